package lifecycletest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// recorder is a testing.TB that keeps the failures instead of failing the
// test. Fatalf ends the goroutine as testing's does, so run calls the
// helper on a goroutine of its own.
type recorder struct {
	testing.TB // the real test, for Context and Cleanup
	failures   []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// run calls check with a recorder over t and returns what it recorded.
func run(t *testing.T, check func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failures
}

// flaw is the one rule a fake breaks.
type flaw int

const (
	none            flaw = iota
	startFails           // Start of a fresh service errors
	restartsRunning      // a second Start succeeds
	startedSaysStop      // a second Start says ErrStopped, not ErrStarted
	restartsStopped      // Start after Stop succeeds
	stopIdleFails        // Stop before Start errors
	secondStopFails      // the second Stop errors
)

// fake is a service that follows the rule except for its flaw.
type fake struct {
	flaw     flaw
	state    int // 0 never started, 1 running, 2 stopped
	stops    int
	startCtx context.Context // the first Start's
}

func (f *fake) Start(ctx context.Context) error {
	switch {
	case f.flaw == startFails && f.state == 0:
		return errors.New("cannot start")
	case f.state == 1 && f.flaw == startedSaysStop:
		return fmt.Errorf("fake: start: %w", lifecycle.ErrStopped)
	case f.state == 1 && f.flaw != restartsRunning:
		return fmt.Errorf("fake: start: %w", lifecycle.ErrStarted)
	case f.state == 2 && f.flaw != restartsStopped:
		return fmt.Errorf("fake: start: %w", lifecycle.ErrStopped)
	}
	if f.startCtx == nil {
		f.startCtx = ctx
	}
	f.state = 1
	return nil
}

func (f *fake) Stop(context.Context) error {
	was := f.state
	f.state = 2
	f.stops++
	switch {
	case f.flaw == stopIdleFails && was == 0:
		return errors.New("nothing to stop")
	case f.flaw == secondStopFails && f.stops == 2:
		return errors.New("stopped already")
	}
	return nil
}

// TestRulesFailsEachBrokenRule: a service breaking any one step of the
// rule fails Rules, with a message naming the step.
func TestRulesFailsEachBrokenRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		flaw flaw
		want string
	}{
		{"start fails", startFails, "Start: cannot start"},
		{"second start succeeds", restartsRunning, "second Start: <nil>, want lifecycle.ErrStarted"},
		{"second start says stopped", startedSaysStop, "second Start: fake: start: stopped"},
		{"start after stop succeeds", restartsStopped, "Start after Stop: <nil>, want lifecycle.ErrStopped"},
		{"stop before start fails", stopIdleFails, "Stop 1: nothing to stop"},
		{"second stop fails", secondStopFails, "Stop 2: stopped already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, func(tb testing.TB) {
				Rules(tb, func() lifecycle.Service { return &fake{flaw: tc.flaw} })
			})
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("failures %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// TestRulesPassesTheRule: a service that follows the rule, the fake
// without a flaw and lifecycle's own Funcs, passes.
func TestRulesPassesTheRule(t *testing.T) {
	for name, newService := range map[string]func() lifecycle.Service{
		"fake":  func() lifecycle.Service { return &fake{} },
		"funcs": func() lifecycle.Service { return lifecycle.Funcs("f", nil, nil) },
	} {
		if got := run(t, func(tb testing.TB) { Rules(tb, newService) }); len(got) != 0 {
			t.Errorf("%s: failures %q", name, got)
		}
	}
}

// TestStartEndsItsContext: what a test checks after Start sees a service
// whose Start context has ended.
func TestStartEndsItsContext(t *testing.T) {
	f := &fake{}
	if got := run(t, func(tb testing.TB) { Start(tb, f) }); len(got) != 0 {
		t.Fatalf("failures %q", got)
	}
	if f.startCtx == nil || f.startCtx.Err() == nil {
		t.Fatalf("the Start context is still live after Start returned")
	}
}

// TestStopAfterStopOfItsOwn: a test that stopped the service its own way
// can still check the rest of the rule with Stop.
func TestStopAfterStopOfItsOwn(t *testing.T) {
	f := &fake{}
	got := run(t, func(tb testing.TB) {
		Start(tb, f)
		if err := f.Stop(context.Background()); err != nil {
			tb.Fatalf("own Stop: %v", err)
		}
		Stop(tb, f)
	})
	if len(got) != 0 {
		t.Fatalf("failures %q", got)
	}
}

// TestStartStopsOnCleanup: a test that ends (failing, say) between Start
// and Stop does not leave the service running.
func TestStartStopsOnCleanup(t *testing.T) {
	f := &fake{}
	t.Run("ends while running", func(t *testing.T) {
		run(t, func(tb testing.TB) { Start(tb, f) })
	})
	if f.state != 2 {
		t.Fatalf("state %d after the test's cleanup, want stopped", f.state)
	}
}
