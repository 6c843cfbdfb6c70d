// Package lifecycletest checks in tests that a service follows
// internal/lifecycle's one rule, so that each type's lifecycle test states
// only what is its own (a port that closes, a page that answers 503) and
// leaves the rule to one place.
package lifecycletest

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Rules checks the whole rule on two services from newService: one
// stopped before it ever started (Stop), one started and stopped (Start,
// then Stop). A test with checks of its own between the steps calls
// Start and Stop itself instead.
func Rules(t testing.TB, newService func() lifecycle.Service) {
	t.Helper()
	Stop(t, newService())
	s := newService()
	Start(t, s)
	Stop(t, s)
}

// Start starts s and checks that a second Start returns
// lifecycle.ErrStarted. The first Start's context is cancelled as soon as
// Start returns: the Start context bounds starting only, so what the test
// checks next sees a service that outlived it. A cleanup stops s in case
// the test ends before it does (a Stop of a stopped service is a no-op).
func Start(t testing.TB, s lifecycle.Service) {
	t.Helper()
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	ctx, cancel := context.WithCancel(t.Context())
	err := s.Start(ctx)
	cancel()
	if err != nil {
		t.Fatalf("%T: Start: %v", s, err)
	}
	if err := s.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("%T: second Start: %v, want lifecycle.ErrStarted", s, err)
	}
}

// Stop checks that Stop returns nil twice and that a Start after them
// returns lifecycle.ErrStopped. s may be running, never started (Stop
// before Start), or already stopped by the test in its own way; the rule
// is the same for all three.
func Stop(t testing.TB, s lifecycle.Service) {
	t.Helper()
	for i := range 2 {
		if err := s.Stop(t.Context()); err != nil {
			t.Fatalf("%T: Stop %d: %v, want nil", s, i+1, err)
		}
	}
	if err := s.Start(t.Context()); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("%T: Start after Stop: %v, want lifecycle.ErrStopped", s, err)
	}
}
