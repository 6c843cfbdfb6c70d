package work

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/nntp"
)

const (
	// chunkAttempts is how many times one chunk is fetched (and written)
	// before its range is given up for the round.
	chunkAttempts = 3
	// holdChunks bounds how many chunks a fetcher runs on one connection
	// before handing it back to the pool, so other users of the pool (and
	// a shrink) get their turn within a round.
	holdChunks = 16
)

// ErrStopped: the prefetcher was stopped; it starts no new chunk.
var ErrStopped = errors.New("work: prefetcher stopped")

// PrefetchConfig configures a Prefetcher.
type PrefetchConfig struct {
	// Shard is the part of the ranges this prefetcher spools. Zero means
	// 1/1 (every range).
	Shard Shard
	// Ahead is how many of the shard's ranges to keep spooled and not yet
	// leased. Zero means PrefetchAheadDefault.
	Ahead int
	// Chunk is how many articles one OVER asks for and one spool message
	// holds. Zero means ChunkDefault.
	Chunk int64
	// Tick is the round of a started prefetcher (Start). Zero means
	// TickDefault.
	Tick time.Duration
	// Logger receives the failures of ranges, which are retried on the
	// next round. Nil means slog.Default(); its lines carry
	// role=prefetcher.
	Logger *slog.Logger
}

func (c PrefetchConfig) withDefaults() PrefetchConfig {
	if c.Shard == (Shard{}) {
		c.Shard = Shard{Index: 1, Count: 1}
	}
	if c.Ahead == 0 {
		c.Ahead = PrefetchAheadDefault
	}
	if c.Chunk == 0 {
		c.Chunk = ChunkDefault
	}
	if c.Tick == 0 {
		c.Tick = TickDefault
	}
	return c
}

func (c PrefetchConfig) validate() error {
	if c.Shard.Count < 1 || c.Shard.Index < 1 || c.Shard.Index > c.Shard.Count {
		return fmt.Errorf("work: prefetch: bad shard %s", c.Shard)
	}
	if c.Ahead < 0 {
		return fmt.Errorf("work: prefetch: negative ahead %d", c.Ahead)
	}
	if c.Chunk < 0 {
		return fmt.Errorf("work: prefetch: negative chunk %d", c.Chunk)
	}
	if c.Tick < 0 {
		return fmt.Errorf("work: prefetch: negative tick %v", c.Tick)
	}
	return nil
}

// TickStats is what one Tick did.
type TickStats struct {
	// Spooled is how many ranges it moved to spooled.
	Spooled int
	// Chunks and Articles are what those ranges' spools hold.
	Chunks   int
	Articles int64
}

// PrefetchStats are a prefetcher's counters since it was made.
type PrefetchStats struct {
	Ranges   int64 // ranges moved to spooled
	Chunks   int64 // chunks written (of any range, spooled or not yet)
	Articles int64 // overview lines written
	Bytes    int64 // bytes of overview lines written
	// ChunkErrors counts failed attempts at a chunk (fetch or write).
	ChunkErrors int64
	// Dropped counts lines the server sent that were not an overview line
	// of the chunk's articles (no number, out of the asked range, or not
	// after the line before): they are left out of the spool.
	Dropped int64
}

// Prefetcher keeps a coordinator shard's ranges spooled ahead of the
// workers: each Tick fetches the overview of the next planned ranges
// through an NNTP pool into their spools and marks them spooled. Start
// runs a Tick every PrefetchConfig.Tick until Stop; Tick may also be
// called on its own. Its methods are safe for concurrent use; Ticks run
// one at a time.
type Prefetcher struct {
	st   *Store
	pool *nntp.Pool
	cfg  PrefetchConfig
	log  *slog.Logger

	base  lifecycle.Base
	abort context.CancelFunc // cancels the rounds' context: chunks in flight are cut off
	done  chan struct{}      // closed when the round loop has returned

	tickMu   sync.Mutex     // one round at a time; protects failures
	failures map[uint64]int // rounds in a row a range failed, by id
	mu       sync.Mutex     // protects stopped; held while a chunk is taken
	stopped  bool
	active   atomic.Int64
	ranges   atomic.Int64
	chunks   atomic.Int64
	articles atomic.Int64
	bytes    atomic.Int64
	errs     atomic.Int64
	dropped  atomic.Int64
}

// NewPrefetcher checks cfg and returns a prefetcher spooling st's ranges
// through pool (which the caller starts, sizes and stops).
func NewPrefetcher(st *Store, pool *nntp.Pool, cfg PrefetchConfig) (*Prefetcher, error) {
	if st == nil || pool == nil {
		return nil, errors.New("work: prefetch: store and pool are required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Prefetcher{st: st, pool: pool, cfg: cfg, log: lifecycle.Logger(cfg.Logger, "prefetcher"), failures: map[uint64]int{}}, nil
}

// Start runs a round at once and then every Tick, until Stop; a failed
// round is logged and the next one tries again. ctx is used only to start
// (the lifecycle package's rules: a second Start fails, a stopped
// prefetcher does not start again).
func (p *Prefetcher) Start(ctx context.Context) error {
	return p.base.Start(ctx, "work: prefetcher", func(context.Context) error {
		run := p.base.Run()
		// The rounds' context is not the run context, which ends as soon as
		// Stop begins: the chunks in flight are still written within Stop's
		// deadline, and only past it is this one cancelled.
		fetch, cancel := context.WithCancel(context.WithoutCancel(run))
		p.abort, p.done = cancel, make(chan struct{})
		go p.loop(run, fetch)
		return nil
	})
}

func (p *Prefetcher) loop(run, fetch context.Context) {
	defer close(p.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-run.Done():
			return
		case <-t.C:
		}
		_, err := p.Tick(fetch)
		switch {
		case errors.Is(err, ErrStopped):
			return // Stop: the round's chunks in flight are written
		case err != nil && fetch.Err() == nil:
			p.log.Error("prefetch round failed", "err", err)
		}
		t.Reset(p.cfg.Tick)
	}
}

// Active is the number of chunks being fetched or written now.
func (p *Prefetcher) Active() int { return int(p.active.Load()) }

// Stop makes the prefetcher start no new chunk: a Tick running finishes
// the chunks in flight and returns ErrStopped, leaving the ranges it did
// not finish planned (a later prefetcher fetches them again, replacing
// their chunks). Later Ticks return ErrStopped, whether or not the
// prefetcher was started. Stop waits for the round loop of Start until ctx
// ends; then it cuts the chunks in flight off, waits for the loop to
// return and says so with an error wrapping ctx.Err().
func (p *Prefetcher) Stop(ctx context.Context) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	return p.base.Stop(ctx, func(ctx context.Context) error {
		select {
		case <-p.done:
			return nil
		case <-ctx.Done():
			active := p.Active()
			p.abort()
			<-p.done
			return fmt.Errorf("work: prefetcher stop: %d chunks in flight cut off: %w", active, ctx.Err())
		}
	})
}

func (p *Prefetcher) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// Stats returns the prefetcher's counters.
func (p *Prefetcher) Stats() PrefetchStats {
	return PrefetchStats{
		Ranges:      p.ranges.Load(),
		Chunks:      p.chunks.Load(),
		Articles:    p.articles.Load(),
		Bytes:       p.bytes.Load(),
		ChunkErrors: p.errs.Load(),
		Dropped:     p.dropped.Load(),
	}
}

// target is one range being spooled in a round.
type target struct {
	v      Versioned[Range]
	stale  map[string]bool // chunk keys already in the spool (from an earlier try)
	left   atomic.Int64    // chunks not yet written
	failed atomic.Bool     // a chunk ran out of attempts: skip the rest
	mu     sync.Mutex      // protects the fields below
	chunks int
	lines  int64
}

// job is one chunk of a target.
type job struct {
	t           *target
	first, last int64
}

// Tick runs one round: it reads the ranges, counts the shard's ranges that
// are spooled (not leased), and while they are fewer than Ahead spools the
// shard's next planned ones (tail before history, lowest id first). The
// chunks are fetched concurrently on as many pool connections as the pool
// allows, one chunk per connection at a time; a range is marked spooled as
// soon as its last chunk is written. A range whose chunk keeps failing is
// logged and stays planned for the next round. The error is the round's
// own (reading the ranges, ctx, Stop), not a range's.
func (p *Prefetcher) Tick(ctx context.Context) (TickStats, error) {
	p.tickMu.Lock()
	defer p.tickMu.Unlock()
	if p.isStopped() {
		return TickStats{}, ErrStopped
	}
	all, err := p.st.Ranges(ctx)
	if err != nil {
		return TickStats{}, fmt.Errorf("work: prefetch: %w", err)
	}
	var planned []Versioned[Range]
	spooled := 0
	for _, v := range all {
		if !p.cfg.Shard.Owns(v.Val.ID) {
			continue
		}
		switch v.Val.State {
		case StateSpooled:
			spooled++
		case StatePlanned:
			if r := v.Val; r.First < 1 || r.Last < r.First || r.Group == "" {
				p.log.Warn("prefetch: skipping a malformed range", "range", r.ID, "group", r.Group, "first", r.First, "last", r.Last)
				continue
			}
			planned = append(planned, v)
		}
	}
	for id := range p.failures {
		if !slices.ContainsFunc(planned, func(v Versioned[Range]) bool { return v.Val.ID == id }) {
			delete(p.failures, id) // spooled by another, or gone
		}
	}
	need := p.cfg.Ahead - spooled
	if need <= 0 || len(planned) == 0 {
		return TickStats{}, nil
	}
	slices.SortFunc(planned, func(a, b Versioned[Range]) int {
		// A range that failed in the last rounds goes after the others,
		// so that a few failing ranges do not hold up the whole shard.
		if fa, fb := p.failures[a.Val.ID], p.failures[b.Val.ID]; fa != fb {
			return cmp.Compare(fa, fb)
		}
		// Tail first: new articles are what readers wait for.
		ta, tb := a.Val.Kind == KindTail, b.Val.Kind == KindTail
		if ta != tb {
			if ta {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Val.ID, b.Val.ID)
	})
	planned = planned[:min(need, len(planned))]
	workers := p.pool.Stats().Allowed
	if workers <= 0 {
		// No connection to fetch with (the share granted none): Acquire
		// would wait for the whole round.
		p.log.Debug("prefetch: the pool allows no connection; nothing fetched")
		return TickStats{}, nil
	}

	rd := &round{p: p, ctx: ctx}
	var targets []*target
	for _, v := range planned {
		t, err := p.prepare(ctx, v)
		if err != nil {
			if ctx.Err() != nil {
				return TickStats{}, fmt.Errorf("work: prefetch: %w", ctx.Err())
			}
			p.log.Warn("prefetch: range not started", "range", v.Val.ID, "group", v.Val.Group, "err", err)
			continue
		}
		n := int64(0)
		for lo, hi := range spans(v.Val.First, v.Val.Last, p.cfg.Chunk) {
			rd.jobs = append(rd.jobs, job{t: t, first: lo, last: hi})
			n++
		}
		t.left.Store(n)
		targets = append(targets, t)
	}
	rd.run(min(workers, len(rd.jobs)))
	for _, t := range targets {
		if ctx.Err() != nil {
			break // a canceled round says nothing of its ranges
		}
		if t.failed.Load() {
			p.failures[t.v.Val.ID]++
		} else {
			delete(p.failures, t.v.Val.ID)
		}
	}
	if err := ctx.Err(); err != nil {
		return rd.stats, fmt.Errorf("work: prefetch: %w", err)
	}
	if rd.stopped {
		return rd.stats, ErrStopped
	}
	return rd.stats, nil
}

// round is one Tick's work: its chunks, fetched by one goroutine per
// connection and written by as many writers, so that a connection fetches
// its next chunk while persist stores the one before.
type round struct {
	p    *Prefetcher
	ctx  context.Context
	jobs []job

	mu      sync.Mutex // protects the fields below
	next    int        // the next job to hand out
	stopped bool       // Stop ended the round early
	stats   TickStats

	writes chan *fetched
	free   chan *fetched // buffers to reuse
}

// fetched is a chunk's lines, back to back in buf, line i ending at
// ends[i].
type fetched struct {
	j    *job
	buf  []byte
	ends []int
}

func (rd *round) run(workers int) {
	if workers <= 0 {
		return
	}
	// A fetcher goes on to its next chunk while writers store the ones
	// it fetched (at most workers queued); the buffers go round.
	rd.writes = make(chan *fetched, workers)
	rd.free = make(chan *fetched, 3*workers)
	var fw, ww sync.WaitGroup
	for range workers {
		fw.Add(1)
		go func() {
			defer fw.Done()
			f := fetcher{rd: rd}
			defer f.release()
			f.run()
		}()
		ww.Add(1)
		go func() {
			defer ww.Done()
			rd.writer()
		}()
	}
	fw.Wait()
	close(rd.writes)
	ww.Wait()
}

// take hands out the next chunk whose range has not failed; nil when
// there is none, ctx ended or Stop was called. The stop check and the
// Active count are under p.mu, so that after Stop returns no chunk starts.
func (rd *round) take() *job {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	p := rd.p
	for rd.next < len(rd.jobs) && rd.ctx.Err() == nil {
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			rd.stopped = true
			return nil
		}
		j := &rd.jobs[rd.next]
		rd.next++
		if j.t.failed.Load() {
			p.mu.Unlock()
			continue
		}
		p.active.Add(1)
		p.mu.Unlock()
		return j
	}
	return nil
}

// buffer returns a chunk buffer to fill.
func (rd *round) buffer(j *job) *fetched {
	select {
	case b := <-rd.free:
		b.j, b.buf, b.ends = j, b.buf[:0], b.ends[:0]
		return b
	default:
		return &fetched{j: j}
	}
}

func (rd *round) recycle(b *fetched) {
	b.j = nil
	select {
	case rd.free <- b:
	default:
	}
}

// fail gives up j's range for the round (logged once).
func (rd *round) fail(j *job, err error) {
	rd.p.active.Add(-1)
	if !j.t.failed.Swap(true) && rd.ctx.Err() == nil {
		rd.p.log.Warn("prefetch: range left planned for the next round",
			"range", j.t.v.Val.ID, "group", j.t.v.Val.Group,
			"chunk", fmt.Sprintf("%d-%d", j.first, j.last), "err", err)
	}
}

// writer stores fetched chunks, trying each up to chunkAttempts times, and
// marks a range spooled once its last chunk is stored.
func (rd *round) writer() {
	for b := range rd.writes {
		j := b.j
		if j.t.failed.Load() {
			// Its range is given up for the round: the next one fetches
			// this chunk again anyway.
			rd.recycle(b)
			rd.p.active.Add(-1)
			continue
		}
		var err error
		for range chunkAttempts {
			if err = rd.p.write(rd.ctx, b); err == nil || rd.ctx.Err() != nil {
				break
			}
			rd.p.errs.Add(1)
		}
		rd.recycle(b)
		if err != nil {
			rd.fail(j, err)
			continue
		}
		rd.p.active.Add(-1)
		if j.t.left.Add(-1) == 0 && !j.t.failed.Load() {
			rd.finish(j.t)
		}
	}
}

func (rd *round) finish(t *target) {
	r, err := rd.p.finish(rd.ctx, t)
	if err != nil {
		if rd.ctx.Err() == nil {
			rd.p.log.Warn("prefetch: range spooled but not marked", "range", t.v.Val.ID, "err", err)
		}
		return
	}
	rd.mu.Lock()
	rd.stats.Spooled++
	rd.stats.Chunks += r.Chunks
	rd.stats.Articles += r.Articles
	rd.mu.Unlock()
}

// prepare readies range v's spool: chunks left by an earlier try are
// replaced by key as they are fetched again, unless one of them does not
// start where this prefetcher's chunks start (the chunk size changed), in
// which case the spool is dropped so that no article is spooled twice.
func (p *Prefetcher) prepare(ctx context.Context, v Versioned[Range]) (*target, error) {
	t := &target{v: v}
	keys, err := p.st.Spool(v.Val.ID).Keys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list spool: %w", err)
	}
	if len(keys) == 0 {
		return t, nil
	}
	want := map[string]bool{}
	for lo := range spans(v.Val.First, v.Val.Last, p.cfg.Chunk) {
		want[chunkKey(lo)] = true
	}
	t.stale = map[string]bool{}
	for _, k := range keys {
		if !want[k] {
			if err := p.st.DropSpool(ctx, v.Val.ID); err != nil {
				return nil, err
			}
			t.stale = nil
			return t, nil
		}
		t.stale[k] = true
	}
	return t, nil
}

// finish marks t spooled with a compare-and-set on the record read at the
// start of the round.
func (p *Prefetcher) finish(ctx context.Context, t *target) (Range, error) {
	r := t.v.Val
	r.State = StateSpooled
	t.mu.Lock()
	r.Articles, r.Chunks = t.lines, t.chunks
	t.mu.Unlock()
	if _, err := p.st.PutRange(ctx, r, t.v.Seq); err != nil {
		return Range{}, err
	}
	p.ranges.Add(1)
	p.log.Debug("prefetch: range spooled", "range", r.ID, "group", r.Group, "articles", r.Articles, "chunks", r.Chunks)
	return r, nil
}

// fetcher fetches chunks on one pooled connection at a time; it knows
// which group that connection has selected because it holds the
// connection exclusively from its GROUP on.
type fetcher struct {
	rd    *round
	conn  *nntp.Conn
	group string // selected on conn; "" for none
	held  int    // chunks fetched on conn
}

func (f *fetcher) release() {
	if f.conn != nil {
		f.rd.p.pool.Release(f.conn)
		f.conn, f.group, f.held = nil, "", 0
	}
}

func (f *fetcher) run() {
	rd := f.rd
	for {
		j := rd.take()
		if j == nil {
			return
		}
		b := rd.buffer(j)
		var err error
		for range chunkAttempts {
			if err = f.fetch(b); err == nil || rd.ctx.Err() != nil {
				break
			}
			rd.p.errs.Add(1)
		}
		if err != nil {
			rd.recycle(b)
			rd.fail(j, err)
			continue
		}
		rd.writes <- b
	}
}

// fetch reads the chunk's overview lines into b, selecting the group
// first unless the connection has it selected already.
func (f *fetcher) fetch(b *fetched) error {
	ctx := f.rd.ctx
	if f.conn != nil && f.held >= holdChunks {
		f.release()
	}
	if f.conn == nil {
		c, err := f.rd.p.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		f.conn = c
	}
	f.held++
	err := f.over(b)
	if err != nil && f.conn.Err() != nil {
		// Broken: the pool closes it; the next attempt dials afresh.
		f.release()
	}
	return err
}

func (f *fetcher) over(b *fetched) error {
	ctx, j := f.rd.ctx, b.j
	if g := j.t.v.Val.Group; f.group != g {
		f.group = ""
		if _, err := f.conn.Group(ctx, g); err != nil {
			return err
		}
		f.group = g
	}
	b.buf, b.ends = b.buf[:0], b.ends[:0]
	prev := j.first - 1
	return f.conn.OverLines(ctx, j.first, j.last, func(line []byte) error {
		n, ok := lineArticle(line)
		if !ok || n <= prev || n > j.last {
			f.rd.p.dropped.Add(1)
			return nil
		}
		prev = n
		b.buf = append(b.buf, line...)
		b.ends = append(b.ends, len(b.buf))
		return nil
	})
}

// write stores b as its chunk's spool message.
func (p *Prefetcher) write(ctx context.Context, b *fetched) error {
	t := b.j.t
	if len(b.ends) == 0 && !t.stale[chunkKey(b.j.first)] {
		// Nothing to spool and nothing to replace.
		return nil
	}
	lines := make([][]byte, len(b.ends))
	start := 0
	for i, end := range b.ends {
		lines[i] = b.buf[start:end:end]
		start = end
	}
	if err := p.st.WriteChunk(ctx, t.v.Val.ID, b.j.first, b.j.last, lines); err != nil {
		return err
	}
	t.mu.Lock()
	t.chunks++
	t.lines += int64(len(lines))
	t.mu.Unlock()
	p.chunks.Add(1)
	p.articles.Add(int64(len(lines)))
	p.bytes.Add(int64(len(b.buf)))
	return nil
}

// lineArticle reads the article number an overview line starts with (up
// to its first tab), as DecodeChunk will.
func lineArticle(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line) && line[i] != '\t'; i++ {
		c := line[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		// Exactly up to 2^63-1, the highest number GROUP and DecodeChunk
		// take: a bound that left room for any digit refused the last
		// eight, and their lines were dropped though the range was
		// planned up to them.
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, i > 0 && n > 0
}
