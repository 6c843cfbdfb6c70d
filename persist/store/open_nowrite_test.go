package store

import (
	"database/sql"
	"os"
	"testing"
	"time"
)

// closedStream is the storage of a new directory holding the closed stream
// "s" of scope "hub" with n messages, and the stream's file.
func closedStream(t *testing.T, n int) (*SQLite, string, time.Time) {
	t.Helper()
	dir := t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir})
	now := time.Now()
	s, err := st.Open("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		writeN(t, s, n, now)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := StreamPath(dir, "hub", "s")
	if err != nil {
		t.Fatal(err)
	}
	return st, p, now
}

// TestReopenWritesNothing: opening an existing stream and reading it writes
// nothing to its file (no pragma, DDL or bookkeeping transaction), so an
// open costs no fsync; the WAL holds no frame until the first write.
func TestReopenWritesNothing(t *testing.T) {
	t.Parallel()
	st, p, now := closedStream(t, 3)
	s, err := st.OpenExisting("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(1); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Fatalf("the WAL holds %d bytes after an open and a read, want 0", fi.Size())
	}
}

// TestSchemaVersionStamped: a new file is stamped with the lazy schema's
// version; a file from before the schema version (0) gets its tables
// checked once (all of them, as before lazy tables) and is stamped, so
// later opens skip the DDL.
func TestSchemaVersionStamped(t *testing.T) {
	t.Parallel()
	_, p, now := closedStream(t, 0)
	version := func() int {
		t.Helper()
		db, err := sql.Open("sqlite", fileURI(p))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v int
		if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(); v != lazySchemaVersion {
		t.Fatalf("new file at user_version %d, want %d", v, lazySchemaVersion)
	}
	st, p := fullSchemaStream(t)
	db, err := sql.Open("sqlite", fileURI(p))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP INDEX msgids_time; PRAGMA user_version = 0`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := st.OpenExisting("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != fullSchemaVersion {
		t.Fatalf("old file at user_version %d after an open, want %d", v, fullSchemaVersion)
	}
	db, err = sql.Open("sqlite", fileURI(p))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'msgids_time'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("index msgids_time after the open of an old file: %d, %v", n, err)
	}
}
