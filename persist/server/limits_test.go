package server

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
	"github.com/switchyard-dev/switchyard/placement"
)

func TestLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	tests := []struct {
		name   string
		config string
		run    func(t *testing.T, stream string)
	}{
		{"max_msgs discards the oldest", `{"max_msgs": 3}`, func(t *testing.T, s string) {
			for i := range 5 {
				h.set(s, fmt.Sprint(i), nil)
			}
			msgs, _, _ := h.getAll(s, nil)
			if len(msgs) != 3 || msgs[0].Seq != 3 {
				t.Fatalf("kept %d messages from seq %d", len(msgs), msgs[0].Seq)
			}
		}},
		{"max_bytes discards the oldest", `{"max_bytes": 10}`, func(t *testing.T, s string) {
			for range 4 {
				h.set(s, "abcd", nil)
			}
			inv := h.inventory(s)
			if inv.Count != 2 || inv.Bytes != 8 {
				t.Fatalf("inventory %+v", inv)
			}
			wantCode(t, h.req(persist.CmdSet, s, nil, []byte("this is more than ten bytes")), persist.CodeReject)
		}},
		{"max_msg_size is too-large", `{"max_msg_size": 8}`, func(t *testing.T, s string) {
			h.set(s, "12345678", nil)
			wantCode(t, h.req(persist.CmdSet, s, nil, []byte("123456789")), persist.CodeTooLarge)
			// The key and the headers count too.
			wantCode(t, h.req(persist.CmdSet, s, map[string]string{persist.HdrKey: "k"}, []byte("12345678")), persist.CodeTooLarge)
			wantCode(t, h.req(persist.CmdSet, s, map[string]string{"H": "v"}, []byte("1")), persist.CodeTooLarge)
		}},
		{"discard new rejects", `{"max_msgs": 2, "discard_policy": "new"}`, func(t *testing.T, s string) {
			h.set(s, "a", map[string]string{persist.HdrKey: "k"})
			h.set(s, "b", nil)
			wantCode(t, h.req(persist.CmdSet, s, nil, []byte("c")), persist.CodeReject)
			// Replacing a key does not grow the stream, so it fits.
			h.set(s, "a2", map[string]string{persist.HdrKey: "k"})
			if inv := h.inventory(s); inv.Count != 2 {
				t.Fatalf("inventory %+v", inv)
			}
		}},
		{"max_msgs_per_second rejects", `{"max_msgs_per_second": 2}`, func(t *testing.T, s string) {
			// One setMany commits at one instant, so exactly the third is over.
			var body []byte
			for range 3 {
				body, _ = persist.AppendFrame(body, &persist.Frame{Value: []byte("x")})
			}
			var res []persist.SetManyResult
			mustJSON(t, h.ok(persist.CmdSetMany, s, nil, body).Data, &res)
			if res[0].Err != nil || res[1].Err != nil || persist.CodeOf(res[2].Err) != persist.CodeReject {
				t.Fatalf("results %+v", res)
			}
		}},
		{"max_bytes_per_second rejects", `{"max_bytes_per_second": 10}`, func(t *testing.T, s string) {
			wantCode(t, h.req(persist.CmdSet, s, nil, []byte("eleven byte")), persist.CodeReject)
		}},
		{"ttl needs allow_msg_ttl", `{}`, func(t *testing.T, s string) {
			wantCode(t, h.req(persist.CmdSet, s, map[string]string{persist.HdrTTL: "1000"}, []byte("x")), persist.CodeBadRequest)
			h.config(s, `{"allow_msg_ttl": true}`)
			h.set(s, "x", map[string]string{persist.HdrTTL: "100000"})
			if r := h.ok(persist.CmdGet, s, map[string]string{persist.HdrSeq: "1"}, nil); r.Header.Get(persist.HdrTTL) != "100000" {
				t.Fatalf("ttl header %v", r.Header)
			}
		}},
		{"lowering max_msgs enforces at once", `{}`, func(t *testing.T, s string) {
			for range 5 {
				h.set(s, "x", nil)
			}
			h.config(s, `{"max_msgs": 1}`)
			if inv := h.inventory(s); inv.Count != 1 {
				t.Fatalf("inventory %+v", inv)
			}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fmt.Sprintf("limits-%d", i)
			before := len(h.deletedSeqs())
			h.config(s, tt.config)
			tt.run(t, s)
			// Whatever a limit removed was reported, and is gone.
			removed := h.deletedSeqs()[before:]
			for _, q := range removed {
				wantCode(t, h.req(persist.CmdGet, s, map[string]string{persist.HdrSeq: itoa(q)}, nil), persist.CodeNotFound)
			}
			inv := h.inventory(s)
			if int64(inv.Seq)-int64(len(removed)) != inv.Count {
				t.Fatalf("%d written, %d removal(s) reported, %d left", inv.Seq, len(removed), inv.Count)
			}
		})
	}
}

func TestExpiryOnTimer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.ExpireEvery = 10 * time.Millisecond })
	h.config("aged", `{"max_age": 50}`)
	a := h.set("aged", "x", nil)
	h.config("ttl", `{"allow_msg_ttl": true}`)
	b := h.set("ttl", "short", map[string]string{persist.HdrTTL: "50"})
	c := h.set("ttl", "long", map[string]string{persist.HdrTTL: "3600000"})
	// No further writes: only the timer can remove them.
	testwait.For(t, "expiry", func() bool {
		return h.inventory("aged").Count == 0 && h.inventory("ttl").Count == 1
	})
	wantCode(t, h.req(persist.CmdGet, "aged", map[string]string{persist.HdrSeq: itoa(a.Seq)}, nil), persist.CodeNotFound)
	wantCode(t, h.req(persist.CmdGet, "ttl", map[string]string{persist.HdrSeq: itoa(b.Seq)}, nil), persist.CodeNotFound)
	h.ok(persist.CmdGet, "ttl", map[string]string{persist.HdrSeq: itoa(c.Seq)}, nil)
	got := h.deletedSeqs()
	slices.Sort(got)
	if fmt.Sprint(got) != fmt.Sprint([]uint64{a.Seq, b.Seq}) {
		t.Fatalf("expiry reported deletes %v, want %v", got, []uint64{a.Seq, b.Seq})
	}
}

func TestEphemeral(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	eph := map[string]string{persist.HdrEphemeral: "true"}
	var res persist.SetResult
	mustJSON(t, h.ok(persist.CmdSet, "e", eph, []byte("in memory")).Data, &res)
	if r := h.ok(persist.CmdGet, "e", map[string]string{persist.HdrEphemeral: "true", persist.HdrSeq: itoa(res.Seq)}, nil); string(r.Data) != "in memory" {
		t.Fatalf("ephemeral get %q", r.Data)
	}
	// The persistent stream of the same name is a different stream.
	wantCode(t, h.req(persist.CmdGet, "e", map[string]string{persist.HdrSeq: itoa(res.Seq)}, nil), persist.CodeNotFound)
	// Nothing reached the disk: the persistent stream was only read, and a
	// read of a missing stream creates no file.
	files := 0
	_ = filepath.Walk(h.dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".db") {
			files++
		}
		return nil
	})
	if files != 0 {
		t.Fatalf("%d stream files on disk, want none", files)
	}
	// The byte cap applies whatever the config asks.
	var c persist.Config
	mustJSON(t, h.ok(persist.CmdConfig, "e", eph, []byte(`{"max_bytes": -1}`)).Data, &c)
	if c.MaxBytes != store.EphemeralMaxBytes {
		t.Fatalf("ephemeral max_bytes %d", c.MaxBytes)
	}
	// Gone after a restart.
	h.restart()
	wantCode(t, h.req(persist.CmdGet, "e", map[string]string{persist.HdrEphemeral: "true", persist.HdrSeq: itoa(res.Seq)}, nil), persist.CodeNotFound)
}

func TestEphemeralOnlyServer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DataDir = "" })
	h.ok(persist.CmdSet, "e", map[string]string{persist.HdrEphemeral: "true"}, []byte("x"))
	wantCode(t, h.req(persist.CmdSet, "p", nil, []byte("x")), persist.CodeBadRequest)
}

func TestHostileNames(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	names := []string{"..", "../..", "/", "/etc/passwd", "a/../../b", ".", "~", "%2e%2e",
		"ünïcødé ☃", "Case", "case", "CASE", strings.Repeat("é", persist.MaxStreamNameBytes/2), `C:\windows`, "a~0123", "inner space"}
	for i, n := range names {
		h.set(n, fmt.Sprint(i), nil)
	}
	for i, n := range names {
		r := h.ok(persist.CmdGet, n, map[string]string{persist.HdrSeq: "1"}, nil)
		if string(r.Data) != fmt.Sprint(i) {
			t.Fatalf("stream %q holds %q, want %d: two names share a stream", n, r.Data, i)
		}
	}
	seen := map[string]string{}
	for _, n := range names {
		p, err := store.StreamPath(h.dir, "hub", n)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(p) != filepath.Join(h.dir, "hub") {
			t.Fatalf("%q maps to %s, outside its scope directory", n, p)
		}
		// Case-insensitive filesystems: no two files may differ only in case.
		low := strings.ToLower(filepath.Base(p))
		if other, dup := seen[low]; dup {
			t.Fatalf("%q and %q map to files equal but for case", n, other)
		}
		seen[low] = n
		if len(filepath.Base(p)) > 100 {
			t.Fatalf("%q maps to a %d-byte file name", n, len(filepath.Base(p)))
		}
	}
	err := filepath.Walk(h.dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(h.dir, p); strings.HasPrefix(rel, "..") {
			t.Errorf("file %s outside the data directory", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, h.req(persist.CmdSet, strings.Repeat("x", 10000), nil, []byte("v")), persist.CodeBadRequest)
	wantCode(t, h.req(persist.CmdSet, "", nil, []byte("v")), persist.CodeBadRequest)
	// Control characters break the naming rule (names_test.go has the rest).
	wantCode(t, h.req(persist.CmdSet, "nul\x00byte", nil, []byte("v")), persist.CodeBadRequest)
	wantCode(t, h.req(persist.CmdSet, "tab\there", nil, []byte("v")), persist.CodeBadRequest)
}

func TestWrongOwner(t *testing.T) {
	t.Parallel()
	ids := []string{"0", "1"}
	h := newHarness(t, func(c *Config) { c.IDs = ids; c.Placement = placement.Modulo })
	var mine, theirs string
	for i := 0; mine == "" || theirs == ""; i++ {
		s := fmt.Sprintf("account-%d", i)
		if placement.Modulo(ids, s) == "0" {
			mine = s
		} else {
			theirs = s
		}
	}
	h.scope = theirs
	wantCode(t, h.req(persist.CmdSet, "s", nil, []byte("x")), persist.CodeWrongOwner)
	h.scope = mine
	h.set("s", "x", nil)
	// A subject whose scope token is not a scope.
	m := nats.NewMsg(bus.APISubject(bus.DefaultService, "BAD", "0"))
	m.Header.Set(persist.HdrCmd, persist.CmdKeys)
	m.Header.Set(persist.HdrStream, "s")
	wantCode(t, h.do(m), persist.CodeBadRequest)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	tests := []struct {
		name string
		cmd  string
		hdr  map[string]string
		body string
		code persist.Code
	}{
		{"unknown command", "explode", nil, "", persist.CodeBadRequest},
		{"missing command", "", nil, "", persist.CodeBadRequest},
		{"bad seq", persist.CmdGet, map[string]string{persist.HdrSeq: "-1"}, "", persist.CodeBadRequest},
		{"get needs seq or key", persist.CmdGet, nil, "", persist.CodeBadRequest},
		{"get with both", persist.CmdGet, map[string]string{persist.HdrSeq: "1", persist.HdrKey: "k"}, "", persist.CodeBadRequest},
		{"bad prev seq", persist.CmdSet, map[string]string{persist.HdrKey: "k", persist.HdrPrevSeq: "x"}, "v", persist.CodeBadRequest},
		{"bad ttl", persist.CmdSet, map[string]string{persist.HdrTTL: "soon"}, "v", persist.CodeBadRequest},
		{"zero ttl", persist.CmdSet, map[string]string{persist.HdrTTL: "0"}, "v", persist.CodeBadRequest},
		{"bad ephemeral", persist.CmdSet, map[string]string{persist.HdrEphemeral: "maybe"}, "v", persist.CodeBadRequest},
		{"key too long", persist.CmdSet, map[string]string{persist.HdrKey: strings.Repeat("k", persist.MaxKeyBytes+1)}, "v", persist.CodeTooLarge},
		{"bad frames", persist.CmdSetMany, nil, "\xff\xff\xff", persist.CodeBadRequest},
		{"bad frame json", persist.CmdSetMany, nil, "\x02{x\x00", persist.CodeBadRequest},
		{"bad limit", persist.CmdGetAll, map[string]string{persist.HdrLimit: "0"}, "", persist.CodeBadRequest},
		{"bad config", persist.CmdConfig, nil, "{", persist.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := h.msg(tt.cmd, "s", tt.hdr, []byte(tt.body))
			if tt.cmd == "" {
				m.Header.Del(persist.HdrCmd)
			}
			wantCode(t, h.do(m), tt.code)
		})
	}
	m := h.msg(persist.CmdSet, "s", nil, nil)
	m.Header.Del(persist.HdrStream)
	wantCode(t, h.do(m), persist.CodeBadRequest)
	// Too many frames.
	var body []byte
	for range persist.MaxBatch + 1 {
		body, _ = persist.AppendFrame(body, &persist.Frame{})
	}
	wantCode(t, h.req(persist.CmdSetMany, "s", nil, body), persist.CodeTooLarge)
	// The server still works.
	h.set("s", "fine", nil)
}

// (Was: undocumented: a header sent twice counts with its first value; wire.md now says so.)
func TestDuplicateHeaderFirstValueCounts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "one", nil)
	h.set("s", "two", nil)
	m := h.msg(persist.CmdGet, "s", nil, nil)
	m.Header.Add(persist.HdrStream, "other")
	m.Header.Add(persist.HdrSeq, "1")
	m.Header.Add(persist.HdrSeq, "2")
	if r := h.do(m); r.Header.Get(persist.HdrError) != "" || string(r.Data) != "one" {
		t.Fatalf("get with two streams and two seqs: %q %q, want seq 1 of s", r.Header.Get(persist.HdrError), r.Data)
	}
}

// (Was: a number or boolean header sent with an empty value ("Sy-Prev-Seq:",
// a script's unset variable) counted as absent: a compare-and-set was a
// plain write, a TTL was dropped, and a drop of an ephemeral stream dropped
// the persistent one.)
func TestEmptyHeaderValueIsBadRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	first := h.set("s", "v1", map[string]string{persist.HdrKey: "k"})
	h.set("p", "persistent", nil)
	h.ok(persist.CmdSet, "p", map[string]string{persist.HdrEphemeral: "true"}, []byte("ephemeral"))
	tests := []struct {
		name   string
		cmd    string
		stream string
		hdr    map[string]string
		empty  string // the header sent with an empty value
	}{
		{"prev seq", persist.CmdSet, "s", map[string]string{persist.HdrKey: "k"}, persist.HdrPrevSeq},
		{"ttl", persist.CmdSet, "s", nil, persist.HdrTTL},
		{"ephemeral", persist.CmdDelete, "p", map[string]string{persist.HdrAll: "true", persist.HdrDrop: "true"}, persist.HdrEphemeral},
		{"cold", persist.CmdKeys, "s", nil, persist.HdrCold},
		{"deadline", persist.CmdKeys, "s", nil, persist.HdrDeadline},
		{"get seq", persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, persist.HdrSeq},
		{"start seq", persist.CmdGetAll, "s", nil, persist.HdrStartSeq},
		{"end seq", persist.CmdGetAll, "s", nil, persist.HdrEndSeq},
		{"limit", persist.CmdGetAll, "s", nil, persist.HdrLimit},
		{"delete seq", persist.CmdDelete, "s", map[string]string{persist.HdrAll: "true"}, persist.HdrSeq},
		{"seqs", persist.CmdDelete, "s", map[string]string{persist.HdrAll: "true"}, persist.HdrSeqs},
		{"up to", persist.CmdDelete, "s", map[string]string{persist.HdrAll: "true"}, persist.HdrUpTo},
		{"all", persist.CmdDelete, "s", map[string]string{persist.HdrUpTo: "100"}, persist.HdrAll},
		{"drop", persist.CmdDelete, "p", map[string]string{persist.HdrAll: "true"}, persist.HdrDrop},
	}
	for _, tt := range tests {
		for _, value := range []string{"", "  "} { // nats.go sends "  " as ""
			m := h.msg(tt.cmd, tt.stream, tt.hdr, []byte("v2"))
			m.Header.Set(tt.empty, value)
			r := h.do(m)
			if got := persist.Code(r.Header.Get(persist.HdrError)); got != persist.CodeBadRequest {
				t.Fatalf("%s: %s: %q: answered %q %q, want %s", tt.name, tt.cmd, tt.empty+":"+value, got, r.Data, persist.CodeBadRequest)
			}
		}
	}
	// The first value counts, empty too: not the second one's CAS.
	m := h.msg(persist.CmdSet, "s", map[string]string{persist.HdrKey: "k"}, []byte("v3"))
	m.Header.Add(persist.HdrPrevSeq, "")
	m.Header.Add(persist.HdrPrevSeq, itoa(first.Seq))
	wantCode(t, h.do(m), persist.CodeBadRequest)
	// Nothing was written, deleted or dropped.
	if r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrKey: "k"}, nil); string(r.Data) != "v1" || r.Header.Get(persist.HdrSeq) != itoa(first.Seq) {
		t.Fatalf("key k holds %q at seq %s, want v1 at %d", r.Data, r.Header.Get(persist.HdrSeq), first.Seq)
	}
	for _, c := range []struct {
		hdr  map[string]string
		want int64
	}{{nil, 1}, {map[string]string{persist.HdrEphemeral: "true"}, 1}} {
		var inv persist.Inventory
		mustJSON(t, h.ok(persist.CmdInventory, "p", c.hdr, nil).Data, &inv)
		if inv.Count != c.want {
			t.Fatalf("stream p (%v) holds %d messages, want %d", c.hdr, inv.Count, c.want)
		}
	}
	if inv := h.inventory("s"); inv.Count != 1 || inv.Seq != first.Seq {
		t.Fatalf("stream s: %+v, want its one message", inv)
	}
}

// TestKeysOverMaxPayloadTooLarge: a keys answer that cannot fit the
// connection's max payload is too-large, said by the store before it
// builds the list, and the stream still answers a list that fits.
// (Was: the server built every key into one list, then refused the reply.)
func TestKeysOverMaxPayloadTooLarge(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, testnats.Options{MaxPayload: 64 << 10}, nil, nil)
	for i := range 800 {
		h.set("many", "v", map[string]string{persist.HdrKey: fmt.Sprintf("%03d-%s", i, strings.Repeat("k", 96))})
	}
	r := h.req(persist.CmdKeys, "many", nil, nil)
	wantCode(t, r, persist.CodeTooLarge)
	if !strings.Contains(string(r.Data), "keys are more than") {
		t.Fatalf("keys over the max payload: %q, want the store's refusal", r.Data)
	}
	var keys []string
	h.set("few", "v", map[string]string{persist.HdrKey: "a"})
	mustJSON(t, h.ok(persist.CmdKeys, "few", nil, nil).Data, &keys)
	if len(keys) != 1 || keys[0] != "a" {
		t.Fatalf("keys of a small stream: %q", keys)
	}
}
