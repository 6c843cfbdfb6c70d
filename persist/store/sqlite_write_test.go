package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// TestWriteBatchedInserts mixes plain appends (inserted many rows per
// statement) with keyed replaces, msgIDs and a refused op in one commit whose
// length crosses every multi-row run size, then reopens the stream and checks
// every row: seq order, values, keys replaced, totals.
func TestWriteBatchedInserts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "mix", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const n = 203 // 3*64 + 8 + 3: every run size and single rows
	var ops []WriteOp
	want := map[uint64]string{}
	for i := range n {
		op := WriteOp{Value: fmt.Appendf(nil, "v%d", i)}
		switch {
		case i%37 == 5:
			op.Key = fmt.Sprintf("k%d", i%2) // k0/k1 replaced within the commit
		case i%50 == 7:
			op.MsgID = fmt.Sprintf("id%d", i)
		case i == 100:
			op.TTL = 1000 // refused: allow_msg_ttl is off
		case i%11 == 3:
			op.Value = nil // empty values keep a size of 0, not NULL
		}
		ops = append(ops, op)
	}
	res, changes, err := st.Write(ops, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lastKeyed := map[string]uint64{}
	var prev uint64
	sets := 0
	for i, r := range res {
		if i == 100 {
			if r.Err == nil || r.Err.Code != persist.CodeBadRequest {
				t.Fatalf("op 100: %+v, want bad-request", r)
			}
			continue
		}
		if r.Err != nil || r.Seq <= prev {
			t.Fatalf("op %d: %+v after seq %d", i, r, prev)
		}
		prev = r.Seq
		want[r.Seq] = string(ops[i].Value)
		if k := ops[i].Key; k != "" {
			if old, ok := lastKeyed[k]; ok {
				delete(want, old)
			}
			lastKeyed[k] = r.Seq
		}
	}
	for _, c := range changes {
		if c.Op == ChangeSet {
			sets++
			if _, ok := want[c.Msg.Seq]; !ok && c.Msg.Key == "" {
				t.Fatalf("change for seq %d not written", c.Msg.Seq)
			}
		}
	}
	if sets != n-1 {
		t.Fatalf("%d set changes, want %d", sets, n-1)
	}
	// A second commit dedups one msgID and appends after the batch.
	res2, _, err := st.Write([]WriteOp{{MsgID: "id7", Value: []byte("again")}, {Value: []byte("tail")}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !res2[0].Dup || res2[0].Seq != res[7].Seq {
		t.Fatalf("msgID id7: %+v, want dup of seq %d", res2[0], res[7].Seq)
	}
	want[res2[1].Seq] = "tail"
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "mix", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := map[uint64]string{}
	if _, err := st.GetAll(1, 0, 0, func(m *persist.Frame) error {
		got[m.Seq] = string(m.Value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows after reopen, want %d", len(got), len(want))
	}
	for seq, v := range want {
		if got[seq] != v {
			t.Fatalf("seq %d = %q, want %q", seq, got[seq], v)
		}
	}
	for k, seq := range lastKeyed {
		m, err := st.GetKey(k)
		if err != nil || m.Seq != seq {
			t.Fatalf("key %s: %v %v, want seq %d", k, m, err, seq)
		}
	}
	var bytes int64
	for seq, v := range want {
		bytes += int64(len(v))
		if m, err := st.Get(seq); err == nil && m.Key != "" {
			bytes += int64(len(m.Key))
		}
	}
	if inv := inventory(t, st); inv.Count != int64(len(want)) || inv.Seq != res2[1].Seq || inv.Bytes != bytes {
		t.Fatalf("inventory %+v, want count %d seq %d bytes %d", inv, len(want), res2[1].Seq, bytes)
	}
}

// TestWriteSharedFile: two handles on one stream file (two servers that
// both believe they own the scope) never hand out the same seq, because
// each write transaction notices the other's commits.
func TestWriteSharedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "shared", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "shared", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seen := map[uint64]bool{}
	for i := range 6 {
		st := a
		if i%2 == 1 {
			st = b
		}
		res, _, err := st.Write([]WriteOp{{Value: []byte("x")}, {Value: []byte("y")}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if seen[r.Seq] {
				t.Fatalf("write %d: seq %d handed out twice", i, r.Seq)
			}
			seen[r.Seq] = true
		}
	}
}

// TestWriteKeyedRun: one commit of keyed sets over a few keys, each key
// repeated many times (so the run must be inserted before a key comes back),
// with compare-and-set ops among them; every key ends at its last write and
// the stream holds exactly one row per key.
func TestWriteKeyedRun(t *testing.T) {
	t.Parallel()
	st := benchStreamT(t)
	var ops []WriteOp
	for i := range 150 {
		op := WriteOp{Key: fmt.Sprintf("k%d", i%7), Value: fmt.Appendf(nil, "v%d", i)}
		if i == 149 {
			zero := uint64(0)
			op.PrevSeq = &zero // k2 exists: refused
		}
		ops = append(ops, op)
	}
	res, changes, err := st.Write(ops, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res[149].Err == nil || res[149].Err.Code != persist.CodeWrongLastSequence {
		t.Fatalf("op 149: %+v, want wrong-last-sequence", res[149])
	}
	last := map[string]int{}
	for i := range 149 {
		if res[i].Err != nil {
			t.Fatalf("op %d: %v", i, res[i].Err)
		}
		last[ops[i].Key] = i
	}
	deletes := 0
	for _, c := range changes {
		if c.Op == ChangeDelete {
			deletes += len(c.Seqs)
		}
	}
	if deletes != 149-7 {
		t.Fatalf("%d replaced rows reported, want %d", deletes, 149-7)
	}
	for k, i := range last {
		m, err := st.GetKey(k)
		if err != nil || m.Seq != res[i].Seq || string(m.Value) != string(ops[i].Value) {
			t.Fatalf("key %s: %+v %v, want seq %d %q", k, m, err, res[i].Seq, ops[i].Value)
		}
	}
	if inv := inventory(t, st); inv.Count != 7 {
		t.Fatalf("count %d, want 7", inv.Count)
	}
	var n int64
	if _, err := st.GetAll(1, 0, 0, func(*persist.Frame) error { n++; return nil }); err != nil || n != 7 {
		t.Fatalf("getAll: %d rows, %v; want 7", n, err)
	}
}

func benchStreamT(t *testing.T) Stream {
	t.Helper()
	st, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("hub", "keyed", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestWriteBatchSameAsOneByOne writes the same ops once as one group commit
// and once one op per commit, on streams with the same rows, and wants the
// same results, the same changes (in order) and the same rows: batching the
// keyed replaces of a commit must not change what a write means, with a key
// replaced twice in one commit and compare-and-set mixed in.
func TestWriteBatchSameAsOneByOne(t *testing.T) {
	u := func(n uint64) *uint64 { return &n }
	v := func(s string) []byte { return []byte(s) }
	manyKeys := func(n int) []WriteOp {
		var ops []WriteOp
		for i := range n {
			ops = append(ops, WriteOp{Key: fmt.Sprintf("m%d", i), Value: fmt.Appendf(nil, "v%d", i)})
			if i%3 == 0 {
				ops = append(ops, WriteOp{Value: v("plain")})
			}
		}
		return ops
	}
	tests := []struct {
		name  string
		cfg   *persist.Config // nil = defaults
		setup []WriteOp       // committed first, one commit
		ops   []WriteOp
	}{
		{
			name:  "same key twice",
			setup: []WriteOp{{Key: "a", Value: v("a0")}},
			ops: []WriteOp{
				{Key: "a", Value: v("a1")}, {Key: "a", Value: v("a2")}, {Key: "b", Value: v("b1")},
				{Value: v("x")}, {Key: "a", Value: v("a3")}, {Key: "b", Value: v("b2")},
			},
		},
		{
			// setup: a = seq 1, c = seq 2; the batch starts at seq 3.
			name:  "compare-and-set mixed in",
			setup: []WriteOp{{Key: "a", Value: v("a0")}, {Key: "c", Value: v("c0")}},
			ops: []WriteOp{
				{Key: "a", Value: v("a1")},                                       // 3, removes 1
				{Key: "a", Value: v("late"), PrevSeq: u(1)},                      // wrong-last-sequence: a is at 3
				{Key: "b", Value: v("b1"), PrevSeq: u(0)},                        // 4: b is new
				{Key: "b", Value: v("b2")},                                       // 5, removes 4
				{Key: "a", Value: v("a2"), PrevSeq: u(3)},                        // 6, removes 3
				{Key: "c", Value: v("c1")},                                       // 7, removes 2
				{Key: "a", Value: v("a3"), Headers: map[string]string{"h": "1"}}, // 8, removes 6 (not a plain row)
				{Key: "a", Value: v("a4")},                                       // 9, removes 8
				{Key: "b", Value: v("b3"), PrevSeq: u(0)},                        // wrong-last-sequence: b exists
				{Key: "d", Value: v("d1"), MsgID: "m1"},                          // 10
				{Key: "d", Value: v("d2"), MsgID: "m1"},                          // dup of 10
			},
		},
		{
			name:  "discard new looks every key up",
			cfg:   &persist.Config{MaxMsgs: 3, DiscardPolicy: persist.DiscardNew},
			setup: []WriteOp{{Key: "a", Value: v("a0")}, {Value: v("x")}},
			ops: []WriteOp{
				{Key: "a", Value: v("a1")}, {Key: "b", Value: v("b1")}, {Key: "c", Value: v("c1")},
				{Key: "b", Value: v("b2")}, {Value: v("y")},
			},
		},
		{
			name:  "more keys than one statement",
			setup: manyKeys(90),
			ops:   append(manyKeys(90), manyKeys(7)...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			open := func(name string) Stream {
				t.Helper()
				st, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("hub", name, now)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				if tc.cfg != nil {
					c := persist.DefaultConfig()
					c.MaxMsgs, c.DiscardPolicy = tc.cfg.MaxMsgs, tc.cfg.DiscardPolicy
					if _, _, err := st.SetConfig(c, now); err != nil {
						t.Fatal(err)
					}
				}
				if _, _, err := st.Write(tc.setup, now); err != nil {
					t.Fatal(err)
				}
				return st
			}
			batch, single := open("batch"), open("single")
			gotRes, gotCh, err := batch.Write(tc.ops, now)
			if err != nil {
				t.Fatal(err)
			}
			var wantRes []WriteResult
			var wantCh []Change
			for _, op := range tc.ops {
				res, ch, err := single.Write([]WriteOp{op}, now)
				if err != nil {
					t.Fatal(err)
				}
				wantRes = append(wantRes, res...)
				wantCh = append(wantCh, ch...)
			}
			for i := range wantRes {
				g, w := gotRes[i], wantRes[i]
				if g.Seq != w.Seq || g.Dup != w.Dup || (g.Err == nil) != (w.Err == nil) || (g.Err != nil && g.Err.Code != w.Err.Code) {
					t.Fatalf("op %d: batch %+v, one by one %+v", i, g, w)
				}
			}
			if got, want := describeChanges(gotCh), describeChanges(wantCh); got != want {
				t.Fatalf("changes\nbatch:      %s\none by one: %s", got, want)
			}
			if got, want := describeRows(t, batch), describeRows(t, single); got != want {
				t.Fatalf("rows\nbatch:      %s\none by one: %s", got, want)
			}
			if got, want := inventory(t, batch), inventory(t, single); got.Count != want.Count || got.Bytes != want.Bytes || got.Seq != want.Seq {
				t.Fatalf("inventory: batch %+v, one by one %+v", got, want)
			}
		})
	}
}

func describeChanges(cs []Change) string {
	var b []byte
	for _, c := range cs {
		if c.Op == ChangeSet {
			b = fmt.Appendf(b, "set %d %q %q; ", c.Msg.Seq, c.Msg.Key, c.Msg.Value)
		} else {
			b = fmt.Appendf(b, "delete %v; ", c.Seqs)
		}
	}
	return string(b)
}

func describeRows(t *testing.T, st Stream) string {
	t.Helper()
	var b []byte
	if _, err := st.GetAll(1, 0, 0, func(m *persist.Frame) error {
		b = fmt.Appendf(b, "%d %q %q %v; ", m.Seq, m.Key, m.Value, m.Headers)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSeqNotReusedAfterNewestGone: once the newest message is gone (deleted
// by seq, by up-to or all, or by a limit), a reopened stream still goes on
// from the highest seq ever given, in files made with AUTOINCREMENT (older
// ones) and without it (whose commits then record the seq in meta).
func TestSeqNotReusedAfterNewestGone(t *testing.T) {
	ways := []struct {
		name string
		gone func(t *testing.T, st Stream, now time.Time)
	}{
		{"delete by seq", func(t *testing.T, st Stream, now time.Time) {
			if _, _, err := st.Delete(persist.Delete{Seqs: []uint64{3}}, now); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete all", func(t *testing.T, st Stream, now time.Time) {
			if _, _, err := st.Delete(persist.Delete{All: true}, now); err != nil {
				t.Fatal(err)
			}
		}},
		{"max_msgs 0", func(t *testing.T, st Stream, now time.Time) {
			c := st.Config()
			c.MaxMsgs = 0
			if _, _, err := st.SetConfig(c, now); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, legacy := range []bool{false, true} {
		for _, w := range ways {
			t.Run(fmt.Sprintf("%s/autoincrement=%v", w.name, legacy), func(t *testing.T) {
				t.Parallel()
				dir, now := t.TempDir(), time.Now()
				if legacy {
					makeLegacyFile(t, dir, "hub", "s")
				}
				open := func() Stream {
					t.Helper()
					st, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "s", now)
					if err != nil {
						t.Fatal(err)
					}
					return st
				}
				st := open()
				if _, _, err := st.Write([]WriteOp{{Value: []byte("1")}, {Key: "k", Value: []byte("2")}, {Value: []byte("3")}}, now); err != nil {
					t.Fatal(err)
				}
				w.gone(t, st, now)
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				st = open()
				defer st.Close()
				res, _, err := st.Write([]WriteOp{{Value: []byte("4")}}, now)
				if err != nil {
					t.Fatal(err)
				}
				if res[0].Seq != 4 {
					t.Fatalf("next seq after reopen is %d, want 4", res[0].Seq)
				}
			})
		}
	}
}

// makeLegacyFile creates the stream file of scope/name with the messages
// table of older versions (seq AUTOINCREMENT).
func makeLegacyFile(t *testing.T, dir, scope, name string) {
	t.Helper()
	p, err := StreamPath(dir, scope, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE messages(seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, time INTEGER NOT NULL, headers BLOB, enc INTEGER NOT NULL DEFAULT 0, raw BLOB, size INTEGER NOT NULL, ttl INTEGER, expires INTEGER)`); err != nil {
		t.Fatal(err)
	}
}

// The store refuses, op by op, a key the naming rule refuses and headers
// that are not valid UTF-8, whatever decoder handed them over: stored, the
// headers' JSON would hold U+FFFD in place of the bytes sent.
func TestWriteRefusesNamesNotUTF8(t *testing.T) {
	t.Parallel()
	st, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("hub", "names", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ops := []WriteOp{
		{Key: "alias\xff", Value: []byte("v")},
		{Key: "alias\ufffd", Value: []byte("real")},
		{Key: "k", Headers: map[string]string{"h": "v\xfe"}, Value: []byte("v")},
		{Key: "k", Headers: map[string]string{"h\xff": "v"}, Value: []byte("v")},
		{Key: " sp", Value: []byte("v")},
	}
	res, _, err := st.Write(ops, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if i == 1 {
			if r.Err != nil {
				t.Fatalf("op 1 (a real U+FFFD): %v", r.Err)
			}
			continue
		}
		if r.Err == nil || r.Err.Code != persist.CodeBadRequest {
			t.Errorf("op %d (%q, %q): %+v, want bad-request", i, ops[i].Key, ops[i].Headers, r)
		}
	}
	keys, err := st.Keys(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "alias\ufffd" {
		t.Fatalf("keys %q, want only %q", keys, "alias\ufffd")
	}
}

// (Was: a compare-and-set on a key that does not exist said it "is at
// seq 0", a seq no row ever has.)
func TestPrevSeqOfMissingKeySaysSo(t *testing.T) {
	t.Parallel()
	st := benchStreamT(t)
	prev := uint64(7)
	res, _, err := st.Write([]WriteOp{{Key: "k", Value: []byte("v"), PrevSeq: &prev}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if e := res[0].Err; e == nil || e.Code != persist.CodeWrongLastSequence || !strings.Contains(e.Message, `key "k" does not exist`) {
		t.Fatalf("result %+v, want wrong-last-sequence saying the key does not exist", res[0])
	}
}

// TestKeysBoundedAsJSON: Keys(maxJSON) answers a list whose JSON is
// maxJSON bytes, refuses one a byte over it too-large, and stops reading
// when it passes the bound instead of building the whole list first.
// (Was: a stream of many keys built every key, then the server refused
// the answer as over the connection's max payload.)
func TestKeysBoundedAsJSON(t *testing.T) {
	st, err := NewSQLite(SQLiteConfig{Dir: t.TempDir()}).Open("hub", "many", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ops []WriteOp
	for i := range 20000 {
		// Quotes and '<' grow in JSON: the bound is the encoding's, not the bytes'.
		ops = append(ops, WriteOp{Key: fmt.Sprintf("key-%05d-\"<%s", i, strings.Repeat("x", 90)), Value: []byte("v")})
	}
	if _, _, err := st.Write(ops, time.Now()); err != nil {
		t.Fatal(err)
	}
	all, err := st.Keys(0)
	if err != nil || len(all) != len(ops) {
		t.Fatalf("keys: %d, %v", len(all), err)
	}
	enc, _ := json.Marshal(all)
	if got, err := st.Keys(len(enc)); err != nil || len(got) != len(all) {
		t.Fatalf("Keys(%d), the list's exact size: %d keys, %v", len(enc), len(got), err)
	}
	if _, err := st.Keys(len(enc) - 1); persist.CodeOf(err) != persist.CodeTooLarge {
		t.Fatalf("Keys(%d), a byte short: %v, want too-large", len(enc)-1, err)
	}
	allocs := func(maxJSON int) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = st.Keys(maxJSON)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	whole, bounded := allocs(0), allocs(4096)
	if bounded*10 > whole {
		t.Fatalf("Keys(4096) allocated %d bytes, Keys(0) %d: the bounded list should stop reading early", bounded, whole)
	}
}
