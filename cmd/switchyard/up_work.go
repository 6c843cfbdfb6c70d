package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/web/metrics"
	"github.com/switchyard-dev/switchyard/work"
)

// The demo provider up runs when --nntp names none: a few generated groups
// that keep growing, so the tail has something to plan.
const (
	upDemoGroups    = 2
	upDemoArticles  = 60_000
	upDemoGrowBy    = 500
	upDemoGrowEvery = 5 * time.Second
	upDemoSource    = "demo"
	// upDemoTailEvery plans the demo groups' growth often enough to watch.
	upDemoTailEvery = 10 * time.Second
)

// upWork is the work part of up's configuration.
type upWork struct {
	off     bool
	workers int
	// tailSet: --tail-every was given, so the demo keeps it.
	tailSet      bool
	source       string
	providerOpts providerFlags
	workOpts     workFlags
	usenetOpts   usenetFlags
}

// startWork runs, inside up, the demo NNTP provider (unless --nntp names a
// real one), one coordinator and --workers workers. It returns what to tell
// the user and how to stop it all: up calls that before it drains the
// persist servers, so the work's stops (bounded by their own waits) do not
// eat into the servers' drain. connect's connections are closed by up's
// own stops, after this.
func startWork(ctx context.Context, uw upWork, connect func(name, user string) (*nats.Conn, error), ph *procHTTP) (line string, stop func(context.Context) error, err error) {
	if uw.off {
		return "", func(context.Context) error { return nil }, nil
	}
	var demo *nntptest.Server
	var co *work.Coordinator
	var workers []*work.Worker
	var settler *usenet.Settler
	stop = func(ctx context.Context) error {
		// Every worker is told at once, so none takes a new range while
		// another is still finishing its own.
		errs := make([]error, len(workers))
		var wg sync.WaitGroup
		for i, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workerStopWait)
				defer cancel()
				errs[i] = w.Stop(wctx)
			}()
		}
		wg.Wait()
		if settler != nil {
			errs = append(errs, settler.Stop(context.WithoutCancel(ctx)))
		}
		if co != nil {
			errs = append(errs, co.Stop(context.WithoutCancel(ctx)))
		}
		if demo != nil {
			errs = append(errs, demo.Stop(context.WithoutCancel(ctx)))
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			_ = stop(ctx)
		}
	}()
	source := uw.source
	providerOpts := uw.providerOpts
	if providerOpts.addr == "" {
		demo = nntptest.New(nntptest.Config{Addr: "127.0.0.1:0", GrowEvery: upDemoGrowEvery, GrowBy: upDemoGrowBy})
		for i := 1; i <= upDemoGroups; i++ {
			demo.AddGroup(fmt.Sprintf("alt.binaries.demo.%d", i), upDemoArticles)
		}
		if err := demo.Start(ctx); err != nil {
			demo = nil
			return "", nil, fmt.Errorf("demo nntp provider: %w", err)
		}
		providerOpts.addr = demo.Addr()
		if !uw.tailSet {
			uw.workOpts.tailEvery = upDemoTailEvery
		}
		if source == sourceDefault {
			source = upDemoSource
		}
	}
	ncfg, groups, err := providerOpts.config()
	if err != nil {
		return "", nil, err
	}
	client := func(name string) (*work.Store, error) {
		nc, err := connect(name, auth.RoleClient)
		if err != nil {
			return nil, err
		}
		c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
		if err != nil {
			return nil, err
		}
		return work.NewStore(c, source)
	}
	st, err := client("switchyard-coordinator")
	if err != nil {
		return "", nil, err
	}
	c, err := newCoordinator(st, ncfg, groups, providerOpts.conns, work.Shard{Index: 1, Count: 1}, uw.workOpts, slog.Default())
	if err != nil {
		return "", nil, err
	}
	if err := c.Start(ctx); err != nil {
		return "", nil, err
	}
	co = c
	ph.addMetrics(func(r *metrics.Registry) {
		r.AddCoordinator(c)
		r.AddNNTPPool("coordinator-1/1", c.Pool(), c.Share().Granted)
		r.AddWorkStatus(st)
	})
	if ph != nil {
		ph.parts.addWork(st, "coordinator-1/1", c.Pool(), c.Share().Granted)
	}
	counters := usenetCounters(ph)
	for i := 1; i <= uw.workers; i++ {
		name := fmt.Sprintf("up-worker-%d", i)
		wst, err := client("switchyard-" + name)
		if err != nil {
			return "", nil, err
		}
		ust, err := uw.usenetOpts.store(wst.Client())
		if err != nil {
			return "", nil, err
		}
		w, err := work.NewWorker(wst, countedIndexer(&usenet.Indexer{Store: ust}, counters), work.WorkerConfig{Name: name, Lease: uw.workOpts.leaseConfig(), Heartbeat: uw.workOpts.heartbeat()})
		if err != nil {
			return "", nil, err
		}
		if err := w.Start(ctx); err != nil {
			return "", nil, err
		}
		workers = append(workers, w)
		ph.addMetrics(func(r *metrics.Registry) { r.AddWorker(w) })
	}
	if len(workers) > 0 {
		cfg, err := uw.usenetOpts.settleConfig()
		if err != nil {
			return "", nil, err
		}
		ust, err := uw.usenetOpts.store(st.Client())
		if err != nil {
			return "", nil, err
		}
		settler = usenet.NewSettler(ust, cfg, nil)
		if err := settler.Start(ctx); err != nil {
			return "", nil, err
		}
	}
	n := fmt.Sprintf("%d workers", uw.workers)
	if uw.workers == 1 {
		n = "1 worker"
	}
	return fmt.Sprintf("  work       source %s, NNTP %s, groups %s, 1 coordinator, %s\n", source, providerOpts.addr, groups.Wildmat(), n), stop, nil
}
