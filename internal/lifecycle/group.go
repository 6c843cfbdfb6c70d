package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Group owns services started one after the other and stops them in the
// reverse order under one deadline. The order of the Start calls is the
// order of the group: a role that needs another is started after it, so it
// is stopped before it.
type Group struct {
	// Logger receives the stop errors after the first. Nil means
	// slog.Default().
	Logger *slog.Logger

	mu      sync.Mutex
	members []member
	stopped bool
}

type member struct {
	name string
	svc  Service
}

// Start starts svc now and makes it a member, so Stop stops it. When svc
// fails to start it is not a member and the error says its name; the
// members already started stay started (the caller decides: usually it
// stops the group and returns the error).
func (g *Group) Start(ctx context.Context, name string, svc Service) error {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return fmt.Errorf("%s: start: %w", name, ErrStopped)
	}
	g.mu.Unlock()
	if err := svc.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	g.mu.Lock()
	stopped := g.stopped
	if !stopped {
		g.members = append(g.members, member{name: name, svc: svc})
	}
	g.mu.Unlock()
	if stopped { // Stop ran while svc started: no one else will stop it
		_ = svc.Stop(context.WithoutCancel(ctx))
		return fmt.Errorf("%s: start: %w", name, ErrStopped)
	}
	return nil
}

// Names lists the members in start order.
func (g *Group) Names() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	names := make([]string, len(g.members))
	for i, m := range g.members {
		names[i] = m.name
	}
	return names
}

// Stop stops every member in reverse start order, all under ctx: once one
// has given up at the deadline, the later ones give up too. Every member is
// asked to stop, whatever the ones before it returned. The first error is
// returned (with the member's name); the others are logged. Stop twice is
// a no-op, and a Start after Stop fails.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	members := g.members
	g.members, g.stopped = nil, true
	g.mu.Unlock()
	var first error
	for i := len(members) - 1; i >= 0; i-- {
		m := members[i]
		err := m.svc.Stop(ctx)
		switch {
		case err == nil:
		case first == nil:
			first = fmt.Errorf("stop %s: %w", m.name, err)
		default:
			logger := g.Logger
			if logger == nil {
				logger = slog.Default()
			}
			logger.Warn("stop", "member", m.name, "err", err)
		}
	}
	return first
}
