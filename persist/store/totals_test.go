package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// bigStream is a closed stream "s" of scope "hub" in a new directory with
// TotalsMinRows+100 rows, some keyed, some with a TTL (so every total is
// non-zero), and the path of its file.
func bigStream(t *testing.T) (dir, path string, now time.Time, want persist.Inventory) {
	t.Helper()
	dir = t.TempDir()
	now = time.Now()
	s, err := NewSQLite(SQLiteConfig{Dir: dir}).Open("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	cfg := persist.DefaultConfig()
	cfg.AllowMsgTTL = true
	if _, _, err := s.SetConfig(cfg, now); err != nil {
		t.Fatal(err)
	}
	ops := make([]WriteOp, TotalsMinRows+100)
	for i := range ops {
		ops[i].Value = []byte("value " + strconv.Itoa(i))
		if i%3 == 0 {
			ops[i].Key = "k" + strconv.Itoa(i)
		}
		if i%10 == 0 {
			ops[i].TTL = time.Hour.Milliseconds()
		}
	}
	res, _, err := s.Write(ops, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	want = totalsOf(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if path, err = StreamPath(dir, "hub", "s"); err != nil {
		t.Fatal(err)
	}
	return dir, path, now, want
}

// totalsOf is s's inventory without its limits, to compare.
func totalsOf(t *testing.T, s Stream) persist.Inventory {
	t.Helper()
	inv := inventory(t, s)
	inv.Limits = nil
	return inv
}

// keptTotals is meta 'totals' of the closed stream file p, "" if none.
func keptTotals(t *testing.T, p string) string {
	t.Helper()
	db := rawDB(t, p)
	defer db.Close()
	var v []byte
	err := db.QueryRow(`SELECT v FROM meta WHERE k = 'totals'`).Scan(&v)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// rawDB opens the stream file p as another program would: no persist code,
// the file's triggers on.
func rawDB(t *testing.T, p string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+p+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

func rawExec(t *testing.T, p, q string, args ...any) {
	t.Helper()
	db := rawDB(t, p)
	defer db.Close()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

func reopen(t *testing.T, dir string, now time.Time) Stream {
	t.Helper()
	s, err := NewSQLite(SQLiteConfig{Dir: dir}).OpenExisting("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKeptTotalsSpareTheCount: a large stream's close keeps its totals in
// the file and the next open takes them from there instead of counting the
// rows. The proof is a file whose kept totals were changed behind the
// stream's back (with its last seq left right): the open reports them.
func TestKeptTotalsSpareTheCount(t *testing.T) {
	t.Parallel()
	dir, p, now, want := bigStream(t)
	kept := keptTotals(t, p)
	if kept != (totals{want.Count, want.Bytes, (TotalsMinRows + 100 + 9) / 10, want.Seq}).encode() {
		t.Fatalf("kept totals %q, want those of %+v", kept, want)
	}
	s := reopen(t, dir, now)
	if got := totalsOf(t, s); got != want {
		t.Fatalf("reopened: %+v, want %+v", got, want)
	}
	s.Close()

	rawExec(t, p, `UPDATE meta SET v = ? WHERE k = 'totals'`, totals{7, 70, 0, want.Seq}.encode())
	s = reopen(t, dir, now)
	defer s.Close()
	if got := totalsOf(t, s); got.Count != 7 || got.Bytes != 70 {
		t.Fatalf("the open counted the rows (%+v) instead of taking the kept totals 7 and 70", got)
	}
}

// TestKeptTotalsWhenTheRowsChanged: kept totals are not trusted once the
// rows changed after they were kept, whoever changed them: another program
// deleting or updating a row (the file's triggers drop them), inserting one
// (the last seq moved), and this build's own writes followed by a crash,
// which leaves no close to keep new ones. Every reopen reports the rows.
func TestKeptTotalsWhenTheRowsChanged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir, p string, now time.Time) (string, int64) // the file to open, and the change in count
	}{
		{"another program deletes", func(t *testing.T, dir, p string, now time.Time) (string, int64) {
			rawExec(t, p, `DELETE FROM messages WHERE seq = 5`)
			return dir, -1
		}},
		{"another program updates", func(t *testing.T, dir, p string, now time.Time) (string, int64) {
			rawExec(t, p, `UPDATE messages SET size = size + 1000 WHERE seq = 5`)
			return dir, 0
		}},
		{"another program inserts", func(t *testing.T, dir, p string, now time.Time) (string, int64) {
			rawExec(t, p, `INSERT INTO messages(seq, time, raw, size) VALUES((SELECT MAX(seq) + 1 FROM messages), ?, x'00', 1)`, now.UnixMilli())
			return dir, 1
		}},
		{"a crash after a write", func(t *testing.T, dir, p string, now time.Time) (string, int64) {
			s := reopen(t, dir, now)
			defer s.Close()
			writeN(t, s, 1, now)
			return crashCopy(t, p), 1
		}},
		{"a crash after a delete", func(t *testing.T, dir, p string, now time.Time) (string, int64) {
			s := reopen(t, dir, now)
			defer s.Close()
			if _, _, err := s.Delete(persist.Delete{Seqs: []uint64{5, 6}}, now); err != nil {
				t.Fatal(err)
			}
			return crashCopy(t, p), -2
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, p, now, want := bigStream(t)
			if keptTotals(t, p) == "" {
				t.Fatal("no totals kept")
			}
			from, dCount := tc.change(t, dir, p, now)
			s := reopen(t, from, now)
			defer s.Close()
			got := totalsOf(t, s)
			rows := int64(rows(t, s))
			if got.Count != rows || got.Count != want.Count+dCount {
				t.Fatalf("count %d, want %d (%d rows)", got.Count, want.Count+dCount, rows)
			}
			if tc.name == "another program updates" && got.Bytes != want.Bytes+1000 {
				t.Fatalf("bytes %d after the update, want %d", got.Bytes, want.Bytes+1000)
			}
		})
	}
}

// crashCopy copies the stream file p and its WAL, as they are while the
// stream is open, into a new directory laid out as the store's: what a
// crash leaves.
func crashCopy(t *testing.T, p string) string {
	t.Helper()
	dir := t.TempDir()
	q, err := StreamPath(dir, "hub", "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(q), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(p + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(q+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestKeptTotalsReadOnlyOpenWritesNothing: reopening a stream whose file
// keeps current totals, reading it and closing it writes nothing (an open
// that only reads costs no write, as for a small stream). The close is a
// quick one, which leaves the WAL in place: it must be empty.
func TestKeptTotalsReadOnlyOpenWritesNothing(t *testing.T) {
	t.Parallel()
	dir, p, now, _ := bigStream(t)
	s := reopen(t, dir, now)
	if _, err := s.Get(1); err != nil {
		t.Fatal(err)
	}
	kept, err := s.(QuickCloser).CloseQuick()
	if err != nil {
		t.Fatal(err)
	}
	if !kept {
		t.Fatal("the quick close left no WAL to look at")
	}
	fi, err := os.Stat(p + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Fatalf("the WAL holds %d bytes after an open, a read and a close, want 0", fi.Size())
	}
}

// TestKeptTotalsSharedFile: two handles on one file (sqlite_shared.go).
// One writes and keeps its totals at its close; the other, which opened
// before and never looked since, must neither keep its stale ones at its
// own close nor, once it writes, keep totals that miss the first's rows,
// nor, closing after the first only deleted rows (no new seq to give the
// stale totals away), keep totals that still count them.
func TestKeptTotalsSharedFile(t *testing.T) {
	t.Parallel()
	dir, p, now, want := bigStream(t)
	a := reopen(t, dir, now)
	b := reopen(t, dir, now)
	writeN(t, b, 2, now)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // a knows nothing of b's rows
		t.Fatal(err)
	}
	s := reopen(t, dir, now)
	if got := totalsOf(t, s); got.Count != want.Count+2 {
		t.Fatalf("after a stale handle closed: count %d, want %d", got.Count, want.Count+2)
	}
	s.Close()

	a = reopen(t, dir, now)
	b = reopen(t, dir, now)
	writeN(t, b, 3, now)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	writeN(t, a, 1, now) // sees b's commit first
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if keptTotals(t, p) == "" {
		t.Fatal("no totals kept")
	}
	s = reopen(t, dir, now)
	if got := totalsOf(t, s); got.Count != want.Count+6 || int64(rows(t, s)) != got.Count {
		t.Fatalf("count %d, want %d", got.Count, want.Count+6)
	}
	s.Close()

	// b only deletes, so the last seq a knows stays the file's: a's close
	// must reload the totals before it keeps them.
	a = reopen(t, dir, now)
	writeN(t, a, 1, now)
	b = reopen(t, dir, now)
	if _, _, err := b.Delete(persist.Delete{Seqs: []uint64{5, 6, 7}}, now); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, dir, now)
	defer s.Close()
	if got := totalsOf(t, s); got.Count != want.Count+4 || int64(rows(t, s)) != got.Count {
		t.Fatalf("after the other handle's deletes: count %d, want %d", got.Count, want.Count+4)
	}
}

func TestParseTotals(t *testing.T) {
	t.Parallel()
	want := totals{1, 2, 3, 4}
	if got, ok := parseTotals([]byte(want.encode())); !ok || got != want {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
	for _, bad := range []string{"", "1 2 3", "1 2 3 4 5", "-1 2 3 4", "1 2 3 x", "1 2 3 -4"} {
		if _, ok := parseTotals([]byte(bad)); ok {
			t.Errorf("parseTotals(%q) accepted", bad)
		}
	}
}

// BenchmarkStoreWriteKeyedKeptTotals is BenchmarkStoreWriteKeyed on a
// stream large enough to keep its totals, reopened after a clean close:
// with the triggers that guard the kept totals (each replaced row's delete
// runs one), and with them dropped, as before kept totals. ns/op is per
// keyed set, one a commit.
func BenchmarkStoreWriteKeyedKeptTotals(b *testing.B) {
	for _, tc := range []struct {
		name     string
		triggers bool
	}{{"triggers", true}, {"none", false}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			now := time.Now()
			st := NewSQLite(SQLiteConfig{Dir: dir, Exclusive: true})
			s, err := st.Open("bench", "s", now)
			if err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 128)
			ops := make([]WriteOp, TotalsMinRows+1000)
			for i := range ops {
				ops[i] = WriteOp{Key: "k" + strconv.Itoa(i), Value: value}
			}
			if _, _, err := s.Write(ops, now); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			if !tc.triggers {
				p, err := StreamPath(dir, "bench", "s")
				if err != nil {
					b.Fatal(err)
				}
				db, err := sql.Open("sqlite", "file:"+p)
				if err != nil {
					b.Fatal(err)
				}
				_, err = db.Exec(`DROP TRIGGER totals_stale_delete; DROP TRIGGER totals_stale_update`)
				db.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			if s, err = st.Open("bench", "s", now); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			i := 0
			for b.Loop() {
				ops := []WriteOp{{Key: "k" + strconv.Itoa(i%1000), Value: value}}
				if _, _, err := s.Write(ops, time.Now()); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
