package work_test

import (
	"testing"

	"github.com/switchyard-dev/switchyard/work"
)

// TestSpoolOrderPastTwelveDigits: a worker reads a spool in article order
// in a group whose numbers cross 10^12. (Was: chunks were ordered by their
// keys as strings, padded to 12 digits, so the chunk of
// 1,000,000,000,001.. came before the one of 999,999,999,901.., and a
// complete, correct spool was failed as out of order, three times, its
// articles lost.)
func TestSpoolOrderPastTwelveDigits(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	const first, last = int64(999_999_999_901), int64(1_000_000_000_100)
	r, _ := e.ltSpooled(t, "g", work.KindTail, first, last, nil)
	w := ltWorker(t, e.st, work.CountingIndexer{}, work.WorkerConfig{Name: "w1"})
	ok, err := w.RunOne(e.ctx)
	got := e.ltRange(t, r.ID).Val
	if !ok || err != nil || got.State != work.StateDone {
		t.Fatalf("RunOne = %v, %v; range %s (error %q), want done", ok, err, got.State, got.Error)
	}
}
