package store

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"
)

// CloseQuick leaves the WAL, holding the commits, beside the database;
// the next open reads them back, and a full Close checkpoints them into the
// database and removes the -wal and -shm files.
func TestCloseQuickLeavesWAL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1})
	p, err := StreamPath(dir, "a", "s")
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Open("a", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k0", "k1", "k2"} {
		if _, _, err := s.Write([]WriteOp{{Key: k, Value: []byte("v-" + k)}}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	closeQuickKept(t, s)
	fi, err := os.Stat(p + "-wal")
	if err != nil || fi.Size() == 0 {
		t.Fatalf("after CloseQuick the -wal is %v (err %v): the close checkpointed", fi, err)
	}
	s, err = st.OpenExisting("a", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if inv, err := s.Inventory(); err != nil || inv.Count != 3 {
		t.Fatalf("reopened after CloseQuick: %+v (err %v), want 3 messages", inv, err)
	}
	if _, _, err := s.Write([]WriteOp{{Key: "k0", Value: []byte("again")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(p + suffix); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after Close %s is left (err %v)", suffix, err)
		}
	}
	s, err = st.OpenExisting("a", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.GetKey("k0")
	if err != nil {
		t.Fatal(err)
	}
	if inv, err := s.Inventory(); err != nil || string(m.Value) != "again" || inv.Count != 3 {
		t.Fatalf("k0 = %q, inventory %+v (err %v)", m.Value, inv, err)
	}
}

// New files get newFilePageSize pages, WAL mode and incremental vacuum.
func TestNewFilePageSize(t *testing.T) {
	t.Parallel()
	st := NewSQLite(SQLiteConfig{Dir: t.TempDir(), ReserveBytes: -1})
	s, err := st.Open("a", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ss := s.(*sqliteStream)
	var n, vacuum int
	var mode string
	if err := ss.conn.QueryRowContext(t.Context(), `PRAGMA auto_vacuum`).Scan(&vacuum); err != nil {
		t.Fatal(err)
	}
	if err := ss.conn.QueryRowContext(t.Context(), `PRAGMA page_size`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := ss.conn.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if n != newFilePageSize || mode != "wal" || vacuum != 2 {
		t.Fatalf("new file: page size %d, journal mode %q, auto_vacuum %d; want %d, wal, 2 (incremental)", n, mode, vacuum, newFilePageSize)
	}
}

// Compact leaves a quickly closed stream as a full close would: its WAL
// checkpointed into the database, -wal and -shm gone, the data intact; a
// missing stream stays missing.
func TestCompact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1})
	p, err := StreamPath(dir, "a", "s")
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Open("a", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Key: "k", Value: []byte("v")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	closeQuickKept(t, s)
	if err := st.Compact("a", "s"); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(p + suffix); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after Compact %s is left (err %v)", suffix, err)
		}
	}
	if err := st.Compact("a", "gone"); err != nil {
		t.Fatalf("Compact of a missing stream: %v", err)
	}
	if _, err := st.OpenExisting("a", "gone", time.Now()); !errors.Is(err, ErrNoStream) {
		t.Fatalf("after Compact of a missing stream, OpenExisting: %v", err)
	}
	s, err = st.OpenExisting("a", "s", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m, err := s.GetKey("k"); err != nil || string(m.Value) != "v" {
		t.Fatalf("after Compact k = %v (err %v)", m, err)
	}
}

// closeQuickKept closes s quickly and fails t unless its WAL was kept.
func closeQuickKept(t *testing.T, s Stream) {
	t.Helper()
	if kept, err := s.(QuickCloser).CloseQuick(); err != nil || !kept {
		t.Fatalf("CloseQuick: kept %v, err %v", kept, err)
	}
}
