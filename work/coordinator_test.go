package work_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/work"
)

// TestCoordinatorEndToEnd: a coordinator and a worker in one process index
// a group completely, the tail follows the group as it grows, and both stop
// cleanly (the package's goleak check sees every loop end).
func TestCoordinatorEndToEnd(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	srv := nntptest.Start(t)
	const group = "alt.binaries.coord"
	srv.AddGroup(group, 5_000)
	ctx := context.Background()
	st, err := work.NewStore(env.Client(), "coord")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := work.ParseGroups(group)
	co, err := work.NewCoordinator(st, pool, work.CoordinatorConfig{
		Planner:   work.PlannerConfig{Groups: groups, RangeSize: 1_000, HistoryDepth: 5_000},
		Prefetch:  work.PrefetchConfig{Chunk: 200},
		Share:     work.ShareConfig{Limit: 2, Every: 50 * time.Millisecond},
		Tick:      20 * time.Millisecond,
		TailEvery: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	lifecycletest.Start(t, co)
	w, err := work.NewWorker(st, work.CountingIndexer{}, work.WorkerConfig{Name: "w", Idle: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone := func(high int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			s, err := st.Status(ctx)
			if err == nil && len(s.Groups) == 1 && s.Groups[0].PlannedThrough == high && s.Groups[0].Planned == high && s.Groups[0].Done == high {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("group not indexed through %d: %+v %v", high, s, err)
			}
			<-tick.C
		}
	}
	waitDone(5_000)
	high, err := srv.Grow(group, 1_500)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(high)

	rs, err := st.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var done []work.Range
	tail := 0
	for _, r := range rs {
		done = append(done, r.Val)
		if r.Val.Kind == work.KindTail {
			tail++
		}
	}
	got, err := work.SumResults(done)
	if err != nil {
		t.Fatal(err)
	}
	var articles []int64
	for a := int64(1); a <= high; a++ {
		articles = append(articles, a)
	}
	if want := work.ExpectedCount(group, articles); got[group] != want {
		t.Errorf("indexed %+v, want %+v", got[group], want)
	}
	if tail == 0 {
		t.Error("the growth was planned without a tail range")
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	lifecycletest.Stop(t, co)
	// Stop left the share: the table no longer lists the coordinator.
	table, err := st.ShareTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Val) != 0 {
		t.Errorf("share table after Stop: %+v", table.Val)
	}
}
