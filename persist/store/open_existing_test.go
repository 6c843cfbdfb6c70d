package store

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
)

// OpenExisting of a stream with no file creates nothing, not even the
// scope's directory; once Open created the stream, OpenExisting opens it.
func TestOpenExistingCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir})
	now := time.Now()
	for name, st := range map[string]Storage{"sqlite": st, "memory": NewMemory()} {
		s, err := st.OpenExisting("hub", "missing", now)
		if !errors.Is(err, ErrNoStream) {
			t.Fatalf("%s: OpenExisting of a missing stream: %v, %v; want ErrNoStream", name, s, err)
		}
	}
	if files := testdisk.Files(t, dir); len(files) != 0 {
		t.Fatalf("OpenExisting left %v", files)
	}
	s, err := st.Open("hub", "there", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Key: "k", Value: []byte("v")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = st.OpenExisting("hub", "there", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if inv := inventory(t, s); inv.Count != 1 {
		t.Fatalf("reopened stream holds %d messages, want 1", inv.Count)
	}
	if _, err := st.OpenExisting("hub", "missing", now); !errors.Is(err, ErrNoStream) {
		t.Fatalf("OpenExisting next to an existing stream: %v", err)
	}
}

// A stream whose only copy is in the archive exists: OpenExisting restores
// it. One in neither place leaves nothing in either.
func TestOpenExistingRestoresFromArchive(t *testing.T) {
	t.Parallel()
	archive := t.TempDir()
	now := time.Now()
	first := NewSQLite(SQLiteConfig{Dir: t.TempDir(), Archive: archive})
	s, err := first.Open("hub", "kept", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Value: []byte("v")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // backs the stream up
		t.Fatal(err)
	}
	archived := testdisk.Files(t, archive)

	dir := t.TempDir() // the data directory was lost
	st := NewSQLite(SQLiteConfig{Dir: dir, Archive: archive})
	if _, err := st.OpenExisting("hub", "never", now); !errors.Is(err, ErrNoStream) {
		t.Fatalf("OpenExisting of a stream in neither place: %v", err)
	}
	if files := testdisk.Files(t, dir); len(files) != 0 {
		t.Fatalf("data directory holds %v after a read of a missing stream", files)
	}
	if files := testdisk.Files(t, archive); len(files) != len(archived) {
		t.Fatalf("archive holds %v, want %v", files, archived)
	}
	s, err = st.OpenExisting("hub", "kept", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if inv := inventory(t, s); inv.Count != 1 {
		t.Fatalf("restored stream holds %d messages, want 1", inv.Count)
	}
}
