package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// schemaV1 is the schema verbatim as the builds before lazy tables created
// it in every stream file (user_version 1): the file these tests call old.
const schemaV1 = `
CREATE TABLE IF NOT EXISTS messages(
	seq     INTEGER PRIMARY KEY,
	key     TEXT,
	time    INTEGER NOT NULL,
	headers BLOB,
	enc     INTEGER NOT NULL DEFAULT 0,
	raw     BLOB,
	size    INTEGER NOT NULL,
	ttl     INTEGER,
	expires INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_key ON messages(key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_expires ON messages(expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS msgids(id TEXT PRIMARY KEY, seq INTEGER NOT NULL, time INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS msgids_time ON msgids(time);
CREATE TABLE IF NOT EXISTS delids(id TEXT PRIMARY KEY, seqs BLOB NOT NULL, time INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS delids_time ON delids(time);
`

// allBtrees are the b-trees of a file of schemaV1, sorted.
var allBtrees = []string{"delids", "delids_time", "messages", "messages_expires", "messages_key", "meta", "msgids", "msgids_time"}

// coreBtrees are the b-trees of a new file before any lazy one, sorted.
var coreBtrees = []string{"messages", "messages_key", "meta"}

// fullSchemaStream makes, in a new data directory, the file of stream "s"
// of scope "hub" as a build before lazy tables did (2 KiB pages,
// auto_vacuum=INCREMENTAL, WAL, schemaV1, the name, version 1), and
// returns the storage of that directory and the file.
func fullSchemaStream(t *testing.T) (*SQLite, string) {
	t.Helper()
	dir := t.TempDir()
	p, err := StreamPath(dir, "hub", "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", fileURI(p))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{`PRAGMA page_size = 2048`, `PRAGMA auto_vacuum = INCREMENTAL`, `PRAGMA journal_mode = WAL`, schemaV1,
		`INSERT INTO meta(k, v) VALUES('name', 's'), ('scope', 'hub')`, `PRAGMA user_version = 1`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return NewSQLite(SQLiteConfig{Dir: dir}), p
}

// fileBtrees is the sorted names of the b-trees (tables and indexes with a
// root page) in the file p, its page count and user_version, read by a
// connection of its own.
func fileBtrees(t *testing.T, p string) (names []string, pages, version int) {
	t.Helper()
	db, err := sql.Open("sqlite", fileURI(p)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE rootpage > 0 ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	return names, pages, version
}

// TestNewFileCoreOnly: a new stream of a few keys holds the b-trees it uses
// and nothing else (no msgids, delids, expiry index, sqlite_sequence): its
// file is the header page, the pointer map and one page per b-tree.
func TestNewFileCoreOnly(t *testing.T) {
	t.Parallel()
	st, p, _ := closedStream(t, 0)
	s, err := st.Open("hub", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		writeOne(t, s, WriteOp{Key: k, Value: []byte("v")}, time.Now())
	}
	if got := s.(*sqliteStream).lazy; got != 0 {
		t.Fatalf("lazy tables %b on a stream that used none", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, pages, version := fileBtrees(t, p)
	if !slices.Equal(names, coreBtrees) {
		t.Fatalf("b-trees %v, want %v", names, coreBtrees)
	}
	if want := 2 + len(coreBtrees); pages != want {
		t.Fatalf("%d pages, want %d", pages, want)
	}
	if version != lazySchemaVersion {
		t.Fatalf("user_version %d, want %d", version, lazySchemaVersion)
	}
}

// TestLazyTablesOnFirstUse: each feature's b-trees appear with its first
// use, and only they; after a reopen the feature answers as it did (a
// retried write or delete is a duplicate, a TTL expires).
func TestLazyTablesOnFirstUse(t *testing.T) {
	t.Parallel()
	type check func(t *testing.T, s Stream, now time.Time)
	cases := []struct {
		name  string
		trees []string
		use   check // first use, at now
		after check // after a reopen
	}{
		{"msgid", []string{"msgids", "msgids_time"},
			func(t *testing.T, s Stream, now time.Time) {
				writeOne(t, s, WriteOp{Key: "k", MsgID: "m", Value: []byte("v")}, now)
			},
			func(t *testing.T, s Stream, now time.Time) {
				r, _, err := s.Write([]WriteOp{{Key: "k", MsgID: "m", Value: []byte("v")}}, now)
				if err != nil || !r[0].Dup || r[0].Seq != 1 {
					t.Fatalf("retry after reopen: %+v, %v; want Dup of seq 1", r, err)
				}
			}},
		{"delete id", []string{"delids", "delids_time"},
			func(t *testing.T, s Stream, now time.Time) {
				writeN(t, s, 2, now)
				r, _, err := s.Delete(persist.Delete{Seqs: []uint64{1}, MsgID: "d"}, now)
				if err != nil || !slices.Equal(r.Seqs, []uint64{1}) {
					t.Fatalf("delete: %+v, %v", r, err)
				}
			},
			func(t *testing.T, s Stream, now time.Time) {
				r, _, err := s.Delete(persist.Delete{All: true, MsgID: "d"}, now)
				if err != nil || !r.Dup || !slices.Equal(r.Seqs, []uint64{1}) {
					t.Fatalf("retry after reopen: %+v, %v; want Dup of [1]", r, err)
				}
				if n := rows(t, s); n != 1 {
					t.Fatalf("%d rows after the retry, want 1", n)
				}
			}},
		{"ttl", []string{"messages_expires"},
			func(t *testing.T, s Stream, now time.Time) {
				c := s.Config()
				c.AllowMsgTTL = true
				if _, _, err := s.SetConfig(c, now); err != nil {
					t.Fatal(err)
				}
				writeOne(t, s, WriteOp{Key: "k", TTL: 1000, Value: []byte("v")}, now)
				writeOne(t, s, WriteOp{Key: "l", Value: []byte("v")}, now)
			},
			func(t *testing.T, s Stream, now time.Time) {
				if !s.NeedsExpiry() {
					t.Fatal("NeedsExpiry false with a TTL row")
				}
				changes, err := s.Expire(now.Add(2 * time.Second))
				if err != nil || len(changes) != 1 || !slices.Equal(changes[0].Seqs, []uint64{1}) {
					t.Fatalf("expire: %+v, %v; want seq 1", changes, err)
				}
				if n := rows(t, s); n != 1 {
					t.Fatalf("%d rows after expiry, want 1", n)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, p, now := closedStream(t, 0)
			s, err := st.Open("hub", "s", now)
			if err != nil {
				t.Fatal(err)
			}
			tc.use(t, s, now)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(coreBtrees), tc.trees...)))
			if names, _, _ := fileBtrees(t, p); !slices.Equal(names, want) {
				t.Fatalf("b-trees %v, want %v", names, want)
			}
			s, err = st.OpenExisting("hub", "s", now)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tc.after(t, s, now.Add(time.Second))
		})
	}
}

// TestLazyTablesRollback: a transaction that created a lazy table and then
// failed leaves neither the table nor the handle's belief in it; the next
// use creates it.
func TestLazyTablesRollback(t *testing.T) {
	t.Parallel()
	st, p, now := closedStream(t, 0)
	s, err := st.Open("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ss := s.(*sqliteStream)
	// A row of value "fail" cannot be inserted, so the write's last op
	// fails after the first one's msgID made msgids.
	if _, err := ss.conn.ExecContext(t.Context(), `CREATE TRIGGER fail BEFORE INSERT ON messages WHEN NEW.raw = CAST('fail' AS BLOB) BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{MsgID: "m", Value: []byte("v")}, {Value: []byte("fail")}}, now); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("write: %v, want the trigger's error", err)
	}
	if ss.lazy != 0 {
		t.Fatalf("lazy tables %b after the rollback", ss.lazy)
	}
	if names, _, _ := fileBtrees(t, p); !slices.Equal(names, coreBtrees) {
		t.Fatalf("b-trees %v after the rollback, want %v", names, coreBtrees)
	}
	first := writeOne(t, s, WriteOp{MsgID: "m", Value: []byte("v")}, now)
	if first.Dup {
		t.Fatalf("write after the rollback: %+v, want a new write", first)
	}
	if r := writeOne(t, s, WriteOp{MsgID: "m", Value: []byte("v")}, now); !r.Dup || r.Seq != first.Seq {
		t.Fatalf("retry: %+v, want Dup of %+v", r, first)
	}
}

// TestLazyTablesOldFile: a file made before lazy tables (every b-tree,
// version 1) opens knowing it has them all, works for msgIDs, delete ids
// and TTLs across a reopen, and keeps its schema and version.
func TestLazyTablesOldFile(t *testing.T) {
	t.Parallel()
	now := time.Now()
	st, p := fullSchemaStream(t)
	s, err := st.OpenExisting("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(*sqliteStream).lazy; got != lazyAll {
		t.Fatalf("lazy tables %b on an old file, want %b", got, lazyAll)
	}
	c := s.Config()
	c.AllowMsgTTL = true
	if _, _, err := s.SetConfig(c, now); err != nil {
		t.Fatal(err)
	}
	first := writeOne(t, s, WriteOp{Key: "k", MsgID: "m", Value: []byte("v")}, now)
	writeOne(t, s, WriteOp{Key: "t", TTL: 10_000, Value: []byte("v")}, now)
	if r, _, err := s.Delete(persist.Delete{Seqs: []uint64{first.Seq}, MsgID: "d"}, now); err != nil || !slices.Equal(r.Seqs, []uint64{first.Seq}) {
		t.Fatalf("delete: %+v, %v", r, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = st.OpenExisting("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	later := now.Add(time.Second)
	if r := writeOne(t, s, WriteOp{Key: "k", MsgID: "m", Value: []byte("v")}, later); !r.Dup || r.Seq != first.Seq {
		t.Fatalf("msgID retry: %+v, want Dup of %+v", r, first)
	}
	if r, _, err := s.Delete(persist.Delete{All: true, MsgID: "d"}, later); err != nil || !r.Dup || !slices.Equal(r.Seqs, []uint64{first.Seq}) {
		t.Fatalf("delete retry: %+v, %v", r, err)
	}
	if changes, err := s.Expire(now.Add(20 * time.Second)); err != nil || len(changes) != 1 {
		t.Fatalf("expire: %+v, %v; want the TTL row", changes, err)
	}
	names, _, version := fileBtrees(t, p)
	if !slices.Equal(names, allBtrees) || version != fullSchemaVersion {
		t.Fatalf("old file now has b-trees %v at version %d, want %v at %d", names, version, allBtrees, fullSchemaVersion)
	}
}

// TestLazyTablesShared: two handles on one new file (two servers that both
// believe they own its scope) both start without lazy tables; what one
// creates and stores, the other sees at its next transaction: a retried
// write or delete is a duplicate there, a TTL row is counted and expired
// there.
func TestLazyTablesShared(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := openShared(t, now)
	if _, err := b.Inventory(); err != nil { // b has served the stream
		t.Fatal(err)
	}
	c := a.Config()
	c.AllowMsgTTL = true
	if _, _, err := a.SetConfig(c, now); err != nil {
		t.Fatal(err)
	}
	first := writeOne(t, a, WriteOp{Key: "k", MsgID: "m", Value: []byte("v")}, now)
	ttl := writeOne(t, a, WriteOp{Key: "t", TTL: 1000, Value: []byte("v")}, now)
	del, _, err := a.Delete(persist.Delete{Seqs: []uint64{first.Seq}, MsgID: "d"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if r := writeOne(t, b, WriteOp{Key: "k", MsgID: "m", Value: []byte("v")}, now); !r.Dup || r.Seq != first.Seq {
		t.Fatalf("msgID retry through b: %+v, want Dup of %+v", r, first)
	}
	if r, _, err := b.Delete(persist.Delete{All: true, MsgID: "d"}, now); err != nil || !r.Dup || !slices.Equal(r.Seqs, del.Seqs) {
		t.Fatalf("delete retry through b: %+v, %v; want Dup of %v", r, err, del.Seqs)
	}
	if got := b.(*sqliteStream).lazy; got != lazyAll {
		t.Fatalf("b knows lazy tables %b, want %b", got, lazyAll)
	}
	if !b.NeedsExpiry() {
		t.Fatal("b: NeedsExpiry false with a's TTL row in the file")
	}
	changes, err := b.Expire(now.Add(2 * time.Second))
	if err != nil || len(changes) != 1 || !slices.Equal(changes[0].Seqs, []uint64{ttl.Seq}) {
		t.Fatalf("b: expire %+v, %v; want seq %d", changes, err, ttl.Seq)
	}
}

// TestLazyTableCreatedMeanwhile: a handle that believes a lazy table missing
// when another connection made it (here forced: its belief cleared after
// the other's commit was seen) creates nothing twice and fails nothing.
func TestLazyTableCreatedMeanwhile(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := openShared(t, now)
	writeOne(t, a, WriteOp{MsgID: "m", Value: []byte("v")}, now)
	if _, err := b.Inventory(); err != nil { // b sees a's commit
		t.Fatal(err)
	}
	bs := b.(*sqliteStream)
	bs.lazy = 0
	if r := writeOne(t, b, WriteOp{MsgID: "n", Value: []byte("w")}, now); r.Dup {
		t.Fatalf("write through b: %+v", r)
	}
	if bs.lazy != lazyMsgIDs {
		t.Fatalf("b knows lazy tables %b, want %b", bs.lazy, lazyMsgIDs)
	}
	if r := writeOne(t, a, WriteOp{MsgID: "n", Value: []byte("w")}, now); !r.Dup {
		t.Fatalf("retry of b's msgID through a: %+v, want Dup", r)
	}
}

// TestMemoryStreamLazy: an ephemeral stream's database starts with the
// core b-trees too, and gets the others on first use.
func TestMemoryStreamLazy(t *testing.T) {
	t.Parallel()
	now := time.Now()
	s, err := NewMemory().Open("hub", "m", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ss := s.(*sqliteStream)
	if ss.lazy != 0 {
		t.Fatalf("lazy tables %b in a new memory stream", ss.lazy)
	}
	first := writeOne(t, s, WriteOp{MsgID: "m", Value: []byte("v")}, now)
	if r := writeOne(t, s, WriteOp{MsgID: "m", Value: []byte("v")}, now); !r.Dup || r.Seq != first.Seq {
		t.Fatalf("retry: %+v, want Dup of %+v", r, first)
	}
	var n int
	if err := ss.conn.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM sqlite_master WHERE name IN ('msgids', 'msgids_time', 'delids', 'messages_expires')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d lazy b-trees after a msgID, want 2 (msgids and its index)", n)
	}
}
