package work_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/work"
)

// ltNNTP starts a test news server with groups of the given sizes.
func ltNNTP(t *testing.T, groups map[string]int64) *nntptest.Server {
	t.Helper()
	srv := nntptest.Start(t)
	for g, n := range groups {
		srv.AddGroup(g, n)
	}
	return srv
}

func ltPool(t *testing.T, srv *nntptest.Server) *nntp.Pool {
	t.Helper()
	p, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: srv.Addr()}, Size: 2, HealthEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

func ltPlanner(t *testing.T, st *work.Store, pool *nntp.Pool, patterns ...string) *work.Planner {
	t.Helper()
	p, err := work.NewPlanner(st, pool, work.PlannerConfig{Groups: work.Groups{Patterns: patterns}, RangeSize: 400, HistoryDepth: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlannerHistoryThenTail(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	srv := ltNNTP(t, map[string]int64{"alt.bin.big": 2500, "alt.bin.small": 300, "misc.other": 100})
	pool := ltPool(t, srv)
	// A glob (LIST ACTIVE) and an exact name (GROUP) planner on one store.
	pg := ltPlanner(t, e.st, pool, "alt.bin.*")
	px := ltPlanner(t, e.st, pool, "misc.other", "no.such.group")

	st, err := pg.PlanAll(e.ctx)
	if err != nil || st != (work.PlanStats{Groups: 2, Ranges: 4}) {
		t.Fatalf("PlanAll (glob) = %+v, %v; want 2 groups, 4 ranges", st, err)
	}
	if st, err := px.PlanAll(e.ctx); err != nil || st != (work.PlanStats{Groups: 1, Ranges: 1}) {
		t.Fatalf("PlanAll (exact) = %+v, %v; want 1 group, 1 range", st, err)
	}
	all := e.ltRanges(t)
	// History reaches HistoryDepth back from the high mark, or to the low.
	for _, r := range ltCover(t, all, "alt.bin.big", 1501, 2500, 400) {
		if r.Kind != work.KindHistory || r.State != work.StatePlanned {
			t.Errorf("range %+v: want a planned history range", r)
		}
	}
	ltCover(t, all, "alt.bin.small", 1, 300, 400)
	ltCover(t, all, "misc.other", 1, 100, 400)

	// Nothing new: planning again cuts nothing.
	for _, p := range []*work.Planner{pg, px} {
		if st, err := p.PlanAll(e.ctx); err != nil || st != (work.PlanStats{}) {
			t.Fatalf("PlanAll again = %+v, %v; want nothing", st, err)
		}
		if st, err := p.PlanTail(e.ctx); err != nil || st != (work.PlanStats{}) {
			t.Fatalf("PlanTail with no new articles = %+v, %v; want nothing", st, err)
		}
	}

	if _, err := srv.Grow("alt.bin.big", 950); err != nil {
		t.Fatal(err)
	}
	if st, err := pg.PlanTail(e.ctx); err != nil || st != (work.PlanStats{Groups: 1, Ranges: 3}) {
		t.Fatalf("PlanTail = %+v, %v; want 1 group, 3 ranges", st, err)
	}
	if st, err := pg.PlanTail(e.ctx); err != nil || st != (work.PlanStats{}) {
		t.Fatalf("PlanTail again = %+v, %v; want nothing", st, err)
	}
	rs := ltCover(t, e.ltRanges(t), "alt.bin.big", 1501, 3450, 400)
	wantKinds := []string{work.KindHistory, work.KindHistory, work.KindHistory, work.KindTail, work.KindTail, work.KindTail}
	if len(rs) != len(wantKinds) {
		t.Fatalf("alt.bin.big: %d ranges %v, want %d", len(rs), ltSpans(rs), len(wantKinds))
	}
	for i, r := range rs {
		if r.Kind != wantKinds[i] {
			t.Errorf("range %d-%d kind %s, want %s", r.First, r.Last, r.Kind, wantKinds[i])
		}
	}
	g, err := e.st.Group(e.ctx, "alt.bin.big")
	if err != nil {
		t.Fatal(err)
	}
	if g.Val.PlannedThrough != 3450 || g.Val.High != 3450 || g.Val.Low != 1 || g.Val.HistoryFrom != 1501 || len(g.Val.Pending) != 0 || g.Val.ProbedAt == 0 {
		t.Errorf("group record %+v: want planned and probed through 3450 from 1501, no claim", g.Val)
	}
	if _, err := e.st.Group(e.ctx, "no.such.group"); err == nil {
		t.Error("a group the server does not have got a record")
	}
}

// Two planners (two processes: two clients, two pools) plan the same
// groups at once, several rounds, the groups growing in between: the
// ranges cover every article exactly once.
func TestPlannerRace(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	srv := ltNNTP(t, map[string]int64{"alt.race.a": 1700, "alt.race.b": 90})
	var ps []*work.Planner
	for range 2 {
		st := ltStoreOn(t, e.ctx, e.env.Client())
		ps = append(ps, ltPlanner(t, st, ltPool(t, srv), "alt.race.*"))
	}
	total := 0
	var mu sync.Mutex
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(ps))
		for _, p := range ps {
			wg.Go(func() {
				a, err := p.PlanAll(e.ctx)
				errs <- err
				b, err := p.PlanTail(e.ctx)
				errs <- err
				mu.Lock()
				total += a.Ranges + b.Ranges
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		for _, g := range []string{"alt.race.a", "alt.race.b"} {
			if _, err := srv.Grow(g, int64(130*(round+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The last growth is planned by one more tail.
	st, err := ps[0].PlanTail(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	total += st.Ranges
	all := e.ltRanges(t)
	grown := int64(130 * (1 + 2 + 3 + 4 + 5))
	ltCover(t, all, "alt.race.a", 701, 1700+grown, 400)
	ltCover(t, all, "alt.race.b", 1, 90+grown, 400)
	// Every range a planner reported cutting was written, once.
	var maxID uint64
	for _, r := range all {
		maxID = max(maxID, r.ID)
	}
	t.Logf("%d ranges, highest id %d (ids above the count were lost to a conflict)", len(all), maxID)
	if total != len(all) {
		t.Errorf("planners reported %d ranges, %d stored", total, len(all))
	}
}

// A planner that died after claiming ranges in the group record (step c)
// but before writing them loses nothing: the next planner writes them.
func TestPlannerCompletesClaim(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	srv := ltNNTP(t, map[string]int64{"alt.claim": 500})
	p := ltPlanner(t, e.st, ltPool(t, srv), "alt.claim")
	if _, err := p.PlanAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The dead planner: ids allocated, the record claims 501..900 in two
	// ranges, which were never written.
	g, err := e.st.Group(e.ctx, "alt.claim")
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.st.AllocIDs(e.ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	claim := []work.Range{
		{ID: id, Group: "alt.claim", First: 501, Last: 800, Kind: work.KindTail, State: work.StatePlanned},
		{ID: id + 1, Group: "alt.claim", First: 801, Last: 900, Kind: work.KindTail, State: work.StatePlanned},
	}
	rec := g.Val
	rec.PlannedThrough, rec.Pending = 900, claim
	if _, err := e.st.PutGroup(e.ctx, rec, g.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Grow("alt.claim", 600); err != nil { // high 1100
		t.Fatal(err)
	}
	if st, err := p.PlanTail(e.ctx); err != nil || st.Ranges != 1 {
		t.Fatalf("PlanTail = %+v, %v; want the claim written and 1 new range", st, err)
	}
	all := e.ltRanges(t)
	ltCover(t, all, "alt.claim", 1, 1100, 400)
	for _, c := range claim {
		r := e.ltRange(t, c.ID).Val
		if r.First != c.First || r.Last != c.Last || r.State != work.StatePlanned {
			t.Errorf("claimed range %d: %+v, want %+v", c.ID, r, c)
		}
	}
	g, err = e.st.Group(e.ctx, "alt.claim")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Val.Pending) != 0 || g.Val.PlannedThrough != 1100 {
		t.Errorf("record after completion: %+v", g.Val)
	}
}

// A dead planner's claim is written out even when its group is no longer
// selected or no longer answers GROUP: by PlanTail and by PlanAll.
func TestPlannerCompletesClaimOfUnprobedGroup(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	srv := ltNNTP(t, map[string]int64{"alt.left": 500, "alt.kept": 100})
	if _, err := ltPlanner(t, e.st, ltPool(t, srv), "alt.left").PlanAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	// alt.gone was planned through 500 while the server had it; it has
	// since dropped the group.
	if _, err := e.st.PutGroup(e.ctx, work.Group{Name: "alt.gone", Low: 1, High: 500, PlannedThrough: 500, HistoryFrom: 1}, 0); err != nil {
		t.Fatal(err)
	}
	for i, span := range [][2]int64{{1, 400}, {401, 500}} {
		r := work.Range{ID: 1000 + uint64(i), Group: "alt.gone", First: span[0], Last: span[1], Kind: work.KindHistory, State: work.StatePlanned}
		if _, err := e.st.PutRange(e.ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	// claim leaves a dead planner's claim of 501..700 in group's record.
	claim := func(group string) work.Range {
		t.Helper()
		g, err := e.st.Group(e.ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		id, err := e.st.AllocIDs(e.ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		r := work.Range{ID: id, Group: group, First: 501, Last: 700, Kind: work.KindTail, State: work.StatePlanned}
		rec := g.Val
		rec.PlannedThrough, rec.Pending = 700, []work.Range{r}
		if _, err := e.st.PutGroup(e.ctx, rec, g.Seq); err != nil {
			t.Fatal(err)
		}
		return r
	}
	check := func(what string, c work.Range) {
		t.Helper()
		got, err := e.st.Range(e.ctx, c.ID)
		if err != nil {
			t.Fatalf("%s: claimed range %d not written: %v", what, c.ID, err)
		}
		if got.Val.First != c.First || got.Val.Last != c.Last || got.Val.State != work.StatePlanned {
			t.Errorf("%s: claimed range %+v, want %+v", what, got.Val, c)
		}
		g, err := e.st.Group(e.ctx, c.Group)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Val.Pending) != 0 || g.Val.PlannedThrough != 700 {
			t.Errorf("%s: record after completion %+v", what, g.Val)
		}
		ltCover(t, e.ltRanges(t), c.Group, 1, 700, 400)
	}
	other := ltPlanner(t, e.st, ltPool(t, srv), "alt.kept")

	// alt.gone is not on the server: its tail probe finds nothing.
	gone := claim("alt.gone")
	if _, err := ltPlanner(t, e.st, ltPool(t, srv), "alt.gone").PlanTail(e.ctx); err != nil {
		t.Fatalf("PlanTail: %v", err)
	}
	check("PlanTail, group gone from the server", gone)

	// alt.left was dropped from --groups: a planner of other groups
	// writes its claim out.
	left := claim("alt.left")
	if st, err := other.PlanAll(e.ctx); err != nil || st.Ranges != 1 {
		t.Fatalf("PlanAll = %+v, %v; want alt.kept's 1 range (completed claims are not counted)", st, err)
	}
	check("PlanAll, group no longer selected", left)
}

// One exact name's failing GROUP leaves that group for the next round and
// plans the others' history now.
// (Was: PlanAll gave up on the first failing probe, so a pooled connection
// the provider had closed while idle cost every group its history until the
// next round, an hour later.)
func TestPlannerGoesOnPastAFailedProbe(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	srv := ltNNTP(t, map[string]int64{"alt.first": 500, "alt.second": 300})
	pool := ltPool(t, srv)
	// One connection, used and then idle in the pool, which the provider
	// closes: the next probe gets it and fails.
	if err := pool.Do(e.ctx, func(c *nntp.Conn) error { _, err := c.Group(e.ctx, "alt.first"); return err }); err != nil {
		t.Fatal(err)
	}
	srv.CloseConns()
	p := ltPlanner(t, e.st, pool, "alt.first", "alt.second")
	st, err := p.PlanAll(e.ctx)
	if err == nil || !strings.Contains(err.Error(), "alt.first") {
		t.Fatalf("PlanAll error %v, want alt.first's failed probe", err)
	}
	if st != (work.PlanStats{Groups: 1, Ranges: 1}) {
		t.Fatalf("PlanAll = %+v; want alt.second planned all the same", st)
	}
	ltCover(t, e.ltRanges(t), "alt.second", 1, 300, 400)
	// The broken connection is gone: the next round plans alt.first.
	if st, err := p.PlanAll(e.ctx); err != nil || st != (work.PlanStats{Groups: 1, Ranges: 2}) {
		t.Fatalf("PlanAll again = %+v, %v; want alt.first's 2 ranges", st, err)
	}
	ltCover(t, e.ltRanges(t), "alt.first", 1, 500, 400)
}

// (Was: cutting a group whose high mark is at the top of int64 stepped past 2^63-1 to a negative start, again below the high mark, and PlanAll appended ranges until it ran out of memory; a range size that large gave a range ending below its start.)
func TestPlannerNumbersAtTopOfInt64(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name              string
		articles, size    int64
		first, last, want int64 // the ranges' cover, and how many
	}{
		{"high mark 2^63-1", math.MaxInt64, 400, math.MaxInt64 - 999, math.MaxInt64, 3},
		{"range size 2^63-1", 2500, math.MaxInt64, 1501, 2500, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := ltStart(t)
			srv := ltNNTP(t, map[string]int64{"alt.top": c.articles})
			p, err := work.NewPlanner(e.st, ltPool(t, srv), work.PlannerConfig{Groups: work.Groups{Patterns: []string{"alt.top"}}, RangeSize: c.size, HistoryDepth: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := p.PlanAll(e.ctx); err != nil || st != (work.PlanStats{Groups: 1, Ranges: int(c.want)}) {
				t.Fatalf("PlanAll = %+v, %v; want 1 group, %d ranges", st, err, c.want)
			}
			ltCover(t, e.ltRanges(t), "alt.top", c.first, c.last, min(c.size, c.last-c.first+1))
		})
	}
}

// A planner frozen past RetainDone resumes with the group record it read
// before the freeze, after another planner has planned the same articles
// and their ranges were done and retired: frozen before its claim, its
// compare-and-set fails and it re-reads the record; frozen after its claim,
// it finds the claim written out by another and writes none of its ranges.
// Either way no retired range comes back and nothing below the group's
// planned_through is planned again.
// (Was: a planner frozen after its claim wrote the claimed ranges once it resumed, though another planner had written them out and they had been done and retired: "must not exist" held for the deleted records, so the ranges came back to be indexed and counted again.)
func TestPlannerFrozenPastRetirement(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"claim", "write"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			e := ltStart(t)
			srv := ltNNTP(t, map[string]int64{"alt.frozen": 500})
			live := ltPlanner(t, e.st, ltPool(t, srv), "alt.frozen")
			if _, err := live.PlanAll(e.ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.Grow("alt.frozen", 600); err != nil { // high 1100
				t.Fatal(err)
			}

			// The frozen planner: another process, stopped at step of its
			// first tail until resumed.
			frozen := ltPlanner(t, ltStoreOn(t, e.ctx, e.env.Client()), ltPool(t, srv), "alt.frozen")
			stopped, resume := make(chan struct{}), make(chan struct{})
			var stopOnce, resumeOnce sync.Once
			release := func() { resumeOnce.Do(func() { close(resume) }) }
			work.SetPlannerHook(frozen, func(s string, g work.Group) {
				if s == step && g.Name == "alt.frozen" {
					stopOnce.Do(func() {
						close(stopped)
						<-resume
					})
				}
			})
			var frozenStats work.PlanStats
			var frozenErr error
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				frozenStats, frozenErr = frozen.PlanTail(e.ctx)
			}()
			t.Cleanup(func() { release(); <-finished })
			select {
			case <-stopped:
			case <-finished:
				t.Fatalf("the planner never reached step %q: %+v, %v", step, frozenStats, frozenErr)
			}

			// Meanwhile the live planner plans the tail (or writes out the
			// frozen one's claim of it), the ranges are done, and a day
			// later retired.
			if _, err := live.PlanTail(e.ctx); err != nil {
				t.Fatal(err)
			}
			all := e.ltRanges(t)
			ltCover(t, all, "alt.frozen", 1, 1100, 400)
			for _, r := range all {
				v := e.ltRange(t, r.ID)
				done := v.Val
				done.State = work.StateDone
				if _, err := e.st.PutRange(e.ctx, done, v.Seq); err != nil {
					t.Fatal(err)
				}
			}
			later := ltLeases(t, e.st, work.LeaseConfig{})
			work.SetClock(later, func() time.Time { return time.Now().Add(work.RetainDoneDefault + time.Hour) })
			if n, err := later.Retire(e.ctx); err != nil || n != len(all) {
				t.Fatalf("Retire = %d, %v; want all %d ranges retired", n, err, len(all))
			}

			release()
			<-finished
			if frozenErr != nil {
				t.Fatalf("the resumed planner: %v", frozenErr)
			}
			if got := e.ltRanges(t); len(got) != 0 {
				t.Fatalf("the resumed planner wrote ranges %v, all of whose articles were planned, done and retired", ltSpans(got))
			}
			g, err := e.st.Group(e.ctx, "alt.frozen")
			if err != nil {
				t.Fatal(err)
			}
			if g.Val.PlannedThrough != 1100 || len(g.Val.Pending) != 0 || g.Val.Retired.Ranges != int64(len(all)) || g.Val.Retired.Articles != 1100 {
				t.Fatalf("group record %+v: want planned through 1100, no claim, %d ranges and 1100 articles retired", g.Val, len(all))
			}
			// The next articles are planned from the frontier, once.
			if _, err := srv.Grow("alt.frozen", 100); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*work.Planner{frozen, live} {
				if _, err := p.PlanTail(e.ctx); err != nil {
					t.Fatal(err)
				}
			}
			ltCover(t, e.ltRanges(t), "alt.frozen", 1101, 1200, 400)
		})
	}
}

// A jump of a group's high mark is planned a bounded number of ranges a
// round, from where the last round stopped, with the group record showing
// how far planning got; a jump to 10^12 costs a round no more.
// (Was: a tail was cut into as many ranges as it spans in one round: a high mark jumping from 1,000 to 10^12 made billions of ranges in memory, all listed in one group record that could never be written, round after round.)
func TestPlannerBoundsATailJump(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	srv := ltNNTP(t, map[string]int64{"alt.jump": 1000})
	p, err := work.NewPlanner(e.st, ltPool(t, srv), work.PlannerConfig{
		Groups: work.Groups{Patterns: []string{"alt.jump"}}, RangeSize: 400, HistoryDepth: 1000, MaxTailRanges: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PlanAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	round := func(wantRanges int, wantThrough, wantHigh int64) {
		t.Helper()
		st, err := p.PlanTail(e.ctx)
		if err != nil || st.Ranges != wantRanges {
			t.Fatalf("PlanTail = %+v, %v; want %d ranges", st, err, wantRanges)
		}
		g, err := e.st.Group(e.ctx, "alt.jump")
		if err != nil {
			t.Fatal(err)
		}
		if g.Val.PlannedThrough != wantThrough || g.Val.High != wantHigh || len(g.Val.Pending) != 0 {
			t.Fatalf("group record %+v: want planned through %d of high %d, no claim", g.Val, wantThrough, wantHigh)
		}
	}
	// 1001..5600 is 12 ranges: 5, 5 and 2 in three rounds.
	if _, err := srv.Grow("alt.jump", 4600); err != nil {
		t.Fatal(err)
	}
	round(5, 3000, 5600)
	round(5, 5000, 5600)
	round(2, 5600, 5600)
	round(0, 5600, 5600)
	ltCover(t, e.ltRanges(t), "alt.jump", 1, 5600, 400)

	const high = 1_000_000_000_000
	if _, err := srv.Grow("alt.jump", high-5600); err != nil {
		t.Fatal(err)
	}
	round(5, 7600, high)
	round(5, 9600, high)
	ltCover(t, e.ltRanges(t), "alt.jump", 1, 9600, 400)
}
