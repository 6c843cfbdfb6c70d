package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// ticker is a service as the real ones are built: a loop in the run context.
type ticker struct {
	base    Base
	done    chan struct{}
	starts  int
	stops   int
	failing error
}

func (tk *ticker) Start(ctx context.Context) error {
	return tk.base.Start(ctx, "ticker", func(ctx context.Context) error {
		tk.starts++
		if tk.failing != nil {
			return tk.failing
		}
		tk.done = make(chan struct{})
		run := tk.base.Run() // set before the start function runs
		go func() {
			defer close(tk.done)
			<-run.Done()
		}()
		return nil
	})
}

func (tk *ticker) Stop(ctx context.Context) error {
	return tk.base.Stop(ctx, func(ctx context.Context) error {
		tk.stops++
		select {
		case <-tk.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

func TestBaseRules(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()

	t.Run("start twice errors, stop twice is a no-op, no restart", func(t *testing.T) {
		tk := &ticker{}
		if err := tk.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if !tk.base.Running() {
			t.Fatal("not running after Start")
		}
		if err := tk.Start(ctx); !errors.Is(err, ErrStarted) {
			t.Fatalf("second Start: %v, want ErrStarted", err)
		}
		for range 2 {
			if err := tk.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if tk.stops != 1 {
			t.Fatalf("stop function ran %d times, want 1", tk.stops)
		}
		if err := tk.Start(ctx); !errors.Is(err, ErrStopped) {
			t.Fatalf("Start after Stop: %v, want ErrStopped", err)
		}
		if tk.starts != 1 {
			t.Fatalf("start function ran %d times, want 1", tk.starts)
		}
	})

	t.Run("stop before start", func(t *testing.T) {
		tk := &ticker{}
		if err := tk.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if tk.stops != 0 {
			t.Fatal("stop function ran without a start")
		}
		if err := tk.Start(ctx); !errors.Is(err, ErrStopped) {
			t.Fatalf("Start after Stop: %v, want ErrStopped", err)
		}
		if !tk.base.Stopped() {
			t.Fatal("Stopped() false after Stop")
		}
	})

	t.Run("a failed start can be retried and needs no stop", func(t *testing.T) {
		boom := errors.New("boom")
		tk := &ticker{failing: boom}
		if err := tk.Start(ctx); !errors.Is(err, boom) {
			t.Fatalf("Start: %v, want boom", err)
		}
		if tk.base.Running() {
			t.Fatal("running after a failed Start")
		}
		if err := tk.base.Run().Err(); err == nil {
			t.Fatal("run context alive after a failed Start")
		}
		tk.failing = nil
		if err := tk.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tk.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the start context bounds starting only", func(t *testing.T) {
		tk := &ticker{}
		sctx, cancel := context.WithCancel(ctx)
		if err := tk.Start(sctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		select {
		case <-tk.done:
			t.Fatal("the loop ended with the Start context")
		default:
		}
		if err := tk.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if tk.base.Run().Err() == nil {
			t.Fatal("run context alive after Stop")
		}
	})
}

// recorder is a member that writes what happens to it into a shared log.
type recorder struct {
	name     string
	log      *[]string
	startErr error
	stopErr  error
	block    bool // Stop waits for its deadline
}

func (r *recorder) Start(context.Context) error {
	*r.log = append(*r.log, "start "+r.name)
	return r.startErr
}

func (r *recorder) Stop(ctx context.Context) error {
	*r.log = append(*r.log, "stop "+r.name)
	if r.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return r.stopErr
}

func TestGroupStopsInReverseUnderOneDeadline(t *testing.T) {
	var log []string
	var g Group
	ctx := context.Background()
	a := &recorder{name: "a", log: &log, stopErr: errors.New("a failed")}
	b := &recorder{name: "b", log: &log, block: true}
	c := &recorder{name: "c", log: &log}
	for _, r := range []*recorder{a, b, c} {
		if err := g.Start(ctx, r.name, r); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.Names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Names = %v", got)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err := g.Stop(sctx)
	// b gave up at the deadline: its error is the first; a is still asked.
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v, want the deadline of b", err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("log = %v, want %v", log, want)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := g.Start(ctx, "late", &recorder{name: "late", log: &log}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
}

func TestGroupFailedStartIsNotAMember(t *testing.T) {
	var log []string
	var g Group
	ctx := context.Background()
	boom := errors.New("boom")
	if err := g.Start(ctx, "a", &recorder{name: "a", log: &log}); err != nil {
		t.Fatal(err)
	}
	err := g.Start(ctx, "b", &recorder{name: "b", log: &log, startErr: boom})
	if !errors.Is(err, boom) || err.Error() != "start b: boom" {
		t.Fatalf("Start b: %v", err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("log = %v, want %v", log, want)
	}
}

func TestFuncs(t *testing.T) {
	ctx := context.Background()
	var started, stopped int
	s := Funcs("f", func(context.Context) error { started++; return nil }, func(context.Context) error { stopped++; return nil })
	if err := s.Stop(ctx); err != nil || stopped != 0 {
		t.Fatalf("Stop before Start: err %v, stop ran %d times", err, stopped)
	}
	s = Funcs("f", func(context.Context) error { started++; return nil }, func(context.Context) error { stopped++; return nil })
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	_ = s.Stop(ctx)
	_ = s.Stop(ctx)
	if started != 1 || stopped != 1 {
		t.Fatalf("started %d, stopped %d; want 1, 1", started, stopped)
	}
	o := OnStop("close", func(context.Context) error { stopped++; return nil })
	if err := o.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.Stop(ctx); err != nil || stopped != 2 {
		t.Fatalf("OnStop: err %v, stopped %d", err, stopped)
	}
}

func TestLoggerNamesTheRole(t *testing.T) {
	var buf bytes.Buffer
	Logger(slog.New(slog.NewTextHandler(&buf, nil)), "balancer").Info("up")
	if !strings.Contains(buf.String(), "role=balancer") {
		t.Fatalf("log line %q has no role", buf.String())
	}
}
