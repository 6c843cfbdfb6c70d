package eventsws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/web"
)

// refusingPresence is a presence store whose writes fail while refuse is
// set: a persist server away when a user connects.
type refusingPresence struct {
	events.PresenceStore
	refuse atomic.Bool
}

func (s *refusingPresence) Put(ctx context.Context, k events.PresenceKey, connectedAt int64, ttl time.Duration) error {
	if s.refuse.Load() {
		return errors.New("store away")
	}
	return s.PresenceStore.Put(ctx, k, connectedAt, ttl)
}

// presenceGateway is a gateway whose presence writes to store (the
// router's persist when nil) and removes a row 1-2 ms after the last
// socket left, with alice and bob as its users; tune, if any, changes its
// config after that.
func presenceGateway(t *testing.T, store func(events.PresenceStore) events.PresenceStore, tune ...func(*Config)) (*env, *events.Presence) {
	t.Helper()
	var p *events.Presence
	e := start(t, func(c *Config) {
		var s events.PresenceStore = events.PersistPresence{Client: c.Router.Client()}
		if store != nil {
			s = store(s)
		}
		var err error
		p, err = events.NewPresence(events.PresenceConfig{Region: "eu", Store: s, LeaveMin: time.Millisecond, LeaveMax: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		c.Presence = p
		c.Authorizer = web.Accounts([]web.Account{
			{Principal: web.Principal{Name: "alice", AllScopes: true}, Password: "a"},
			{Principal: web.Principal{Name: "bob", AllScopes: true}, Password: "b"},
		})
		for _, f := range tune {
			f(c)
		}
	})
	return e, p
}

func login(user, password string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Basic "+basic(user, password))
	return h
}

// TestPresenceMessages: a user's first connection joins, and a
// subscriber of presence/USER hears it as a presence message; once the
// user's last socket has closed and the leave's delay passed, it hears
// the leave.
func TestPresenceMessages(t *testing.T) {
	t.Parallel()
	e, p := presenceGateway(t, nil)
	bob := e.dial("", login("bob", "b"))
	if m := bob.subscribe("where", "presence/alice", nil); m.Type != TypeSubscribed {
		t.Fatalf("subscribe: %+v", m)
	}
	alice := e.dial("?app=notes", login("alice", "a"))
	if m := bob.read(); m.Type != TypePresence || m.User != "alice" || m.App != "notes" || m.Region != "eu" || m.Op != "join" || m.Sub != "where" {
		t.Fatalf("message %+v, want alice joined notes in eu", m)
	}
	if n := p.Connections("alice", "notes"); n != 1 {
		t.Fatalf("alice has %d connections, want 1", n)
	}
	if err := alice.ws.CloseNow(); err != nil {
		t.Fatal(err)
	}
	if m := bob.read(); m.Type != TypePresence || m.Op != "leave" || m.User != "alice" || m.App != "notes" || m.Region != "eu" || m.Sub != "where" {
		t.Fatalf("message %+v, want alice left notes in eu", m)
	}
}

// TestPresenceFailedJoinStillLeaves: a socket whose presence write
// failed still counts as a connection (the next refresh writes the row),
// so its close must uncount it: otherwise the user stays present for good.
func TestPresenceFailedJoinStillLeaves(t *testing.T) {
	t.Parallel()
	var store *refusingPresence
	e, p := presenceGateway(t, func(s events.PresenceStore) events.PresenceStore {
		store = &refusingPresence{PresenceStore: s}
		store.refuse.Store(true)
		return store
	})
	alice := e.dial("?app=notes", login("alice", "a")) // ready: its Join has returned
	if n := p.Connections("alice", "notes"); n != 1 {
		t.Fatalf("alice has %d connections after a failed write, want 1", n)
	}
	if err := alice.ws.CloseNow(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "alice's connection uncounted", func() bool { return p.Connections("alice", "notes") == 0 })
	// Nothing left to write either: a refresh with the store back finds
	// no connection of alice's.
	store.refuse.Store(false)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Present != 0 || st.Writes != 0 {
		t.Fatalf("presence %+v after alice left, want nobody present and no row written", st)
	}
}

// TestSinglePresenceDeliveryIsAcked: a durable `single` subscription on a
// presence anchor (presence/USER) gets its deliveries as presence
// messages, and each carries the mode, entry and attempt an event message
// would: without the entry the client could not ack it, the delivery came
// again at every lease's end and nothing after it was ever delivered.
func TestSinglePresenceDeliveryIsAcked(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	c.send(map[string]any{"type": "subscribe", "id": "where", "anchor": "presence/bob", "mode": "single"})
	if m := c.read(); m.Type != TypeSubscribed || m.Mode != "single" {
		t.Fatalf("durable subscribe: %+v", m)
	}
	r := e.g.cfg.Router
	testwait.Until(t, "the row live", func() (bool, string) {
		st := r.Stats()
		return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
	})
	e.set("presence", "bob", "web/eu", []byte(`{"connectedAt":1,"region":"eu","app":"web"}`))
	e.set("presence", "bob", "web/us", []byte(`{"connectedAt":2,"region":"us","app":"web"}`))
	first := c.read()
	if first.Type != TypePresence || first.Region != "eu" || first.Mode != "single" || first.Entry == "" || first.Attempt != 1 {
		t.Fatalf("the `single` delivery of bob's join in eu: %+v, want a presence message with mode, entry and attempt", first)
	}
	// One in flight: the join in us comes once the first is acked.
	c.send(map[string]any{"type": "ack", "sub": "where", "entry": first.Entry})
	// The ack's answer and the next delivery, in either order.
	acked, next := false, false
	for range 2 {
		switch m := c.read(); {
		case m.Type == TypeAcked && m.ID == first.Entry:
			acked = true
		case m.Type == TypePresence && m.Region == "us" && m.Entry != "" && m.Entry != first.Entry:
			next = true
		default:
			t.Fatalf("after the ack: %+v, want its answer and bob's join in us", m)
		}
	}
	if !acked || !next {
		t.Fatalf("after the ack: acked %v, bob's join in us %v", acked, next)
	}
}

// (Was: a socket whose app was past events.MaxPresenceApps was upgraded and served, not present, with the refusal only logged.)
func TestTooManyAppsRefusedBeforeUpgrade(t *testing.T) {
	t.Parallel()
	e, p := presenceGateway(t, nil)
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/ws/events"
	refused := func(app string) {
		t.Helper()
		ws, resp, err := websocket.Dial(context.Background(), u+"?app="+app, &websocket.DialOptions{HTTPHeader: login("alice", "a")})
		if ws != nil {
			_ = ws.CloseNow()
			t.Fatalf("a socket of alice's %dth app %q was upgraded", events.MaxPresenceApps+1, app)
		}
		if resp == nil {
			t.Fatalf("no response: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		want := fmt.Sprintf("%s: alice has %d apps present", CodeTooManyApps, events.MaxPresenceApps)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.HasPrefix(string(body), want) {
			t.Fatalf("alice's %dth app: HTTP %d %q, want 429 starting with %q", events.MaxPresenceApps+1, resp.StatusCode, body, want)
		}
	}

	var apps []*client
	for i := range events.MaxPresenceApps {
		apps = append(apps, e.dial(fmt.Sprintf("?app=app%d", i), login("alice", "a")))
	}
	refused("extra")
	if st := p.Stats(); st.Refused != 1 || st.Present != events.MaxPresenceApps {
		t.Fatalf("presence %+v, want 1 refused and alice's %d apps present", st, events.MaxPresenceApps)
	}
	if got := e.g.Stats().Accepted; got != events.MaxPresenceApps {
		t.Fatalf("%d sockets upgraded, want %d", got, events.MaxPresenceApps)
	}
	// An app present may open more sockets, and another user's apps are
	// its own.
	e.dial("?app=app1", login("alice", "a"))
	e.dial("?app=extra", login("bob", "b"))

	// Once an app's socket closed and its leave removed its row, its
	// place is free.
	if err := apps[0].ws.CloseNow(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "app0's row removed", func() (bool, string) {
		st := p.Stats()
		return st.Removes == 1, fmt.Sprintf("%+v", st)
	})
	e.dial("?app=extra", login("alice", "a"))
	if n := p.Connections("alice", "extra"); n != 1 {
		t.Fatalf("alice's extra has %d connections once admitted, want 1", n)
	}
	refused("another")
}
