package work

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

const pfGroup = "alt.binaries.test"

// pfEnv is one prefetch test's persist, store, NNTP server and pool.
type pfEnv struct {
	st   *Store
	srv  *nntptest.Server
	pool *nntp.Pool
}

func newPFEnv(t testing.TB, articles int64, conns int) *pfEnv {
	t.Helper()
	ctx := context.Background()
	env := persistenv.Start(t, 1)
	st, err := NewStore(env.Client(), "src")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Init(ctx); err != nil {
		t.Fatal(err)
	}
	srv := nntptest.Start(t)
	srv.AddGroup(pfGroup, articles)
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: srv.Addr()}, Size: conns, HealthEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })
	return &pfEnv{st: st, srv: srv, pool: pool}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (e *pfEnv) prefetcher(t *testing.T, cfg PrefetchConfig) *Prefetcher {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	p, err := NewPrefetcher(e.st, e.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// putRanges writes planned ranges id, id+1, ... of size articles each,
// from article 1 on.
func (e *pfEnv) putRanges(t testing.TB, firstID uint64, n int, size int64, kind string) []Range {
	t.Helper()
	var out []Range
	for i := range n {
		r := Range{ID: firstID + uint64(i), Group: pfGroup, First: 1 + int64(i)*size, Last: int64(i+1) * size, Kind: kind, State: StatePlanned}
		if _, err := e.st.PutRange(context.Background(), r, 0); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// direct reads first..last with one OVER on a connection of its own.
func (e *pfEnv) direct(t *testing.T, first, last int64) [][]byte {
	t.Helper()
	ctx := context.Background()
	c, err := nntp.Dial(ctx, nntp.Config{Addr: e.srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Group(ctx, pfGroup); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	if err := c.OverLines(ctx, first, last, func(l []byte) error {
		out = append(out, bytes.Clone(l))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// spool reads range id's spool, failing on an article seen twice.
func (e *pfEnv) spool(t *testing.T, id uint64) [][]byte {
	t.Helper()
	var out [][]byte
	seen := map[int64]bool{}
	if _, err := e.st.ReadSpool(context.Background(), id, func(a int64, l []byte) error {
		if seen[a] {
			return fmt.Errorf("article %d spooled twice", a)
		}
		seen[a] = true
		out = append(out, bytes.Clone(l))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSpooled checks that range r is spooled with exactly the server's
// lines of its articles.
func (e *pfEnv) checkSpooled(t *testing.T, r Range) {
	t.Helper()
	v, err := e.st.Range(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := e.direct(t, r.First, r.Last)
	got := e.spool(t, r.ID)
	if v.Val.State != StateSpooled || v.Val.Articles != int64(len(want)) {
		t.Errorf("range %d: state %s, %d articles; want spooled, %d", r.ID, v.Val.State, v.Val.Articles, len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("range %d: spool holds %d lines, the server has %d", r.ID, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("range %d line %d:\n got %q\nwant %q", r.ID, i, got[i], want[i])
		}
	}
}

func (e *pfEnv) state(t *testing.T, id uint64) RangeState {
	t.Helper()
	v, err := e.st.Range(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return v.Val.State
}

func TestPrefetchSpoolsServerArticles(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 5000, 3)
	ranges := e.putRanges(t, 1, 2, 2500, KindHistory)
	p := e.prefetcher(t, PrefetchConfig{Chunk: 300})
	ts, err := p.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	chunks := int(2 * ((2500 + 299) / 300))
	if ts.Spooled != 2 || ts.Articles != 5000 || ts.Chunks != chunks {
		t.Errorf("tick: %+v, want 2 ranges, %d chunks, 5000 articles", ts, chunks)
	}
	for _, r := range ranges {
		e.checkSpooled(t, r)
	}
	s := p.Stats()
	if s.Ranges != 2 || s.Chunks != int64(chunks) || s.Articles != 5000 || s.Bytes == 0 || s.ChunkErrors != 0 || s.Dropped != 0 {
		t.Errorf("stats: %+v", s)
	}
	// Nothing planned is left: a second round does nothing.
	if ts, err := p.Tick(context.Background()); err != nil || ts != (TickStats{}) {
		t.Errorf("second tick: %+v, %v", ts, err)
	}
}

// A range past the group's articles (expired or not yet there) spools
// what the server has, and an empty range is spooled with nothing.
func TestPrefetchMissingArticles(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 1500, 2)
	for _, r := range []Range{
		{ID: 1, Group: pfGroup, First: 1001, Last: 2000, Kind: KindTail, State: StatePlanned},
		{ID: 2, Group: pfGroup, First: 3001, Last: 4000, Kind: KindTail, State: StatePlanned},
	} {
		if _, err := e.st.PutRange(context.Background(), r, 0); err != nil {
			t.Fatal(err)
		}
	}
	p := e.prefetcher(t, PrefetchConfig{Chunk: 200})
	if _, err := p.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.checkSpooled(t, Range{ID: 1, First: 1001, Last: 2000})
	v, err := e.st.Range(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if v.Val.State != StateSpooled || v.Val.Articles != 0 || v.Val.Chunks != 0 {
		t.Errorf("empty range: %+v", v.Val)
	}
}

func TestPrefetchShardTouchesOnlyItsRanges(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 4000, 2)
	ranges := e.putRanges(t, 1, 4, 1000, KindHistory)
	p := e.prefetcher(t, PrefetchConfig{Shard: Shard{Index: 2, Count: 2}, Chunk: 500})
	ts, err := p.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ts.Spooled != 2 {
		t.Errorf("spooled %d ranges, want 2", ts.Spooled)
	}
	for _, r := range ranges {
		if r.ID%2 == 1 { // shard 2/2 owns the odd ids
			e.checkSpooled(t, r)
			continue
		}
		if s := e.state(t, r.ID); s != StatePlanned {
			t.Errorf("range %d of shard 1/2: %s", r.ID, s)
		}
		keys, err := e.st.Spool(r.ID).Keys(context.Background())
		if err != nil || len(keys) != 0 {
			t.Errorf("range %d of shard 1/2: spool keys %v, %v", r.ID, keys, err)
		}
	}
}

func TestPrefetchAheadBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPFEnv(t, 6000, 2)
	e.putRanges(t, 1, 4, 1000, KindHistory)
	tail := e.putRanges(t, 5, 2, 1000, KindTail) // ids 5, 6; articles 1..2000 again
	p := e.prefetcher(t, PrefetchConfig{Ahead: 2})

	spooled := func() []uint64 {
		t.Helper()
		all, err := e.st.Ranges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, v := range all {
			if v.Val.State == StateSpooled {
				ids = append(ids, v.Val.ID)
			}
		}
		slices.Sort(ids) // Ranges is in write order
		return ids
	}
	if _, err := p.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	// Tail before history.
	if got := spooled(); fmt.Sprint(got) != fmt.Sprint([]uint64{tail[0].ID, tail[1].ID}) {
		t.Fatalf("after the first round spooled %v, want the tail [5 6]", got)
	}
	if _, err := p.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got := spooled(); len(got) != 2 {
		t.Fatalf("a round with Ahead spooled already spooled more: %v", got)
	}
	// A worker leases range 5: one more is spooled, the lowest history id.
	v, err := e.st.Range(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	v.Val.State = StateLeased
	if _, err := e.st.PutRange(ctx, v.Val, v.Seq); err != nil {
		t.Fatal(err)
	}
	ts, err := p.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := spooled(); ts.Spooled != 1 || fmt.Sprint(got) != "[1 6]" {
		t.Fatalf("after a lease: tick %+v, spooled %v, want [1 6]", ts, got)
	}
}

// countKeys is how many chunks range id's spool holds.
func countKeys(t *testing.T, st *Store, id uint64) int {
	t.Helper()
	keys, err := st.Spool(id).Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// A round cut short by the server leaves the range planned with part of
// its chunks; the next round spools every article exactly once.
func TestPrefetchAfterCutServer(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 3000, 1)
	ranges := e.putRanges(t, 1, 1, 3000, KindHistory)
	p := e.prefetcher(t, PrefetchConfig{Chunk: 250})
	// Fill the first chunks, then cut every answer from now on.
	ctx := context.Background()
	for lo := int64(1); lo <= 1000; lo += 250 {
		lines := e.direct(t, lo, lo+249)
		if err := e.st.WriteChunk(ctx, 1, lo, lo+249, lines); err != nil {
			t.Fatal(err)
		}
	}
	e.srv.SetFaults(nntptest.Faults{CutAfter: 100})
	ts, err := p.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Spooled != 0 || e.state(t, 1) != StatePlanned {
		t.Fatalf("a cut round spooled the range: %+v, %s", ts, e.state(t, 1))
	}
	if s := p.Stats(); s.ChunkErrors < chunkAttempts {
		t.Errorf("chunk errors %d, want at least %d", s.ChunkErrors, chunkAttempts)
	}
	e.srv.SetFaults(nntptest.Faults{})
	ts, err = p.Tick(ctx)
	if err != nil || ts.Spooled != 1 {
		t.Fatalf("second round: %+v, %v", ts, err)
	}
	e.checkSpooled(t, ranges[0])
	if n := countKeys(t, e.st, 1); n != 12 {
		t.Errorf("spool holds %d chunks, want 12", n)
	}
}

// (Was: a range ending within a chunk of 2^63-1 stepped its next chunk's start past it to a negative number, again below the range's last article, so the round, and its check of an earlier round's chunk keys, appended until they ran out of memory; and the lines of the articles from 2^63-8 on were dropped as not overview lines.)
func TestPrefetchNumbersAtTopOfInt64(t *testing.T) {
	t.Parallel()
	// The server's high mark is the top itself (the test server's OVER
	// walk stops there too).
	e := newPFEnv(t, math.MaxInt64, 2)
	r := Range{ID: 1, Group: pfGroup, First: math.MaxInt64 - 149, Last: math.MaxInt64, Kind: KindTail, State: StatePlanned}
	ctx := context.Background()
	if _, err := e.st.PutRange(ctx, r, 0); err != nil {
		t.Fatal(err)
	}
	// An earlier round cut off after its first chunk: this round checks
	// the chunk's key against its own.
	if err := e.st.WriteChunk(ctx, r.ID, r.First, r.First+99, e.direct(t, r.First, r.First+99)); err != nil {
		t.Fatal(err)
	}
	p := e.prefetcher(t, PrefetchConfig{Chunk: 100})
	ts, err := p.Tick(ctx)
	if err != nil || ts != (TickStats{Spooled: 1, Chunks: 2, Articles: 150}) {
		t.Fatalf("tick = %+v, %v; want the range spooled in 2 chunks of 150 articles", ts, err)
	}
	e.checkSpooled(t, r)
	if n := countKeys(t, e.st, r.ID); n != 2 {
		t.Errorf("spool holds %d chunks, want 2", n)
	}
}

// A round canceled mid-range, then a prefetcher with another chunk size
// (a restart with a new config): every article is spooled exactly once.
func TestPrefetchAfterCanceledRound(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 4000, 2)
	ranges := e.putRanges(t, 1, 1, 4000, KindHistory)
	// Slow answers, so the cancel lands mid-range.
	e.srv.SetFaults(nntptest.Faults{Delay: 20 * time.Millisecond})
	p := e.prefetcher(t, PrefetchConfig{Chunk: 300})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := make(chan error, 1)
	go func() {
		_, err := p.Tick(ctx)
		tick <- err
	}()
	// Cancel once a few chunks are in the spool.
	testwait.For(t, "three chunks spooled", func() bool { return p.Stats().Chunks >= 3 })
	cancel()
	if err := <-tick; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled tick: %v, want context.Canceled", err)
	}
	if e.state(t, 1) != StatePlanned {
		t.Fatalf("canceled round: range %s", e.state(t, 1))
	}
	if n := countKeys(t, e.st, 1); n < 3 || n >= 14 {
		t.Fatalf("canceled round left %d chunks, want some but not all", n)
	}
	e.srv.SetFaults(nntptest.Faults{})
	p2 := e.prefetcher(t, PrefetchConfig{Chunk: 700})
	if ts, err := p2.Tick(context.Background()); err != nil || ts.Spooled != 1 {
		t.Fatalf("second round: %+v, %v", ts, err)
	}
	e.checkSpooled(t, ranges[0])
}

// A range whose chunks keep failing (its group is gone from the server)
// stays planned, goes after the others, and is tried again each round.
func TestPrefetchFailingRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPFEnv(t, 1000, 1) // one chunk at a time: the counts are exact
	bad := Range{ID: 1, Group: "alt.gone", First: 1, Last: 1000, Kind: KindHistory, State: StatePlanned}
	if _, err := e.st.PutRange(ctx, bad, 0); err != nil {
		t.Fatal(err)
	}
	good := e.putRanges(t, 2, 1, 1000, KindHistory)[0]
	p := e.prefetcher(t, PrefetchConfig{Ahead: 1, Chunk: 500})
	ts, err := p.Tick(ctx)
	if err != nil || ts.Spooled != 0 {
		t.Fatalf("first round: %+v, %v; want the bad range tried and nothing spooled", ts, err)
	}
	if s := p.Stats(); s.ChunkErrors != chunkAttempts {
		t.Errorf("chunk errors %d, want %d (one chunk's attempts, the rest skipped)", s.ChunkErrors, chunkAttempts)
	}
	if ts, err := p.Tick(ctx); err != nil || ts.Spooled != 1 {
		t.Fatalf("second round: %+v, %v; want the good range spooled", ts, err)
	}
	e.checkSpooled(t, good)
	// Ahead is used up by the good range; a lease frees it, and the bad
	// range is tried again (and fails again).
	v, err := e.st.Range(ctx, good.ID)
	if err != nil {
		t.Fatal(err)
	}
	v.Val.State = StateLeased
	if _, err := e.st.PutRange(ctx, v.Val, v.Seq); err != nil {
		t.Fatal(err)
	}
	if ts, err := p.Tick(ctx); err != nil || ts.Spooled != 0 || p.Stats().ChunkErrors != 2*chunkAttempts {
		t.Fatalf("third round: %+v, %v, %d chunk errors", ts, err, p.Stats().ChunkErrors)
	}
	if s := e.state(t, bad.ID); s != StatePlanned {
		t.Errorf("bad range: %s", s)
	}
}

// Lines that are not overview lines of the chunk are left out of the
// spool (the worker could not read them), and counted.
func TestPrefetchDropsGarbageLines(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 1000, 1)
	r := e.putRanges(t, 1, 1, 1000, KindHistory)[0]
	e.srv.SetFaults(nntptest.Faults{GarbageEvery: 10})
	want := e.direct(t, 1, 1000)
	p := e.prefetcher(t, PrefetchConfig{Chunk: 400})
	if ts, err := p.Tick(context.Background()); err != nil || ts.Spooled != 1 || ts.Articles == 0 {
		t.Fatalf("tick: %+v, %v", ts, err)
	}
	got := e.spool(t, r.ID)
	var keep [][]byte
	for _, l := range want {
		if !bytes.HasPrefix(l, []byte("garbage")) {
			keep = append(keep, l)
		}
	}
	if len(got) != len(keep) || int64(len(want)-len(keep)) != p.Stats().Dropped {
		t.Fatalf("spooled %d lines, dropped %d; the server sent %d of which %d overview lines", len(got), p.Stats().Dropped, len(want), len(keep))
	}
	for i := range keep {
		if !bytes.Equal(got[i], keep[i]) {
			t.Fatalf("line %d: %q, want %q", i, got[i], keep[i])
		}
	}
}

func TestPrefetchStop(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 20000, 2)
	e.putRanges(t, 1, 2, 10000, KindHistory)
	e.srv.SetFaults(nntptest.Faults{Delay: 5 * time.Millisecond})
	p := e.prefetcher(t, PrefetchConfig{Chunk: 100})
	type result struct {
		ts  TickStats
		err error
	}
	res := make(chan result, 1)
	go func() {
		ts, err := p.Tick(context.Background())
		res <- result{ts, err}
	}()
	testwait.For(t, "five chunks written", func() bool { return p.Stats().Chunks >= 5 })
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err) // never started: Stop only stops the running Tick
	}
	r := <-res
	if !errors.Is(r.err, ErrStopped) {
		t.Fatalf("stopped tick: %+v, %v; want ErrStopped", r.ts, r.err)
	}
	if a := p.Active(); a != 0 {
		t.Errorf("Active %d after the round returned", a)
	}
	chunks, cmds := p.Stats().Chunks, e.srv.Stats().Commands
	if chunks >= 200 {
		t.Fatalf("every chunk was written (%d) before Stop took effect", chunks)
	}
	if _, err := p.Tick(context.Background()); !errors.Is(err, ErrStopped) {
		t.Errorf("tick after Stop: %v", err)
	}
	if got := e.srv.Stats().Commands; got != cmds || p.Stats().Chunks != chunks {
		t.Errorf("after Stop: %d more commands, %d more chunks", got-cmds, p.Stats().Chunks-chunks)
	}
	for _, id := range []uint64{1, 2} {
		if s := e.state(t, id); s != StatePlanned {
			t.Errorf("range %d: %s after a stopped round", id, s)
		}
	}
}

func TestNewPrefetcherChecksConfig(t *testing.T) {
	e := &pfEnv{st: &Store{}}
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []PrefetchConfig{
		{Shard: Shard{Index: 3, Count: 2}},
		{Shard: Shard{Index: 0, Count: 2}},
		{Ahead: -1},
		{Chunk: -5},
	} {
		if _, err := NewPrefetcher(e.st, pool, cfg); err == nil {
			t.Errorf("NewPrefetcher(%+v): no error", cfg)
		}
	}
	if _, err := NewPrefetcher(e.st, nil, PrefetchConfig{}); err == nil {
		t.Error("NewPrefetcher without a pool: no error")
	}
	p, err := NewPrefetcher(e.st, pool, PrefetchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Shard != (Shard{1, 1}) || p.cfg.Ahead != PrefetchAheadDefault || p.cfg.Chunk != ChunkDefault || p.log == nil {
		t.Errorf("defaults: %+v", p.cfg)
	}
}

func TestLineArticle(t *testing.T) {
	for line, want := range map[string]int64{
		"12\tsubject": 12, "7": 7, "0\tx": -1, "\tx": -1, "": -1, "x1\t": -1,
		"+3\tx": -1, "99999999999999999999\tx": -1, "9223372036854775808\t": -1,
		"9223372036854775807\t": math.MaxInt64, "9223372036854775800\tx": math.MaxInt64 - 7,
	} {
		n, ok := lineArticle([]byte(line))
		if !ok {
			n = -1
		}
		if n != want {
			t.Errorf("lineArticle(%q) = %d, want %d", line, n, want)
		}
	}
}

// TestPrefetcherStartStop: a started prefetcher spools the planned ranges
// round after round, and follows the lifecycle rules.
func TestPrefetcherStartStop(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 2000, 1)
	e.putRanges(t, 1, 2, 1000, KindHistory)
	p := e.prefetcher(t, PrefetchConfig{Chunk: 100, Tick: time.Millisecond})
	lifecycletest.Start(t, p)
	testwait.For(t, "both ranges spooled", func() bool {
		return e.state(t, 1) == StateSpooled && e.state(t, 2) == StateSpooled
	})
	lifecycletest.Stop(t, p)
	if _, err := p.Tick(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Tick after Stop: %v, want ErrStopped", err)
	}
}

// TestPrefetcherStopDeadline: chunks that do not finish before Stop's
// deadline are cut off, Stop says so, and their range stays planned.
func TestPrefetcherStopDeadline(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 1000, 1)
	e.putRanges(t, 1, 1, 1000, KindHistory)
	e.srv.SetFaults(nntptest.Faults{HoldOver: true})
	p := e.prefetcher(t, PrefetchConfig{Chunk: 100})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a chunk in flight", func() bool { return p.Active() > 0 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop past its deadline: %v, want context.Canceled", err)
	}
	if a := p.Active(); a != 0 {
		t.Errorf("Active %d after Stop returned", a)
	}
	if s := e.state(t, 1); s != StatePlanned {
		t.Errorf("range 1: %s after a cut-off round, want planned", s)
	}
}
