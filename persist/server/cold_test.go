package server

import (
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestColdStreamClosedOnceIdle: a request that says Sy-Cold has its stream
// closed as soon as nothing more waits on it, where a stream without the
// hint stays open (for IdleClose, an hour here); the data survives the
// close and the next request opens the stream again; and an ephemeral
// stream, which a close would remove, stays open whatever its requests say.
func TestColdStreamClosedOnceIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cold := map[string]string{persist.HdrCold: "true"}
	h.set("warm", "w", nil)
	h.set("cold", "c", cold)
	testwait.For(t, "the cold stream to be closed", func() bool {
		st := h.srv.Stats()
		return st.ColdCloses == 1 && st.OpenStorage == 1
	})
	if got := cached(h); !slices.Equal(got, []string{"warm"}) {
		t.Fatalf("cache holds %v, want [warm]", got)
	}
	if r := h.ok(persist.CmdGet, "cold", map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != "c" {
		t.Fatalf("the cold stream's message after its close: %q, want c", r.Data)
	}
	// That get had no hint: the stream stays open now.
	if got := cached(h); !slices.Equal(got, []string{"cold", "warm"}) {
		t.Fatalf("cache holds %v, want [cold warm]", got)
	}
	eph := map[string]string{persist.HdrCold: "true", persist.HdrEphemeral: "true"}
	h.set("mem", "m", eph)
	if r := h.ok(persist.CmdGet, "mem", map[string]string{persist.HdrSeq: "1", persist.HdrEphemeral: "true"}, nil); string(r.Data) != "m" {
		t.Fatalf("the ephemeral stream after a cold set: %q, want m", r.Data)
	}
	if n := h.srv.Stats().ColdCloses; n != 1 {
		t.Fatalf("%d cold closes, want 1 (an ephemeral stream is never closed for the hint)", n)
	}
}
