package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet/postproc"
	"github.com/switchyard-dev/switchyard/work"
)

// IngestConfig configures RunIngest. Zero fields take the documented
// defaults.
type IngestConfig struct {
	// Articles in the one group read. Zero means 1,000,000.
	Articles int64
	// Conns are the connection counts measured. Nil means 1, 2 and 4.
	Conns []int
	// Delays are the provider latencies measured: the test server waits
	// this long before each answer, as a provider across a network does.
	// Nil means 0 (loopback) and 5 ms.
	Delays []time.Duration
	// Workers index the spool. Zero means 2.
	Workers int
	// RangeSize: zero means work.RangeSizeDefault.
	RangeSize int64
	// Chunk: zero means work.ChunkDefault.
	Chunk int64
	// Dir holds the persist data; "" means a temp dir.
	Dir string
	// Indexer builds each worker's indexer over its persist client, for
	// the ingest run named run (a fresh name per run, for a fresh store);
	// nil means the counting indexer.
	Indexer func(c *persist.Client, run string) (work.Indexer, error)
	// PostProcess, when set, runs every row twice, without and then with
	// the post-processor it builds (over the run's store, fetching from
	// addr) running beside the workers, and reports both rates and what
	// post-processing cost per release.
	PostProcess func(c *persist.Client, run, addr string) (*postproc.Processor, error)
	// Progress shows each raw and ingest run as it goes. Nil means none.
	Progress Progress
}

func (c IngestConfig) withDefaults() IngestConfig {
	if c.Articles == 0 {
		c.Articles = 1_000_000
	}
	if c.Conns == nil {
		c.Conns = []int{1, 2, 4}
	}
	if c.Delays == nil {
		c.Delays = []time.Duration{0, 5 * time.Millisecond}
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.RangeSize == 0 {
		c.RangeSize = work.RangeSizeDefault
	}
	if c.Chunk == 0 {
		c.Chunk = work.ChunkDefault
	}
	return c
}

// IngestResult is one connection count's figures.
type IngestResult struct {
	Delay time.Duration
	Conns int
	// Raw is the OVER rate of the same server read by nntptest.RawOver on
	// Conns connections at once, lines/s: the anchor.
	Raw float64
	// Ours is articles/s end to end: plan, prefetch through the pool into
	// the spool, lease, read the spool, index, finish under the fence.
	Ours float64
	// RawCPU and OursCPU are the CPU time this process spent per article
	// (the test server's included: it runs in the process).
	RawCPU, OursCPU time.Duration
	// PP is the row run again with post-processing on (IngestConfig.
	// PostProcess), nil without.
	PP *PostProcessResult
}

// PostProcessResult is an ingest run with post-processing on.
type PostProcessResult struct {
	// Ours is articles/s end to end with the post-processor running.
	Ours float64
	// During is the releases post-processed while the ingest ran; Stats
	// are the post-processor's totals once it had processed every
	// release (Drain after the ingest ended).
	During int64
	Drain  time.Duration
	Stats  postproc.Stats
}

// PPRatio is the rate with post-processing over the rate without.
func (r IngestResult) PPRatio() float64 {
	if r.PP == nil || r.Ours == 0 {
		return 0
	}
	return r.PP.Ours / r.Ours
}

// CPUCeiling is the ratio the CPU allows: on cores that both sides keep
// busy, ours can reach at most the raw rate times RawCPU/OursCPU.
func (r IngestResult) CPUCeiling() float64 {
	if r.OursCPU == 0 {
		return 0
	}
	return float64(r.RawCPU) / float64(r.OursCPU)
}

// Ratio is Ours/Raw.
func (r IngestResult) Ratio() float64 {
	if r.Raw == 0 {
		return 0
	}
	return r.Ours / r.Raw
}

const ingestGroup = "alt.binaries.bench.ingest"

// RunIngest measures the pipeline against the raw OVER rate of the same
// test NNTP server in the same run and writes a table to w.
func RunIngest(ctx context.Context, cfg IngestConfig, w io.Writer) ([]IngestResult, error) {
	cfg = cfg.withDefaults()
	env, err := StartPersistEnv(cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	srv := nntptest.New(nntptest.Config{Addr: "127.0.0.1:0"})
	srv.AddGroup(ingestGroup, cfg.Articles)
	if err := srv.Start(ctx); err != nil {
		return nil, err
	}
	defer srv.Stop(context.WithoutCancel(ctx))

	fmt.Fprintf(w, "ingest of %d articles (ranges of %d, chunks of %d, %d workers) vs raw OVER of the same server\n", cfg.Articles, cfg.RangeSize, cfg.Chunk, cfg.Workers)
	fmt.Fprintf(w, "%6s %5s %12s %12s %7s %10s %10s %8s\n", "delay", "conns", "raw lines/s", "ours art/s", "ratio", "raw cpu/a", "ours cpu/a", "cpu cap")
	var out []IngestResult
	for _, delay := range cfg.Delays {
		srv.SetFaults(nntptest.Faults{Delay: delay})
		for _, conns := range cfg.Conns {
			c0 := processCPU()
			raw, err := rawOverRate(ctx, cfg.Progress.start(fmt.Sprintf("delay %s, %d conns: raw OVER", delay, conns), cfg.Articles, "lines"), srv.Addr(), cfg.Articles, cfg.Chunk, conns)
			if err != nil {
				return out, fmt.Errorf("raw over: %w", err)
			}
			c1 := processCPU()
			ours, _, err := ingestRate(ctx, cfg.Progress.start(fmt.Sprintf("delay %s, %d conns: ingest", delay, conns), cfg.Articles, "articles"), env, srv.Addr(), fmt.Sprintf("bench-%d", time.Now().UnixNano()), cfg, conns, false)
			if err != nil {
				return out, fmt.Errorf("ingest with %d connections: %w", conns, err)
			}
			c2 := processCPU()
			per := func(d time.Duration) time.Duration { return d / time.Duration(cfg.Articles) }
			r := IngestResult{Delay: delay, Conns: conns, Raw: raw, Ours: ours, RawCPU: per(c1 - c0), OursCPU: per(c2 - c1)}
			if cfg.PostProcess != nil {
				on, pp, err := ingestRate(ctx, cfg.Progress.start(fmt.Sprintf("delay %s, %d conns: ingest + post-processing", delay, conns), cfg.Articles, "articles"), env, srv.Addr(), fmt.Sprintf("bench-%d", time.Now().UnixNano()), cfg, conns, true)
				if err != nil {
					return out, fmt.Errorf("ingest with post-processing, %d connections: %w", conns, err)
				}
				pp.Ours = on
				r.PP = pp
			}
			out = append(out, r)
			fmt.Fprintf(w, "%6s %5d %12.0f %12.0f %6.2fx %10s %10s %7.2fx\n", delay, r.Conns, r.Raw, r.Ours, r.Ratio(), r.RawCPU, r.OursCPU, r.CPUCeiling())
		}
	}
	fmt.Fprintln(w, "cpu/a: CPU time of this process per article, the test server's own included; cpu cap: the ratio the")
	fmt.Fprintln(w, "CPU allows when both sides keep the same cores busy (raw cpu/a over ours cpu/a)")
	if cfg.PostProcess != nil {
		writePostProcess(w, out)
	}
	return out, nil
}

// writePostProcess writes the post-processing table: ingest with it on
// against off, and its cost per release.
func writePostProcess(w io.Writer, rows []IngestResult) {
	fmt.Fprintln(w, "\nwith post-processing (one more connection, 2 workers) vs without, same rows")
	fmt.Fprintf(w, "%6s %5s %12s %12s %7s %9s %9s %8s %9s %9s %9s\n", "delay", "conns", "off art/s", "on art/s", "on/off", "releases", "during", "drain", "art/rel", "KiB/rel", "ms/rel")
	for _, r := range rows {
		p := r.PP
		if p == nil {
			continue
		}
		n := max(p.Stats.Releases, 1)
		fmt.Fprintf(w, "%6s %5d %12.0f %12.0f %6.2fx %9d %9d %8s %9.2f %9.0f %9.2f\n", r.Delay, r.Conns, r.Ours, p.Ours, r.PPRatio(),
			p.Stats.Releases, p.During, p.Drain.Round(time.Millisecond), float64(p.Stats.Articles)/float64(n),
			float64(p.Stats.Bytes)/1024/float64(n), float64(p.Stats.Time.Microseconds())/1000/float64(n))
	}
	fmt.Fprintln(w, "releases: post-processed in all; during: of them while the ingest ran; drain: the time after it to finish the")
	fmt.Fprintln(w, "rest; art/rel, KiB/rel: articles and article bytes fetched per release; ms/rel: the time one release took")
}

// rawOverRate reads the group's overview split over conns connections. m
// hears of each connection's lines when it finishes (RawOver counts only at
// its end) and is done at return.
func rawOverRate(ctx context.Context, m Meter, addr string, n, chunk int64, conns int) (float64, error) {
	defer m.Done()
	start := time.Now()
	var wg sync.WaitGroup
	var total atomic.Int64
	errs := make([]error, conns)
	per := (n + int64(conns) - 1) / int64(conns)
	for i := range conns {
		first, last := int64(i)*per+1, min(int64(i+1)*per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := nntptest.RawOver(ctx, addr, ingestGroup, first, last, chunk, false)
			total.Add(got)
			m.Add(got)
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(total.Load()) / time.Since(start).Seconds(), nil
}

// ingestRate runs one planner, one prefetcher with a pool of conns and the
// workers on a fresh source, and times them until every range is done. m
// follows the workers' article count and is done at return.
func ingestRate(ctx context.Context, m Meter, env *PersistEnv, addr, source string, cfg IngestConfig, conns int, withPP bool) (float64, *PostProcessResult, error) {
	var once sync.Once
	done := func() { once.Do(m.Done) }
	defer done()
	return ingestRun(ctx, m, done, env, addr, source, cfg, conns, withPP)
}

// ingestRun is ingestRate; done ends m's line when the ingest is done,
// before the post-processor's drain.
func ingestRun(ctx context.Context, m Meter, done func(), env *PersistEnv, addr, source string, cfg IngestConfig, conns int, withPP bool) (float64, *PostProcessResult, error) {
	c, err := env.Client()
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	st, err := work.NewStore(c, source)
	if err != nil {
		return 0, nil, err
	}
	if err := st.Init(ctx); err != nil {
		return 0, nil, err
	}
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: addr}, Size: conns})
	if err != nil {
		return 0, nil, err
	}
	if err := pool.Start(ctx); err != nil {
		return 0, nil, err
	}
	defer pool.Stop(context.WithoutCancel(ctx))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	groups, _ := work.ParseGroups(ingestGroup)
	planner, err := work.NewPlanner(st, pool, work.PlannerConfig{Groups: groups, RangeSize: cfg.RangeSize, HistoryDepth: cfg.Articles})
	if err != nil {
		return 0, nil, err
	}
	// Ahead covers the whole group: the benchmark measures throughput, not
	// how far the prefetcher may run ahead.
	pf, err := work.NewPrefetcher(st, pool, work.PrefetchConfig{Ahead: int(cfg.Articles/cfg.RangeSize) + 1, Chunk: cfg.Chunk, Logger: quiet})
	if err != nil {
		return 0, nil, err
	}
	var proc *postproc.Processor
	if withPP && cfg.PostProcess != nil {
		pc, err := env.Client()
		if err != nil {
			return 0, nil, err
		}
		defer pc.Close()
		if proc, err = cfg.PostProcess(pc, source, addr); err != nil {
			return 0, nil, err
		}
		if err := proc.Start(ctx); err != nil {
			return 0, nil, err
		}
		defer proc.Stop(context.WithoutCancel(ctx))
	}
	start := time.Now()
	if _, err := planner.PlanAll(ctx); err != nil {
		return 0, nil, err
	}
	var workers []*work.Worker
	for i := range cfg.Workers {
		wc, err := env.Client()
		if err != nil {
			return 0, nil, err
		}
		defer wc.Close()
		wst, err := work.NewStore(wc, source)
		if err != nil {
			return 0, nil, err
		}
		var ix work.Indexer = work.CountingIndexer{}
		if cfg.Indexer != nil {
			if ix, err = cfg.Indexer(wc, source); err != nil {
				return 0, nil, err
			}
		}
		wk, err := work.NewWorker(wst, ix, work.WorkerConfig{Name: fmt.Sprintf("bench-%d", i), Idle: 20 * time.Millisecond, Logger: quiet})
		if err != nil {
			return 0, nil, err
		}
		if err := wk.Start(ctx); err != nil {
			return 0, nil, err
		}
		workers = append(workers, wk)
	}
	defer func() {
		for _, wk := range workers {
			_ = wk.Stop(context.WithoutCancel(ctx))
		}
	}()
	// Prefetch until no range is left planned: a round whose chunks all
	// failed leaves its ranges planned for the next one.
	for {
		if _, err := pf.Tick(ctx); err != nil {
			return 0, nil, err
		}
		s, err := st.Status(ctx)
		if err != nil {
			return 0, nil, err
		}
		if s.Ranges[work.StatePlanned] == 0 {
			break
		}
	}
	// Done when the workers have finished ranges holding every article:
	// their own counters, so that watching costs the pipeline nothing.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		var n, failed int64
		for _, wk := range workers {
			ws := wk.Stats()
			n += ws.Articles
			failed += ws.Failed
		}
		if failed > 0 {
			return 0, nil, fmt.Errorf("%d ranges failed", failed)
		}
		m.Set(n)
		if n >= cfg.Articles {
			break
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-tick.C:
		}
	}
	rate := float64(cfg.Articles) / time.Since(start).Seconds()
	if proc == nil {
		return rate, nil, nil
	}
	pp := &PostProcessResult{During: proc.Counters().Stats().Releases}
	end := time.Now()
	done()
	if err := proc.WaitIdle(ctx); err != nil {
		return 0, nil, err
	}
	pp.Drain = time.Since(end)
	pp.Stats = proc.Counters().Stats()
	return rate, pp, nil
}
