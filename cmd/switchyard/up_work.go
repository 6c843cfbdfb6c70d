package main

import (
	"fmt"
	"time"

	"github.com/switchyard-dev/switchyard/fleet"
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

// demo reports whether up runs the demo provider (no --nntp).
func (uw upWork) demo() bool { return uw.providerOpts.addr == "" }

// sourceName is the source up's work runs as: the demo's own unless
// --source says otherwise.
func (uw upWork) sourceName() string {
	if uw.demo() && uw.source == sourceDefault {
		return upDemoSource
	}
	return uw.source
}

// fleetConfig is up's work pipeline: the demo NNTP provider (unless --nntp
// names a real one), one coordinator (shard 1/1) and --workers usenet
// workers with their settle sweep. With --no-work it is only the usenet
// scope, which the HTTP side (the Newznab API, the releases page and the
// search index) still reads: other processes' workers may write it.
func (uw upWork) fleetConfig() (fleet.WorkConfig, error) {
	if uw.off {
		return fleet.WorkConfig{UsenetScope: uw.usenetOpts.scope}, nil
	}
	po := uw.providerOpts
	wo := uw.workOpts
	if uw.demo() {
		po.addr = "demo:119" // replaced by the demo provider's address when it listens
		if !uw.tailSet {
			wo.tailEvery = upDemoTailEvery
		}
	}
	ncfg, groups, err := po.config()
	if err != nil {
		return fleet.WorkConfig{}, err
	}
	settle, err := uw.usenetOpts.settleConfig()
	if err != nil {
		return fleet.WorkConfig{}, err
	}
	ccfg := coordinatorConfig(groups, po.conns, work.Shard{Index: 1, Count: 1}, wo)
	wc := fleet.WorkConfig{
		Source:      uw.sourceName(),
		NNTP:        ncfg,
		Coordinator: &ccfg,
		Worker:      wo.workerConfig(),
		Indexer:     fleet.IndexerUsenet,
		UsenetScope: uw.usenetOpts.scope,
		Settle:      settle,
	}
	if uw.usenetOpts.postprocess {
		wc.PostProcess = &fleet.PostProcessConfig{}
	}
	if uw.demo() {
		wc.Demo = &fleet.DemoConfig{Groups: upDemoGroups, Articles: upDemoArticles, GrowBy: upDemoGrowBy, GrowEvery: upDemoGrowEvery}
	}
	for i := 1; i <= uw.workers; i++ {
		wc.Workers = append(wc.Workers, fmt.Sprintf("up-worker-%d", i))
	}
	return wc, nil
}

// workLine is up's line about the work pipeline, "" without one.
func workLine(uw upWork, wc fleet.WorkConfig, f *fleet.Fleet) string {
	if wc.Coordinator == nil {
		return ""
	}
	groups := wc.Coordinator.Planner.Groups
	n := fmt.Sprintf("%d workers", uw.workers)
	if uw.workers == 1 {
		n = "1 worker"
	}
	if wc.PostProcess != nil {
		n += ", post-processing"
	}
	return fmt.Sprintf("  work       source %s, NNTP %s, groups %s, 1 coordinator, %s\n", uw.sourceName(), f.NNTPAddr(), groups.Wildmat(), n)
}
