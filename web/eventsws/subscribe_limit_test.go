package eventsws

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/events"
)

// TestFailedSubscribesTakeNoSlot: a subscribe that failed (unavailable:
// the stream was not read in time; the client is told to retry) holds
// nothing, in the router or in the socket's 50: its id stayed in the
// session's table, so after 50 failures a socket holding nothing was
// refused too-many, and an unsubscribe of a failed id was answered
// unsubscribed instead of not-found (found by an audit).
func TestFailedSubscribesTakeNoSlot(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) { c.SubscribeTimeout = time.Nanosecond })
	c := e.dial("", nil)
	// With a timeout of 1 ns nearly every subscribe fails; one whose
	// stream was read at once may still succeed, and is unsubscribed
	// again, so that the socket ends up holding none.
	failed := ""
	for i, fails := 0, 0; fails < events.MaxSessionSubsDefault; i++ {
		if i == 10*events.MaxSessionSubsDefault {
			t.Fatalf("only %d of %d subscribes with a timeout of 1 ns failed", fails, i)
		}
		id := fmt.Sprint("s", i)
		switch m := c.subscribe(id, fmt.Sprint("project-1/stream-", i), nil); {
		case m.Type == TypeError && m.Code == CodeUnavailable:
			fails++
			failed = id
		case m.Type == TypeSubscribed:
			c.send(map[string]any{"type": "unsubscribe", "id": id})
			if m := c.read(); m.Type != TypeUnsubscribed {
				t.Fatalf("unsubscribe %s: %+v", id, m)
			}
		default:
			t.Fatalf("subscribe %d: %+v, want unavailable (the timeout is 1 ns)", i, m)
		}
	}
	if st := e.g.cfg.Router.Stats(); st.Subs != 0 {
		t.Fatalf("router holds %d subscriptions after only failed subscribes", st.Subs)
	}
	m := c.subscribe("one-more", "project-1/other", nil)
	if m.Code == CodeTooMany {
		t.Fatalf("after %d failed subscribes (the socket holds none): %+v, want unavailable like the others", events.MaxSessionSubsDefault, m)
	}
	c.send(map[string]any{"type": "unsubscribe", "id": failed})
	if m := c.read(); m.Type != TypeError || m.Code != CodeNotFound {
		t.Fatalf("unsubscribe of a failed subscribe: %+v, want not-found", m)
	}
}
