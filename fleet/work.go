package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/postproc"
	"github.com/switchyard-dev/switchyard/web/metrics"
	"github.com/switchyard-dev/switchyard/work"
)

// Indexer names, for WorkConfig.Indexer.
const (
	IndexerUsenet = "usenet" // parse, assemble, publish releases (the default)
	IndexerCount  = "count"  // per-group counts and a digest: the exactly-once check of the tests
)

// WorkerStopWaitDefault bounds how long a stopping worker tries to finish
// the range in hand before it releases it for another worker.
const WorkerStopWaitDefault = 10 * time.Second

// WorkConfig is the work pipeline of one source in this process.
type WorkConfig struct {
	// Source names the work state (persist scope work-SOURCE). "" means
	// "default".
	Source string

	// NNTP is how the coordinator reaches the provider. Ignored with Demo.
	NNTP nntp.Config

	// Demo, when non-nil, runs a demo NNTP provider in this process and
	// indexes it instead of NNTP.
	Demo *DemoConfig

	// Coordinator, when non-nil, runs one coordinator shard with this
	// config (fleet sets its Logger).
	Coordinator *work.CoordinatorConfig

	// Workers are the names of the workers run here, one each: the lease
	// holder's name (its bus connection is switchyard-NAME).
	Workers []string

	// Worker is the workers' config; Name comes from Workers.
	Worker work.WorkerConfig

	// WorkerStopWait bounds a stopping worker's wait for the range in
	// hand. Zero means WorkerStopWaitDefault.
	WorkerStopWait time.Duration

	// Indexer is what the workers do with each overview line:
	// IndexerUsenet ("" means it) or IndexerCount.
	Indexer string

	// UsenetScope is the persist scope of the usenet records. "" means
	// usenet.DefaultScope. The Newznab API reads it too.
	UsenetScope string

	// Settle says when an incomplete release shows; its sweep runs beside
	// the usenet workers.
	Settle usenet.SettleConfig

	// PostProcess, when non-nil, runs the usenet post-processor
	// (usenet/postproc) beside the main coordinator shard (1/n): it reads
	// a few bodies of each visible release of UsenetScope through a share
	// of the provider's connections of its own, below the coordinator's.
	// Ignored without a coordinator, on another shard, or with the count
	// indexer.
	PostProcess *PostProcessConfig
}

// PostProcessConfig is the post-processor's part of WorkConfig.
type PostProcessConfig struct {
	// Budget bounds what is read per release; zero fields mean
	// postproc's defaults (3 articles, 2 MiB).
	Budget postproc.Budget
	// Workers is how many releases are read at once, and the most
	// connections its share asks for. Zero means postproc.WorkersDefault.
	Workers int
}

// DemoConfig is the demo NNTP provider: Groups generated groups
// alt.binaries.demo.1.. of Articles articles each, growing by GrowBy every
// GrowEvery, so the tail always has something to plan.
type DemoConfig struct {
	Groups    int
	Articles  int64
	GrowBy    int64
	GrowEvery time.Duration
}

func (w *WorkConfig) withDefaults() {
	if w.Source == "" {
		w.Source = "default"
	}
	if w.WorkerStopWait == 0 {
		w.WorkerStopWait = WorkerStopWaitDefault
	}
	if w.Indexer == "" {
		w.Indexer = IndexerUsenet
	}
	if w.UsenetScope == "" {
		w.UsenetScope = usenet.DefaultScope
	}
}

func (w *WorkConfig) validate() error {
	if w.Indexer != IndexerUsenet && w.Indexer != IndexerCount {
		return fmt.Errorf("fleet: indexer %q: want %s or %s", w.Indexer, IndexerUsenet, IndexerCount)
	}
	if err := work.ValidSource(w.Source); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if err := usenet.ValidScope(w.UsenetScope); err != nil {
		return fmt.Errorf("fleet: usenet scope: %w", err)
	}
	return nil
}

// workInfo is what the work steps hand each other and the caller.
type workInfo struct {
	nntp     nntp.Config   // the provider the coordinator fetches from
	nntpAddr string        // its address, once a coordinator runs
	stores   []*work.Store // one per worker, in Workers order
	// coord is the coordinator's store, connected early when the demo
	// provider needs to read the work state before it starts.
	coord *work.Store
}

// NNTPAddr is the provider the coordinator fetches from (the demo
// provider's address when it runs), "" without a coordinator.
func (f *Fleet) NNTPAddr() string { return f.work.nntpAddr }

// The work pipeline's steps of Start. Stop goes the other way: workers
// first (all at once), then the sweep, the coordinator, the provider.

// startDemo runs the demo NNTP provider, which the coordinator then
// fetches from instead of Work.NNTP.
func (f *Fleet) startDemo(ctx context.Context) error {
	w := f.cfg.Work
	f.work.nntp = w.NNTP
	if w.Demo == nil || w.Coordinator == nil {
		return nil
	}
	// Started again on the same data, the demo's groups begin where the
	// work state left them (they grew while it ran): a group that began
	// at Articles again would sit below what was planned, and nothing
	// would be fetched until it grew past that.
	// The coordinator's connection, made now rather than after the demo.
	st, err := f.coordinatorStore(ctx)
	if err != nil {
		return err
	}
	known, err := st.Groups(ctx)
	if err != nil {
		return fmt.Errorf("demo nntp provider: read groups: %w", err)
	}
	reached := map[string]int64{}
	for _, g := range known {
		reached[g.Val.Name] = max(g.Val.High, g.Val.PlannedThrough)
	}
	demo := nntptest.New(nntptest.Config{Addr: "127.0.0.1:0", GrowEvery: w.Demo.GrowEvery, GrowBy: w.Demo.GrowBy})
	for i := 1; i <= w.Demo.Groups; i++ {
		name := fmt.Sprintf("alt.binaries.demo.%d", i)
		demo.AddGroup(name, max(w.Demo.Articles, reached[name]))
	}
	if err := f.start(ctx, "demo-nntp", demo); err != nil {
		return fmt.Errorf("demo nntp provider: %w", err)
	}
	f.work.nntp = nntp.Config{Addr: demo.Addr()}
	return nil
}

// startWorkerStores connects each worker (as the client user): their
// connections are closed after the workers and the sweep stop.
func (f *Fleet) startWorkerStores(ctx context.Context) error {
	for _, name := range f.cfg.Work.Workers {
		st, err := f.workStore(ctx, "switchyard-"+name)
		if err != nil {
			return err
		}
		f.work.stores = append(f.work.stores, st)
	}
	return nil
}

// startSettle runs the usenet settle sweep beside the usenet workers, on
// the first worker's connection. It starts before the workers so that it
// stops after them: the records it settles are the ones they write.
func (f *Fleet) startSettle(ctx context.Context) error {
	w := f.cfg.Work
	if len(f.work.stores) == 0 || w.Indexer != IndexerUsenet {
		return nil
	}
	ust, err := usenet.NewStore(f.work.stores[0].Client(), w.UsenetScope)
	if err != nil {
		return err
	}
	settle := w.Settle
	if settle.Logger == nil {
		settle.Logger = f.log
	}
	return f.start(ctx, "settle", usenet.NewSettler(ust, settle, nil))
}

// startWorkers runs the workers as one member, so that stopping tells
// every worker at once and none takes a new range while another finishes
// its own.
func (f *Fleet) startWorkers(ctx context.Context) error {
	w := f.cfg.Work
	if len(f.work.stores) == 0 {
		return nil
	}
	counters := f.http.usenetCounters()
	workers := &workerSet{wait: w.WorkerStopWait}
	for i, name := range w.Workers {
		st := f.work.stores[i]
		var ix work.Indexer = work.CountingIndexer{}
		if w.Indexer == IndexerUsenet {
			ust, err := usenet.NewStore(st.Client(), w.UsenetScope)
			if err != nil {
				return err
			}
			ust.SetPolicy(w.Settle)
			ix = countedIndexer(&usenet.Indexer{Store: ust}, counters)
		}
		wcfg := w.Worker
		wcfg.Name = name
		wcfg.Logger = f.log
		wk, err := work.NewWorker(st, ix, wcfg)
		if err != nil {
			return err
		}
		workers.add(wk)
		f.http.addMetrics(func(r *metrics.Registry) { r.AddWorker(wk) })
	}
	return f.start(ctx, "workers", workers)
}

// startCoordinator starts one coordinator shard on its pool of the
// provider (the coordinator owns the pool: its Stop closes it).
func (f *Fleet) startCoordinator(ctx context.Context) error {
	if f.cfg.Work.Coordinator == nil {
		return nil
	}
	ncfg, ccfg := f.work.nntp, *f.cfg.Work.Coordinator
	f.work.nntpAddr = ncfg.Addr
	name := "coordinator-" + ccfg.Shard.String()
	st, err := f.coordinatorStore(ctx)
	if err != nil {
		return err
	}
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: ncfg, Size: 1})
	if err != nil {
		return err
	}
	ccfg.Logger = f.log
	co, err := work.NewCoordinator(st, pool, ccfg)
	if err != nil {
		return err
	}
	if err := f.start(ctx, name, co); err != nil {
		return err
	}
	f.http.addMetrics(func(r *metrics.Registry) {
		r.AddCoordinator(co)
		r.AddNNTPPool(name, co.Pool(), co.Share().Granted)
		if ccfg.Shard.Main() {
			r.AddWorkStatus(st) // one process of the source reads its status
		}
	})
	if f.http != nil {
		f.http.parts.addWork(st, name, co.Pool(), co.Share().Granted)
	}
	return nil
}

// startPostProcess runs the post-processor beside the main coordinator
// shard, on its own connection and its own pool, sized by a share of the
// coordinator's limit at work.PriorityPostProcess.
func (f *Fleet) startPostProcess(ctx context.Context) error {
	w := f.cfg.Work
	// A zero Shard is 1/1 (work.CoordinatorConfig's default).
	if w.PostProcess == nil || w.Coordinator == nil || w.Coordinator.Shard.Index > 1 || w.Indexer != IndexerUsenet {
		return nil
	}
	st, err := f.workStore(ctx, "switchyard-postprocess")
	if err != nil {
		return err
	}
	ust, err := usenet.NewStore(st.Client(), w.UsenetScope)
	if err != nil {
		return err
	}
	ust.SetPolicy(w.Settle)
	pcfg := *w.PostProcess
	if pcfg.Workers <= 0 {
		pcfg.Workers = postproc.WorkersDefault
	}
	pool, err := nntp.NewPool(nntp.PoolConfig{Conn: f.work.nntp, Size: 0})
	if err != nil {
		return err
	}
	sc := w.Coordinator.Share
	share, err := work.NewShare(st, pool, work.ShareConfig{
		Name: postproc.ShareName, Priority: work.PriorityPostProcess, Max: pcfg.Workers,
		Limit: sc.Limit, Every: sc.Every, TTL: sc.TTL,
	})
	if err != nil {
		return err
	}
	counters := f.http.postprocCounters()
	pp, err := postproc.New(postproc.Config{
		Store: ust, Pool: pool, Share: share, ShareEvery: sc.Every,
		Budget: pcfg.Budget, Workers: pcfg.Workers, Counters: counters, Logger: f.log,
	})
	if err != nil {
		return err
	}
	if err := f.start(ctx, "postprocess", pp); err != nil {
		return err
	}
	f.postproc = pp
	f.http.addMetrics(func(r *metrics.Registry) { r.AddNNTPPool(postproc.ShareName, pool, share.Granted) })
	return nil
}

// PostProcessor is the post-processor this process runs, nil without one.
func (f *Fleet) PostProcessor() *postproc.Processor { return f.postproc }

// coordinatorStore is the coordinator's store, connected on first use.
func (f *Fleet) coordinatorStore(ctx context.Context) (*work.Store, error) {
	if f.work.coord != nil {
		return f.work.coord, nil
	}
	st, err := f.workStore(ctx, "switchyard-coordinator-"+f.cfg.Work.Coordinator.Shard.String())
	if err != nil {
		return nil, err
	}
	f.work.coord = st
	return st, nil
}

// workStore connects a work role (as the client user) and returns the
// store of the source.
func (f *Fleet) workStore(ctx context.Context, name string) (*work.Store, error) {
	nc, err := f.connect(ctx, name, auth.RoleClient)
	if err != nil {
		return nil, err
	}
	c, err := f.persistClient(ctx, nc)
	if err != nil {
		return nil, err
	}
	return work.NewStore(c, f.cfg.Work.Source)
}

// workerSet starts the workers one after the other and stops them all at
// once, each bounded by wait.
type workerSet struct {
	base    lifecycle.Base
	wait    time.Duration
	workers []*work.Worker
}

func (s *workerSet) add(w *work.Worker) { s.workers = append(s.workers, w) }

func (s *workerSet) Start(ctx context.Context) error {
	return s.base.Start(ctx, "workers", func(ctx context.Context) error {
		for i, w := range s.workers {
			if err := w.Start(ctx); err != nil {
				s.stop(context.WithoutCancel(ctx), s.workers[:i])
				return err
			}
		}
		return nil
	})
}

func (s *workerSet) Stop(ctx context.Context) error {
	return s.base.Stop(ctx, func(ctx context.Context) error { return s.stop(ctx, s.workers) })
}

func (s *workerSet) stop(ctx context.Context, workers []*work.Worker) error {
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, s.wait)
			defer cancel()
			errs[i] = w.Stop(wctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
