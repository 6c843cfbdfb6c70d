package eventsws

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeHarness is run by node before a scenario: a fake WebSocket the
// scenario opens and drops by hand, manual timers (their delays kept),
// and events.js loaded as the browser would.
const nodeHarness = `
"use strict";
const sockets = [];
class FakeWS {
  constructor(url) { this.url = url; this.readyState = 0; this.sent = []; sockets.push(this); }
  send(d) { if (this.readyState !== 1) throw new Error("send on a socket not open"); this.sent.push(JSON.parse(d)); }
  close(code) { this.readyState = 3; }
}
FakeWS.CONNECTING = 0; FakeWS.OPEN = 1; FakeWS.CLOSING = 2; FakeWS.CLOSED = 3;
globalThis.WebSocket = FakeWS;
globalThis.location = {protocol: "http:", host: "127.0.0.1:1"};
const timers = [];
globalThis.setTimeout = (f, ms) => { timers.push({f, ms}); return timers.length; };
function runTimers() { const ts = timers.splice(0); for (const t of ts) t.f(); return ts.map((t) => t.ms); }
function open(ws) { ws.readyState = 1; ws.onopen && ws.onopen({}); }
function drop(ws, code) { ws.readyState = 3; ws.onclose && ws.onclose({code: code || 1006, reason: ""}); }
function serverSays(ws, m) { ws.onmessage({data: JSON.stringify(m)}); }
`

// runClient runs events.js with the harness and scenario in node and
// returns what the scenario printed. Without node the test is skipped.
func runClient(t *testing.T, scenario string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on this machine")
	}
	js, err := static.ReadFile("static/events.js")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "scenario.js")
	if err := os.WriteFile(f, []byte(nodeHarness+string(js)+"\n"+scenario), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, f).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestClientDurableUnsubscribeWhileDown: a durable subscription
// unsubscribed while the client is reconnecting is unsubscribed once it
// is connected again, and only until the gateway answers. unsubscribe()
// forgot the id at once and send() dropped the request on a socket not
// open, so the row stayed stored for good while the client believed it
// gone.
func TestClientDurableUnsubscribeWhileDown(t *testing.T) {
	t.Parallel()
	out := runClient(t, `
const ev = new SwitchyardEvents({});
open(sockets[0]);
ev.subscribe("jobs", "project-1/jobs", null, "single");
serverSays(sockets[0], {type: "subscribed", id: "jobs", mode: "single"});
drop(sockets[0]);
ev.unsubscribe("jobs");   // while the client is reconnecting
runTimers();              // the reconnect
open(sockets[1]);
serverSays(sockets[1], {type: "unsubscribed", id: "jobs", mode: "single"});
drop(sockets[1]);
runTimers();
open(sockets[2]);
console.log(JSON.stringify(sockets.map((s) => s.sent)));
`)
	var sent [][]map[string]any
	if err := json.Unmarshal([]byte(out), &sent); err != nil || len(sent) != 3 {
		t.Fatalf("%s: %v", out, err)
	}
	if got := fmt.Sprint(sent[1]); len(sent[1]) != 1 || sent[1][0]["type"] != "unsubscribe" || sent[1][0]["id"] != "jobs" || sent[1][0]["mode"] != "single" {
		t.Fatalf("sent once reconnected: %s; want the durable row's unsubscribe alone", got)
	}
	if len(sent[2]) != 0 {
		t.Fatalf("sent after the unsubscribe was answered: %v; want nothing", sent[2])
	}
}

// TestClientRefusesOversizedRequest: a request over the gateway's
// MaxMessageBytes is refused by the client (onError, bad-request) and
// never sent, and the backoff grows while sockets end right after opening
// (it is reset by ready). The gateway closes a socket on such a message
// (1009) and the client sent it again on every open, resetting its
// backoff each time: it reconnected every ~0.5 s for ever.
func TestClientRefusesOversizedRequest(t *testing.T) {
	t.Parallel()
	js, err := static.ReadFile("static/events.js")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("MAX_MESSAGE_BYTES = %d;", MaxMessageBytes); !strings.Contains(string(js), want) {
		t.Fatalf("events.js does not say %q", want)
	}
	out := runClient(t, `
const errors = [];
const ev = new SwitchyardEvents({onError: (m) => errors.push(m.id + " " + m.code)});
open(sockets[0]);
const held = ev.subscribe("big", "project-1/files/" + "a".repeat(9000));
const waits = [];
for (let i = 0; i < 6; i++) {
  drop(sockets[sockets.length - 1], 1006); // dropped right after opening
  waits.push(...runTimers());
  open(sockets[sockets.length - 1]);
}
serverSays(sockets[sockets.length - 1], {type: "ready", user: "anonymous", max_subs: 50});
drop(sockets[sockets.length - 1]);
const afterReady = runTimers();
const big = sockets.flatMap((s) => s.sent).filter((m) => JSON.stringify(m).length > 8192).length;
console.log(JSON.stringify({held, errors, big, waits: waits.map(Math.round), afterReady: afterReady.map(Math.round)}));
`)
	var r struct {
		Held       bool      `json:"held"`
		Errors     []string  `json:"errors"`
		Big        int       `json:"big"`
		Waits      []float64 `json:"waits"`
		AfterReady []float64 `json:"afterReady"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if r.Held || r.Big != 0 || len(r.Errors) != 1 || r.Errors[0] != "big bad-request" {
		t.Fatalf("a subscribe over 8 KiB: %s; want it refused with one bad-request and never sent", out)
	}
	// Jittered: 0.75 to 1.25 times 0.5 s doubling.
	if len(r.Waits) != 6 || r.Waits[5] < 0.75*16000 {
		t.Fatalf("waits %v ms, want a backoff doubling from 0.5 s", r.Waits)
	}
	if len(r.AfterReady) != 1 || r.AfterReady[0] > 1.25*500 {
		t.Fatalf("wait after a socket that was ready: %v ms, want the backoff reset to 0.5 s", r.AfterReady)
	}
}

// TestClientRetriesUnavailableSubscribe: a subscribe answered
// `unavailable` ("retry") is sent again on the same socket after a
// backoff. (Was: only on the next reconnect, which a socket that stays up
// never makes, so the subscription the client held was never made, as
// after a reconnect to a region whose persist was still starting.)
func TestClientRetriesUnavailableSubscribe(t *testing.T) {
	t.Parallel()
	out := runClient(t, `
const ev = new SwitchyardEvents({});
open(sockets[0]);
serverSays(sockets[0], {type: "ready", user: "anonymous", max_subs: 50});
ev.subscribe("files", "project-1/files/a");
serverSays(sockets[0], {type: "error", id: "files", code: "unavailable", message: "events: subscribe project-1/files: context deadline exceeded"});
for (let i = 0; i < 5; i++) runTimers(); // whatever the client scheduled, the socket staying up
console.log(JSON.stringify({sockets: sockets.length, subscribes: sockets[0].sent.filter((m) => m.type === "subscribe" && m.id === "files").length}));
`)
	var r struct {
		Sockets    int `json:"sockets"`
		Subscribes int `json:"subscribes"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if r.Sockets != 1 {
		t.Fatalf("%s: the socket was replaced; want it kept", out)
	}
	if r.Subscribes < 2 {
		t.Fatalf("subscribes of files on the open socket: %d; want it sent again after the unavailable answer (the client still holds it)", r.Subscribes)
	}
}

// TestClientDropsAnAckRefusedForGood: an ack the gateway refuses for good
// (bad-request, its error naming the entry) is not sent again on the next
// socket. (Was: only unknown-entry forgot the ack; any other refusal left
// it in the client's list, sent again, and refused again, on every
// reconnect for the page's life.)
func TestClientDropsAnAckRefusedForGood(t *testing.T) {
	t.Parallel()
	out := runClient(t, `
const ev = new SwitchyardEvents({});
open(sockets[0]);
serverSays(sockets[0], {type: "ready", user: "anonymous", max_subs: 50});
ev.ack("jobs", "bad entry");
ev.ack("jobs", "project-1/jobs#7");
serverSays(sockets[0], {type: "error", id: "bad entry", code: "bad-request", message: "entry: not STREAM#SEQ"});
drop(sockets[0]);
runTimers();
open(sockets[1]);
console.log(JSON.stringify(sockets[1].sent));
`)
	var sent []map[string]any
	if err := json.Unmarshal([]byte(out), &sent); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(sent) != 1 || sent[0]["type"] != "ack" || sent[0]["entry"] != "project-1/jobs#7" {
		t.Fatalf("sent on the next socket: %s; want only the ack still unanswered, not the refused one", out)
	}
}

// (Was: the /events page took every error naming an id for the end of that
// subscription and removed it from its list, `unavailable` included, which
// the client retries: the subscription came back live with no item to
// unsubscribe it by.)
func TestPageKeepsSubscriptionItRetries(t *testing.T) {
	t.Parallel()
	html, err := static.ReadFile("static/events.html")
	if err != nil {
		t.Fatal(err)
	}
	const open = "<script>\n"
	i := strings.LastIndex(string(html), open)
	j := strings.LastIndex(string(html), "</script>")
	if i < 0 || j < i {
		t.Fatal("no inline script in events.html")
	}
	// A fake of the few DOM calls the page makes; the page's script in a
	// block of its own, so that its names do not meet the harness's.
	page := `
class El {
  constructor() { this.children = []; this.dataset = {}; this.listeners = {}; this.value = ""; this.checked = false; this.textContent = ""; this.parent = null; }
  addEventListener(t, f) { this.listeners[t] = f; }
  append(...cs) { for (const c of cs) { c.parent = this; this.children.push(c); } }
  prepend(c) { c.parent = this; this.children.unshift(c); }
  remove() { if (this.parent) this.parent.children.splice(this.parent.children.indexOf(this), 1); }
  get childElementCount() { return this.children.length; }
  get lastChild() { return this.children[this.children.length - 1]; }
}
const els = {};
globalThis.document = {
  getElementById: (id) => els[id] || (els[id] = new El()),
  createElement: () => new El(),
  querySelector: (sel) => els.subs.children.find((li) => sel === 'li[data-id="' + li.dataset.id + '"]') || null,
};
globalThis.CSS = {escape: (s) => s};
{
` + string(html[i+len(open):j]) + `
}
`
	out := runClient(t, page+`
open(sockets[0]);
serverSays(sockets[0], {type: "ready", user: "anonymous", max_subs: 50});
const submit = (anchor) => { document.getElementById("anchor").value = anchor; els.sub.listeners.submit({preventDefault() {}}); };
submit("project-1/files");
serverSays(sockets[0], {type: "error", id: "s1", code: "unavailable", message: "retry"});
const afterUnavailable = els.subs.children.map((li) => li.dataset.id);
submit("other/files");
serverSays(sockets[0], {type: "error", id: "s2", code: "forbidden", message: "no"});
console.log(JSON.stringify({afterUnavailable, afterForbidden: els.subs.children.map((li) => li.dataset.id)}));
`)
	var r struct {
		AfterUnavailable []string `json:"afterUnavailable"`
		AfterForbidden   []string `json:"afterForbidden"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(r.AfterUnavailable) != 1 || r.AfterUnavailable[0] != "s1" {
		t.Fatalf("listed after an unavailable answer: %v; want s1 kept (the client retries it)", r.AfterUnavailable)
	}
	if len(r.AfterForbidden) != 1 || r.AfterForbidden[0] != "s1" {
		t.Fatalf("listed after a forbidden answer: %v; want s2 dropped, s1 kept", r.AfterForbidden)
	}
}

// (Was: the client had no way to send a key, so under up --auth the
// /events page, which a browser loads without credentials, never
// connected.)
func TestClientSendsKeyAndApp(t *testing.T) {
	t.Parallel()
	out := runClient(t, `
new SwitchyardEvents({apikey: "k&1", app: "notes"});
new SwitchyardEvents({});
console.log(sockets.map((s) => s.url).join("\n"));
`)
	if want := "ws://127.0.0.1:1/ws/events?app=notes&apikey=k%261\nws://127.0.0.1:1/ws/events"; out != want {
		t.Fatalf("urls %q, want %q", out, want)
	}
}

// TestClientKeepsSubscriptionARefusedReplacementLeft: a subscribe that
// would replace a confirmed subscription of its id, refused for good,
// leaves the gateway holding the old one; the client keeps it too and
// subscribes to it again after a reconnect. A subscribe refused with no
// subscription before it is forgotten, as before.
// (Was: the client forgot the id on the refusal, so after the next
// reconnect the old subscription was gone, which the gateway had kept.)
func TestClientKeepsSubscriptionARefusedReplacementLeft(t *testing.T) {
	t.Parallel()
	out := runClient(t, `
const ev = new SwitchyardEvents({});
open(sockets[0]);
serverSays(sockets[0], {type: "ready", user: "acme", max_subs: 50});
ev.subscribe("files", "project-1/files/a");
serverSays(sockets[0], {type: "subscribed", id: "files"});
ev.subscribe("files", "other/secrets");
ev.subscribe("new", "other/more");
serverSays(sockets[0], {type: "error", id: "files", code: "forbidden", message: "acme may not read scope other"});
serverSays(sockets[0], {type: "error", id: "new", code: "forbidden", message: "acme may not read scope other"});
drop(sockets[0]);
runTimers();
open(sockets[1]);
console.log(JSON.stringify(sockets[1].sent));
`)
	var sent []map[string]any
	if err := json.Unmarshal([]byte(out), &sent); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(sent) != 1 || sent[0]["type"] != "subscribe" || sent[0]["id"] != "files" || sent[0]["anchor"] != "project-1/files/a" {
		t.Fatalf("sent on the next socket: %s; want only the subscribe of files to project-1/files/a, the one the gateway kept", out)
	}
}
