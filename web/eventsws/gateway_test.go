package eventsws

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/web"
)

// testMsg is any message the gateway sends.
type testMsg struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Sub       string `json:"sub"`
	Subject   string `json:"subject"`
	Op        string `json:"op"`
	Seq       uint64 `json:"seq"`
	Value     string `json:"value"`
	Enc       string `json:"enc"`
	Coalesced int    `json:"coalesced"`
	User      string `json:"user"`
	App       string `json:"app"`
	Region    string `json:"region"`
	MaxSubs   int    `json:"max_subs"`
	Reason    string `json:"reason"`
	Count     int    `json:"count"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Mode      string `json:"mode"`
	Entry     string `json:"entry"`
	Attempt   int    `json:"attempt"`
}

type env struct {
	t  *testing.T
	c  *persist.Client
	g  *Gateway
	ts *httptest.Server
}

// start runs a router and a gateway over one real persist server.
func start(t *testing.T, tune func(*Config)) *env {
	t.Helper()
	pe := persistenv.Start(t, 1)
	c := pe.Client()
	r, err := events.NewRouter(events.RouterConfig{Client: c, Durable: &events.DurableConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	cfg := Config{Router: r, Authorizer: web.Open()}
	if tune != nil {
		tune(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	g.Mount(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		if err := g.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &env{t: t, c: c, g: g, ts: ts}
}

// client is one socket and what it read.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func (e *env) dial(query string, h http.Header) *client {
	e.t.Helper()
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/ws/events" + query
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		e.t.Fatalf("dial: %v (%v)", err, resp)
	}
	e.t.Cleanup(func() { _ = ws.CloseNow() })
	c := &client{t: e.t, ws: ws}
	if m := c.read(); m.Type != TypeReady || m.MaxSubs != events.MaxSessionSubsDefault {
		e.t.Fatalf("first message %+v, want ready", m)
	}
	return c
}

func (c *client) send(m map[string]any) {
	c.t.Helper()
	b, _ := json.Marshal(m)
	if err := c.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) read() testMsg {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var m testMsg
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("message %s: %v", b, err)
	}
	return m
}

// subscribe subscribes and waits for the answer, which it returns.
func (c *client) subscribe(id, anchor string, filter map[string]any) testMsg {
	c.t.Helper()
	m := map[string]any{"type": "subscribe", "id": id, "anchor": anchor}
	if filter != nil {
		m["filter"] = filter
	}
	c.send(m)
	return c.read()
}

func (e *env) set(scope, stream, key string, value []byte) persist.SetResult {
	e.t.Helper()
	res, err := e.c.Stream(scope, stream).Set(context.Background(), value, persist.SetOptions{Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// TestEventsOverTheSocket: a subscription gets the sets and deletes at
// its anchor and below, with their values, and not a sibling's.
func TestEventsOverTheSocket(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	if m := c.subscribe("files", "project-1/files/a", nil); m.Type != TypeSubscribed || m.ID != "files" {
		t.Fatalf("answer %+v, want subscribed", m)
	}
	e.set("project-1", "files", "a2/sibling", []byte("no"))
	res := e.set("project-1", "files", "a/b/c.txt", []byte("hello"))
	m := c.read()
	if m.Type != TypeEvent || m.Sub != "files" || m.Subject != "project-1/files/a/b/c.txt" || m.Op != "set" ||
		m.Value != "hello" || m.Seq != res.Seq || m.ID != fmt.Sprintf("project-1/files#%d", res.Seq) || m.Coalesced != 1 {
		t.Fatalf("event %+v, want the set of a/b/c.txt", m)
	}
	e.set("project-1", "files", "a/bin", []byte{0xff, 0x00})
	if m := c.read(); m.Subject != "project-1/files/a/bin" || m.Enc != "base64" || m.Value != "/wA=" {
		t.Fatalf("event %+v, want the binary value in base64", m)
	}
	if _, err := e.c.Stream("project-1", "files").Delete(context.Background(), persist.Delete{Seqs: []uint64{res.Seq}}); err != nil {
		t.Fatal(err)
	}
	if m := c.read(); m.Type != TypeEvent || m.Op != "delete" || m.Subject != "project-1/files/a/b/c.txt" || m.Value != "" {
		t.Fatalf("event %+v, want the delete of a/b/c.txt", m)
	}
	c.send(map[string]any{"type": "unsubscribe", "id": "files"})
	if m := c.read(); m.Type != TypeUnsubscribed || m.ID != "files" {
		t.Fatalf("answer %+v, want unsubscribed", m)
	}
	// The writer counts a message once its write returns, which may be
	// after the client read it.
	testwait.Until(t, "the gateway's counts", func() (bool, string) {
		st := e.g.Stats()
		return st.Open == 1 && st.Accepted == 1 && st.Sent >= 6, fmt.Sprintf("%+v", st)
	})
}

// TestRequestErrors: what a client gets wrong is answered with an error
// naming the request, and the socket stays open.
func TestRequestErrors(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	check := func(what string, m testMsg, id, code string) {
		t.Helper()
		if m.Type != TypeError || m.ID != id || m.Code != code || m.Message == "" {
			t.Fatalf("%s: answer %+v, want error %s for %q", what, m, code, id)
		}
	}
	expect := func(what, id, code string) { t.Helper(); check(what, c.read(), id, code) }
	if err := c.ws.Write(context.Background(), websocket.MessageText, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	expect("bad JSON", "", CodeBadRequest)
	c.send(map[string]any{"type": "dance"})
	expect("unknown type", "", CodeBadRequest)
	check("anchor without a stream", c.subscribe("x", "project-1", nil), "x", CodeBadRequest)
	check("unknown op", c.subscribe("y", "project-1/files", map[string]any{"ops": []string{"rename"}}), "y", CodeBadRequest)
	c.send(map[string]any{"type": "unsubscribe", "id": "never"})
	expect("unknown subscription", "never", CodeNotFound)
	c.send(map[string]any{"type": "ack", "sub": "x", "entry": "project-1/files#3"})
	expect("ack of nothing held", "project-1/files#3", CodeUnknownEntry)
	for i := 0; i < events.MaxSessionSubsDefault; i++ {
		if m := c.subscribe(fmt.Sprint(i), "project-1/files/"+fmt.Sprint(i), nil); m.Type != TypeSubscribed {
			t.Fatalf("subscription %d: %+v", i, m)
		}
	}
	check("past the socket's limit", c.subscribe("one-more", "project-1/files/x", nil), "one-more", CodeTooMany)
	if m := c.subscribe("0", "project-1/files/again", nil); m.Type != TypeSubscribed {
		t.Fatalf("re-subscribing an id: %+v", m)
	}
}

// TestTenantScopes: a tenant subscribes in its own scopes only, and a
// request without credentials is refused before the upgrade.
func TestTenantScopes(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) {
		c.Authorizer = web.Accounts([]web.Account{{Principal: web.Principal{Name: "acme", Scopes: []string{"acme"}}, Password: "pw"}})
	})
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/ws/events"
	if _, resp, err := websocket.Dial(context.Background(), u, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial without credentials: %v %v, want 401", err, resp)
	}
	h := http.Header{}
	h.Set("Authorization", "Basic "+basic("acme", "pw"))
	c := e.dial("", h)
	if m := c.subscribe("mine", "acme/files", nil); m.Type != TypeSubscribed {
		t.Fatalf("own scope: %+v", m)
	}
	if m := c.subscribe("theirs", "project-1/files", nil); m.Type != TypeError || m.Code != CodeForbidden || m.ID != "theirs" {
		t.Fatalf("another scope: %+v, want forbidden", m)
	}
	e.set("acme", "files", "k", []byte("v"))
	if m := c.read(); m.Sub != "mine" || m.Subject != "acme/files/k" {
		t.Fatalf("event %+v", m)
	}
}

// TestAPIKeyLogins: an API key logs a socket in as its account, in the
// X-Api-Key header or the apikey parameter (a browser cannot set
// headers on a WebSocket); a wrong key is refused, and the account's
// scopes bound what it may subscribe to.
func TestAPIKeyLogins(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) {
		c.Authorizer = web.Accounts([]web.Account{{Principal: web.Principal{Name: "acme", Scopes: []string{"acme"}}, APIKeys: []string{"k3y-acme"}}})
	})
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/ws/events"
	if _, resp, err := websocket.Dial(context.Background(), u+"?"+web.APIKeyParam+"=wrong", nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %v %v, want 401", err, resp)
	}
	h := http.Header{}
	h.Set(web.APIKeyHeader, "k3y-acme")
	for _, c := range []*client{e.dial("", h), e.dial("?"+web.APIKeyParam+"=k3y-acme", nil)} {
		if m := c.subscribe("mine", "acme/files", nil); m.Type != TypeSubscribed {
			t.Fatalf("own scope: %+v", m)
		}
		if m := c.subscribe("theirs", "project-1/files", nil); m.Type != TypeError || m.Code != CodeForbidden {
			t.Fatalf("another scope: %+v, want forbidden", m)
		}
	}
}

// TestStopClosesSockets: Stop ends every socket with going-away.
func TestStopClosesSockets(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	read := make(chan error, 1)
	go func() { // reading, as a browser does, answers the close at once
		_, _, err := c.ws.Read(context.Background())
		read <- err
	}()
	if err := e.g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-read; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("read after Stop: %v, want 1001", err)
	}
	resp, err := http.Get(e.ts.URL + "/ws/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after Stop: %d, want 503", resp.StatusCode)
	}
}

// TestQueueOverflowLeavesOneGapPerSubscription: deliveries past a full
// queue are dropped and counted, and each subscription that lost some
// gets one gap with their count after what was queued.
func TestQueueOverflowLeavesOneGapPerSubscription(t *testing.T) {
	t.Parallel()
	g := &Gateway{cfg: Config{QueueMessages: 2}.withDefaults()}
	c := &conn{g: g, lost: map[string]int{}, wake: make(chan struct{}, 1)}
	ev := func(sub string, n int) events.Delivery {
		return events.Delivery{Sub: sub, Event: &events.Event{Subject: events.Subject{Scope: "p", Stream: "s", Key: "k"}, Op: events.OpSet, Coalesced: n}}
	}
	c.deliver(ev("a", 1))
	c.deliver(ev("a", 1))
	c.deliver(ev("a", 3)) // dropped: 3 events
	c.deliver(ev("b", 1)) // dropped
	if !c.push([]byte(`{"type":"subscribed"}`)) {
		t.Fatal("an answer was refused below twice the bound")
	}
	out := c.take()
	var types []string
	for _, b := range out {
		var m testMsg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		types = append(types, m.Type+":"+m.Sub+":"+m.Reason+":"+fmt.Sprint(m.Count))
	}
	want := "event:a::0 event:a::0 subscribed:::0 gap:a:queue_overflow:3 gap:b:queue_overflow:1"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("took %s\nwant %s", got, want)
	}
	if st := g.Stats(); st.Dropped != 4 || st.Gaps != 2 || g.EventsGaps()[events.ReasonQueueOverflow] != 2 {
		t.Fatalf("stats %+v, want 4 dropped under 2 gaps", st)
	}
	if len(c.take()) != 0 {
		t.Fatal("a gap was sent twice")
	}
}

// messages reads c from now on into a channel, closed when c ends.
func (c *client) messages() <-chan testMsg {
	ch := make(chan testMsg, 64)
	go func() {
		defer close(ch)
		for {
			_, b, err := c.ws.Read(context.Background())
			if err != nil {
				return
			}
			var m testMsg
			if json.Unmarshal(b, &m) == nil {
				ch <- m
			}
		}
	}()
	return ch
}

// TestDurableSingleOverSockets: a `single` subscription stored through one
// socket reaches exactly one of its user's sockets per delivery, with an
// entry that socket acks; the next delivery follows the ack, and an ack
// of an entry not in flight is refused.
func TestDurableSingleOverSockets(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c1, c2 := e.dial("", nil), e.dial("", nil)
	c1.send(map[string]any{"type": "subscribe", "id": "jobs", "anchor": "project-1/jobs", "mode": "single"})
	if m := c1.read(); m.Type != TypeSubscribed || m.Mode != "single" || m.ID != "jobs" {
		t.Fatalf("durable subscribe: %+v", m)
	}
	// The answer says the row is stored; the router following the rows
	// makes it live.
	r := e.g.cfg.Router
	testwait.Until(t, "the row live", func() (bool, string) {
		st := r.Stats()
		return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
	})
	// Both sockets also hear the key fence of the same stream, each on a
	// session subscription: the fence's event comes after anything an
	// earlier change of the stream sent to that socket.
	for _, c := range []*client{c1, c2} {
		if m := c.subscribe("fence", "project-1/jobs/fence", nil); m.Type != TypeSubscribed {
			t.Fatalf("session subscribe: %+v", m)
		}
	}
	m1, m2 := c1.messages(), c2.messages()
	next := func(what string) (testMsg, *client, <-chan testMsg) {
		t.Helper()
		select {
		case m := <-m1:
			return m, c1, m1
		case m := <-m2:
			return m, c2, m2
		case <-time.After(testwait.Timeout):
			t.Fatalf("no %s", what)
		}
		panic("unreachable")
	}
	e.set("project-1", "jobs", "1", []byte("first"))
	m, holder, holderMsgs := next("delivery")
	if m.Type != TypeEvent || m.Mode != "single" || m.Entry == "" || m.Attempt != 1 || m.Value != "first" || m.Sub != "jobs" {
		t.Fatalf("single delivery %+v", m)
	}
	holder.send(map[string]any{"type": "ack", "sub": "jobs", "entry": "project-1/jobs#999"})
	if a := <-holderMsgs; a.Type != TypeError || a.Code != CodeUnknownEntry {
		t.Fatalf("ack of an entry not in flight: %+v", a)
	}
	holder.send(map[string]any{"type": "ack", "sub": "jobs", "entry": m.Entry})
	if a := <-holderMsgs; a.Type != TypeAcked || a.ID != m.Entry {
		t.Fatalf("ack: %+v", a)
	}
	e.set("project-1", "jobs", "2", []byte("second"))
	if m, _, _ := next("second delivery"); m.Value != "second" || m.Attempt != 1 {
		t.Fatalf("second delivery %+v", m)
	}
	// Exactly one socket got each: up to the fence, set after them,
	// neither socket hears anything else.
	e.set("project-1", "jobs", "fence", []byte("fence"))
	for i, msgs := range []<-chan testMsg{m1, m2} {
		select {
		case m := <-msgs:
			if m.Type != TypeEvent || m.Sub != "fence" || m.Value != "fence" {
				t.Fatalf("socket %d: %+v before the fence", i+1, m)
			}
		case <-time.After(testwait.Timeout):
			t.Fatalf("socket %d: no fence", i+1)
		}
	}
	holder.send(map[string]any{"type": "unsubscribe", "id": "jobs", "mode": "single"})
	if u := <-holderMsgs; u.Type != TypeUnsubscribed {
		t.Fatalf("durable unsubscribe: %+v", u)
	}
}
