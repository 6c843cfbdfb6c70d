package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/work"
)

// The demo provider up runs when --nntp names none: a few generated groups
// that keep growing, so the tail has something to plan.
const (
	upDemoGroups   = 2
	upDemoArticles = 60_000
	upDemoGrowBy   = 500
	upDemoGrowEvry = 5 * time.Second
	upDemoSource   = "demo"
	// upDemoTailEvery plans the demo groups' growth often enough to watch.
	upDemoTailEvery = 10 * time.Second
)

// upWork is the work part of up's configuration.
type upWork struct {
	off     bool
	workers int
	// tailSet: --tail-every was given, so the demo keeps it.
	tailSet bool
	source  string
	pf      providerFlags
	wf      workFlags
}

// startWork runs, inside up, the demo NNTP provider (unless --nntp names a
// real one), one coordinator and --workers workers. It returns what to tell
// the user.
func startWork(ctx context.Context, uw upWork, connect func(name, user string) (*nats.Conn, error), stops *[]func(context.Context) error) (string, error) {
	if uw.off {
		return "", nil
	}
	source := uw.source
	pf := uw.pf
	if pf.addr == "" {
		demo := nntptest.New(nntptest.Config{Addr: "127.0.0.1:0", GrowEvery: upDemoGrowEvry, GrowBy: upDemoGrowBy})
		for i := 1; i <= upDemoGroups; i++ {
			demo.AddGroup(fmt.Sprintf("alt.binaries.demo.%d", i), upDemoArticles)
		}
		if err := demo.Start(ctx); err != nil {
			return "", fmt.Errorf("demo nntp provider: %w", err)
		}
		*stops = append(*stops, demo.Stop)
		pf.addr = demo.Addr()
		if !uw.tailSet {
			uw.wf.tailEvery = upDemoTailEvery
		}
		if source == sourceDefault {
			source = upDemoSource
		}
	}
	ncfg, groups, err := pf.config()
	if err != nil {
		return "", err
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
		return "", err
	}
	co, err := newCoordinator(st, ncfg, groups, pf.conns, work.Shard{Index: 1, Count: 1}, uw.wf, slog.Default())
	if err != nil {
		return "", err
	}
	if err := co.Start(ctx); err != nil {
		return "", err
	}
	*stops = append(*stops, co.Stop)
	for i := 1; i <= uw.workers; i++ {
		name := fmt.Sprintf("up-worker-%d", i)
		wst, err := client("switchyard-" + name)
		if err != nil {
			return "", err
		}
		w, err := work.NewWorker(wst, work.CountingIndexer{}, work.WorkerConfig{Name: name, Lease: uw.wf.leaseConfig(), Heartbeat: uw.wf.heartbeat()})
		if err != nil {
			return "", err
		}
		if err := w.Start(ctx); err != nil {
			return "", err
		}
		*stops = append(*stops, stopWithin{w, workerStopWait}.Stop)
	}
	workers := fmt.Sprintf("%d workers", uw.workers)
	if uw.workers == 1 {
		workers = "1 worker"
	}
	return fmt.Sprintf("  work       source %s, NNTP %s, groups %s, 1 coordinator, %s\n", source, pf.addr, groups.Wildmat(), workers), nil
}
