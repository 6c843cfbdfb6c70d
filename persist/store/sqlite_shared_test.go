package store

import (
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// openShared opens the stream "shared" of one data directory twice: two
// servers that both believe they own its scope.
func openShared(t *testing.T, now time.Time) (a, b Stream) {
	t.Helper()
	dir := t.TempDir()
	a, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "shared", now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "shared", now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

func writeOne(t *testing.T, s Stream, op WriteOp, now time.Time) WriteResult {
	t.Helper()
	res, _, err := s.Write([]WriteOp{op}, now)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil {
		t.Fatalf("write: %v", res[0].Err)
	}
	return res[0]
}

func rows(t *testing.T, s Stream) int {
	t.Helper()
	n := 0
	if _, err := s.GetAll(1, 0, 0, func(*persist.Frame) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSharedFileDedup is the retry that reaches a second server sharing the
// data directory: the msgID the first one stored is recognised there, and
// answered with the first write's seq and time, however the first write's
// row fared since (kept, replaced by a later write of its key, deleted).
func TestSharedFileDedup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, a Stream, first WriteResult, now time.Time)
		rows  int // in the file at the end
	}{
		{"kept", func(*testing.T, Stream, WriteResult, time.Time) {}, 1},
		{"replaced", func(t *testing.T, a Stream, _ WriteResult, now time.Time) {
			writeOne(t, a, WriteOp{Key: "k", Value: []byte("newer")}, now)
		}, 1},
		{"deleted", func(t *testing.T, a Stream, first WriteResult, now time.Time) {
			if _, _, err := a.Delete(persist.Delete{Seqs: []uint64{first.Seq}}, now); err != nil {
				t.Fatal(err)
			}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			a, b := openShared(t, now)
			// b has served the stream before a wrote (its window is loaded).
			if _, err := b.Inventory(); err != nil {
				t.Fatal(err)
			}
			first := writeOne(t, a, WriteOp{Key: "k", MsgID: "X", Value: []byte("v")}, now)
			tc.after(t, a, first, now)
			retry := writeOne(t, b, WriteOp{Key: "k", MsgID: "X", Value: []byte("v")}, now.Add(time.Second))
			if !retry.Dup || retry.Seq != first.Seq || retry.Time != first.Time {
				t.Fatalf("retry through the second handle: %+v, want Dup of %+v", retry, first)
			}
			if n := rows(t, b); n != tc.rows {
				t.Fatalf("%d rows after the retry, want %d", n, tc.rows)
			}
			// And the other way round: a's own window answers a retry of
			// an id b stored.
			second := writeOne(t, b, WriteOp{MsgID: "Y", Value: []byte("w")}, now.Add(time.Second))
			if again := writeOne(t, a, WriteOp{MsgID: "Y", Value: []byte("w")}, now.Add(2*time.Second)); !again.Dup || again.Seq != second.Seq || again.Time != second.Time {
				t.Fatalf("retry of b's write through a: %+v, want Dup of %+v", again, second)
			}
		})
	}
}

// TestSharedFileDedupWindow: a msgID another handle stored is forgotten
// after DedupWindow like one of this handle's, and this handle's Expire
// prunes it from the table even when it stored no msgID itself.
func TestSharedFileDedupWindow(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := openShared(t, now)
	first := writeOne(t, a, WriteOp{MsgID: "X", Value: []byte("v")}, now)
	if err := a.Close(); err != nil { // the old owner is gone
		t.Fatal(err)
	}
	if r := writeOne(t, b, WriteOp{MsgID: "X", Value: []byte("v")}, now.Add(DedupWindow-time.Second)); !r.Dup || r.Seq != first.Seq {
		t.Fatalf("inside the window: %+v, want Dup of %+v", r, first)
	}
	if !b.NeedsExpiry() {
		t.Fatal("NeedsExpiry false with another handle's msgID in the table")
	}
	later := now.Add(DedupWindow + time.Second)
	if _, err := b.Expire(later); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.(*sqliteStream).conn.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM msgids`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d msgids left after the window", n)
	}
	if r := writeOne(t, b, WriteOp{MsgID: "X", Value: []byte("v")}, later); r.Dup || r.Seq == first.Seq {
		t.Fatalf("after the window: %+v, want a new write", r)
	}
}

// TestSharedFileInventory: an inventory answers what the file holds, not
// what this handle last wrote, once another handle wrote to it: its count,
// bytes, seq and limits; the config another handle stored is this one's too.
func TestSharedFileInventory(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := openShared(t, now)
	writeOne(t, b, WriteOp{Value: []byte("b1")}, now)
	for _, v := range []string{"a1", "a2"} {
		writeOne(t, a, WriteOp{Value: []byte(v)}, now)
	}
	if _, _, err := a.Delete(persist.Delete{Seqs: []uint64{1}}, now); err != nil {
		t.Fatal(err)
	}
	cfg := a.Config()
	cfg.MaxMsgs = 50
	cfg.Sync = true
	if _, _, err := a.SetConfig(cfg, now); err != nil {
		t.Fatal(err)
	}
	want, err := a.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 2 || got.Seq != 3 || got.Bytes != want.Bytes || got.Limits.MaxMsgs != 50 {
		t.Fatalf("b's inventory %+v (limits %+v), want %+v (limits %+v)", got, got.Limits, want, want.Limits)
	}
	if c := b.Config(); c.MaxMsgs != 50 || !c.Sync {
		t.Fatalf("b's config after a's update: %+v, want max_msgs 50 and sync", c)
	}
	// b's commits follow the sync mode a set.
	var mode int
	if err := b.(*sqliteStream).conn.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 { // FULL
		t.Fatalf("b's synchronous is %d after a's sync config, want 2 (FULL)", mode)
	}
}

func inventory(t *testing.T, s Stream) persist.Inventory {
	t.Helper()
	inv, err := s.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestSharedFileTimeNeverDecreases: times never decrease along seq (the
// max_age expiry and the rate window rely on it), also when another handle
// on the same file wrote a row with a later time than this handle's clock.
// (Was: Write clamped its time to the handle's lastTime before begin
// reloaded it from the file, so the other handle's later time was not seen.)
func TestSharedFileTimeNeverDecreases(t *testing.T) {
	base := time.UnixMilli(1_000_000)
	a, b := openShared(t, base)
	// b's clock runs 10 s ahead of a's.
	writeOne(t, b, WriteOp{Value: []byte("from b")}, base.Add(10*time.Second))
	r := writeOne(t, a, WriteOp{Value: []byte("from a")}, base.Add(1*time.Second))
	m1, err := a.Get(1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Time < m1.Time {
		t.Fatalf("seq %d time %d is before seq 1's time %d: times decrease along seq", r.Seq, r.Time, m1.Time)
	}
}

// TestSharedFileMaxAgeAfterForeignWrite: the consequence of the above: no
// row past max_age stays. (Was: one did, because the expiry, walking seq,
// stopped at the first (younger) row the other handle wrote.)
func TestSharedFileMaxAgeAfterForeignWrite(t *testing.T) {
	base := time.UnixMilli(1_000_000)
	a, b := openShared(t, base)
	age := 5 * time.Second
	cfg := persist.DefaultConfig()
	cfg.MaxAge = age
	if _, _, err := a.SetConfig(cfg, base); err != nil {
		t.Fatal(err)
	}
	writeOne(t, b, WriteOp{Value: []byte("from b")}, base.Add(10*time.Second)) // seq 1 at +10s
	writeOne(t, a, WriteOp{Value: []byte("from a")}, base.Add(1*time.Second))  // seq 2
	// At +14s: by seq 2's stored time it is 13 s old, past max_age 5 s,
	// while seq 1 (4 s old) stays. Either seq 2 carries a time not below
	// seq 1's (and stays, as young as seq 1), or it must go now.
	if _, err := a.Expire(base.Add(14 * time.Second)); err != nil {
		t.Fatal(err)
	}
	m2, err := a.Get(2)
	if err != nil {
		return // removed: max_age enforced
	}
	if now := base.Add(14 * time.Second).UnixMilli(); now-m2.Time >= age.Milliseconds() {
		t.Fatalf("seq 2 (time %d) is %d ms old at %d, past max_age %v, and was not expired", m2.Time, now-m2.Time, now, age)
	}
}

// TestSharedFileExpireSeesForeignTTL: a handle's Expire removes messages
// past their TTL also when another handle sharing the file wrote them (and
// went away: the scope moved). (Was: Expire decided whether it had work
// from the handle's ttlRows and config before reloading them, and did
// nothing.)
func TestSharedFileExpireSeesForeignTTL(t *testing.T) {
	base := time.UnixMilli(1_000_000)
	a, b := openShared(t, base)
	cfg := persist.DefaultConfig()
	cfg.AllowMsgTTL = true
	if _, _, err := b.SetConfig(cfg, base); err != nil {
		t.Fatal(err)
	}
	writeOne(t, b, WriteOp{Key: "k", Value: []byte("v"), TTL: 1000}, base)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ch, err := a.Expire(base.Add(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetKey("k"); err == nil {
		t.Fatalf("key k (TTL 1 s, written at %d) still there after Expire at +5 s (changes %v, NeedsExpiry %v)", base.UnixMilli(), ch, a.NeedsExpiry())
	}
}

// TestSharedFileExpireSeesForeignMaxAge: the same for a max_age another
// handle set.
func TestSharedFileExpireSeesForeignMaxAge(t *testing.T) {
	base := time.UnixMilli(1_000_000)
	a, b := openShared(t, base)
	writeOne(t, b, WriteOp{Value: []byte("v")}, base)
	cfg := persist.DefaultConfig()
	cfg.MaxAge = 2 * time.Second
	if _, _, err := b.SetConfig(cfg, base); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ch, err := a.Expire(base.Add(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(1); err == nil {
		t.Fatalf("seq 1 (written at %d) still there after Expire at +5 s with max_age 2 s (changes %v, NeedsExpiry %v)", base.UnixMilli(), ch, a.NeedsExpiry())
	}
}

// TestSharedFileReadLearnsForeignTTL: a handle that only reads a file
// another handle writes learns of that handle's TTL rows at each kind of
// read, so NeedsExpiry asks the expiry timer for a visit, which removes
// them once their TTL has passed.
// (Was: only a write (or inventory, config, Expire) reloaded them: a stream only read on this server never asked for expiry, and once the writer went away its expired rows were answered for good.)
func TestSharedFileReadLearnsForeignTTL(t *testing.T) {
	t.Parallel()
	for name, read := range map[string]func(Stream) error{
		"get":    func(s Stream) error { _, err := s.Get(1); return err },
		"getKey": func(s Stream) error { _, err := s.GetKey("k"); return err },
		"getAll": func(s Stream) error {
			_, err := s.GetAll(1, 0, 0, func(*persist.Frame) error { return nil })
			return err
		},
		"keys": func(s Stream) error { _, err := s.Keys(0); return err },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base := time.UnixMilli(1_000_000)
			a, b := openShared(t, base)
			cfg := persist.DefaultConfig()
			cfg.AllowMsgTTL = true
			if _, _, err := b.SetConfig(cfg, base); err != nil {
				t.Fatal(err)
			}
			writeOne(t, b, WriteOp{Key: "k", Value: []byte("v"), TTL: 1000}, base)
			if err := b.Close(); err != nil { // the writer went away (the scope moved)
				t.Fatal(err)
			}
			if err := read(a); err != nil {
				t.Fatal(err)
			}
			if !a.NeedsExpiry() {
				t.Fatalf("after a %s of the file holding another handle's TTL row, NeedsExpiry is false: the expiry timer never visits the stream", name)
			}
			if _, err := a.Expire(base.Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.GetKey("k"); persist.CodeOf(err) != persist.CodeNotFound {
				t.Fatalf("key k (TTL 1 s) after the expiry at +5 s: %v, want not-found", err)
			}
		})
	}
}
