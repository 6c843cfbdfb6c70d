package events

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestReplacedSubscriptionsWindowGoesNowhere: subscribing an id again
// replaces its subscription under the same router id. The old one's open
// windows stay until the loop takes its forget, and flush found a window's
// subscription by that id alone: a window that ended before the forget
// went to the new subscription, anchored elsewhere ("x", subscribed again
// on project-1/b, got an event of project-1/a). The loop is held in
// another session's delivery while the windows that ended together are
// flushed, which makes the order certain.
func TestReplacedSubscriptionsWindowGoesNowhere(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	e.warm("a")
	e.warm("b")
	e.warm("c")

	var hold sync.Once
	held, release := make(chan struct{}), make(chan struct{})
	blocker := e.r.Open("bob", func(Delivery) {
		hold.Do(func() { close(held); <-release })
	})
	e.subscribe(blocker, "y", "project-1/c", Filter{})
	var got sink
	alice := e.r.Open("alice", got.deliver)
	e.subscribe(alice, "x", "project-1/a", Filter{})

	// Two windows that end together, bob's first.
	from := e.r.Stats().Changes
	e.set("c", "k", "for bob")
	testwait.For(t, "bob's change taken", func() bool { return e.r.Stats().Changes >= from+1 })
	e.set("a", "k", "for x on a")
	testwait.Until(t, "alice's change taken", func() (bool, string) {
		st := e.r.Stats()
		return st.Changes >= from+2 && e.clk.Pending() > 0, fmt.Sprintf("%+v", st)
	})
	e.clk.Advance(CoalesceWindowDefault)
	select {
	case <-held: // the loop is delivering bob's window; alice's is next
	case <-time.After(testwait.Timeout):
		t.Fatal("bob's delivery never came")
	}
	e.subscribe(alice, "x", "project-1/b", Filter{}) // replaces x
	close(release)

	// A change on b tells when the loop is past the old windows.
	from = e.r.Stats().Changes
	e.set("b", "k", "for x on b")
	e.advanceUntil("x's event on b", func() bool {
		for _, ev := range got.events() {
			if ev.Subject.Stream == "b" {
				return true
			}
		}
		return false
	})
	for _, d := range got.all() {
		if d.Event != nil && d.Event.Subject.Stream == "a" {
			t.Fatalf("after x was re-subscribed on project-1/b it got %s (%q), an event of its old anchor: %+v", d.Event.Subject, d.Event.Value, got.all())
		}
	}
}
