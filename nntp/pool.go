package nntp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Defaults of PoolConfig.
const (
	// PoolSizeDefault is the initial number of connections a pool may open.
	PoolSizeDefault = 1
	// GateRestoreDefault is how long a pool keeps its lowered limit after
	// the server said "too many connections".
	GateRestoreDefault = 30 * time.Second
	// HealthEveryDefault is how often idle connections are checked, and how
	// long one must have been idle to be checked.
	HealthEveryDefault = 30 * time.Second
	// healthTimeout bounds one health check.
	healthTimeout = 10 * time.Second
	// quitTimeout bounds closing one connection (Conn.Quit).
	quitTimeout = 5 * time.Second
	// quitGrace is how long a connection whose Quit failed is still
	// counted as open: the server did not confirm it let go, and once our
	// end is closed it may take a moment to notice.
	quitGrace = 5 * time.Second
)

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Conn says how to dial each connection.
	Conn Config
	// Size is the initial number of connections. Zero means
	// PoolSizeDefault; change it later with Resize.
	Size int
	// GateRestore: zero means GateRestoreDefault.
	GateRestore time.Duration
	// HealthEvery: zero means HealthEveryDefault; negative turns the
	// health checks off.
	HealthEvery time.Duration

	// quitTimeout and quitGrace: zero means the constants; tests shorten
	// them.
	quitTimeout, quitGrace time.Duration
}

func (c PoolConfig) withDefaults() PoolConfig {
	if c.Size == 0 {
		c.Size = PoolSizeDefault
	}
	if c.GateRestore <= 0 {
		c.GateRestore = GateRestoreDefault
	}
	if c.HealthEvery == 0 {
		c.HealthEvery = HealthEveryDefault
	}
	if c.quitTimeout <= 0 {
		c.quitTimeout = quitTimeout
	}
	if c.quitGrace <= 0 {
		c.quitGrace = quitGrace
	}
	return c
}

func (c PoolConfig) validate() error {
	if c.Size < 0 {
		return fmt.Errorf("nntp: pool: negative size %d", c.Size)
	}
	return c.Conn.withDefaults().validate()
}

// PoolStats is a snapshot of a pool's state and counters.
type PoolStats struct {
	Size    int // the size set by config or Resize
	Allowed int // Size, or less while the too-many-connections gate is down
	InUse   int // connections handed out (or being dialed)
	Idle    int // open connections waiting to be used
	// Closing counts connections taken out of the pool (beyond its size,
	// broken, or stopped) that are being closed: the pool says QUIT and
	// waits for the server to close its end (Conn.Quit), so until then the
	// server still counts them. One whose Quit failed stays counted for a
	// grace period after it. They count against Allowed: the pool opens no
	// connection into a slot the server may still hold.
	Closing int
	// Waits counts acquisitions that had to wait for a free slot, WaitTime
	// their total wait.
	Waits    int64
	WaitTime time.Duration
	Dials    int64 // connections opened
	Errors   int64 // failed dials and connections closed broken
	TooMany  int64 // "too many connections" refusals seen
	// Commands counts the commands sent on the pool's connections (their
	// setup included); BytesRead the bytes read from them (after TLS,
	// before decompression).
	Commands  int64
	BytesRead int64
	Gated     bool // the gate is down (Allowed < Size because of a refusal)
}

// Open is how many connections the pool holds towards the server: in use,
// idle or still being closed.
func (s PoolStats) Open() int { return s.InUse + s.Idle + s.Closing }

type idleConn struct {
	c     *Conn
	since time.Time
}

// Pool shares connections to one server. Acquire/Release or Do hand out a
// connection; at most Allowed are open at a time. Its methods are safe for
// concurrent use.
type Pool struct {
	cfg PoolConfig

	mu        sync.Mutex // protects the fields below
	size      int
	gate      int // the lowered limit while gated, -1 otherwise
	gateTimer *time.Timer
	inUse     int
	idle      []idleConn    // oldest first
	closing   int           // connections being closed outside the lock
	changed   chan struct{} // closed and replaced when a slot may have freed
	closed    bool
	st        PoolStats // counters only; the gauges are computed

	base    lifecycle.Base // the health loop runs in its run context
	wg      sync.WaitGroup
	closers sync.WaitGroup // the goroutines of closeConns
	io      ioCounters     // shared with the connections (cfg.Conn.counters)
}

// NewPool checks the config and returns a pool that opens connections on
// demand. Call Start for health checks and Stop to close it.
func NewPool(cfg PoolConfig) (*Pool, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, size: cfg.Size, gate: -1, changed: make(chan struct{})}
	p.cfg.Conn.counters = &p.io
	return p, nil
}

// Start runs the health checks of idle connections until Stop. The pool
// hands out connections without it. Starting twice fails with
// lifecycle.ErrStarted; a stopped pool does not start again
// (lifecycle.ErrStopped).
func (p *Pool) Start(ctx context.Context) error {
	return p.base.Start(ctx, "nntp pool", func(context.Context) error {
		if p.cfg.HealthEvery < 0 {
			return nil
		}
		p.wg.Add(1)
		go p.healthLoop(p.base.Run())
		return nil
	})
}

// Stop stops handing out connections, closes the idle ones, then waits for
// those in use to come back (each is closed on Release) and for every close
// to be done, until ctx ends. A pool that was never started is closed all
// the same, since it hands out connections without Start. Safe to call
// twice; a later Start fails.
func (p *Pool) Stop(ctx context.Context) error {
	// Ends the health loop (its run context) if it runs; Stop before Start
	// only marks the pool stopped.
	_ = p.base.Stop(ctx, nil)
	p.wg.Wait()
	p.mu.Lock()
	p.closed = true
	idle := make([]*Conn, 0, len(p.idle))
	for _, ic := range p.idle {
		idle = append(idle, ic.c)
	}
	p.idle = nil
	p.closing += len(idle)
	if p.gateTimer != nil {
		p.gateTimer.Stop()
	}
	p.notifyLocked()
	p.mu.Unlock()
	p.closeConns(idle)
	for {
		p.mu.Lock()
		n, closing, ch := p.inUse, p.closing, p.changed
		p.mu.Unlock()
		if n == 0 && closing == 0 {
			p.closers.Wait() // each has counted its connection down: it is ending
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("nntp: pool stop: %d connections still in use, %d closing: %w", n, closing, ctx.Err())
		}
	}
}

func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pool) allowedLocked() int {
	if p.gate >= 0 && p.gate < p.size {
		return p.gate
	}
	return p.size
}

// Resize sets the number of connections the pool may open. Growing wakes
// waiters at once; shrinking closes idle connections now and in-use ones
// as their commands finish and they are released (never mid-command).
// It does not wait for the closes (Stats.Closing counts them until the
// server let go): WaitOpen says when the shrink is done.
func (p *Pool) Resize(n int) {
	if n < 0 {
		n = 0
	}
	p.mu.Lock()
	p.size = n
	drop := p.trimLocked()
	p.notifyLocked()
	p.mu.Unlock()
	p.closeConns(drop)
}

// closeConns closes connections already counted in closing with Quit, in
// the background: a caller (Resize, Release) must not wait a round trip or
// a slow server's quitTimeout for it. Each is counted down once the server
// has closed its end, so that a caller handing the freed slots to another
// process (see WaitOpen) never has the server see both at once. When Quit
// of a live connection runs out of time (the server did not answer or let
// go), it is counted down only quitGrace later: the server may still count
// it until it notices our end closed. Other failures (the server already
// gone) need no grace.
func (p *Pool) closeConns(cs []*Conn) {
	for _, c := range cs {
		p.closers.Add(1)
		go func() {
			defer p.closers.Done()
			live := c.Err() == nil
			ctx, cancel := context.WithTimeout(context.Background(), p.cfg.quitTimeout)
			err := c.Quit(ctx)
			cancel()
			if live && isTimeout(err) {
				t := time.NewTimer(p.cfg.quitGrace)
				<-t.C
			}
			p.mu.Lock()
			p.closing--
			p.notifyLocked()
			p.mu.Unlock()
		}()
	}
}

// isTimeout: err is running out of time, by a context or a socket deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// WaitOpen waits until the pool holds at most n connections (Stats.Open:
// in use, idle or being closed), or ctx ends. After Resize(n) it says the
// shrink is done: the commands in flight have finished and the surplus
// connections are closed.
func (p *Pool) WaitOpen(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		open, ch := p.inUse+len(p.idle)+p.closing, p.changed
		p.mu.Unlock()
		if open <= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("nntp: pool: %d connections open, waiting for %d: %w", open, n, ctx.Err())
		}
	}
}

// trimLocked removes idle connections beyond the allowed count, oldest
// first, and returns them for closeConns.
func (p *Pool) trimLocked() []*Conn {
	var drop []*Conn
	for len(p.idle) > 0 && p.inUse+len(p.idle) > p.allowedLocked() {
		drop = append(drop, p.idle[0].c)
		p.idle = p.idle[1:]
	}
	p.closing += len(drop)
	return drop
}

// Acquire returns a connection for the caller's exclusive use, waiting for
// a free slot if needed (until ctx ends). Give it back with Release.
func (p *Pool) Acquire(ctx context.Context) (*Conn, error) {
	start := time.Now()
	waited := false
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("nntp: pool: %w", ErrClosed)
		}
		// An idle connection may be handed out while fewer than Allowed
		// are in use; a new one is dialled only if the connections being
		// closed leave room, so the server never sees more than Allowed.
		if allowed := p.allowedLocked(); p.inUse < allowed && (len(p.idle) > 0 || p.inUse+p.closing < allowed) {
			break
		}
		if !waited {
			waited = true
			p.st.Waits++
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			p.st.WaitTime += time.Since(start)
			p.mu.Unlock()
			return nil, fmt.Errorf("nntp: pool: acquire: %w", ctx.Err())
		}
		p.mu.Lock()
	}
	if waited {
		p.st.WaitTime += time.Since(start)
	}
	p.inUse++
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1].c // the most recently used is the most likely alive
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.st.Dials++
	p.mu.Unlock()

	c, err := Dial(ctx, p.cfg.Conn)
	if err != nil {
		p.mu.Lock()
		p.inUse--
		p.st.Errors++
		if errors.Is(err, ErrTooManyConnections) {
			p.tripGateLocked()
		}
		p.notifyLocked()
		p.mu.Unlock()
		return nil, err
	}
	return c, nil
}

// tripGateLocked lowers the allowed count to the connections open now (the
// server just refused one more) and restores it after GateRestore; a new
// refusal while gated restarts the wait.
func (p *Pool) tripGateLocked() {
	p.st.TooMany++
	p.gate = p.inUse + len(p.idle)
	if p.gateTimer != nil {
		p.gateTimer.Stop()
	}
	if p.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(p.cfg.GateRestore, func() {
		p.mu.Lock()
		if p.gateTimer == t {
			p.gate = -1
			p.gateTimer = nil
			p.notifyLocked()
		}
		p.mu.Unlock()
	})
	p.gateTimer = t
}

// Release returns a connection taken with Acquire. A broken connection, or
// one beyond the current allowed count (after a shrink), is closed.
func (p *Pool) Release(c *Conn) {
	p.mu.Lock()
	p.inUse--
	keep := c.Err() == nil && !p.closed && p.inUse+len(p.idle) < p.allowedLocked()
	if c.Err() != nil {
		p.st.Errors++
	}
	if keep {
		p.idle = append(p.idle, idleConn{c: c, since: time.Now()})
	} else {
		p.closing++
	}
	p.notifyLocked()
	p.mu.Unlock()
	if !keep {
		p.closeConns([]*Conn{c})
	}
}

// Do runs fn with a pooled connection and releases it afterwards.
func (p *Pool) Do(ctx context.Context, fn func(*Conn) error) error {
	c, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	defer p.Release(c)
	return fn(c)
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.st
	s.Size = p.size
	s.Allowed = p.allowedLocked()
	s.InUse = p.inUse
	s.Idle = len(p.idle)
	s.Closing = p.closing
	s.Gated = s.Allowed < s.Size
	s.Commands = p.io.commands.Load()
	s.BytesRead = p.io.bytesRead.Load()
	return s
}

func (p *Pool) healthLoop(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.HealthEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.checkIdle(ctx)
		}
	}
}

// checkIdle takes the connections idle for at least HealthEvery out of the
// pool, sends each a DATE, and releases them: a broken one is closed.
func (p *Pool) checkIdle(ctx context.Context) {
	p.mu.Lock()
	var stale []*Conn
	kept := p.idle[:0]
	for _, ic := range p.idle {
		if time.Since(ic.since) >= p.cfg.HealthEvery {
			stale = append(stale, ic.c)
		} else {
			kept = append(kept, ic)
		}
	}
	p.idle = kept
	p.inUse += len(stale)
	p.mu.Unlock()
	for _, c := range stale {
		cctx, cancel := context.WithTimeout(ctx, healthTimeout)
		_, _ = c.Date(cctx) // only a broken connection matters, Release sees it
		cancel()
		p.Release(c)
	}
}
