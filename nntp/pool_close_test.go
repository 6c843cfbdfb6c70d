package nntp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// TestPoolSlowQuit: a shrink does not wait for a slow server's QUIT; the
// connection being closed still counts (Stats.Closing) and keeps its slot
// (no new dial into it) until its Quit timed out and the grace period
// after it passed.
func TestPoolSlowQuit(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 10)
	const quitT, grace = 400 * time.Millisecond, 400 * time.Millisecond
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 1, HealthEvery: -1, quitTimeout: quitT, quitGrace: grace})
	ctx := context.Background()
	c, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(c)

	// The server answers nothing (QUIT included) for longer than the test.
	s.SetFaults(nntptest.Faults{Delay: time.Minute})
	start := time.Now()
	p.Resize(0)
	if d := time.Since(start); d >= quitT {
		t.Fatalf("Resize waited %v for the close", d)
	}
	if st := p.Stats(); st.Closing != 1 || st.Open() != 1 {
		t.Fatalf("after the shrink: %+v", st)
	}

	// Its slot is not free while it closes.
	p.Resize(1)
	actx, cancel := context.WithTimeout(ctx, quitT/2)
	defer cancel()
	if c, err := p.Acquire(actx); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			p.Release(c)
		}
		t.Fatalf("Acquire while the only slot's connection closes: %v, want a wait", err)
	}
	if n := p.Stats().Dials; n != 1 {
		t.Fatalf("%d dials: the pool dialled into the slot of a connection still closing", n)
	}

	testwait.For(t, "the close to be counted down", func() bool { return p.Stats().Closing == 0 })
	if d := time.Since(start); d < quitT+grace {
		t.Fatalf("the timed-out close was counted down %v after the shrink, before the Quit timeout and grace (%v)", d, quitT+grace)
	}
	s.SetFaults(nntptest.Faults{})
	c, err = p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(c)
}
