package work_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/work"
)

func ltWorker(t *testing.T, st *work.Store, ix work.Indexer, cfg work.WorkerConfig) *work.Worker {
	t.Helper()
	if cfg.Idle == 0 {
		cfg.Idle = 50 * time.Millisecond
	}
	w, err := work.NewWorker(st, ix, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// ltExpect is the counts of the articles spooled, by group.
type ltExpect map[string][]int64

func (x ltExpect) check(t *testing.T, ranges []work.Range) {
	t.Helper()
	got, err := work.SumResults(ranges)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(x) {
		t.Errorf("results for %d groups, want %d: %v", len(got), len(x), got)
	}
	for g, arts := range x {
		if want := work.ExpectedCount(g, arts); got[g] != want {
			t.Errorf("%s: indexed %+v, want %+v (every article once)", g, got[g], want)
		}
	}
}

// gate is an indexer that counts like CountingIndexer but, at article
// stopAt of any range, tells reached and waits for open (or its ctx).
type gate struct {
	stopAt  int64
	reached chan uint64
	open    chan struct{}
}

func newGate(stopAt int64) *gate {
	return &gate{stopAt: stopAt, reached: make(chan uint64, 10), open: make(chan struct{})}
}

func (g *gate) Begin(ctx context.Context, r work.Range) (work.RangeIndex, error) {
	ri, err := work.CountingIndexer{}.Begin(ctx, r)
	return &gateRange{g: g, id: r.ID, ri: ri}, err
}

type gateRange struct {
	g  *gate
	id uint64
	ri work.RangeIndex
}

func (gr *gateRange) Line(ctx context.Context, a int64, line []byte) error {
	if a == gr.g.stopAt {
		gr.g.reached <- gr.id
		select {
		case <-gr.g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return gr.ri.Line(ctx, a, line)
}

func (gr *gateRange) End(ctx context.Context) (json.RawMessage, error) { return gr.ri.End(ctx) }

// Three workers (two processes) index every spooled range; the results add
// up to every article exactly once.
func TestWorkersIndexEverythingOnce(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	want := ltExpect{}
	for i := range 10 {
		g := []string{"alt.one", "alt.two"}[i%2]
		first := int64(i/2*300 + 1)
		// Gaps: articles the server no longer has are absent.
		_, arts := e.ltSpooled(t, g, work.KindTail, first, first+299, func(a int64) bool { return a%7 != 3 })
		want[g] = append(want[g], arts...)
	}
	other := ltStoreOn(t, e.ctx, e.env.Client())
	var ws []*work.Worker
	for i := range 3 {
		st := e.st
		if i == 2 {
			st = other
		}
		w := ltWorker(t, st, work.CountingIndexer{}, work.WorkerConfig{Name: fmt.Sprintf("w%d", i), Lease: work.LeaseConfig{TTL: 2 * time.Second}})
		if err := w.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	testwait.For(t, "the workers to finish every range", func() bool {
		for _, r := range e.ltRanges(t) {
			if r.State != work.StateDone {
				return false
			}
		}
		return true
	})
	var finished, articles int64
	for _, w := range ws {
		if err := w.Stop(e.ctx); err != nil {
			t.Fatal(err)
		}
		s := w.Stats()
		finished += s.Finished
		articles += s.Articles
		if s.Fenced != 0 || s.Failed != 0 || s.Current != 0 {
			t.Errorf("worker stats %+v", s)
		}
	}
	total := int64(len(want["alt.one"]) + len(want["alt.two"]))
	if finished != 10 || articles != total {
		t.Errorf("workers finished %d ranges, %d articles; want 10, %d", finished, articles, total)
	}
	want.check(t, e.ltRanges(t))
}

// A worker stopped mid-range whose Stop cannot wait releases the range;
// another worker finishes it, every article once.
func TestWorkerStopReleases(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, arts := e.ltSpooled(t, "alt.x", work.KindTail, 1, 500, nil)
	g := newGate(250)
	a := ltWorker(t, e.st, g, work.WorkerConfig{Name: "a"})
	if err := a.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	if id := <-g.reached; id != r.ID {
		t.Fatalf("gate reached in range %d, want %d", id, r.ID)
	}
	if s := a.Stats(); s.Current != r.ID || s.Progress != 249 {
		t.Errorf("stats mid-range %+v: want range %d at 249", s, r.ID)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cancel() // no time to finish
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.Released != 1 || s.Finished != 0 || s.Current != 0 {
		t.Errorf("stats after stop %+v: want 1 released", s)
	}
	got := e.ltRange(t, r.ID).Val
	if got.State != work.StateSpooled || got.Attempts != 0 {
		t.Fatalf("released range %s, %d attempts; want spooled, 0", got.State, got.Attempts)
	}
	if err := a.Stop(e.ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	b := ltWorker(t, e.st, work.CountingIndexer{}, work.WorkerConfig{Name: "b"})
	if ok, err := b.RunOne(e.ctx); !ok || err != nil {
		t.Fatalf("b.RunOne: %v %v", ok, err)
	}
	if ok, err := b.RunOne(e.ctx); ok || err != nil {
		t.Fatalf("b.RunOne with nothing left: %v %v", ok, err)
	}
	ltExpect{"alt.x": arts}.check(t, e.ltRanges(t))
}

// A Stop that can wait lets the range in hand finish.
func TestWorkerStopFinishesInHand(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, arts := e.ltSpooled(t, "alt.x", work.KindTail, 1, 300, nil)
	e.ltSpooled(t, "alt.x", work.KindTail, 301, 600, nil)
	g := newGate(100)
	w := ltWorker(t, e.st, g, work.WorkerConfig{Name: "w"})
	lifecycletest.Start(t, w)
	if id := <-g.reached; id != r.ID {
		t.Fatalf("gate reached in range %d, want %d", id, r.ID)
	}
	stopped := make(chan error, 1)
	sctx := &doneWatch{Context: e.ctx, asked: make(chan struct{})}
	go func() { stopped <- w.Stop(sctx) }()
	// Stop waits on its ctx only once it has told the loop to lease no more.
	<-sctx.asked
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with the range in hand", err)
	default:
	}
	close(g.open)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Finished != 1 || s.Released != 0 || s.Articles != int64(len(arts)) {
		t.Fatalf("stats %+v: want the range in hand finished, no other", s)
	}
	done := 0
	for _, r := range e.ltRanges(t) {
		if r.State == work.StateDone {
			done++
		}
	}
	if done != 1 {
		t.Fatalf("%d ranges done, want 1 (no lease after Stop)", done)
	}
	ltExpect{"alt.x": arts}.check(t, e.ltRanges(t))
	lifecycletest.Stop(t, w) // the rest of the rule after the Stop above
}

// Heartbeats keep a range longer than its TTL in hand.
func TestWorkerHeartbeatKeepsLease(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, arts := e.ltSpooled(t, "alt.x", work.KindTail, 1, 200, nil)
	g := newGate(150)
	// A renewal's deadline is the heartbeat interval, and one that lands
	// after it (its answer lost) costs the range: the next renewal is
	// fenced. With 150 ms, a persist round trip on a loaded machine under
	// the race detector (measured up to 125 ms) came within reach of it.
	// A third of the TTL, as the default, also lets one renewal fail
	// without the lease expiring.
	ttl := 1500 * time.Millisecond
	w := ltWorker(t, e.st, g, work.WorkerConfig{Name: "w", Lease: work.LeaseConfig{TTL: ttl}, Heartbeat: ttl / 3})
	res := make(chan error, 1)
	go func() {
		_, err := w.RunOne(e.ctx)
		res <- err
	}()
	<-g.reached
	start := time.Now()
	thief := ltLeases(t, e.st, work.LeaseConfig{})
	// Two and a half TTLs while the indexer is held up: the lease lives
	// on, with the progress, and nobody else can take the range.
	testwait.For(t, "the lease to be renewed for 2.5 TTLs", func() bool {
		if _, err := thief.Acquire(e.ctx, "thief"); !errors.Is(err, work.ErrNoWork) {
			t.Fatalf("thief.Acquire while the worker heartbeats: %v", err)
		}
		le, err := e.st.Lease(e.ctx, r.ID)
		if err != nil {
			t.Fatalf("lease while heartbeating: %v", err)
		}
		return le.Val.Progress == 149 && time.Since(start) > ttl*5/2
	})
	close(g.open)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if got := e.ltRange(t, r.ID).Val; got.State != work.StateDone || got.Attempts != 1 {
		t.Fatalf("range %s after %d attempts; want done after 1", got.State, got.Attempts)
	}
	ltExpect{"alt.x": arts}.check(t, e.ltRanges(t))
}

// A worker whose lease was taken over stops at its next heartbeat and
// leaves the range to the new holder.
func TestWorkerFencedAborts(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 200, nil)
	g := newGate(50)
	w := ltWorker(t, e.st, g, work.WorkerConfig{Name: "w", Lease: work.LeaseConfig{TTL: 2 * time.Second}, Heartbeat: 100 * time.Millisecond})
	res := make(chan error, 1)
	go func() {
		_, err := w.RunOne(e.ctx)
		res <- err
	}()
	<-g.reached
	// The lease vanishes (as if it had expired) and another takes it.
	le, err := e.st.Lease(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.DropLease(e.ctx, le.Seq); err != nil {
		t.Fatal(err)
	}
	other := ltLeases(t, e.st, work.LeaseConfig{})
	h, err := other.Acquire(e.ctx, "other")
	if err != nil || h.Range.ID != r.ID {
		t.Fatalf("other.Acquire: %+v %v", h, err)
	}
	if err := <-res; !errors.Is(err, work.ErrFenced) {
		t.Fatalf("RunOne of the fenced worker: %v, want ErrFenced", err)
	}
	if s := w.Stats(); s.Fenced != 1 || s.Finished != 0 || s.Failed != 0 {
		t.Errorf("stats %+v: want 1 fenced", s)
	}
	got := e.ltRange(t, r.ID).Val
	if got.State != work.StateLeased || got.Holder != "other" {
		t.Fatalf("range %s held by %q; want leased by other", got.State, got.Holder)
	}
	if err := other.Finish(e.ctx, h, json.RawMessage(`{}`)); err != nil {
		t.Fatalf("the new holder's Finish: %v", err)
	}
}

// An indexer error fails the attempt; the last attempt fails the range.
func TestWorkerIndexerErrorFails(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
	w := ltWorker(t, e.st, failing{at: 60}, work.WorkerConfig{Name: "w", Lease: work.LeaseConfig{MaxAttempts: 2}})
	for attempt := 1; attempt <= 2; attempt++ {
		ok, err := w.RunOne(e.ctx)
		if !ok || !errors.Is(err, errIndex) {
			t.Fatalf("attempt %d: %v %v, want the indexer's error", attempt, ok, err)
		}
	}
	got := e.ltRange(t, r.ID).Val
	if got.State != work.StateFailed || got.Attempts != 2 || len(got.Missed) != 1 || got.Missed[0] != [2]int64{1, 100} || got.Error == "" {
		t.Fatalf("range %+v: want failed after 2 attempts, all missed", got)
	}
	if s := w.Stats(); s.Failed != 2 {
		t.Errorf("stats %+v: want 2 failed", s)
	}
	if ok, err := w.RunOne(e.ctx); ok || err != nil {
		t.Errorf("RunOne after the range failed: %v %v", ok, err)
	}
}

var errIndex = errors.New("index broke")

type failing struct{ at int64 }

func (f failing) Begin(ctx context.Context, r work.Range) (work.RangeIndex, error) {
	return failingRange(f), nil
}

type failingRange struct{ at int64 }

func (f failingRange) Line(_ context.Context, a int64, _ []byte) error {
	if a == f.at {
		return errIndex
	}
	return nil
}

func (failingRange) End(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }

func TestNewWorkerChecks(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	for _, cfg := range []work.WorkerConfig{
		{},
		{Name: "w", Lease: work.LeaseConfig{TTL: time.Second}, Heartbeat: time.Second},
		{Name: "w", Idle: -time.Second},
	} {
		if _, err := work.NewWorker(e.st, work.CountingIndexer{}, cfg); err == nil {
			t.Errorf("NewWorker(%+v): no error", cfg)
		}
	}
	w, err := work.NewWorker(e.st, work.CountingIndexer{}, work.WorkerConfig{Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(e.ctx); err != nil {
		t.Errorf("Stop without Start: %v", err)
	}
}

func TestArticleDigest(t *testing.T) {
	t.Parallel()
	base := work.ExpectedCount("g", []int64{1, 2, 3})
	for name, c := range map[string]work.GroupCount{
		"duplicate":   work.ExpectedCount("g", []int64{1, 2, 2, 3}),
		"gap":         work.ExpectedCount("g", []int64{1, 3}),
		"moved":       work.ExpectedCount("g", []int64{1, 2, 4}),
		"other group": work.ExpectedCount("h", []int64{1, 2, 3}),
	} {
		if c.Sum == base.Sum {
			t.Errorf("%s: same digest sum as the articles once", name)
		}
	}
	var sum work.GroupCount
	for _, part := range [][]int64{{3}, {1, 2}} {
		sum.Add(work.ExpectedCount("g", part))
	}
	if sum != base {
		t.Errorf("parts add to %+v, want %+v", sum, base)
	}
}

// doneWatch tells asked when Done is first called.
type doneWatch struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (d *doneWatch) Done() <-chan struct{} {
	d.once.Do(func() { close(d.asked) })
	return d.Context.Done()
}

// The worker checks what it read against the range record: a spool that
// lost a chunk, one with an overlapping chunk and one with lines outside
// the range each fail the range (the reason says what differed) instead
// of finishing it with a wrong result.
func TestWorkerChecksSpool(t *testing.T) {
	t.Parallel()
	lines := func(first, last int64) [][]byte {
		var out [][]byte
		for a := first; a <= last; a++ {
			out = append(out, ltLine("alt.x", a))
		}
		return out
	}
	for name, tc := range map[string]struct {
		spoil func(e *ltEnv, r *work.Range)
		want  string
	}{
		"missing chunk": {
			spoil: func(e *ltEnv, r *work.Range) {
				m, err := e.st.Spool(r.ID).GetKey(e.ctx, "c000000000101")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.st.Spool(r.ID).Delete(e.ctx, persist.Delete{Seqs: []uint64{m.Seq}}); err != nil {
					t.Fatal(err)
				}
			},
			want: "holds 200 lines in 2 chunks, the range record says 300 in 3",
		},
		"overlapping chunk": {
			// The record's counts agree with the spool: only the order
			// of the articles gives it away.
			spoil: func(e *ltEnv, r *work.Range) {
				if err := e.st.WriteChunk(e.ctx, r.ID, 150, 249, lines(150, 249)); err != nil {
					t.Fatal(err)
				}
				r.Articles, r.Chunks = 400, 4
			},
			want: "article 150 after article 200",
		},
		"lines outside the range": {
			spoil: func(e *ltEnv, r *work.Range) {
				if err := e.st.WriteChunk(e.ctx, r.ID, 301, 310, lines(301, 310)); err != nil {
					t.Fatal(err)
				}
				r.Articles, r.Chunks = 310, 4
			},
			want: "article 301 outside the range's 1-300",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := ltStart(t)
			r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 300, nil)
			tc.spoil(e, &r)
			if _, err := e.st.PutRange(e.ctx, r, e.ltRange(t, r.ID).Seq); err != nil {
				t.Fatal(err)
			}
			w := ltWorker(t, e.st, work.CountingIndexer{}, work.WorkerConfig{Name: "w", Lease: work.LeaseConfig{MaxAttempts: 1}})
			ok, err := w.RunOne(e.ctx)
			if !ok || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunOne: %v %v; want an error saying %q", ok, err, tc.want)
			}
			got := e.ltRange(t, r.ID).Val
			if got.State != work.StateFailed || !strings.Contains(got.Error, tc.want) || got.Result != nil {
				t.Fatalf("range %+v: want failed, saying %q, without a result", got, tc.want)
			}
			if s := w.Stats(); s.Failed != 1 || s.Finished != 0 {
				t.Errorf("stats %+v: want 1 failed, none finished", s)
			}
		})
	}
}

// A Stop that lands between the loop's stop check and Acquire: the range
// Acquire takes is given back at once, not indexed after the stop.
func TestWorkerStopBeforeAcquireReleases(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 100, nil)
	w := ltWorker(t, e.st, work.CountingIndexer{}, work.WorkerConfig{Name: "w"})
	stopped := make(chan error, 1)
	var once sync.Once
	work.SetBeforeAcquire(w, func() {
		once.Do(func() {
			go func() { stopped <- w.Stop(e.ctx) }()
			<-work.StopAsked(w)
		})
	})
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	got := e.ltRange(t, r.ID).Val
	if got.State != work.StateSpooled || got.Attempts != 0 {
		t.Fatalf("range after Stop: %s, %d attempts; want spooled, 0 (given back)", got.State, got.Attempts)
	}
	if s := w.Stats(); s.Released != 1 || s.Finished != 0 {
		t.Errorf("stats %+v: want 1 released, none finished", s)
	}
}

// A heartbeat call that hangs is cut off after one heartbeat interval, so
// a Stop that cannot wait returns soon, not a lease TTL later.
func TestWorkerStopBoundsHungHeartbeat(t *testing.T) {
	t.Parallel()
	e := ltStart(t)
	r, _ := e.ltSpooled(t, "alt.x", work.KindTail, 1, 200, nil)
	g := newGate(100)
	w := ltWorker(t, e.st, g, work.WorkerConfig{Name: "w", Lease: work.LeaseConfig{TTL: time.Minute}, Heartbeat: 100 * time.Millisecond})
	hung := make(chan struct{})
	var once sync.Once
	work.SetHeartbeatCall(w, func(ctx context.Context, _ *work.Held, _ int64) error {
		// A persist call that does not answer: it ends only with ctx.
		once.Do(func() { close(hung) })
		<-ctx.Done()
		return ctx.Err()
	})
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	<-g.reached
	<-hung
	ctx, cancel := context.WithCancel(e.ctx)
	cancel() // no time to finish
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop still waiting for the hung heartbeat after 10s (the lease TTL is 1m)")
	}
	if got := e.ltRange(t, r.ID).Val; got.State != work.StateSpooled {
		t.Errorf("range after Stop: %s, want released", got.State)
	}
}
