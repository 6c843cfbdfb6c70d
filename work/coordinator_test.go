package work_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// unmatchedIndexer's result counts every line as "unmatched", so that a
// group's Unmatched in Status adds up what its ranges' results said.
type unmatchedIndexer struct{}

func (unmatchedIndexer) Begin(context.Context, work.Range) (work.RangeIndex, error) {
	return &unmatchedRange{}, nil
}

type unmatchedRange struct{ n int64 }

func (u *unmatchedRange) Line(context.Context, int64, []byte) error { u.n++; return nil }

func (u *unmatchedRange) End(context.Context) (json.RawMessage, error) {
	return json.Marshal(map[string]int64{"unmatched": u.n})
}

// The main shard's abandoned round retires done ranges once they are older
// than RetainDone: the ranges stream then holds only the live ones (what
// every Acquire reads), and Status's totals stay the same across the
// retirement and across restarts of the coordinator.
// (Was: done ranges were kept for ever, so every Acquire, Status and
// coordinator round read every range ever planned.)
func TestCoordinatorRetiresDoneRanges(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	srv := nntptest.Start(t)
	const group = "alt.binaries.retire"
	srv.AddGroup(group, 2_000)
	ctx := context.Background()
	st, err := work.NewStore(env.Client(), "retire")
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := work.ParseGroups(group)
	// coordinator starts a main shard whose Retire reads the clock at
	// ahead past now (the coordinator of a process restarted).
	coordinator := func(ahead *atomic.Int64) *work.Coordinator {
		t.Helper()
		pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: srv.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		co, err := work.NewCoordinator(st, pool, work.CoordinatorConfig{
			Planner:   work.PlannerConfig{Groups: groups, RangeSize: 100, HistoryDepth: 2_000},
			Prefetch:  work.PrefetchConfig{Chunk: 100},
			Share:     work.ShareConfig{Limit: 2, Every: 50 * time.Millisecond},
			Lease:     work.LeaseConfig{AbandonedEvery: 20 * time.Millisecond},
			Tick:      20 * time.Millisecond,
			TailEvery: 50 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		work.SetClock(co.Leases(), func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
		lifecycletest.Start(t, co)
		return co
	}
	w, err := work.NewWorker(st, unmatchedIndexer{}, work.WorkerConfig{Name: "w", Idle: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(ctx) })
	keys := func() []string {
		t.Helper()
		ks, err := env.Client().KV(work.Scope("retire"), "ranges").Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	// totals checks Status against every range ever finished: done ranges
	// finished, articles through high, retired of them.
	totals := func(when string, done int, high, retired int64) {
		t.Helper()
		s, err := st.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Ranges[work.StateDone] != done || s.Articles[work.StateDone] != high || s.Retired != retired || len(s.Groups) != 1 {
			t.Fatalf("%s: status %d done ranges, %d done articles, %d retired; want %d, %d, %d",
				when, s.Ranges[work.StateDone], s.Articles[work.StateDone], s.Retired, done, high, retired)
		}
		if g := s.Groups[0]; g.Done != high || g.Planned != high || g.Unmatched != high {
			t.Fatalf("%s: group %+v, want done, planned and unmatched %d", when, g, high)
		}
	}
	indexedThrough := func(high int64) {
		t.Helper()
		testwait.Until(t, fmt.Sprintf("the group indexed through %d", high), func() (bool, string) {
			s, err := st.Status(ctx)
			if err != nil || len(s.Groups) != 1 {
				return false, fmt.Sprint(s, err)
			}
			g := s.Groups[0]
			return g.PlannedThrough == high && g.Planned == high && g.Done == high, fmt.Sprintf("%+v", g)
		})
	}

	var now atomic.Int64 // no time has passed
	co := coordinator(&now)
	indexedThrough(2_000)
	if n := len(keys()); n != 20 {
		t.Fatalf("%d range records before the retention ran out, want 20", n)
	}
	totals("before the retention ran out", 20, 2_000, 0)
	lifecycletest.Stop(t, co)

	// A day and more later, a coordinator's round retires them all.
	var later atomic.Int64
	later.Store(int64(work.RetainDoneDefault + time.Hour))
	co = coordinator(&later)
	testwait.Until(t, "the done ranges retired", func() (bool, string) {
		ks := keys()
		return len(ks) == 0, fmt.Sprint(ks)
	})
	totals("after the retirement", 20, 2_000, 20)
	if got := co.Leases().Stats().Retired; got != 20 {
		t.Errorf("LeaseStats.Retired %d, want 20", got)
	}

	// New articles: only their ranges are records now, which is all an
	// Acquire reads.
	later.Store(0)
	high, err := srv.Grow(group, 150)
	if err != nil {
		t.Fatal(err)
	}
	indexedThrough(high)
	if ks := keys(); len(ks) != 2 {
		t.Fatalf("range records %v after the tail was indexed, want its 2 only", ks)
	}
	totals("with 2 done ranges kept", 22, high, 20)
	lifecycletest.Stop(t, co)

	// Restarted: the same totals, and its own retirement counts each range
	// once.
	var again atomic.Int64
	co = coordinator(&again)
	totals("after a restart", 22, high, 20)
	again.Store(int64(work.RetainDoneDefault + time.Hour))
	testwait.Until(t, "the tail's ranges retired", func() (bool, string) {
		ks := keys()
		return len(ks) == 0, fmt.Sprint(ks)
	})
	totals("after the second retirement", 22, high, 22)
	l, err := work.NewLeases(st, work.LeaseConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "w2"); !errors.Is(err, work.ErrNoWork) {
		t.Errorf("Acquire with every range retired: %v, want ErrNoWork", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	lifecycletest.Stop(t, co)
}
