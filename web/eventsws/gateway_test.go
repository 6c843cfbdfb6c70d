package eventsws

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	e, _ := startRouter(t, events.RouterConfig{}, tune)
	return e
}

// startRouter is start with a router config of the test's (its Client set,
// and its Durable when nil), and returns the persist environment too (to
// stop its server).
func startRouter(t *testing.T, rcfg events.RouterConfig, tune func(*Config)) (*env, *persistenv.Env) {
	t.Helper()
	pe := persistenv.Start(t, 1)
	c := pe.Client()
	rcfg.Client = c
	if rcfg.Durable == nil {
		rcfg.Durable = &events.DurableConfig{}
	}
	r, err := events.NewRouter(rcfg)
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
	return &env{t: t, c: c, g: g, ts: ts}, pe
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

// TestSubscriptionSlotsAndIDs: an unsubscribed id frees its slot of the
// socket's max_subs and may be subscribed again, on another anchor, which
// is what it hears from then on; the old anchor's changes made after the
// unsubscribe reach nobody.
func TestSubscriptionSlotsAndIDs(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	for i := 0; i < events.MaxSessionSubsDefault; i++ {
		if m := c.subscribe(fmt.Sprint(i), "project-1/files/"+fmt.Sprint(i), nil); m.Type != TypeSubscribed {
			t.Fatalf("subscription %d: %+v", i, m)
		}
	}
	if m := c.subscribe("one-more", "project-1/files/x", nil); m.Type != TypeError || m.Code != CodeTooMany || m.ID != "one-more" {
		t.Fatalf("subscription %d: %+v, want too-many", events.MaxSessionSubsDefault+1, m)
	}
	c.send(map[string]any{"type": "unsubscribe", "id": "0"})
	if m := c.read(); m.Type != TypeUnsubscribed || m.ID != "0" {
		t.Fatalf("unsubscribe: %+v", m)
	}
	if m := c.subscribe("one-more", "project-1/files/x", nil); m.Type != TypeSubscribed {
		t.Fatalf("subscribe after an unsubscribe freed a slot: %+v", m)
	}
	c.send(map[string]any{"type": "unsubscribe", "id": "one-more"})
	if m := c.read(); m.Type != TypeUnsubscribed {
		t.Fatalf("unsubscribe: %+v", m)
	}
	if m := c.subscribe("0", "project-1/files/again", nil); m.Type != TypeSubscribed || m.ID != "0" {
		t.Fatalf("the same id after its unsubscribe: %+v", m)
	}
	e.set("project-1", "files", "0/k", []byte("old anchor"))
	e.set("project-1", "files", "x/k", []byte("unsubscribed anchor"))
	e.set("project-1", "files", "again/k", []byte("new anchor"))
	if m := c.read(); m.Type != TypeEvent || m.Sub != "0" || m.Value != "new anchor" {
		t.Fatalf("first delivery %+v, want the new anchor's change", m)
	}
	if st := e.g.cfg.Router.Stats(); st.Subs != events.MaxSessionSubsDefault {
		t.Fatalf("router %+v, want the socket's %d", st, events.MaxSessionSubsDefault)
	}
}

// TestMessageSizeLimit: a client message of 8 KiB is answered; one byte
// more closes the socket with 1009.
func TestMessageSizeLimit(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	msg := func(size int) []byte {
		head := `{"type":"unsubscribe","id":"big","pad":"`
		return []byte(head + strings.Repeat("x", size-len(head)-2) + `"}`)
	}
	if err := c.ws.Write(context.Background(), websocket.MessageText, msg(MaxMessageBytes)); err != nil {
		t.Fatal(err)
	}
	if m := c.read(); m.Type != TypeError || m.Code != CodeNotFound || m.ID != "big" {
		t.Fatalf("a message of %d bytes: %+v, want its answer (not-found)", MaxMessageBytes, m)
	}
	if err := c.ws.Write(context.Background(), websocket.MessageText, msg(MaxMessageBytes+1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, b, err := c.ws.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("a message of %d bytes: %s %v, want the socket closed with 1009", MaxMessageBytes+1, b, err)
	}
	testwait.For(t, "the socket's session gone", func() bool { return e.g.cfg.Router.Stats().Sessions == 0 })
}

// TestNothingAnsweredAfterClose: a request the client sends after its close
// frame is not handled, and the socket's subscriptions end with it.
func TestNothingAnsweredAfterClose(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := rawDial(t, e.ts.URL)
	if op, p, err := c.Frame(10 * time.Second); err != nil || op != 0x1 {
		t.Fatalf("first frame: op %d %s %v, want ready", op, p, err)
	}
	c.Write(0x1, []byte(`{"type":"subscribe","id":"a","anchor":"project-1/files"}`))
	if op, p, err := c.Frame(30 * time.Second); err != nil || op != 0x1 || !strings.Contains(string(p), `"subscribed"`) {
		t.Fatalf("subscribe: op %d %s %v", op, p, err)
	}
	c.Write(0x8, []byte{0x03, 0xe8}) // close, 1000
	c.Write(0x1, []byte(`{"type":"subscribe","id":"b","anchor":"project-1/other"}`))
	for {
		op, p, err := c.Frame(30 * time.Second)
		if err != nil || op == 0x8 {
			break // the close answered, or the connection closed
		}
		if op == 0x1 {
			t.Fatalf("after the client's close: %s", p)
		}
	}
	testwait.Until(t, "the socket's subscriptions gone", func() (bool, string) {
		st := e.g.cfg.Router.Stats()
		return st.Sessions == 0 && st.Subs == 0 && st.Watches == 0, fmt.Sprintf("%+v", st)
	})
}

// TestTooSlowClientClosed: a client that sends requests and does not read
// their answers is closed with 1008 once its answers' queue is full.
func TestTooSlowClientClosed(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) {
		c.QueueMessages = 1
		c.PingInterval = -1
		c.WriteTimeout = time.Minute // the client reads only once the gateway gave up
	})
	c := e.dial("", nil)
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		b := []byte(`{"type":"unsubscribe","id":"none"}`)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c.ws.Write(context.Background(), websocket.MessageText, b) != nil {
				return
			}
		}
	}()
	testwait.For(t, "the gateway giving up on the socket", func() bool { return e.g.cfg.Router.Stats().Sessions == 0 })
	close(stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	for err == nil {
		_, _, err = c.ws.Read(ctx)
	}
	<-sent
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("the socket ended with %v, want 1008", err)
	}
}

// TestAckOfAnotherUsersEntry: an ack of an entry delivered to another
// user is unknown-entry, for a subscription id the acker holds too.
func TestAckOfAnotherUsersEntry(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) {
		c.Authorizer = web.Accounts([]web.Account{
			{Principal: web.Principal{Name: "alice", Scopes: []string{"project-1"}}, Password: "pa"},
			{Principal: web.Principal{Name: "bob", Scopes: []string{"project-1"}}, Password: "pb"},
		})
	})
	login := func(user, pw string) http.Header {
		h := http.Header{}
		h.Set("Authorization", "Basic "+basic(user, pw))
		return h
	}
	alice, bob := e.dial("", login("alice", "pa")), e.dial("", login("bob", "pb"))
	for _, c := range []*client{alice, bob} {
		// Bob's row is on another stream: nothing of it is in flight.
		anchor := map[*client]string{alice: "project-1/jobs", bob: "project-1/bobs-jobs"}[c]
		c.send(map[string]any{"type": "subscribe", "id": "jobs", "anchor": anchor, "mode": "single"})
		if m := c.read(); m.Type != TypeSubscribed {
			t.Fatalf("durable subscribe: %+v", m)
		}
	}
	e.set("project-1", "jobs", "1", []byte("alice's"))
	m := alice.read()
	if m.Type != TypeEvent || m.Entry == "" {
		t.Fatalf("alice's delivery %+v", m)
	}
	bob.send(map[string]any{"type": "ack", "sub": "jobs", "entry": m.Entry})
	if a := bob.read(); a.Type != TypeError || a.Code != CodeUnknownEntry || a.ID != m.Entry {
		t.Fatalf("bob's ack of alice's entry: %+v, want unknown-entry naming it", a)
	}
	alice.send(map[string]any{"type": "ack", "sub": "jobs", "entry": m.Entry})
	if a := alice.read(); a.Type != TypeAcked || a.ID != m.Entry {
		t.Fatalf("alice's ack: %+v", a)
	}
}

// (Was: a request with a field of the wrong JSON type — a filter's ops as
// a string, an anchor as a number — was answered bad-request with no id,
// so a client could not tell which subscribe failed, and the browser
// client kept it and sent it again on every reconnect.)
func TestWrongTypedFieldErrorNamesItsRequest(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	for _, tc := range []struct{ msg, id, says string }{
		{`{"type":"subscribe","id":"files","anchor":"project-1/files","filter":{"ops":"set"}}`, "files", "filter.ops"},
		{`{"type":"subscribe","id":"globs","anchor":"project-1/files","filter":{"glob":["*.txt"]}}`, "globs", "filter.glob"},
		{`{"type":"subscribe","id":"num","anchor":7}`, "num", "anchor"},
		{`{"type":"unsubscribe","id":"files","mode":true}`, "files", "mode"},
		{`{"type":"ack","sub":7,"entry":"project-1/jobs#7"}`, "project-1/jobs#7", "sub"},
		{`{"type":1,"id":"typed"}`, "typed", "type"},
	} {
		if err := c.ws.Write(context.Background(), websocket.MessageText, []byte(tc.msg)); err != nil {
			t.Fatal(err)
		}
		if m := c.read(); m.Type != TypeError || m.Code != CodeBadRequest || m.ID != tc.id || !strings.Contains(m.Message, tc.says) {
			t.Fatalf("%s: answer %+v, want bad-request naming %q and saying %q", tc.msg, m, tc.id, tc.says)
		}
	}
	// The socket is still usable.
	if m := c.subscribe("files", "project-1/files", map[string]any{"ops": []string{"set"}}); m.Type != TypeSubscribed || m.ID != "files" {
		t.Fatalf("subscribe after the errors: %+v", m)
	}
}

// (Was: a request sent in a binary frame was answered bad-request with no
// id: a client whose library sends bytes as binary could not tell which of
// its requests were refused.)
func TestBinaryFrameErrorNamesItsRequest(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	for _, tc := range []struct{ msg, id string }{
		{`{"type":"subscribe","id":"files","anchor":"project-1/files"}`, "files"},
		{`{"type":"ack","sub":"jobs","entry":"project-1/jobs#7"}`, "project-1/jobs#7"},
		{`not json`, ""},
	} {
		if err := c.ws.Write(context.Background(), websocket.MessageBinary, []byte(tc.msg)); err != nil {
			t.Fatal(err)
		}
		if m := c.read(); m.Type != TypeError || m.Code != CodeBadRequest || m.ID != tc.id || !strings.Contains(m.Message, "text") {
			t.Fatalf("binary %s: answer %+v, want bad-request naming %q", tc.msg, m, tc.id)
		}
	}
	// Nothing was subscribed, and the socket is still usable.
	if st := e.g.cfg.Router.Stats(); st.Subs != 0 {
		t.Fatalf("a binary subscribe was taken: router %+v", st)
	}
	if m := c.subscribe("files", "project-1/files", nil); m.Type != TypeSubscribed {
		t.Fatalf("subscribe after a binary frame: %+v", m)
	}
}

// TestAckErrorNamesItsEntry: an error answering an ack names the ack's
// entry, whatever is wrong with it, a bad mode included; the mode was
// checked before the ack's entry was read, so that error named "".
func TestAckErrorNamesItsEntry(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	c.send(map[string]any{"type": "ack", "sub": "jobs", "entry": "project-1/jobs#1", "mode": "bogus"})
	if m := c.read(); m.Type != TypeError || m.Code != CodeBadRequest || m.ID != "project-1/jobs#1" {
		t.Fatalf("ack with a bad mode: %+v, want a bad-request naming its entry", m)
	}
}

// TestNonUTF8RequestIsBadRequest: a message that is not valid UTF-8 is
// bad-request, and nothing is subscribed. encoding/json turned each
// invalid byte into U+FFFD before the id's UTF-8 check, so a subscribe
// of id "\xff" was taken, silently, for one of "\uFFFD".
func TestNonUTF8RequestIsBadRequest(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	r := rawDial(t, e.ts.URL)
	if _, _, err := r.Frame(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	payload := []byte("{\"type\":\"subscribe\",\"id\":\"\xff\",\"anchor\":\"project-1/files\",\"mode\":\"broadcast\"}")
	fr := append([]byte{0x81, 0x80 | byte(len(payload)), 0, 0, 0, 0}, payload...) // masked with a zero key
	if _, err := r.NC.Write(fr); err != nil {
		t.Fatal(err)
	}
	op, p, err := r.Frame(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if op != 0x1 || !strings.Contains(string(p), `"code":"bad-request"`) {
		t.Fatalf("a subscribe whose id is not UTF-8: op %d %s, want bad-request", op, p)
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

// TestOriginAndCredentialsRefused: a browser page of another origin is
// refused (403) before its credentials are looked at, and a wrong
// password is 401, both before the upgrade.
func TestOriginAndCredentialsRefused(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) {
		c.Authorizer = web.Accounts([]web.Account{{Principal: web.Principal{Name: "acme", Scopes: []string{"acme"}}, Password: "pw"}})
	})
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/ws/events"
	good := http.Header{}
	good.Set("Authorization", "Basic "+basic("acme", "pw"))
	bad := http.Header{}
	bad.Set("Authorization", "Basic "+basic("acme", "wrong"))
	evil := good.Clone()
	evil.Set("Origin", "http://evil.example")
	for _, tc := range []struct {
		what string
		h    http.Header
		want int
	}{{"another origin", evil, http.StatusForbidden}, {"a wrong password", bad, http.StatusUnauthorized}} {
		if _, resp, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPHeader: tc.h}); err == nil || resp == nil || resp.StatusCode != tc.want {
			t.Fatalf("%s: %v %v, want %d", tc.what, err, resp, tc.want)
		}
	}
	c := e.dial("", good)
	if m := c.subscribe("mine", "acme/files", nil); m.Type != TypeSubscribed {
		t.Fatalf("own scope: %+v", m)
	}
	// A durable subscription is bound by the scopes as a session's is.
	c.send(map[string]any{"type": "subscribe", "id": "theirs", "anchor": "project-1/jobs", "mode": "single"})
	if m := c.read(); m.Type != TypeError || m.Code != CodeForbidden || m.ID != "theirs" {
		t.Fatalf("durable subscribe in another scope: %+v, want forbidden", m)
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

// TestTenantConnections: a user with TenantConnections sockets open is
// refused the next one (429 before the upgrade, the body naming the
// bound, and no presence written for it), whether it signs in with its
// password or a key; another user is not; a socket that ends, closed or
// dropped, gives its place back; the anonymous principal of an open
// gateway is not bounded.
// (Was: one user could open any number of sockets, each with its session and queue.)
func TestTenantConnections(t *testing.T) {
	t.Parallel()
	const bound = 3
	e, p := presenceGateway(t, nil, func(c *Config) {
		c.Authorizer = web.Accounts([]web.Account{
			{Principal: web.Principal{Name: "alice", AllScopes: true}, Password: "a", APIKeys: []string{"alice-key"}},
			{Principal: web.Principal{Name: "bob", AllScopes: true}, Password: "b"},
		})
		c.TenantConnections = bound
	})
	alice := func(i int) http.Header {
		if i%2 == 0 {
			return login("alice", "a")
		}
		return http.Header{web.APIKeyHeader: {"alice-key"}}
	}
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/ws/events"
	refused := func(i int) {
		t.Helper()
		// Its own app: a presence join for it would show.
		ws, resp, err := websocket.Dial(context.Background(), u+"?app=refused", &websocket.DialOptions{HTTPHeader: alice(i)})
		if ws != nil {
			_ = ws.CloseNow()
			t.Fatalf("socket %d of a user bounded to %d was upgraded", bound+1, bound)
		}
		if resp == nil {
			t.Fatalf("no response: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		want := CodeTooManyConnections + ": alice has 3 "
		if resp.StatusCode != http.StatusTooManyRequests || !strings.HasPrefix(string(body), want) {
			t.Fatalf("socket %d: HTTP %d %q, want 429 starting with %q", bound+1, resp.StatusCode, body, want)
		}
		if n := p.Connections("alice", "refused"); n != 0 {
			t.Fatalf("a refused socket counts as %d presence connections, want 0", n)
		}
	}
	placeBack := func(want int) {
		t.Helper()
		testwait.For(t, "alice's socket to give its place back", func() bool {
			return e.g.limit.Open("alice") == want
		})
	}

	var conns []*client
	for i := range bound {
		conns = append(conns, e.dial("", alice(i)))
	}
	refused(0)
	refused(1)
	if got := e.g.Stats().TenantRefusals; got != 2 {
		t.Errorf("TenantRefusals %d, want 2", got)
	}
	if st := p.Stats(); st.Present != 1 {
		t.Errorf("presence %+v, want alice's one app present", st)
	}
	e.dial("", login("bob", "b"))

	// Closed with a handshake, then dropped: each gives its place back.
	if err := conns[0].ws.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	placeBack(bound - 1)
	e.dial("", alice(0))
	refused(0)
	_ = conns[1].ws.CloseNow()
	placeBack(bound - 1)
	e.dial("", alice(1))

	// On an open gateway everyone is web.Open's one anonymous principal:
	// no bound (it would be the whole gateway's).
	open := start(t, func(c *Config) { c.TenantConnections = 1 })
	for range 3 {
		open.dial("", nil)
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

// (Was: the queue was bounded by its count only, so a socket that stopped
// reading held up to 1,024 copies of whatever values came: 16 sets of
// 1 MiB on an anchor its 50 subscriptions shared held 833 MiB.)
func TestQueueBoundedInBytes(t *testing.T) {
	t.Parallel()
	g := &Gateway{cfg: Config{}.withDefaults()}
	c := &conn{g: g, lost: map[string]int{}, wake: make(chan struct{}, 1)}
	big := func(sub string, size int) events.Delivery {
		return events.Delivery{Sub: sub, Event: &events.Event{Subject: events.Subject{Scope: "p", Stream: "s", Key: "k"}, Op: events.OpSet,
			Value: bytes.Repeat([]byte("x"), size), Coalesced: 1}}
	}
	// One delivery larger than the bound still passes an empty queue.
	c.deliver(big("a", 2*QueueBytesDefault))
	if out := c.take(); len(out) != 1 || len(out[0]) < 2*QueueBytesDefault {
		t.Fatalf("a delivery over the bound, queue empty: took %d messages, want it", len(out))
	}
	const size = 64 << 10
	for range 64 { // 4 MiB
		c.deliver(big("a", size))
	}
	c.deliver(big("b", size))
	out := c.take()
	queued, taken, gaps := 0, 0, map[string]int{}
	for _, b := range out {
		var m testMsg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		switch m.Type {
		case TypeEvent:
			queued += len(b)
			taken++
		case TypeGap:
			gaps[m.Sub] = m.Count
		}
	}
	if queued > QueueBytesDefault {
		t.Fatalf("queued %d events, %d bytes, over QueueBytes (%d)", taken, queued, QueueBytesDefault)
	}
	if dropped := 65 - taken; gaps["a"]+gaps["b"] != dropped || gaps["b"] != 1 {
		t.Fatalf("queued %d of 65 events, gaps %v: want one queue_overflow gap per subscription counting the rest", taken, gaps)
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

// TestLongStreamEntryIsAcked: a `single` delivery's entry is its change's
// id, SCOPE/STREAM#SEQ, and an ack of it is taken however long its stream's
// name (up to what an anchor holds). Entries were bounded as ids are, to
// 128 bytes: a delivery in a stream named with over ~115 bytes could
// never be acked, and held its subscription's next ones back for good.
func TestLongStreamEntryIsAcked(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	// About the longest stream an anchor holds, escaped as the entry has
	// it: each "j/" is "j%2F".
	stream := strings.Repeat("j/", (events.MaxAnchorBytes-len("project-1/")-1)/4) + "j"
	anchor := events.Subject{Scope: "project-1", Stream: stream}.String()
	if len(anchor) > events.MaxAnchorBytes || len(anchor) < events.MaxAnchorBytes-4 {
		t.Fatalf("anchor of %d bytes", len(anchor))
	}
	c.send(map[string]any{"type": "subscribe", "id": "jobs", "anchor": anchor, "mode": "single"})
	if m := c.read(); m.Type != TypeSubscribed {
		t.Fatalf("durable subscribe: %+v", m)
	}
	msgs := c.messages()
	// A change made before a router has the row live is read back from
	// the row's cursor: the first one is delivered either way.
	e.set("project-1", stream, "1", []byte("first"))
	var m testMsg
	select {
	case m = <-msgs:
	case <-time.After(testwait.Timeout):
		t.Fatal("no delivery")
	}
	if m.Type != TypeEvent || m.Entry == "" {
		t.Fatalf("delivery %+v", m)
	}
	c.send(map[string]any{"type": "ack", "sub": "jobs", "entry": m.Entry})
	if a := <-msgs; a.Type != TypeAcked || a.ID != m.Entry {
		t.Fatalf("ack of the delivery's own entry (%d bytes): %+v, want acked", len(m.Entry), a)
	}
}

// TestDurableIDNoRowCanHave: a durable subscription's id ends its row's
// persist key (USER/ID), and one persist refuses in a key (whitespace at
// an end, a control character) is bad-request for a subscribe and
// not-found for an unsubscribe (no row can have it). Both were answered
// `unavailable`, the store's refusal, which the client retries for ever.
func TestDurableIDNoRowCanHave(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	c := e.dial("", nil)
	for _, id := range []string{"jobs ", "jobs\x01"} {
		c.send(map[string]any{"type": "subscribe", "id": id, "anchor": "project-1/jobs", "mode": "broadcast"})
		if m := c.read(); m.Type != TypeError || m.Code != CodeBadRequest || m.ID != id {
			t.Fatalf("durable subscribe with id %q: %+v, want bad-request", id, m)
		}
		c.send(map[string]any{"type": "unsubscribe", "id": id, "mode": "broadcast"})
		if m := c.read(); m.Type != TypeError || m.Code != CodeNotFound || m.ID != id {
			t.Fatalf("durable unsubscribe with id %q: %+v, want not-found", id, m)
		}
	}
	c.send(map[string]any{"type": "unsubscribe", "id": "nope", "mode": "broadcast"})
	if m := c.read(); m.Type != TypeError || m.Code != CodeNotFound {
		t.Fatalf("durable unsubscribe of nothing: %+v, want not-found", m)
	}
}
