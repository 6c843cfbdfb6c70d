package persist_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// parkedInSlots counts the goroutines blocked in a pipeline's fn ("Flush"
// or "Close"): waiting for a slot, or for a lock a fix may add.
func parkedInSlots(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		// Flush waits in a select (with its ctx), Close in a plain send.
		blocked := strings.Contains(g, "[select") || strings.Contains(g, "[chan send") || strings.Contains(g, "[sync.Mutex.Lock") || strings.Contains(g, "[semacquire")
		if blocked && strings.Contains(g, "persist.(*Pipeline)."+fn+"(") {
			n++
		}
	}
	return n
}

// TestPipelineConcurrentFlushes: two callers of a Pipeline (safe for
// concurrent use) wait in Flush, or one in Flush and one in Close, while
// sets are in flight; both return once the sets are answered. Each freed
// slot used to go to one of them, so each held part of the slots and
// waited for the rest, which the other held: with context.Background, for
// good (found by an audit). Flush has a deadline far past the few
// milliseconds the sets take, and the test fails when it hits it.
func TestPipelineConcurrentFlushes(t *testing.T) {
	for _, other := range []string{"Flush", "Close"} {
		t.Run(other, func(t *testing.T) {
			hold := &commitGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
			h := newHarness(t, func(c *server.Config) { c.Observer = hold })
			t.Cleanup(hold.open)
			p, err := h.stream("flushed").Pipeline(persist.PipelineConfig{MaxPending: 2, MaxRequests: 2})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			hold.armed.Store(true)
			a := p.Set(ctx, []byte("a"), persist.SetOptions{})
			b := p.Set(ctx, []byte("b"), persist.SetOptions{})
			<-hold.entered // both sets are held: every slot is taken

			fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			errs := make(chan error, 2)
			go func() { errs <- p.Flush(fctx) }()
			go func() {
				if other == "Flush" {
					errs <- p.Flush(fctx)
				} else {
					errs <- p.Close()
				}
			}()
			testwait.For(t, "both callers waiting for a slot", func() bool {
				if other == "Flush" {
					return parkedInSlots("Flush") == 2
				}
				return parkedInSlots("Flush") == 1 && parkedInSlots("Close") == 1
			})
			hold.open()
			for _, f := range []*persist.SetFuture{a, b} {
				if _, err := f.Result(); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			for range 2 {
				if err := <-errs; err != nil {
					t.Errorf("Flush/%s with both sets done: %v (after %v)", other, err, time.Since(start).Round(time.Millisecond))
				}
			}
			_ = p.Close()
		})
	}
}

// TestPipelineSecondCloseWaits: a Close called while another is still
// waiting for the sets held also returns only once they have their
// results ("Close waits for every set held"); it returned at once.
func TestPipelineSecondCloseWaits(t *testing.T) {
	t.Parallel()
	hold := &commitGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, func(c *server.Config) { c.Observer = hold })
	t.Cleanup(hold.open)
	p, err := h.stream("closed").Pipeline(persist.PipelineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	hold.armed.Store(true)
	f := p.Set(context.Background(), []byte("a"), persist.SetOptions{})
	<-hold.entered
	first := make(chan error, 1)
	go func() { first <- p.Close() }()
	testwait.For(t, "the first Close waiting", func() bool { return parkedInSlots("Close") == 1 })
	second := make(chan bool, 1) // whether the set was done when it returned
	go func() {
		_ = p.Close()
		select {
		case <-f.Done():
			second <- true
		default:
			second <- false
		}
	}()
	testwait.For(t, "the second Close waiting or returned", func() bool { return parkedInSlots("Close") == 2 || len(second) == 1 })
	hold.open()
	if done := <-second; !done {
		t.Fatal("the second Close returned with the set still in flight")
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := f.Result(); err != nil {
		t.Fatal(err)
	}
}
