package store

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// With Exclusive a stream's connection keeps its file locked while open
// and its WAL index in memory: no -shm appears, another connection cannot
// read the file (and StreamName says ErrInUse rather than wait), a quick
// close still leaves the WAL for the next open, and once closed the file
// is everyone's again.
func TestExclusiveStreamFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1, Exclusive: true})
	p, err := StreamPath(dir, "a", "s")
	if err != nil {
		t.Fatal(err)
	}
	file := p[strings.LastIndexByte(p, os.PathSeparator)+1:]
	for round := range 2 { // a new file, then one with a WAL left
		s, err := st.OpenExisting("a", "s", time.Now())
		if round == 0 {
			if !errors.Is(err, ErrNoStream) {
				t.Fatalf("OpenExisting of a new stream: %v", err)
			}
			s, err = st.Open("a", "s", time.Now())
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k0", "k1", "k2"} {
			if _, _, err := s.Write([]WriteOp{{Key: k, Value: []byte("v-" + k)}}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(p + "-shm"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("round %d: an exclusive stream has a -shm (err %v)", round, err)
		}
		if err := countRows(p, new(int)); err == nil || !strings.Contains(err.Error(), "locked") {
			t.Fatalf("round %d: another connection read the open stream's file (err %v)", round, err)
		}
		if _, err := st.StreamName("a", file); !errors.Is(err, ErrInUse) {
			t.Fatalf("round %d: StreamName of an open exclusive stream: %v, want ErrInUse", round, err)
		}
		// A second server on the directory (the scope's earlier owner
		// still holds the stream open) is told to retry, not failed.
		other := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1, Exclusive: true})
		other.busyMs = 20
		if o, err := other.OpenExisting("a", "s", time.Now()); persist.CodeOf(err) != persist.CodeUnavailable {
			if o != nil {
				o.Close()
			}
			t.Fatalf("round %d: a second exclusive open: %v, want unavailable", round, err)
		}
		if round == 0 {
			closeQuickKept(t, s)
			continue
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(p + suffix); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after Close %s is left (err %v)", suffix, err)
		}
	}
	var n int
	if err := countRows(p, &n); err != nil || n != 3 {
		t.Fatalf("closed: %d rows (err %v), want 3", n, err)
	}
	if name, err := st.StreamName("a", file); err != nil || name != "s" {
		t.Fatalf("StreamName of the closed stream: %q, %v", name, err)
	}
}

// countRows counts the messages of the stream file p through a connection
// of its own that does not wait for a lock.
func countRows(p string, n *int) error {
	db, err := sql.Open("sqlite", fileURI(p)+"?_pragma=busy_timeout(0)&mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	return db.QueryRow(`SELECT COUNT(*) FROM messages`).Scan(n)
}

// An archive copy restored over an older local file of an exclusive
// storage is switched to WAL after the locking mode is set (the DSN cannot
// say both in that order): a WAL file with no -shm like any other.
func TestExclusiveRestoresArchiveToWAL(t *testing.T) {
	t.Parallel()
	dir, archive := t.TempDir(), t.TempDir()
	now := time.Now()
	st := NewSQLite(SQLiteConfig{Dir: dir, Archive: archive, Exclusive: true})
	s, err := st.Open("hub", "kept", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Value: []byte("v")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // backs the stream up
		t.Fatal(err)
	}
	// The local file is older than the copy (a disk restored from an
	// old snapshot): the next open restores the copy over it.
	p, _ := StreamPath(dir, "hub", "kept")
	old := now.Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	s, err = st.OpenExisting("hub", "kept", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if inv := inventory(t, s); inv.Count != 1 {
		t.Fatalf("restored stream holds %d messages, want 1", inv.Count)
	}
	var mode string
	if err := s.(*sqliteStream).conn.QueryRowContext(context.Background(), `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("restored stream's journal mode %q (err %v), want wal", mode, err)
	}
	if _, _, err := s.Write([]WriteOp{{Value: []byte("w")}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p + "-shm"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the restored exclusive stream has a -shm (err %v)", err)
	}
}

// A directory a server without Exclusive left with WAL and -shm files
// (quick closes, or a crash) is cleaned by an exclusive storage's name
// read and compaction: the name is read without making a -shm, and the
// compaction checkpoints the WAL and removes the old -shm, which nothing
// in exclusive mode would use or remove.
func TestExclusiveCompactsSharedLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shared := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1})
	s, err := shared.Open("a", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Key: "k", Value: []byte("v")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	closeQuickKept(t, s)
	p, _ := StreamPath(dir, "a", "s")
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(p + suffix); err != nil {
			t.Fatalf("the shared storage's quick close left no %s: %v", suffix, err)
		}
	}
	excl := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1, Exclusive: true})
	if err := os.Remove(p + "-shm"); err != nil { // for a moment: does the name read make one?
		t.Fatal(err)
	}
	file := p[strings.LastIndexByte(p, os.PathSeparator)+1:]
	if name, err := excl.StreamName("a", file); err != nil || name != "s" {
		t.Fatalf("StreamName: %q, %v", name, err)
	}
	if _, err := os.Stat(p + "-shm"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an exclusive storage's name read made a -shm (err %v)", err)
	}
	// The leftover -shm of the shared run, back for the compaction.
	if err := os.WriteFile(p+"-shm", make([]byte, 32<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := excl.Compact("a", "s"); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(p + suffix); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after the exclusive compaction %s is left (err %v)", suffix, err)
		}
	}
	var n int
	if err := countRows(p, &n); err != nil || n != 1 {
		t.Fatalf("compacted: %d rows (err %v), want 1", n, err)
	}
}
