package store

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// A stream in Memory holds its messages while open, has max_bytes bounded
// by EphemeralMaxBytes, and is gone once closed: a new Open starts empty.
func TestMemoryStreamLivesWhileOpen(t *testing.T) {
	t.Parallel()
	st := NewMemory()
	now := time.Now()
	s, err := st.Open("hub", "scratch", now)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Config().MaxBytes; got != EphemeralMaxBytes {
		t.Fatalf("max_bytes %d, want EphemeralMaxBytes %d", got, EphemeralMaxBytes)
	}
	c := s.Config()
	c.MaxBytes = -1
	if c, _, err = s.SetConfig(c, now); err != nil || c.MaxBytes != EphemeralMaxBytes {
		t.Fatalf("SetConfig unlimited: max_bytes %d, %v; want %d", c.MaxBytes, err, EphemeralMaxBytes)
	}
	if _, _, err := s.Write([]WriteOp{{Key: "k", Value: []byte("v")}}, now); err != nil {
		t.Fatal(err)
	}
	if inv := inventory(t, s); inv.Count != 1 {
		t.Fatalf("open stream holds %d messages, want 1", inv.Count)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.OpenExisting("hub", "scratch", now); !errors.Is(err, ErrNoStream) {
		t.Fatalf("OpenExisting of a closed stream in memory: %v, want ErrNoStream", err)
	}
	s, err = st.Open("hub", "scratch", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if inv := inventory(t, s); inv.Count != 0 {
		t.Fatalf("reopened stream holds %d messages, want 0", inv.Count)
	}
}

// Memory checks names as SQLite does: a bad scope or name is bad-request.
func TestMemoryRefusesBadNames(t *testing.T) {
	t.Parallel()
	st := NewMemory()
	for _, c := range []struct{ scope, name string }{{"Bad Scope", "s"}, {"hub", "\x00bad"}} {
		if _, err := st.Open(c.scope, c.name, time.Now()); persist.CodeOf(err) != persist.CodeBadRequest {
			t.Fatalf("Open(%q, %q): %v, want bad-request", c.scope, c.name, err)
		}
		if _, err := st.OpenExisting(c.scope, c.name, time.Now()); persist.CodeOf(err) != persist.CodeBadRequest {
			t.Fatalf("OpenExisting(%q, %q): %v, want bad-request", c.scope, c.name, err)
		}
	}
}
