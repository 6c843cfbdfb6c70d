package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// A reply that does not fit the connection's max payload (here keys: enough
// keys of 4,000 bytes to pass it) must still be answered, with too-large,
// rather than dropped and left to time out.
func TestReplyOverMaxPayloadIsAnswered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	n := int(h.nc.MaxPayload())/4000 + 100
	for b := 0; b < n; b += 100 {
		var body []byte
		for i := b; i < b+100 && i < n; i++ {
			k := fmt.Sprintf("%06d", i) + strings.Repeat("k", 3994)
			var err error
			if body, err = persist.AppendFrame(body, &persist.Frame{Key: k, Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		h.ok(persist.CmdSetMany, "s", nil, body)
	}
	wantCode(t, h.req(persist.CmdKeys, "s", nil, nil), persist.CodeTooLarge)
	// The server still serves the stream afterwards.
	if inv := h.inventory("s"); inv.Count != int64(n) {
		t.Fatalf("count %d, want %d", inv.Count, n)
	}
}

// smallPayloadServer is a persist server on a NATS server of its own whose
// max payload is maxPayload, and a connection to send it requests.
func smallPayloadServer(t *testing.T, maxPayload int32) (*Server, *nats.Conn) {
	t.Helper()
	e := testnats.Server(t, testnats.Options{MaxPayload: maxPayload})
	nc := testnats.Conn(t, e)
	srv, err := New(Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv, nc
}

// payloadRequest sends one request of stream s in scope hub over nc and returns
// the reply, error replies included.
func payloadRequest(t *testing.T, nc *nats.Conn, cmd, s string, body []byte) *nats.Msg {
	t.Helper()
	m := nats.NewMsg(bus.APISubject(bus.DefaultService, "hub", "0"))
	m.Header.Set(persist.HdrCmd, cmd)
	m.Header.Set(persist.HdrStream, s)
	m.Data = body
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := bus.Request(ctx, nc, m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// emptyFrames is a setMany body of n empty messages: 4 bytes each, while
// each answer entry takes up to setManyEntryMax.
func emptyFrames(t *testing.T, n int) []byte {
	t.Helper()
	var body []byte
	for range n {
		var err error
		if body, err = persist.AppendFrame(body, &persist.Frame{}); err != nil {
			t.Fatal(err)
		}
	}
	return body
}

// TestSetManyRefusedWhenItsAnswerMayNotFit: a setMany request that fits
// the NATS max payload but whose answer (one {"seq","time"} per message,
// up to 56 bytes against a 4-byte frame) might not is refused too-large on
// arrival, and nothing is stored. The answer must not contradict what was
// done: the caller (and Pipeline, LocalStream) reads too-large as a
// refusal. (Was: the batch was committed, then its answer was over the max
// payload and respond replaced it with too-large: every message stored,
// the caller told none was.)
func TestSetManyRefusedWhenItsAnswerMayNotFit(t *testing.T) {
	t.Parallel()
	_, nc := smallPayloadServer(t, 32<<10)
	body := emptyFrames(t, 1000)
	if len(body) > 32<<10 {
		t.Fatalf("request body %d bytes", len(body))
	}
	r := payloadRequest(t, nc, persist.CmdSetMany, "s", body)
	code := r.Header.Get(persist.HdrError)
	var inv persist.Inventory
	if err := json.Unmarshal(payloadRequest(t, nc, persist.CmdInventory, "s", nil).Data, &inv); err != nil {
		t.Fatal(err)
	}
	if code != "" && inv.Count != 0 {
		t.Fatalf("setMany of 1000 answered %s (%s), yet the stream holds %d messages: the writes were committed", code, r.Data, inv.Count)
	}
	// The refusal says so on arrival, and names how many a setMany may hold.
	if persist.Code(code) != persist.CodeTooLarge || !strings.Contains(string(r.Data), "per setMany") {
		t.Fatalf("setMany of 1000: %q (%s), want too-large saying how many fit", code, r.Data)
	}
}

// TestSetManyAnswerShortensErrorsToFit: the entries of refused messages
// carry free text, longer than a success entry. A batch that passed the
// arrival check (its successes fit) but whose errors make the answer too
// long is answered all the same, every entry with its code, the messages
// shortened. (Was: such an answer was over the max payload and replaced
// with too-large, though the batch's other messages were committed.)
func TestSetManyAnswerShortensErrorsToFit(t *testing.T) {
	t.Parallel()
	const n = 500
	_, nc := smallPayloadServer(t, 32<<10)
	if r := payloadRequest(t, nc, persist.CmdConfig, "s", []byte(`{"max_msgs":1,"discard_policy":"new"}`)); r.Header.Get(persist.HdrError) != "" {
		t.Fatalf("config: %s", r.Data)
	}
	// One stored, n-1 refused "stream is full (...)": ~90 bytes each.
	r := payloadRequest(t, nc, persist.CmdSetMany, "s", emptyFrames(t, n))
	if code := r.Header.Get(persist.HdrError); code != "" {
		t.Fatalf("setMany answered %s (%s), yet its first message was committed", code, r.Data)
	}
	var res []persist.SetManyResult
	mustJSON(t, r.Data, &res)
	if len(res) != n || res[0].Err != nil || res[0].Seq != 1 {
		t.Fatalf("%d results, first %+v", len(res), res[0])
	}
	for i, e := range res[1:] {
		if e.Err == nil || e.Err.Code != persist.CodeReject || e.Err.Message == "" {
			t.Fatalf("result %d: %+v, want reject with a message", i+1, e)
		}
	}
	var inv persist.Inventory
	mustJSON(t, payloadRequest(t, nc, persist.CmdInventory, "s", nil).Data, &inv)
	if inv.Count != 1 {
		t.Fatalf("%d messages, want 1", inv.Count)
	}
}

// A shortened error entry fits its budget whatever its message holds
// (escapes, multi-byte runes), stays valid JSON and UTF-8, and keeps its
// code.
func TestSetManyErrorEntryShortened(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{
		"",
		"short",
		`key "` + strings.Repeat(`\"<&>`, 300) + `" is at seq 7, not 3`,
		strings.Repeat("ü€😀", 200),
		strings.Repeat("\u2028", 100),
		"not UTF-8 \xff\xfe" + strings.Repeat("x", 100),
	} {
		for _, code := range []persist.Code{persist.CodeReject, persist.CodeWrongLastSequence, persist.CodeTooLarge} {
			b, err := appendSetManyError(nil, &persist.Error{Code: code, Message: msg}, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > setManyEntryMax-1 {
				t.Errorf("%s %.20q: entry of %d bytes, over %d: %s", code, msg, len(b), setManyEntryMax-1, b)
			}
			var r persist.SetManyResult
			mustJSON(t, b, &r)
			if r.Err == nil || r.Err.Code != code || !utf8.ValidString(r.Err.Message) {
				t.Errorf("%s %.20q: read back %+v", code, msg, r.Err)
			}
		}
	}
}

// (Was: an error answer quoting a huge malformed value, a header of junk or
// a config field's name, was over the max payload and never sent: the
// caller waited out its timeout instead of hearing bad-request.)
func TestErrorOverMaxPayloadIsAnswered(t *testing.T) {
	t.Parallel()
	const maxPayload = 64 << 10
	_, nc := smallPayloadServer(t, maxPayload)
	// Quoted in the messages as \xff (4 bytes a byte) and \u0085 (6 bytes
	// for 2): each message would be over the 64 KiB max payload.
	junk := strings.Repeat("\xff", 20<<10)
	c1 := strings.Repeat("\u0085", 12<<10)
	tests := []struct {
		name string
		cmd  string
		hdr  map[string]string
		body string
	}{
		{"number header", persist.CmdGet, map[string]string{persist.HdrSeq: junk}, ""},
		{"bool header", persist.CmdSet, map[string]string{persist.HdrEphemeral: junk}, "v"},
		{"deadline", persist.CmdSet, map[string]string{persist.HdrDeadline: junk}, "v"},
		{"seqs", persist.CmdDelete, map[string]string{persist.HdrSeqs: junk}, ""},
		{"command", junk, nil, ""},
		{"config field", persist.CmdConfig, nil, `{"` + c1 + `":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := nats.NewMsg(bus.APISubject(bus.DefaultService, "hub", "0"))
			m.Header.Set(persist.HdrCmd, tt.cmd)
			m.Header.Set(persist.HdrStream, "s")
			for k, v := range tt.hdr {
				m.Header.Set(k, v)
			}
			m.Data = []byte(tt.body)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := bus.Request(ctx, nc, m)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			wantCode(t, r, persist.CodeBadRequest)
			if len(r.Data) > errorMessageMax || !utf8.Valid(r.Data) {
				t.Fatalf("message of %d bytes (valid UTF-8: %v), want at most %d", len(r.Data), utf8.Valid(r.Data), errorMessageMax)
			}
		})
	}
}
