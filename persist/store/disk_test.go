package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
	"github.com/switchyard-dev/switchyard/persist"
)

// noise is n bytes zstd cannot shrink, so every write costs its size on disk.
func noise(r *rand.ChaCha8, n int) []byte {
	b := make([]byte, n)
	_, _ = r.Read(b) // never fails
	return b
}

// wantDiskError fails t unless err is a *DiskError with reason.
func wantDiskError(t *testing.T, what string, err error, reason string) *DiskError {
	t.Helper()
	d, ok := IsDiskError(err)
	if !ok || d.Reason != reason {
		t.Fatalf("%s: got %v (%T), want a %q DiskError", what, err, err, reason)
	}
	return d
}

// emptyFiles lists the zero-byte stream files under dir.
func emptyFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, fileSuffix) {
			return err
		}
		if fi, err := e.Info(); err == nil && fi.Size() == 0 {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// footprint is what the stream file of name and its WAL take under dir.
func footprint(t *testing.T, dir, name string) int64 {
	t.Helper()
	p, err := StreamPath(dir, "hub", name)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range []string{p, p + "-wal"} {
		fi, err := os.Stat(f)
		switch {
		case err == nil:
			n += fi.Size()
		case !errors.Is(err, os.ErrNotExist):
			t.Fatal(err)
		}
	}
	return n
}

// TestDiskFull fills a 16 MiB filesystem through one stream (past SQLite's
// automatic checkpoint, so most rows are in the database file, not only in
// the WAL): the write that does not fit fails as disk full, later writes and
// new streams are refused without leaving empty files, every acknowledged
// message reads back, a delete of three quarters still runs and shrinks the file, and the
// space it frees lets writes and opens go on again on the same storage.
func TestDiskFull(t *testing.T) {
	// The reserve must hold what the WAL can (4 MiB before the automatic
	// checkpoint), as the default does.
	dir := testdisk.Small(t, 16<<20)
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: 9 << 19})
	now := time.Now()
	s, err := st.Open("hub", "a", now)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	r := rand.NewChaCha8([32]byte{1})
	var acked [][]byte // acked[i] is the value of seq i+1
	for {
		v := noise(r, 32<<10)
		res, _, err := s.Write([]WriteOp{{Value: v}}, now)
		if err != nil {
			wantDiskError(t, "write on a full disk", err, ReasonFull)
			break
		}
		if res[0].Seq != uint64(len(acked)+1) {
			t.Fatalf("seq %d, want %d", res[0].Seq, len(acked)+1)
		}
		acked = append(acked, v)
		if len(acked) > 1000 {
			t.Fatal("16 MiB took 32 MiB of writes: the filesystem is not limited")
		}
	}
	if len(acked) < 10 {
		t.Fatalf("only %d writes fit", len(acked))
	}
	_, _, err = s.Write([]WriteOp{{Value: []byte("x")}}, now)
	wantDiskError(t, "small write while full", err, ReasonFull)
	_, err = st.Open("hub", "b", now)
	wantDiskError(t, "open of a new stream while full", err, ReasonFull)
	if e := emptyFiles(t, dir); len(e) > 0 {
		t.Fatalf("empty stream files left: %v", e)
	}
	for i, v := range acked {
		m, err := s.Get(uint64(i + 1))
		if err != nil {
			t.Fatalf("get %d: %v", i+1, err)
		}
		if !bytes.Equal(m.Value, v) {
			t.Fatalf("seq %d: value differs", i+1)
		}
	}

	before := footprint(t, dir, "a")
	gone := uint64(len(acked) * 3 / 4) // leaves room for the reserve and as much again
	res, _, err := s.Delete(persist.Delete{UpTo: gone}, now)
	if err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	if len(res.Seqs) != int(gone) {
		t.Fatalf("deleted %d, want %d", len(res.Seqs), gone)
	}
	// The freed pages went back to the filesystem (checkpoint and
	// incremental vacuum), not only to the file's free list: the file and
	// its WAL hold little more than the messages left.
	deleted := int64(gone) * 32 << 10
	live := int64(len(acked)-int(gone)) * 32 << 10
	if after := footprint(t, dir, "a"); after > live+deleted/4 {
		t.Fatalf("stream file and WAL take %d bytes after deleting %d (%d before), for %d bytes of messages", after, deleted, before, live)
	}
	w, _, err := s.Write([]WriteOp{{Value: noise(r, 4000)}}, now)
	if err != nil {
		t.Fatalf("write after the delete freed space: %v", err)
	}
	if w[0].Seq != uint64(len(acked)+1) {
		t.Fatalf("seq after recovery %d, want %d", w[0].Seq, len(acked)+1)
	}
	b, err := st.Open("hub", "b", now)
	if err != nil {
		t.Fatalf("open after the delete freed space: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := s.Get(uint64(len(acked)))
	if err != nil || !bytes.Equal(m.Value, acked[len(acked)-1]) {
		t.Fatalf("last acknowledged message after recovery: %v", err)
	}
}

// TestDiskReadOnly opens a stream while its filesystem is read-only: the
// open or the first write fails as a DiskError that asks for a reopen, no
// file is created, and once the filesystem is writable a fresh open writes.
func TestDiskReadOnly(t *testing.T) {
	dir := testdisk.Small(t, 2<<20)
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: 256 << 10})
	now := time.Now()
	s, err := st.Open("hub", "a", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Value: []byte("before")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	testdisk.ReadOnly(t, dir, true)
	s, err = st.Open("hub", "a", now)
	if err == nil {
		_, _, err = s.Write([]WriteOp{{Value: []byte("during")}}, now)
		if cerr := s.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	var d *DiskError
	if !errors.As(err, &d) || !d.Reopen {
		t.Fatalf("write on a read-only filesystem: got %v, want a DiskError asking for a reopen", err)
	}
	_, err = st.Open("hub", "new", now)
	if _, ok := IsDiskError(err); !ok {
		t.Fatalf("open of a new stream on a read-only filesystem: got %v, want a DiskError", err)
	}
	testdisk.ReadOnly(t, dir, false)

	s, err = st.Open("hub", "a", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, _, err := s.Write([]WriteOp{{Value: []byte("after")}}, now)
	if err != nil {
		t.Fatalf("write once writable again: %v", err)
	}
	if res[0].Seq != 2 {
		t.Fatalf("seq %d, want 2", res[0].Seq)
	}
	if e := emptyFiles(t, dir); len(e) > 0 {
		t.Fatalf("empty stream files left: %v", e)
	}
}

// TestDiskFullOpenLeavesNoFile opens a new stream on a full filesystem with
// no reserve, so the open reaches SQLite: it fails as disk full and removes
// the empty file SQLite created.
func TestDiskFullOpenLeavesNoFile(t *testing.T) {
	dir := testdisk.Small(t, 1<<20)
	st := NewSQLite(SQLiteConfig{Dir: dir, ReserveBytes: -1})
	if err := os.Mkdir(filepath.Join(dir, "hub"), 0o755); err != nil {
		t.Fatal(err)
	}
	testdisk.Fill(t, dir)
	_, err := st.Open("hub", "a", time.Now())
	wantDiskError(t, "open on a full disk", err, ReasonFull)
	ents, err := os.ReadDir(filepath.Join(dir, "hub"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}
