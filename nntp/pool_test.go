package nntp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

func newPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return p
}

func TestPoolBoundsConcurrency(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 1000)
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 2})
	var running, peak atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.Do(context.Background(), func(c *Conn) error {
				if n := running.Add(1); n > peak.Load() {
					peak.Store(n)
				}
				defer running.Add(-1)
				if _, err := c.Group(context.Background(), testGroup); err != nil {
					return err
				}
				first := int64(i*100 + 1)
				return c.Over(context.Background(), first, first+99, func(Overview) error { return nil })
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := p.Stats()
	if peak.Load() > 2 || st.Dials > 2 || s.Stats().Accepted > 2 {
		t.Fatalf("peak %d, stats %+v, server %+v", peak.Load(), st, s.Stats())
	}
	if st.InUse != 0 || st.Idle != 2 || st.Waits == 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPoolResize(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 100)
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 3})
	ctx := context.Background()
	var held []*Conn
	for range 3 {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}

	// Shrinking does not cut connections in use: their commands still run.
	p.Resize(1)
	if st := p.Stats(); st.Allowed != 1 || st.InUse != 3 {
		t.Fatalf("after shrink %+v", st)
	}
	for _, c := range held {
		if _, err := c.Group(ctx, testGroup); err != nil {
			t.Fatalf("in-flight command after shrink: %v", err)
		}
	}
	// A waiter blocks until the pool is below its new size.
	got := make(chan *Conn, 1)
	go func() {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	testwait.For(t, "the waiter to block", func() bool { return p.Stats().Waits == 1 })
	p.Release(held[0])
	p.Release(held[1])
	select {
	case c := <-got:
		t.Fatalf("acquired %p while 1 of 1 still in use", c)
	default:
	}
	testwait.For(t, "surplus connections to close", func() bool { return s.Stats().Active == 1 })
	p.Release(held[2])
	c := <-got
	if _, err := c.Group(ctx, testGroup); err != nil {
		t.Fatal(err)
	}

	// Growing wakes waiters at once.
	go func() {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	testwait.For(t, "the second waiter to block", func() bool { return p.Stats().Waits == 2 })
	p.Resize(2)
	c2 := <-got
	p.Release(c)
	p.Release(c2)
	if st := p.Stats(); st.Idle != 2 || st.InUse != 0 || st.Size != 2 {
		t.Fatalf("after grow %+v", st)
	}
}

func TestPoolTooManyConnectionsGate(t *testing.T) {
	// Not parallel: the checks after the refusal must run before the 50ms
	// GateRestore lifts the gate, which other tests' load could delay.
	s := startServer(t, nntptest.Config{MaxConns: 2}, 10)
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 4, GateRestore: 50 * time.Millisecond})
	ctx := context.Background()
	a, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx); !errors.Is(err, ErrTooManyConnections) {
		t.Fatalf("third connection: %v", err)
	}
	if st := p.Stats(); st.Allowed != 2 || !st.Gated || st.TooMany != 1 {
		t.Fatalf("after refusal %+v", st)
	}
	// While gated a caller waits instead of hammering the server.
	waitCtx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Acquire(waitCtx); !errors.Is(err, context.Canceled) {
		t.Fatalf("gated acquire: %v", err)
	}
	testwait.For(t, "the gate to restore", func() bool { return p.Stats().Allowed == 4 })
	p.Release(a)
	p.Release(b)
	if st := p.Stats(); st.Gated || st.Idle != 2 {
		t.Fatalf("after restore %+v", st)
	}
}

func TestPoolHealthCheckDropsDeadConnections(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 10)
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 2, HealthEvery: 10 * time.Millisecond})
	if err := p.Do(context.Background(), func(c *Conn) error { _, err := c.Group(context.Background(), testGroup); return err }); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Idle != 1 {
		t.Fatalf("%+v", st)
	}
	s.CloseConns()
	testwait.For(t, "the dead idle connection to be dropped", func() bool {
		st := p.Stats()
		return st.Idle == 0 && st.Errors == 1
	})
	// The next caller gets a fresh connection.
	if err := p.Do(context.Background(), func(c *Conn) error { _, err := c.Group(context.Background(), testGroup); return err }); err != nil {
		t.Fatal(err)
	}
}

// TestPoolReloginAfterExpiry: a pooled connection whose login expired logs
// in again on the 480 and stays in the pool; one with no login to give is
// retired, not handed to the next caller.
// (Was: the 480 reached the caller and the connection went back to the pool as healthy, failing every request routed to it.)
func TestPoolReloginAfterExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{Users: map[string]string{"alice": "secret"}}, 10)
	ctx := context.Background()
	group := func(c *Conn) error { _, err := c.Group(ctx, testGroup); return err }

	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr(), User: "alice", Pass: "secret"}, Size: 1, HealthEvery: -1})
	if err := p.Do(ctx, group); err != nil {
		t.Fatal(err)
	}
	s.ExpireLogins()
	if err := p.Do(ctx, group); err != nil {
		t.Fatalf("after the login expired: %v", err)
	}
	if st := p.Stats(); st.Dials != 1 || st.Idle != 1 || st.Errors != 0 {
		t.Fatalf("want the one connection kept: %+v", st)
	}

	anon := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 1, HealthEvery: -1})
	if err := anon.Do(ctx, group); !errors.Is(err, ErrAuth) {
		t.Fatalf("without a login: %v, want ErrAuth", err)
	}
	if st := anon.Stats(); st.Idle != 0 || st.Errors != 1 {
		t.Fatalf("want the connection retired: %+v", st)
	}
}

func TestPoolStop(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 10)
	// Size 1: an Acquire racing with Stop waits for the slot and is then
	// refused, it cannot take a second connection.
	p, err := NewPool(PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- p.Stop(ctx)
	}()
	testwait.For(t, "the pool to refuse new work", func() bool {
		_, err := p.Acquire(context.Background())
		return errors.Is(err, ErrClosed)
	})
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v with a connection in use", err)
	default:
	}
	p.Release(c)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the server to see the connection close", func() bool { return s.Stats().Active == 0 })
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}
