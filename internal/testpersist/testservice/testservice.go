// Package testservice runs one service for a test: made and started, made
// again on a restart, and stopped when the test ends. It is what the
// persist test harnesses share; it imports nothing of switchyard's but the
// lifecycle contract, so that persist/server's own (white-box) tests can use
// it too, which cannot import internal/testpersist (it imports them).
package testservice

import (
	"context"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Node is one service of a test and the function that makes it anew. It is
// not safe for concurrent use: the test's goroutine starts and stops it.
type Node[S lifecycle.Service] struct {
	t    testing.TB
	make func() (S, error)
	cur  S
}

// Start makes a service with make and starts it; t fails on an error of
// either. The service in place when the test ends is stopped then.
func Start[S lifecycle.Service](t testing.TB, make func() (S, error)) *Node[S] {
	t.Helper()
	n := &Node[S]{t: t, make: make}
	n.Start()
	return n
}

// Current is the service last made: running, or stopped by Stop.
func (n *Node[S]) Current() S { return n.cur }

// Start makes a new service and starts it, as a process started again
// after a crash or a deploy. The one before is the test's to stop first
// (Stop, or its own Stop method), when the two must not run at once.
func (n *Node[S]) Start() S {
	n.t.Helper()
	s, err := n.make()
	if err != nil {
		n.t.Fatalf("testservice: make: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		n.t.Fatalf("testservice: start: %v", err)
	}
	n.cur = s
	// Stop twice is safe (lifecycle), so the cleanup of a service stopped
	// by the test is a no-op.
	n.t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// Stop stops the current service; t fails on its error. A stopped
// service is stopped again without harm.
func (n *Node[S]) Stop() {
	n.t.Helper()
	if err := n.cur.Stop(context.Background()); err != nil {
		n.t.Fatalf("testservice: stop: %v", err)
	}
}

// Restart stops the current service and starts a new one.
func (n *Node[S]) Restart() S {
	n.t.Helper()
	n.Stop()
	return n.Start()
}
