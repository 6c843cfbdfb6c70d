package persist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/placement"
)

func TestLimits(t *testing.T) {
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
			wantCode(t, h.req(CmdSet, s, nil, []byte("this is more than ten bytes")), CodeReject)
		}},
		{"max_msg_size is too-large", `{"max_msg_size": 8}`, func(t *testing.T, s string) {
			h.set(s, "12345678", nil)
			wantCode(t, h.req(CmdSet, s, nil, []byte("123456789")), CodeTooLarge)
			// The key and the headers count too.
			wantCode(t, h.req(CmdSet, s, map[string]string{HdrKey: "k"}, []byte("12345678")), CodeTooLarge)
			wantCode(t, h.req(CmdSet, s, map[string]string{"H": "v"}, []byte("1")), CodeTooLarge)
		}},
		{"discard new rejects", `{"max_msgs": 2, "discard_policy": "new"}`, func(t *testing.T, s string) {
			h.set(s, "a", map[string]string{HdrKey: "k"})
			h.set(s, "b", nil)
			wantCode(t, h.req(CmdSet, s, nil, []byte("c")), CodeReject)
			// Replacing a key does not grow the stream, so it fits.
			h.set(s, "a2", map[string]string{HdrKey: "k"})
			if inv := h.inventory(s); inv.Count != 2 {
				t.Fatalf("inventory %+v", inv)
			}
		}},
		{"max_msgs_per_second rejects", `{"max_msgs_per_second": 2}`, func(t *testing.T, s string) {
			// One setMany commits at one instant, so exactly the third is over.
			var body []byte
			for range 3 {
				body, _ = AppendFrame(body, &Message{Value: []byte("x")})
			}
			var res []SetManyResult
			mustJSON(t, h.ok(CmdSetMany, s, nil, body).Data, &res)
			if res[0].Code != "" || res[1].Code != "" || res[2].Code != CodeReject {
				t.Fatalf("results %+v", res)
			}
		}},
		{"max_bytes_per_second rejects", `{"max_bytes_per_second": 10}`, func(t *testing.T, s string) {
			wantCode(t, h.req(CmdSet, s, nil, []byte("eleven byte")), CodeReject)
		}},
		{"ttl needs allow_msg_ttl", `{}`, func(t *testing.T, s string) {
			wantCode(t, h.req(CmdSet, s, map[string]string{HdrTTL: "1000"}, []byte("x")), CodeBadRequest)
			h.config(s, `{"allow_msg_ttl": true}`)
			h.set(s, "x", map[string]string{HdrTTL: "100000"})
			if r := h.ok(CmdGet, s, map[string]string{HdrSeq: "1"}, nil); r.Header.Get(HdrTTL) != "100000" {
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
				wantCode(t, h.req(CmdGet, s, map[string]string{HdrSeq: itoa(q)}, nil), CodeNotFound)
			}
			inv := h.inventory(s)
			if int64(inv.Seq)-int64(len(removed)) != inv.Count {
				t.Fatalf("%d written, %d removal(s) reported, %d left", inv.Seq, len(removed), inv.Count)
			}
		})
	}
}

func TestExpiryOnTimer(t *testing.T) {
	h := newHarness(t, func(c *ServerConfig) { c.ExpireEvery = 10 * time.Millisecond })
	h.config("aged", `{"max_age": 50}`)
	a := h.set("aged", "x", nil)
	h.config("ttl", `{"allow_msg_ttl": true}`)
	b := h.set("ttl", "short", map[string]string{HdrTTL: "50"})
	c := h.set("ttl", "long", map[string]string{HdrTTL: "3600000"})
	// No further writes: only the timer can remove them.
	waitFor(t, "expiry", func() bool {
		return h.inventory("aged").Count == 0 && h.inventory("ttl").Count == 1
	})
	wantCode(t, h.req(CmdGet, "aged", map[string]string{HdrSeq: itoa(a.Seq)}, nil), CodeNotFound)
	wantCode(t, h.req(CmdGet, "ttl", map[string]string{HdrSeq: itoa(b.Seq)}, nil), CodeNotFound)
	h.ok(CmdGet, "ttl", map[string]string{HdrSeq: itoa(c.Seq)}, nil)
	got := h.deletedSeqs()
	slices.Sort(got)
	if fmt.Sprint(got) != fmt.Sprint([]uint64{a.Seq, b.Seq}) {
		t.Fatalf("expiry reported deletes %v, want %v", got, []uint64{a.Seq, b.Seq})
	}
}

func TestEphemeral(t *testing.T) {
	h := newHarness(t, nil)
	eph := map[string]string{HdrEphemeral: "true"}
	var res SetResult
	mustJSON(t, h.ok(CmdSet, "e", eph, []byte("in memory")).Data, &res)
	if r := h.ok(CmdGet, "e", map[string]string{HdrEphemeral: "true", HdrSeq: itoa(res.Seq)}, nil); string(r.Data) != "in memory" {
		t.Fatalf("ephemeral get %q", r.Data)
	}
	// The persistent stream of the same name is a different stream.
	wantCode(t, h.req(CmdGet, "e", map[string]string{HdrSeq: itoa(res.Seq)}, nil), CodeNotFound)
	// Nothing but that persistent stream's file reached the disk.
	files := 0
	_ = filepath.Walk(h.dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, fileSuffix) {
			files++
		}
		return nil
	})
	if files != 1 {
		t.Fatalf("%d stream files on disk, want 1 (the persistent one)", files)
	}
	// The byte cap applies whatever the config asks.
	var c Config
	mustJSON(t, h.ok(CmdConfig, "e", eph, []byte(`{"max_bytes": -1}`)).Data, &c)
	if c.MaxBytes != EphemeralMaxBytes {
		t.Fatalf("ephemeral max_bytes %d", c.MaxBytes)
	}
	// Gone after a restart.
	h.restart()
	wantCode(t, h.req(CmdGet, "e", map[string]string{HdrEphemeral: "true", HdrSeq: itoa(res.Seq)}, nil), CodeNotFound)
}

func TestEphemeralOnlyServer(t *testing.T) {
	h := newHarness(t, func(c *ServerConfig) { c.DataDir = "" })
	h.ok(CmdSet, "e", map[string]string{HdrEphemeral: "true"}, []byte("x"))
	wantCode(t, h.req(CmdSet, "p", nil, []byte("x")), CodeBadRequest)
}

func TestZstdRoundTrip(t *testing.T) {
	h := newHarness(t, nil)
	big := strings.Repeat("compressible text ", 10000)
	a := h.set("z", big, nil)
	small := h.set("z", strings.Repeat("y", compressMin), nil)
	if r := h.ok(CmdGet, "z", map[string]string{HdrSeq: itoa(a.Seq)}, nil); string(r.Data) != big {
		t.Fatalf("big value came back as %d bytes", len(r.Data))
	}
	msgs, _, _ := h.getAll("z", nil)
	if len(msgs) != 2 || string(msgs[0].Value) != big {
		t.Fatal("getAll of a compressed value differs")
	}
	// Look at the file itself: compressed above the threshold only.
	st := h.srv.cfg.Storage.(*sqliteStorage)
	s, err := st.Open("hub", "z", false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		seq     uint64
		enc     int
		maxSize int
	}{{a.Seq, encZstd, len(big) / 10}, {small.Seq, encRaw, compressMin}} {
		var enc, n int
		if err := s.(*sqliteStream).conn.QueryRowContext(context.Background(), `SELECT enc, length(raw) FROM messages WHERE seq = ?`, c.seq).Scan(&enc, &n); err != nil {
			t.Fatal(err)
		}
		if enc != c.enc || n > c.maxSize {
			t.Fatalf("seq %d stored with enc %d in %d bytes", c.seq, enc, n)
		}
	}
}

func TestHostileNames(t *testing.T) {
	h := newHarness(t, nil)
	names := []string{"..", "../..", "/", "/etc/passwd", "a/../../b", "nul\x00byte", ".", "~", "%2e%2e",
		"ünïcødé ☃", "Case", "case", "CASE", strings.Repeat("é", MaxStreamNameBytes/2), `C:\windows`, "a~0123", "tab\there"}
	for i, n := range names {
		h.set(n, fmt.Sprint(i), nil)
	}
	for i, n := range names {
		r := h.ok(CmdGet, n, map[string]string{HdrSeq: "1"}, nil)
		if string(r.Data) != fmt.Sprint(i) {
			t.Fatalf("stream %q holds %q, want %d: two names share a stream", n, r.Data, i)
		}
	}
	seen := map[string]string{}
	for _, n := range names {
		p, err := streamPath(h.dir, "hub", n)
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
	wantCode(t, h.req(CmdSet, strings.Repeat("x", 10000), nil, []byte("v")), CodeBadRequest)
	wantCode(t, h.req(CmdSet, "", nil, []byte("v")), CodeBadRequest)
}

func TestWrongOwner(t *testing.T) {
	ids := []string{"0", "1"}
	h := newHarness(t, func(c *ServerConfig) { c.IDs = ids; c.Placement = placement.Modulo })
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
	wantCode(t, h.req(CmdSet, "s", nil, []byte("x")), CodeWrongOwner)
	h.scope = mine
	h.set("s", "x", nil)
	// A subject whose scope token is not a scope.
	m := nats.NewMsg(bus.APISubject(bus.DefaultService, "BAD", "0"))
	m.Header.Set(HdrCmd, CmdKeys)
	m.Header.Set(HdrStream, "s")
	wantCode(t, h.do(m), CodeBadRequest)
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name string
		cmd  string
		hdr  map[string]string
		body string
		code Code
	}{
		{"unknown command", "explode", nil, "", CodeBadRequest},
		{"missing command", "", nil, "", CodeBadRequest},
		{"bad seq", CmdGet, map[string]string{HdrSeq: "-1"}, "", CodeBadRequest},
		{"get needs seq or key", CmdGet, nil, "", CodeBadRequest},
		{"get with both", CmdGet, map[string]string{HdrSeq: "1", HdrKey: "k"}, "", CodeBadRequest},
		{"bad prev seq", CmdSet, map[string]string{HdrKey: "k", HdrPrevSeq: "x"}, "v", CodeBadRequest},
		{"bad ttl", CmdSet, map[string]string{HdrTTL: "soon"}, "v", CodeBadRequest},
		{"zero ttl", CmdSet, map[string]string{HdrTTL: "0"}, "v", CodeBadRequest},
		{"bad ephemeral", CmdSet, map[string]string{HdrEphemeral: "maybe"}, "v", CodeBadRequest},
		{"key too long", CmdSet, map[string]string{HdrKey: strings.Repeat("k", MaxKeyBytes+1)}, "v", CodeTooLarge},
		{"bad frames", CmdSetMany, nil, "\xff\xff\xff", CodeBadRequest},
		{"bad frame json", CmdSetMany, nil, "\x02{x\x00", CodeBadRequest},
		{"bad limit", CmdGetAll, map[string]string{HdrLimit: "0"}, "", CodeBadRequest},
		{"bad config", CmdConfig, nil, "{", CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := h.msg(tt.cmd, "s", tt.hdr, []byte(tt.body))
			if tt.cmd == "" {
				m.Header.Del(HdrCmd)
			}
			wantCode(t, h.do(m), tt.code)
		})
	}
	m := h.msg(CmdSet, "s", nil, nil)
	m.Header.Del(HdrStream)
	wantCode(t, h.do(m), CodeBadRequest)
	// Too many frames.
	var body []byte
	for range MaxBatch + 1 {
		body, _ = AppendFrame(body, &Message{})
	}
	wantCode(t, h.req(CmdSetMany, "s", nil, body), CodeTooLarge)
	// The server still works.
	h.set("s", "fine", nil)
}
