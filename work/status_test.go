package work_test

import (
	"math"
	"testing"

	"github.com/switchyard-dev/switchyard/work"
)

// TestThroughputCountsArticlesFinished: work status's throughput is the
// articles per second finished over the last minute: a done range of
// 1,000 article numbers of which the server had only 10 finished 10
// articles. (Was: the range's span of numbers, 1,000, counted, so a
// group's gaps read as work done; the coordinator's progress log showed
// the same figure.)
func TestThroughputCountsArticlesFinished(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, arts := e.ltSpooled(t, "g", work.KindTail, 1, 1000, func(a int64) bool { return a%100 == 0 })
	w := ltWorker(t, e.st, work.CountingIndexer{}, work.WorkerConfig{Name: "w1"})
	if ok, err := w.RunOne(e.ctx); !ok || err != nil {
		t.Fatalf("RunOne = %v, %v", ok, err)
	}
	if got := e.ltRange(t, r.ID).Val.State; got != work.StateDone {
		t.Fatalf("range %s, want done", got)
	}
	st, err := e.st.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := float64(len(arts)) / work.ThroughputWindow.Seconds()
	if math.Abs(st.Throughput-want) > 1e-9 {
		t.Errorf("throughput %.3f articles/s, want %.3f (%d articles finished in the window, over %d article numbers)",
			st.Throughput, want, len(arts), r.Size())
	}
}
