package server

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// Seqs are unsigned on the wire, but SQLite stores them as signed 64-bit
// integers: a seq above math.MaxInt64 names no message and must be answered
// like any other absent seq, not as an internal (storage) failure.
func TestSeqsAboveInt64(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "a", nil)
	h.set("s", "b", nil)
	huge := strconv.FormatUint(math.MaxInt64+1, 10)
	top := strconv.FormatUint(math.MaxUint64, 10)

	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: huge}, nil), persist.CodeNotFound)

	msgs, next, _ := h.getAll("s", map[string]string{persist.HdrStartSeq: huge})
	if len(msgs) != 0 || next != 0 {
		t.Fatalf("getAll from %s: %d messages, next %d; want none", huge, len(msgs), next)
	}
	msgs, _, _ = h.getAll("s", map[string]string{persist.HdrEndSeq: top})
	if len(msgs) != 2 {
		t.Fatalf("getAll to %s: %d messages, want 2", top, len(msgs))
	}

	var res persist.DeleteResult
	mustJSON(t, h.ok(persist.CmdDelete, "s", map[string]string{persist.HdrSeqs: "1," + huge}, nil).Data, &res)
	if !slices.Equal(res.Seqs, []uint64{1}) {
		t.Fatalf("delete 1,%s removed %v, want [1]", huge, res.Seqs)
	}
	mustJSON(t, h.ok(persist.CmdDelete, "s", map[string]string{persist.HdrUpTo: top}, nil).Data, &res)
	if !slices.Equal(res.Seqs, []uint64{2}) {
		t.Fatalf("delete up to %s removed %v, want [2]", top, res.Seqs)
	}
}
