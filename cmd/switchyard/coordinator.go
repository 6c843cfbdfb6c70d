package main

import (
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/work"
)

// newCoordinatorCmd builds switchyard coordinator and its run.
func newCoordinatorCmd() *cobra.Command {
	coordinatorCmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Plan and prefetch ranges of NNTP articles for the workers",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	coordinatorCmd.AddCommand(newCoordinatorRunCmd())
	return coordinatorCmd
}

// newCoordinatorRunCmd builds switchyard coordinator run.
func newCoordinatorRunCmd() *cobra.Command {
	var natsOpts natsFlags
	var providerOpts providerFlags
	var workOpts workFlags
	var shard, source string
	var httpOpts httpFlags
	var usenetOpts usenetFlags
	run := &cobra.Command{
		Use:   "run",
		Short: "Run one coordinator shard: prefetch its ranges into the spool; shard 1 also plans",
		Long: `Runs coordinator shard i/n of a source (one NNTP provider). Every shard keeps
--prefetch-ahead of its ranges (those with id % n == i-1) spooled ahead of the
workers, fetching OVER through its share of the provider's connections. Shard 1
also plans: new groups' history every hour, the tail every --tail-every, and it
finishes leases whose worker read everything and went quiet (every
--abandoned-every).
Every process of a source shares --nntp-conns connections by priority.

--postprocess (shard 1 only; off by default here, on in up) runs the usenet
post-processor beside it: it reads a few bodies of each visible release of
--usenet-scope (par2 index, NFO, first RAR volume) through a share of its own
below the coordinator's. Give it the --post-gap the workers use.

SIGTERM or Ctrl-C: stop taking work, wait up to 15 s for the chunks in flight,
close the connections, leave the share, exit 0.`,
		Example: `  switchyard coordinator run --nntp news.example.com:119 --groups 'alt.binaries.*'
  switchyard coordinator run --shard 2/3 --nntp news.example.com:563 --nntp-tls --nntp-user me`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sh, err := work.ParseShard(shard)
			if err != nil {
				return usageError{err}
			}
			ncfg, groups, err := providerOpts.config()
			if err != nil {
				return err
			}
			if err := workOpts.validatePlan(); err != nil {
				return err
			}
			if err := checkSource(source); err != nil {
				return err
			}
			if err := httpOpts.validate(false); err != nil {
				return err
			}
			bus, err := natsOpts.fleetNATS()
			if err != nil {
				return err
			}
			ccfg := coordinatorConfig(groups, providerOpts.conns, sh, workOpts)
			wc := fleet.WorkConfig{Source: source, NNTP: ncfg, Coordinator: &ccfg}
			if usenetOpts.postprocess {
				if sh.Index > 1 {
					return usagef("--postprocess runs beside shard 1 only, not --shard %s", shard)
				}
				if err := usenet.ValidScope(usenetOpts.scope); err != nil {
					return usagef("--usenet-scope: %v", err)
				}
				if usenetOpts.postGap <= 0 {
					return usagef("--post-gap %v: want a positive duration", usenetOpts.postGap)
				}
				wc.UsenetScope = usenetOpts.scope
				wc.Settle = usenet.SettleConfig{PostGap: usenetOpts.postGap}
				wc.PostProcess = &fleet.PostProcessConfig{}
			}
			cfg := fleet.Config{
				Service: natsOpts.service,
				NATS:    bus,
				Work:    wc,
				HTTP:    httpOpts.fleetHTTP(),
			}
			return runFleet(cmd, cfg, func(*fleet.Fleet) {}, "")
		},
	}
	run.Flags().StringVar(&shard, "shard", "1/1", "this process's part of the prefetching, `SHARD` i/n: ranges with id % n == i-1; only shard 1 plans")
	sourceFlag(run, &source)
	providerOpts.register(run, true)
	workOpts.registerPlan(run)
	workOpts.registerLease(run)
	usenetOpts.registerScope(run)
	run.Flags().BoolVar(&usenetOpts.postprocess, "postprocess", false, "with shard 1: run the usenet post-processor beside it (see above)")
	run.Flags().DurationVar(&usenetOpts.postGap, "post-gap", usenet.PostGapDefault, "with --postprocess: the workers' --post-gap, which tells a release's posts apart")
	natsOpts.registerServer(run)
	httpOpts.register(run, "")
	return run
}

// coordinatorConfig is the config of coordinator shard sh from the flags.
func coordinatorConfig(groups work.Groups, conns int, sh work.Shard, workOpts workFlags) work.CoordinatorConfig {
	return work.CoordinatorConfig{
		Shard:     sh,
		Planner:   work.PlannerConfig{Groups: groups, RangeSize: workOpts.rangeSize, HistoryDepth: workOpts.depth},
		Prefetch:  work.PrefetchConfig{Ahead: workOpts.ahead, Chunk: workOpts.chunk},
		Lease:     work.LeaseConfig{TTL: workOpts.leaseTTL, AbandonedEvery: workOpts.abandonedEvery, RetainDone: workOpts.retainDone},
		Share:     work.ShareConfig{Limit: conns, Max: conns, Every: workOpts.shareEvery},
		TailEvery: workOpts.tailEvery,
	}
}
