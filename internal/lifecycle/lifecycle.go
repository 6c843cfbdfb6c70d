// Package lifecycle is the one start/stop contract of switchyard's
// long-lived types, and the group that starts them in order and stops them
// in reverse.
//
// The rules, the same for every service:
//   - Start on a running service returns ErrStarted; a stopped service does
//     not start again (ErrStopped). A Start that fails leaves the service as
//     it was before, so Stop is then a no-op and Start may be tried again.
//   - Stop before Start, and Stop twice, are safe and return nil. Stop ends
//     the service's life: a later Start returns ErrStopped.
//   - The Start context bounds starting only. What the service runs lives
//     until Stop, in the run context Base.Run gives (values of the Start
//     context kept, its cancellation not).
//   - Stop's context is the deadline for draining; past it the service
//     gives up waiting and says so with an error wrapping ctx.Err().
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// ErrStarted is returned by Start on a running service.
var ErrStarted = errors.New("already started")

// ErrStopped is returned by Start on a service that was stopped.
var ErrStopped = errors.New("stopped: a stopped service does not start again")

// Service is a long-lived part with the one lifecycle.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

type state int

const (
	idle state = iota
	running
	stopped
)

// Base gives a type the lifecycle rules: embed it (or hold it) and call
// Base.Start and Base.Stop from the type's own Start and Stop with the
// functions that do the work. The zero value is ready to use.
type Base struct {
	mu sync.Mutex // protects the fields below; never held while calling out
	// transition is a one-slot semaphore held across start and stop
	// functions, so they never overlap; a channel, so that Stop can give
	// up waiting for it at its deadline. Made on first use (zero value).
	transition chan struct{}
	state      state
	stopping   bool // Stop was called: a start under way or to come gets an ended run context
	run        context.Context
	cancel     context.CancelFunc
}

// sem is the transition semaphore.
func (b *Base) sem() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.transition == nil {
		b.transition = make(chan struct{}, 1)
	}
	return b.transition
}

// Start runs start unless the service already ran: ErrStarted while it
// runs, ErrStopped once stopped (both wrapped with name). Before start is
// called, Run returns a fresh run context that Stop cancels.
func (b *Base) Start(ctx context.Context, name string, start func(ctx context.Context) error) error {
	sem := b.sem()
	sem <- struct{}{}
	defer func() { <-sem }()
	b.mu.Lock()
	switch b.state {
	case running:
		b.mu.Unlock()
		return fmt.Errorf("%s: start: %w", name, ErrStarted)
	case stopped:
		b.mu.Unlock()
		return fmt.Errorf("%s: start: %w", name, ErrStopped)
	}
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.run, b.cancel = run, cancel
	if b.stopping {
		cancel() // a Stop waits for this Start: what it starts ends at once
	}
	b.mu.Unlock()
	if err := start(ctx); err != nil {
		cancel()
		b.mu.Lock()
		b.run, b.cancel = nil, nil
		b.mu.Unlock()
		return err
	}
	b.mu.Lock()
	b.state = running
	b.mu.Unlock()
	return nil
}

// Stop cancels the run context and runs stop if the service is running;
// otherwise it only marks the service stopped. Either way a later Start
// returns ErrStopped. A Start under way gets its run context cancelled at
// once (a start function may wait on it), and Stop waits for it to end; a
// concurrent Stop waits for the first to finish. Either wait ends at ctx's
// end, with an error wrapping ctx.Err().
func (b *Base) Stop(ctx context.Context, stop func(ctx context.Context) error) error {
	b.mu.Lock()
	b.stopping = true
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	sem := b.sem()
	select {
	case sem <- struct{}{}: // free: a ctx already ended still gets its stop run
	default:
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("stop: waiting for a start or stop under way: %w", ctx.Err())
		}
	}
	defer func() { <-sem }()
	b.mu.Lock()
	was, cancel := b.state, b.cancel
	b.state = stopped
	b.mu.Unlock()
	if was != running {
		return nil
	}
	cancel()
	if stop == nil {
		return nil
	}
	return stop(ctx)
}

// Run is the context of what the service runs: cancelled when Stop begins.
// It is set before the start function is called, so that function may use
// it. Outside a Start, before any, it is an ended context.
func (b *Base) Run() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.run == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	return b.run
}

// Running reports whether Start succeeded and Stop has not begun.
func (b *Base) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == running
}

// Stopped reports whether Stop was called.
func (b *Base) Stopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == stopped
}

// Logger is the service's logger: l (slog.Default() when nil) with the
// attribute role=role, so every line says which part wrote it.
func Logger(l *slog.Logger, role string) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return l.With("role", role)
}

// Funcs is a Service made of two functions, either of which may be nil:
// for a member of a Group that is not a type of its own (a connection to
// close, a listener to shut). It follows the rules through a Base.
func Funcs(name string, start, stop func(ctx context.Context) error) Service {
	return &funcs{name: name, start: start, stop: stop}
}

// OnStop is a Service that does nothing at Start and runs stop at Stop.
func OnStop(name string, stop func(ctx context.Context) error) Service {
	return Funcs(name, nil, stop)
}

type funcs struct {
	base        Base
	name        string
	start, stop func(ctx context.Context) error
}

func (f *funcs) Start(ctx context.Context) error {
	return f.base.Start(ctx, f.name, func(ctx context.Context) error {
		if f.start == nil {
			return nil
		}
		return f.start(ctx)
	})
}

func (f *funcs) Stop(ctx context.Context) error { return f.base.Stop(ctx, f.stop) }
