package work_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/internal/testwait"
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

// msgCounter is a quiet slog handler that counts the records of one
// message.
type msgCounter struct {
	slog.Handler
	msg string
	n   *atomic.Int64
}

func (h msgCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h msgCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return msgCounter{Handler: h.Handler.WithAttrs(as), msg: h.msg, n: h.n}
}

func (h msgCounter) WithGroup(name string) slog.Handler {
	return msgCounter{Handler: h.Handler.WithGroup(name), msg: h.msg, n: h.n}
}

// A history round that failed (the provider refused connections at start)
// is tried again at the tail's pace, and the group gets planned once the
// provider answers.
// (Was: the next history round came PlanEvery, an hour, later, and PlanTail
// plans only groups with a record: nothing was planned for an hour.)
func TestCoordinatorRetriesFailedHistory(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	srv := nntptest.Start(t)
	const group = "alt.binaries.retry"
	srv.AddGroup(group, 1_000)
	srv.SetFaults(nntptest.Faults{Greeting: 400})
	ctx := context.Background()
	st, err := work.NewStore(env.Client(), "retry")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: srv.Addr()}, HealthEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int64
	log := slog.New(msgCounter{Handler: slog.NewTextHandler(io.Discard, nil), msg: "planning history failed", n: &failed})
	groups, _ := work.ParseGroups(group)
	co, err := work.NewCoordinator(st, pool, work.CoordinatorConfig{
		Planner:   work.PlannerConfig{Groups: groups, RangeSize: 500, HistoryDepth: 1_000},
		Share:     work.ShareConfig{Limit: 2, Every: 50 * time.Millisecond},
		Tick:      20 * time.Millisecond,
		TailEvery: 50 * time.Millisecond,
		PlanEvery: time.Hour,
		Logger:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	lifecycletest.Start(t, co)
	testwait.For(t, "the first history round to fail", func() bool { return failed.Load() > 0 })
	srv.SetFaults(nntptest.Faults{})
	testwait.For(t, "the group's history to be planned", func() bool {
		g, err := st.Group(ctx, group)
		return err == nil && g.Val.PlannedThrough == 1_000
	})
	lifecycletest.Stop(t, co)
}
