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
	for i := 0; i < events.MaxSessionSubsDefault; i++ {
		if m := c.subscribe(fmt.Sprint("s", i), fmt.Sprint("project-1/stream-", i), nil); m.Type != TypeError || m.Code != CodeUnavailable {
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
	c.send(map[string]any{"type": "unsubscribe", "id": "s0"})
	if m := c.read(); m.Type != TypeError || m.Code != CodeNotFound {
		t.Fatalf("unsubscribe of a failed subscribe: %+v, want not-found", m)
	}
}
