package persist

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// Seqs are unsigned on the wire, but SQLite stores them as signed 64-bit
// integers: a seq above math.MaxInt64 names no message and must be answered
// like any other absent seq, not as an internal (storage) failure.
func TestSeqsAboveInt64(t *testing.T) {
	h := newHarness(t, nil)
	h.set("s", "a", nil)
	h.set("s", "b", nil)
	huge := strconv.FormatUint(math.MaxInt64+1, 10)
	top := strconv.FormatUint(math.MaxUint64, 10)

	wantCode(t, h.req(CmdGet, "s", map[string]string{HdrSeq: huge}, nil), CodeNotFound)

	msgs, next, _ := h.getAll("s", map[string]string{HdrStartSeq: huge})
	if len(msgs) != 0 || next != 0 {
		t.Fatalf("getAll from %s: %d messages, next %d; want none", huge, len(msgs), next)
	}
	msgs, _, _ = h.getAll("s", map[string]string{HdrEndSeq: top})
	if len(msgs) != 2 {
		t.Fatalf("getAll to %s: %d messages, want 2", top, len(msgs))
	}

	var res DeleteResult
	mustJSON(t, h.ok(CmdDelete, "s", map[string]string{HdrSeqs: "1," + huge}, nil).Data, &res)
	if !slices.Equal(res.Seqs, []uint64{1}) {
		t.Fatalf("delete 1,%s removed %v, want [1]", huge, res.Seqs)
	}
	mustJSON(t, h.ok(CmdDelete, "s", map[string]string{HdrUpTo: top}, nil).Data, &res)
	if !slices.Equal(res.Seqs, []uint64{2}) {
		t.Fatalf("delete up to %s removed %v, want [2]", top, res.Seqs)
	}
}
