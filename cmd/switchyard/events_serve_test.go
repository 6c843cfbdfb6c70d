package main

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// TestEventsServe runs the events layer as a role of its own beside an up
// that holds NATS, persist and the balancer: its /ws/events hears the
// writes made through the bus (each change feed crosses from up's process
// to this one), its sockets are presence rows of its own region, and
// SIGTERM ends it with exit 0.
func TestEventsServe(t *testing.T) {
	t.Parallel()
	port := testproc.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	up := cli(t, "up", "--no-work", "--nats-port", strconv.Itoa(port), "--data", t.TempDir())
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })

	hport := testproc.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	es := cli(t, "events", "serve", "--nats", url, "--http", "127.0.0.1:"+strconv.Itoa(hport), "--region", "side", "--events-window", "0")
	testproc.Start(t, es, "events region side ready on")
	t.Cleanup(func() { _ = es.Process.Kill() })

	events := dialEvents(t, base, "hub/notes")
	for _, k := range []string{"a", "a/b/c.txt"} {
		if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "hub", "notes", k, "v", "--nats", url)); code != 0 {
			t.Fatalf("kv set: exit %d: %s", code, stderr)
		}
	}
	events.waitSubjects("hub/notes/a", "hub/notes/a/b/c.txt")
	if out, stderr, code := testproc.Run(t, cli(t, "events", "presence", "anonymous", "--nats", url)); code != 0 || !regexp.MustCompile(`(?m)^web +side +20\d\d-`).MatchString(out) {
		t.Errorf("events presence anonymous: exit %d: %s%s", code, out, stderr)
	}
	if err := es.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, es); code != 0 {
		t.Fatalf("events serve exit %d", code)
	}
}

// TestEventsServeUsage: what events serve refuses before it connects.
func TestEventsServeUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", ""}, "--http is required"},
		{[]string{"--http", "0.0.0.0:0"}, "reachable from other machines"},
		{[]string{"--peer", "us=http://127.0.0.1:7002"}, "--peer needs --region"},
		{[]string{"--auth", t.TempDir(), "--creds", "x.creds"}, "not both"},
		{[]string{"--events-window", "-1s"}, "events-window"},
	} {
		_, stderr, code := execute(t, append([]string{"events", "serve"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("events serve %q: exit %d, stderr %q; want %d mentioning %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

// TestEventsServeAuth: with --auth, events serve connects as the auth
// directory's client user to a secured bus (up --auth, over TLS) and logs
// sockets in as the bus's users: none is refused, a tenant subscribes to
// its own scopes only and hears its writes.
func TestEventsServeAuth(t *testing.T) {
	t.Parallel()
	url, dir, ca := authBus(t)
	hport := testproc.FreePort(t)
	base := "ws://127.0.0.1:" + strconv.Itoa(hport) + "/ws/events"
	es := cli(t, "events", "serve", "--nats", url, "--auth", dir, "--tls-ca", ca, "--http", "127.0.0.1:"+strconv.Itoa(hport), "--events-window", "0")
	testproc.Start(t, es, "ready on")
	t.Cleanup(func() { _ = es.Process.Kill() })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, base, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a socket without a login: %v (%v), want 401", err, resp)
	}
	c, err := auth.LoadCreds(auth.CredsFile(dir, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(c.User+":"+c.Password))}}
	ws, _, err := websocket.Dial(ctx, base, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("acme's socket: %v", err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	s := &eventsSocket{t: t, ws: ws}
	if m := s.read(); m["type"] != "ready" || m["user"] != "acme" {
		t.Fatalf("first message %v, want ready for acme", m)
	}
	s.send(map[string]string{"type": "subscribe", "id": "theirs", "anchor": "account-b/notes"})
	if m := s.read(); m["type"] != "error" || m["code"] != "forbidden" {
		t.Fatalf("acme on bob's scope: %v, want a forbidden error", m)
	}
	s.send(map[string]string{"type": "subscribe", "id": "mine", "anchor": "account-a/notes"})
	if m := s.read(); m["type"] != "subscribed" {
		t.Fatalf("acme on its own scope: %v", m)
	}
	if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "account-a", "notes", "k", "v", "--nats", url, "--creds", auth.CredsFile(dir, "acme"), "--tls-ca", ca)); code != 0 {
		t.Fatalf("kv set as acme: exit %d: %s", code, stderr)
	}
	s.waitSubjects("account-a/notes/k")
}

// TestRegionExportsForwardFamilies: a region with --peer exports the
// forward families operations.md lists: the queue's per peer, its gap
// markers and the sender's bad replies. (Was: the gap markers were never
// exported: the region's queue makes them through events.QueueLosses,
// which the registry did not take, wanting a *forward.GapPolicy.)
func TestRegionExportsForwardFamilies(t *testing.T) {
	t.Parallel()
	e, _ := testnats.Start(t)
	hport, fport, dead := testproc.FreePort(t), testproc.FreePort(t), testproc.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	es := cli(t, "events", "serve", "--nats", e.ClientURL(), "--http", "127.0.0.1:"+strconv.Itoa(hport),
		"--region", "eu", "--forward-listen", "127.0.0.1:"+strconv.Itoa(fport),
		"--peer", "us=http://127.0.0.1:"+strconv.Itoa(dead), "--forward-secrets", regionSecrets(t))
	testproc.Start(t, es, "ready on")
	t.Cleanup(func() {
		_ = es.Process.Signal(syscall.SIGTERM)
		testproc.Wait(t, es)
	})
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	if !strings.Contains(text, `switchyard_forward_queued_items{peer="us"}`) {
		t.Fatalf("no forward queue families for peer us in /metrics:\n%s", text)
	}
	for _, name := range []string{"switchyard_forward_gap_markers_total", "switchyard_forward_gap_markers_shed_total", "switchyard_forward_sender_bad_replies_total"} {
		if !strings.Contains(text, "\n"+name+" ") {
			t.Errorf("/metrics of a region with --peer has no %s (documented among the Forward families)", name)
		}
	}
}
