package eventsws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestReadyComesFirst: the gateway's first message is ready, also for a
// user whose `single` delivery waits for a session: the session's Open
// hands it out at once, and it came before ready (found by an audit).
func TestReadyComesFirst(t *testing.T) {
	t.Parallel()
	e, _ := presenceGateway(t, nil)
	r := e.g.cfg.Router
	c1 := e.dial("", login("alice", "a"))
	c1.send(map[string]any{"type": "subscribe", "id": "jobs", "anchor": "project-1/jobs", "mode": "single"})
	if m := c1.read(); m.Type != TypeSubscribed {
		t.Fatalf("durable subscribe: %+v", m)
	}
	testwait.Until(t, "the row live", func() (bool, string) {
		st := r.Stats()
		return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
	})
	_ = c1.ws.CloseNow()
	testwait.For(t, "alice's socket closed", func() bool { return r.Stats().Sessions == 0 })
	e.set("project-1", "jobs", "1", []byte("waiting"))
	testwait.Until(t, "the delivery waiting for alice", func() (bool, string) {
		st := r.Stats()
		return st.Backlog == 1, fmt.Sprintf("%+v", st)
	})

	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/ws/events"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: login("alice", "a")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	c2 := &client{t: t, ws: ws}
	first := c2.read()
	if first.Type != TypeReady {
		second := c2.read()
		t.Fatalf("first message %+v, then %+v: want ready first", first, second)
	}
}

// TestReadySaysRoutersMaxSubs: ready's max_subs is the router's limit on
// a session's subscriptions, which a client is refused past; it was the
// default (50), whatever the router held to.
func TestReadySaysRoutersMaxSubs(t *testing.T) {
	t.Parallel()
	e, _ := startRouter(t, events.RouterConfig{MaxSessionSubs: 3}, nil)
	c := rawDial(t, e.ts.URL)
	_, p, err := c.Frame(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p), `"max_subs":3`) {
		t.Fatalf("ready %s, want max_subs 3 (the router's limit)", p)
	}
}
