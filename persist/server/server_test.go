package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist/testservice"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// harness is one embedded NATS, one connection and one persist server,
// made anew from cfg on each start (testservice, which the client tests'
// harness in internal/testpersist shares). It stays in this package, not on
// testpersist (which imports this one), because the tests reach into the
// server's unexported state.
type harness struct {
	t     *testing.T
	e     *embedded.Server
	nc    *nats.Conn
	srv   *Server // the server last started
	node  *testservice.Node[*Server]
	dir   string
	cfg   Config // of the next server started: tests change it between restarts
	scope string

	onNew func(*Server) // runs on each new server before Start

	mu      sync.Mutex
	changes []store.Change // everything OnChange reported
}

func newHarness(t *testing.T, tune func(*Config)) *harness {
	t.Helper()
	return newHarnessHook(t, tune, nil)
}

func newHarnessHook(t *testing.T, tune func(*Config), onNew func(*Server)) *harness {
	t.Helper()
	return newHarnessOn(t, testnats.Options{}, tune, onNew)
}

// newHarnessOn is newHarnessHook on an embedded NATS started with opts.
func newHarnessOn(t *testing.T, opts testnats.Options, tune func(*Config), onNew func(*Server)) *harness {
	t.Helper()
	e := testnats.Server(t, opts)
	nc := testnats.Conn(t, e)
	h := &harness{t: t, e: e, nc: nc, dir: t.TempDir(), scope: "hub", onNew: onNew}
	h.cfg = Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: h.dir}
	h.cfg.OnChange = func(_, _ string, _ bool, ch []store.Change) {
		h.mu.Lock()
		h.changes = append(h.changes, ch...)
		h.mu.Unlock()
	}
	if tune != nil {
		tune(&h.cfg)
	}
	h.node = testservice.Start(t, func() (*Server, error) {
		srv, err := New(h.cfg)
		if err == nil && h.onNew != nil {
			h.onNew(srv)
		}
		return srv, err
	})
	h.srv = h.node.Current()
	return h
}

// start starts a new server on the data directory, after the test stopped
// the last one.
func (h *harness) start() {
	h.t.Helper()
	h.srv = h.node.Start()
}

// restart stops the server and starts a new one on the same data directory.
func (h *harness) restart() {
	h.t.Helper()
	h.srv = h.node.Restart()
}

// deletedSeqs is every seq OnChange reported as deleted.
func (h *harness) deletedSeqs() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []uint64
	for _, c := range h.changes {
		if c.Op == store.ChangeDelete {
			out = append(out, c.Seqs...)
		}
	}
	return out
}

func (h *harness) msg(cmd, stream string, hdr map[string]string, body []byte) *nats.Msg {
	m := nats.NewMsg(bus.APISubject(bus.DefaultService, h.scope, "0"))
	m.Header.Set(persist.HdrCmd, cmd)
	m.Header.Set(persist.HdrStream, stream)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	m.Data = body
	return m
}

func (h *harness) do(m *nats.Msg) *nats.Msg {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := bus.Request(ctx, h.nc, m)
	if err != nil {
		h.t.Fatalf("%s: %v", m.Header.Get(persist.HdrCmd), err)
	}
	return r
}

func (h *harness) req(cmd, stream string, hdr map[string]string, body []byte) *nats.Msg {
	h.t.Helper()
	return h.do(h.msg(cmd, stream, hdr, body))
}

// ok fails the test on an error reply and returns the reply.
func (h *harness) ok(cmd, stream string, hdr map[string]string, body []byte) *nats.Msg {
	h.t.Helper()
	r := h.req(cmd, stream, hdr, body)
	if c := r.Header.Get(persist.HdrError); c != "" {
		h.t.Fatalf("%s %s: %s: %s", cmd, stream, c, r.Data)
	}
	return r
}

func (h *harness) set(stream string, value string, hdr map[string]string) persist.SetResult {
	h.t.Helper()
	var res persist.SetResult
	mustJSON(h.t, h.ok(persist.CmdSet, stream, hdr, []byte(value)).Data, &res)
	if res.Seq == 0 || res.Time == 0 {
		h.t.Fatalf("set reply without seq/time: %+v", res)
	}
	return res
}

func (h *harness) inventory(stream string) persist.Inventory {
	h.t.Helper()
	var inv persist.Inventory
	mustJSON(h.t, h.ok(persist.CmdInventory, stream, nil, nil).Data, &inv)
	return inv
}

func (h *harness) config(stream string, patch string) persist.Config {
	h.t.Helper()
	var c persist.Config
	mustJSON(h.t, h.ok(persist.CmdConfig, stream, nil, []byte(patch)).Data, &c)
	return c
}

// getAll runs a getAll and checks the chunk protocol: numbered from 0, the
// last one with Sy-Eof.
func (h *harness) getAll(stream string, hdr map[string]string) (msgs []persist.Frame, next uint64, chunks int) {
	h.t.Helper()
	inbox := h.nc.NewRespInbox()
	sub, err := h.nc.SubscribeSync(inbox)
	if err != nil {
		h.t.Fatal(err)
	}
	defer sub.Unsubscribe()
	m := h.msg(persist.CmdGetAll, stream, hdr, nil)
	m.Reply = inbox
	if err := h.nc.PublishMsg(m); err != nil {
		h.t.Fatal(err)
	}
	for {
		r, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			h.t.Fatalf("chunk %d: %v", chunks, err)
		}
		if c := r.Header.Get(persist.HdrError); c != "" {
			h.t.Fatalf("getAll: %s: %s", c, r.Data)
		}
		if got := r.Header.Get(persist.HdrChunk); got != strconv.Itoa(chunks) {
			h.t.Fatalf("chunk number %q, want %d", got, chunks)
		}
		if len(r.Data) > persist.ChunkBytes {
			var n int
			_ = persist.DecodeFrames(r.Data, 0, func(*persist.Frame) error { n++; return nil })
			if n > 1 {
				h.t.Fatalf("chunk %d is %d bytes with %d frames, over persist.ChunkBytes", chunks, len(r.Data), n)
			}
		}
		chunks++
		if err := persist.DecodeFrames(r.Data, 0, func(m *persist.Frame) error {
			c := *m
			c.Value = append([]byte(nil), m.Value...)
			msgs = append(msgs, c)
			return nil
		}); err != nil {
			h.t.Fatal(err)
		}
		if r.Header.Get(persist.HdrEOF) == "true" {
			if n := r.Header.Get(persist.HdrNextSeq); n != "" {
				next, _ = strconv.ParseUint(n, 10, 64)
			}
			return msgs, next, chunks
		}
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
}

func wantCode(t *testing.T, r *nats.Msg, code persist.Code) {
	t.Helper()
	if got := persist.Code(r.Header.Get(persist.HdrError)); got != code {
		t.Fatalf("code %q (%s), want %q", got, r.Data, code)
	}
	if len(r.Data) == 0 {
		t.Fatalf("error reply %q without a message", code)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func TestSetGet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a := h.set("s", "one", map[string]string{persist.HdrKey: "k1", "X-User": "u1"})
	b := h.set("s", "two", nil)
	if b.Seq != a.Seq+1 {
		t.Fatalf("seqs %d then %d", a.Seq, b.Seq)
	}
	r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrSeq: itoa(a.Seq)}, nil)
	if string(r.Data) != "one" || r.Header.Get(persist.HdrKey) != "k1" || r.Header.Get("X-User") != "u1" ||
		r.Header.Get(persist.HdrSeq) != itoa(a.Seq) || r.Header.Get(persist.HdrTime) != strconv.FormatInt(a.Time, 10) {
		t.Fatalf("get by seq: %q %v", r.Data, r.Header)
	}
	r = h.ok(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k1"}, nil)
	if string(r.Data) != "one" || r.Header.Get(persist.HdrSeq) != itoa(a.Seq) {
		t.Fatalf("get by key: %q %v", r.Data, r.Header)
	}
	r = h.ok(persist.CmdGet, "s", map[string]string{persist.HdrSeq: itoa(b.Seq)}, nil)
	if string(r.Data) != "two" || r.Header.Get(persist.HdrKey) != "" || r.Header.Get("X-User") != "" {
		t.Fatalf("get unkeyed: %q %v", r.Data, r.Header)
	}
	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "99"}, nil), persist.CodeNotFound)
	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrKey: "nope"}, nil), persist.CodeNotFound)
	// An empty value is a value.
	e := h.set("s", "", nil)
	if r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrSeq: itoa(e.Seq)}, nil); len(r.Data) != 0 {
		t.Fatalf("empty value came back as %q", r.Data)
	}
}

func TestSetMany(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "x", map[string]string{persist.HdrKey: "taken"})
	zero := uint64(0)
	msgs := []persist.Frame{
		{Value: []byte("a")},
		{Key: "k", Value: []byte("b"), Headers: map[string]string{"H": "v"}},
		{Key: "taken", PrevSeq: &zero, Value: []byte("c")}, // fails: key exists
		{MsgID: "m1", Value: []byte("d")},
		{MsgID: "m1", Value: []byte("e")}, // duplicate of the previous one
	}
	var body []byte
	for i := range msgs {
		var err error
		if body, err = persist.AppendFrame(body, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var res []persist.SetManyResult
	mustJSON(t, h.ok(persist.CmdSetMany, "s", nil, body).Data, &res)
	if len(res) != 5 {
		t.Fatalf("%d results", len(res))
	}
	if res[0].Seq != 2 || res[1].Seq != 3 || res[2].Err == nil || res[2].Err.Code != persist.CodeWrongLastSequence || res[2].Err.Message == "" || res[3].Seq != 4 || res[4].Seq != 4 {
		t.Fatalf("results %+v", res)
	}
	r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, nil)
	if string(r.Data) != "b" || r.Header.Get("H") != "v" {
		t.Fatalf("get k: %q %v", r.Data, r.Header)
	}
	if inv := h.inventory("s"); inv.Count != 4 || inv.Seq != 4 {
		t.Fatalf("inventory %+v", inv)
	}
}

func TestGetAllChunksAndPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// Empty stream: one empty chunk 0 with Sy-Eof.
	msgs, next, chunks := h.getAll("s", nil)
	if len(msgs) != 0 || next != 0 || chunks != 1 {
		t.Fatalf("empty getAll: %d msgs, next %d, %d chunks", len(msgs), next, chunks)
	}
	// 1,000 small messages in one setMany, then some large ones.
	var body []byte
	for i := range 1000 {
		var err error
		body, err = persist.AppendFrame(body, &persist.Frame{Value: fmt.Appendf(nil, "v%d", i), Headers: map[string]string{"I": strconv.Itoa(i)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	h.ok(persist.CmdSetMany, "s", nil, body)
	big := strings.Repeat("x", 200<<10)
	for i := range 6 {
		h.set("s", fmt.Sprintf("%d%s", i, big), nil)
	}
	msgs, next, chunks = h.getAll("s", nil)
	if len(msgs) != 1006 || next != 0 {
		t.Fatalf("getAll: %d msgs, next %d", len(msgs), next)
	}
	if chunks < 6 {
		t.Fatalf("1.2 MiB came in %d chunks; want several of at most %d bytes", chunks, persist.ChunkBytes)
	}
	for i, m := range msgs {
		if m.Seq != uint64(i+1) {
			t.Fatalf("msg %d has seq %d", i, m.Seq)
		}
		if i < 1000 && (string(m.Value) != fmt.Sprintf("v%d", i) || m.Headers["I"] != strconv.Itoa(i) || m.Time == 0) {
			t.Fatalf("msg %d: %+v", i, m)
		}
		if i >= 1000 && string(m.Value) != fmt.Sprintf("%d%s", i-1000, big) {
			t.Fatalf("large msg %d corrupted (%d bytes)", i, len(m.Value))
		}
	}
	// Range.
	msgs, _, _ = h.getAll("s", map[string]string{persist.HdrStartSeq: "10", persist.HdrEndSeq: "19"})
	if len(msgs) != 10 || msgs[0].Seq != 10 || msgs[9].Seq != 19 {
		t.Fatalf("range: %d msgs", len(msgs))
	}
	// Pages of 300 walk the whole stream with Sy-Next-Seq.
	var all []uint64
	start := uint64(1)
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		msgs, next, _ = h.getAll("s", map[string]string{persist.HdrStartSeq: itoa(start), persist.HdrLimit: "300"})
		for _, m := range msgs {
			all = append(all, m.Seq)
		}
		if next == 0 {
			break
		}
		if len(msgs) != 300 || next != msgs[len(msgs)-1].Seq+1 {
			t.Fatalf("page of %d, next %d", len(msgs), next)
		}
		start = next
	}
	if len(all) != 1006 || all[1005] != 1006 {
		t.Fatalf("paged %d messages", len(all))
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for i := range 10 {
		h.set("s", strconv.Itoa(i), nil)
	}
	del := func(hdr map[string]string) []uint64 {
		t.Helper()
		var res persist.DeleteResult
		mustJSON(t, h.ok(persist.CmdDelete, "s", hdr, nil).Data, &res)
		if res.Seqs == nil {
			t.Fatal("delete reply seqs is null, want a list")
		}
		return res.Seqs
	}
	if got := del(map[string]string{persist.HdrSeq: "5"}); fmt.Sprint(got) != "[5]" {
		t.Fatalf("delete seq: %v", got)
	}
	if got := del(map[string]string{persist.HdrSeq: "5"}); len(got) != 0 {
		t.Fatalf("delete gone seq: %v", got)
	}
	if got := del(map[string]string{persist.HdrSeqs: "7,1,99,7"}); fmt.Sprint(got) != "[1 7]" {
		t.Fatalf("delete seqs: %v", got)
	}
	if got := del(map[string]string{persist.HdrUpTo: "4"}); fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("delete up to: %v", got)
	}
	if got := del(map[string]string{persist.HdrAll: "true"}); fmt.Sprint(got) != "[6 8 9 10]" {
		t.Fatalf("delete all: %v", got)
	}
	if inv := h.inventory("s"); inv.Count != 0 || inv.Bytes != 0 || inv.Seq != 10 {
		t.Fatalf("inventory after delete: %+v", inv)
	}
	for _, bad := range []map[string]string{nil, {persist.HdrSeq: "1", persist.HdrAll: "true"}, {persist.HdrSeqs: "1,x"}, {persist.HdrAll: "yes"}} {
		wantCode(t, h.req(persist.CmdDelete, "s", bad, nil), persist.CodeBadRequest)
	}
	if got := h.deletedSeqs(); len(got) != 10 {
		t.Fatalf("changes reported deletes of %v", got)
	}
	// Seqs are never reused, even after everything was deleted and reopened.
	h.restart()
	if r := h.set("s", "again", nil); r.Seq != 11 {
		t.Fatalf("seq after delete all and restart: %d", r.Seq)
	}
}

func TestKeysInventoryConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "1", map[string]string{persist.HdrKey: "b"})
	h.set("s", "2", map[string]string{persist.HdrKey: "a"})
	h.set("s", "3", nil)
	var keys []string
	mustJSON(t, h.ok(persist.CmdKeys, "s", nil, nil).Data, &keys)
	if fmt.Sprint(keys) != "[a b]" {
		t.Fatalf("keys %v", keys)
	}
	mustJSON(t, h.ok(persist.CmdKeys, "empty", nil, nil).Data, &keys)
	if keys == nil || len(keys) != 0 {
		t.Fatalf("keys of an empty stream: %v", keys)
	}
	raw := h.ok(persist.CmdInventory, "s", nil, nil).Data
	if strings.Contains(string(raw), "limits") {
		t.Fatalf("default limits listed: %s", raw)
	}
	inv := h.inventory("s")
	if inv.Count != 3 || inv.Seq != 3 || inv.Bytes != 5 { // 3 one-byte values + two one-byte keys
		t.Fatalf("inventory %+v", inv)
	}
	c := h.config("s", "")
	if c != persist.DefaultConfig() {
		t.Fatalf("default config %+v", c)
	}
	c = h.config("s", `{"max_msgs": 100, "desc": "hello"}`)
	want := persist.DefaultConfig()
	want.MaxMsgs, want.Desc = 100, "hello"
	if c != want {
		t.Fatalf("config after update %+v", c)
	}
	c = h.config("s", `{"max_age": 60000}`)
	want.MaxAge = time.Minute
	if c != want {
		t.Fatalf("partial update changed other fields: %+v", c)
	}
	raw = h.ok(persist.CmdInventory, "s", nil, nil).Data
	var rawInv struct {
		Limits map[string]any `json:"limits"`
	}
	mustJSON(t, raw, &rawInv)
	if len(rawInv.Limits) != 3 || rawInv.Limits["max_msgs"] != float64(100) || rawInv.Limits["max_age"] != float64(60000) || rawInv.Limits["desc"] != "hello" {
		t.Fatalf("inventory limits %s", raw)
	}
	if inv := h.inventory("s"); inv.Limits == nil || *inv.Limits != want {
		t.Fatalf("decoded inventory limits %+v", inv.Limits)
	}
	for _, bad := range []string{`{"max_msgs": -2}`, `{"discard_policy": "sometimes"}`, `{"nope": 1}`, `{"max_msgs": "x"}`, `[1]`, `{`} {
		wantCode(t, h.req(persist.CmdConfig, "s", nil, []byte(bad)), persist.CodeBadRequest)
	}
	// The config survives a restart.
	h.restart()
	if c := h.config("s", ""); c != want {
		t.Fatalf("config after restart %+v", c)
	}
}

func TestCompareAndSet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a := h.set("s", "v1", map[string]string{persist.HdrKey: "k", persist.HdrPrevSeq: "0"})
	wantCode(t, h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k", persist.HdrPrevSeq: "0"}, []byte("v2")), persist.CodeWrongLastSequence)
	wantCode(t, h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k", persist.HdrPrevSeq: itoa(a.Seq + 7)}, []byte("v2")), persist.CodeWrongLastSequence)
	wantCode(t, h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: "other", persist.HdrPrevSeq: "3"}, []byte("v2")), persist.CodeWrongLastSequence)
	b := h.set("s", "v2", map[string]string{persist.HdrKey: "k", persist.HdrPrevSeq: itoa(a.Seq)})
	wantCode(t, h.req(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k", persist.HdrPrevSeq: itoa(a.Seq)}, []byte("v3")), persist.CodeWrongLastSequence)
	if r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, nil); string(r.Data) != "v2" || r.Header.Get(persist.HdrSeq) != itoa(b.Seq) {
		t.Fatalf("after CAS: %q %v", r.Data, r.Header)
	}
	wantCode(t, h.req(persist.CmdSet, "s", map[string]string{persist.HdrPrevSeq: "0"}, []byte("no key")), persist.CodeBadRequest)
}

func TestKeyedReplace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a := h.set("s", "old", map[string]string{persist.HdrKey: "k"})
	b := h.set("s", "new", map[string]string{persist.HdrKey: "k"})
	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: itoa(a.Seq)}, nil), persist.CodeNotFound)
	if inv := h.inventory("s"); inv.Count != 1 || inv.Bytes != int64(len("new")+len("k")) {
		t.Fatalf("inventory %+v", inv)
	}
	if got := h.deletedSeqs(); fmt.Sprint(got) != fmt.Sprint([]uint64{a.Seq}) {
		t.Fatalf("replace reported deletes %v", got)
	}
	if r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, nil); r.Header.Get(persist.HdrSeq) != itoa(b.Seq) {
		t.Fatalf("get k: %v", r.Header)
	}
}

func TestDedup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a := h.set("s", "v", map[string]string{persist.HdrMsgID: "id-1"})
	r := h.ok(persist.CmdSet, "s", map[string]string{persist.HdrMsgID: "id-1"}, []byte("v again"))
	var dup persist.SetResult
	mustJSON(t, r.Data, &dup)
	if dup != a || r.Header.Get(persist.HdrDup) != "true" {
		t.Fatalf("duplicate answered %+v %v, want %+v with %s", dup, r.Header, a, persist.HdrDup)
	}
	if inv := h.inventory("s"); inv.Count != 1 {
		t.Fatalf("duplicate stored: %+v", inv)
	}
	// The window survives a restart (a client retrying across a crash).
	h.restart()
	mustJSON(t, h.ok(persist.CmdSet, "s", map[string]string{persist.HdrMsgID: "id-1"}, []byte("v")).Data, &dup)
	if dup != a {
		t.Fatalf("after restart duplicate answered %+v, want %+v", dup, a)
	}
	if b := h.set("s", "w", map[string]string{persist.HdrMsgID: "id-2"}); b.Seq != a.Seq+1 {
		t.Fatalf("new msgID got seq %d", b.Seq)
	}
}

// TestDeleteDedup: a delete repeated with the same Sy-Msg-Id (a client's
// retry after a lost reply) answers what the first one removed, marked
// Sy-Duplicate, and removes nothing more, also after a restart; the feed
// hears of the removal once.
func TestDeleteDedup(t *testing.T) {
	h := newHarness(t, nil)
	for i := range 3 {
		h.set("s", strconv.Itoa(i), nil)
	}
	del := func(id string) (persist.DeleteResult, bool) {
		t.Helper()
		r := h.ok(persist.CmdDelete, "s", map[string]string{persist.HdrUpTo: "100", persist.HdrMsgID: id}, nil)
		var res persist.DeleteResult
		mustJSON(t, r.Data, &res)
		return res, r.Header.Get(persist.HdrDup) == "true"
	}
	first, dup := del("d-1")
	if fmt.Sprint(first.Seqs) != "[1 2 3]" || dup {
		t.Fatalf("first delete: %v, duplicate %v", first.Seqs, dup)
	}
	h.set("s", "after", nil) // seq 4: a repeat that ran again would remove it
	for _, restart := range []bool{false, true} {
		if restart {
			h.restart()
		}
		again, dup := del("d-1")
		if fmt.Sprint(again.Seqs) != "[1 2 3]" || !dup {
			t.Fatalf("repeat (restart %v): %v, duplicate %v; want [1 2 3], true", restart, again.Seqs, dup)
		}
	}
	if inv := h.inventory("s"); inv.Count != 1 {
		t.Fatalf("a repeated delete removed more: %+v", inv)
	}
	if got := h.deletedSeqs(); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("changes reported deletes of %v", got)
	}
	if other, dup := del("d-2"); fmt.Sprint(other.Seqs) != "[4]" || dup {
		t.Fatalf("a new id: %v, duplicate %v", other.Seqs, dup)
	}
}

func testnatsStart(t *testing.T) (*embedded.Server, *nats.Conn) { return testnats.Start(t) }
