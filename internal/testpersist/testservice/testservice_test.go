package testservice

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// counter is a service that records its starts and stops in a shared log.
type counter struct {
	id   int
	log  *[]string
	base lifecycle.Base
}

func (c *counter) Start(ctx context.Context) error {
	return c.base.Start(ctx, "counter", func(context.Context) error {
		*c.log = append(*c.log, "start")
		return nil
	})
}

func (c *counter) Stop(ctx context.Context) error {
	return c.base.Stop(ctx, func(context.Context) error {
		*c.log = append(*c.log, "stop")
		return nil
	})
}

func TestRestartMakesANewService(t *testing.T) {
	var log []string
	made := 0
	t.Run("life", func(t *testing.T) {
		n := Start(t, func() (*counter, error) {
			made++
			return &counter{id: made, log: &log}, nil
		})
		first := n.Current()
		if got := n.Restart(); got == first || got.id != 2 || !got.base.Running() || first.base.Running() {
			t.Fatalf("restart gave service %d (running %v), first running %v", got.id, got.base.Running(), first.base.Running())
		}
		n.Stop()
		n.Start()
	})
	// The cleanups stopped the last service once; the stopped ones again
	// without effect.
	want := []string{"start", "stop", "start", "stop", "start", "stop"}
	if len(log) != len(want) {
		t.Fatalf("log %v, want %v", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("log %v, want %v", log, want)
		}
	}
}

// recorder is a testing.TB that records a failure instead of failing the
// test, to check that Node fails its test; like t.Fatal it ends the call
// (with a panic the check recovers).
type recorder struct {
	testing.TB
	failed bool
}

type fatal struct{}

func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic(fatal{}) }
func (r *recorder) Fatal(...any)          { r.failed = true; panic(fatal{}) }
func (r *recorder) Helper()               {}

func TestMakeErrorFailsTheTest(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != (fatal{}) {
				panic(p)
			}
		}()
		Start[*counter](r, func() (*counter, error) { return nil, errors.New("no") })
	}()
	if !r.failed {
		t.Fatal("a make error did not fail the test")
	}
}
