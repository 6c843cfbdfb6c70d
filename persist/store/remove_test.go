package store

import (
	"errors"
	"os"
	"testing"
	"time"
)

// Remove deletes a closed stream's file and its archive copy, so that the
// stream no longer exists (OpenExisting says so, and the archive does not
// bring it back); a new Open starts it over at seq 1. Removing a stream
// that does not exist, or one in Memory, is no error.
func TestRemove(t *testing.T) {
	t.Parallel()
	dir, archive := t.TempDir(), t.TempDir()
	st := NewSQLite(SQLiteConfig{Dir: dir, Archive: archive})
	now := time.Now()
	s, err := st.Open("hub", "gone", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Write([]WriteOp{{Value: []byte("a")}, {Value: []byte("b")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // backs it up to the archive
		t.Fatal(err)
	}
	p, _ := StreamPath(dir, "hub", "gone")
	ap, _ := StreamPath(archive, "hub", "gone")
	for _, f := range []string{p, ap} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("before Remove: %v", err)
		}
	}
	if err := st.Remove("hub", "gone"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{p, p + "-wal", p + "-shm", p + "-journal", ap} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after Remove: %s: %v, want it gone", f, err)
		}
	}
	if _, err := st.OpenExisting("hub", "gone", now); !errors.Is(err, ErrNoStream) {
		t.Fatalf("OpenExisting after Remove: %v, want ErrNoStream", err)
	}
	s, err = st.Open("hub", "gone", now)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := s.Write([]WriteOp{{Value: []byte("c")}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Seq != 1 {
		t.Fatalf("first write after Remove got seq %d, want 1", res[0].Seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove("hub", "never"); err != nil {
		t.Fatalf("Remove of a stream that does not exist: %v", err)
	}
	if err := NewMemory().Remove("hub", "scratch"); err != nil {
		t.Fatalf("Remove of a stream in memory: %v", err)
	}
	if err := st.Remove("hub", "\x00bad"); err == nil {
		t.Fatal("Remove of an invalid name: no error")
	}
}
