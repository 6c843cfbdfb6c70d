package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
)

// nearlyFull fills the small filesystem dir and then frees that many 4 KiB
// pages of the ballast, so that exactly that much space is left.
func nearlyFull(t *testing.T, dir string, pages int) {
	t.Helper()
	b := testdisk.Fill(t, dir)
	fi, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(b, fi.Size()-int64(pages)*4096); err != nil {
		t.Fatal(err)
	}
}

// TestOpenNearlyFullLeavesNoStreamFile: a new stream whose open fails on a
// nearly full disk (the template copy fits, the 32 KiB -shm does not)
// leaves no file behind. The empty -wal SQLite had made kept the template
// file, so the next walk found a stream nobody wrote.
func TestOpenNearlyFullLeavesNoStreamFile(t *testing.T) {
	dir := testdisk.Small(t, 1<<20)
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1})
	if err := os.Mkdir(filepath.Join(dir, "hub"), 0o755); err != nil {
		t.Fatal(err)
	}
	nearlyFull(t, dir, 6)
	s, err := st.Open("hub", "a", time.Now())
	if err == nil {
		s.Close()
		t.Fatal("open succeeded with 24 KiB free: the test no longer reaches the failure")
	}
	ents, rerr := os.ReadDir(filepath.Join(dir, "hub"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, e := range ents {
		t.Errorf("failed open (%v) left behind: %s", err, e.Name())
	}
	if ok, _ := st.HasStream("hub", "a"); ok {
		t.Errorf("HasStream reports the stream whose create failed")
	}
	if n, _ := st.ScanScope("hub", nil); n != 0 {
		t.Errorf("ScanScope counts %d streams after a failed create, want 0", n)
	}
}

// TestOpenNearlyFullIsFull: that open's failure is a full disk, which
// releases the reserve and puts the storage in its full state. SQLite says
// SQLITE_IOERR_SHMSIZE, which read as an I/O error.
func TestOpenNearlyFullIsFull(t *testing.T) {
	dir := testdisk.Small(t, 1<<20)
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: 64 << 10})
	now := time.Now()
	a, err := st.Open("hub", "a", now) // writes the reserve
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	nearlyFull(t, dir, 6)
	s, err := st.Open("hub", "b", now)
	if err == nil {
		s.Close()
		t.Fatal("open succeeded with 24 KiB free: the test no longer reaches the failure")
	}
	if d, ok := IsDiskError(err); !ok || d.Reason != ReasonFull {
		t.Errorf("open on a full disk: got %v, want a %q DiskError", err, ReasonFull)
	}
	if _, serr := os.Stat(filepath.Join(dir, reserveName)); serr == nil {
		t.Errorf("the reserve was not released after an open failed for want of space")
	}
	if !st.space.isFull() {
		t.Errorf("the storage did not enter the full state")
	}
}

// TestArchiveSameTimeStillBacksUp: a write made in the same file-time step
// as a backup reaches the archive at the next clean close. Equal times
// were taken for "in step", and the close skipped its backup.
func TestArchiveSameTimeStillBacksUp(t *testing.T) {
	now := time.Now()
	dir, archive := t.TempDir(), t.TempDir()
	s, err := NewSQLite(SQLiteConfig{Dir: dir, Archive: archive}).Open("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeOne(t, s, WriteOp{Value: []byte("first")}, now)
	if err := s.(Archiver).ArchiveNow(); err != nil {
		t.Fatal(err)
	}
	writeOne(t, s, WriteOp{Value: []byte("second")}, now) // acknowledged

	// SIGKILL now: the data directory and the archive as they are, copied
	// where the killed process no longer touches them.
	copyAs := func(from, toDir string, suffixes ...string) string {
		t.Helper()
		to, err := StreamPath(toDir, "hub", "s")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, sfx := range suffixes {
			b, err := os.ReadFile(from + sfx)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to+sfx, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return to
	}
	p, _ := StreamPath(dir, "hub", "s")
	ap, _ := StreamPath(archive, "hub", "s")
	dir2, archive2 := t.TempDir(), t.TempDir()
	q := copyAs(p, dir2, "", "-wal")
	aq := copyAs(ap, archive2, "")
	ai, err := os.Stat(ap)
	if err != nil {
		t.Fatal(err)
	}
	stamp := ai.ModTime() // the backup's stamp
	// The second write landed in the backup's clock tick.
	for _, f := range []string{aq, q, q + "-wal"} {
		if err := os.Chtimes(f, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}

	// The restart: the stream is read and the server stopped cleanly.
	st2 := NewSQLite(SQLiteConfig{Dir: dir2, Archive: archive2})
	s2, err := st2.OpenExisting("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	if n := rows(t, s2); n != 2 {
		t.Fatalf("restarted stream holds %d messages, want 2", n)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	// The data directory is lost: the archive must hold both writes.
	s3, err := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Archive: archive2}).OpenExisting("hub", "s", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if n := rows(t, s3); n != 2 {
		t.Fatalf("restored from the archive after a clean stop: %d messages, want 2 (the acknowledged second write is lost)", n)
	}
}
