package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/switchyard-dev/switchyard/fleet"
)

// newWorkerCmd builds switchyard worker and its run.
func newWorkerCmd() *cobra.Command {
	workerCmd := &cobra.Command{
		Use:   "worker",
		Short: "Index spooled ranges of NNTP articles under fenced leases",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	workerCmd.AddCommand(newWorkerRunCmd())
	return workerCmd
}

// newWorkerRunCmd builds switchyard worker run.
func newWorkerRunCmd() *cobra.Command {
	var natsOpts natsFlags
	var workOpts workFlags
	var usenetOpts usenetFlags
	var source, name, indexer string
	var httpOpts httpFlags
	run := &cobra.Command{
		Use:   "run",
		Short: "Lease spooled ranges, hand their overview lines to the indexer, finish them under the fence",
		Long: `Leases the next spooled range of a source (tail before history), reads its
overview lines from the spool, hands each to the indexer, and finishes the range
under the lease's fencing token: a worker that lost its lease (it paused past
--lease-ttl and another took the range) can neither finish the range nor write
over the new holder. Heartbeats renew the lease every sixth of --lease-ttl.

SIGTERM or Ctrl-C: take no new range; the range in hand is finished if it
completes within 10 s, else released for another worker.

Indexers: usenet (the default: parses subjects, assembles parts into binaries
and releases in the --usenet-scope scope, publishes releases as they complete
or settle, and sweeps for settled ones), count (per-group article counts and a
digest of the article numbers: the exactly-once check the tests use).`,
		Example: `  switchyard worker run
  switchyard worker run --source eu-provider --name worker-7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSource(source); err != nil {
				return err
			}
			if err := workOpts.validateLease(); err != nil {
				return err
			}
			if err := usenetOpts.validateIndexer(indexer); err != nil {
				return err
			}
			if err := httpOpts.validate(false); err != nil {
				return err
			}
			if name == "" {
				host, _ := os.Hostname()
				name = fmt.Sprintf("worker-%s-%d", host, os.Getpid())
			}
			bus, err := natsOpts.fleetNATS()
			if err != nil {
				return err
			}
			wc := fleet.WorkConfig{Source: source, Workers: []string{name}, Worker: workOpts.workerConfig(), Indexer: indexer, UsenetScope: usenetOpts.scope}
			if indexer == fleet.IndexerUsenet {
				if wc.Settle, err = usenetOpts.settleConfig(); err != nil {
					return err
				}
			}
			cfg := fleet.Config{Service: natsOpts.service, NATS: bus, Work: wc, HTTP: httpOpts.fleetHTTP()}
			return runFleet(cmd, cfg, func(*fleet.Fleet) {
				slog.Info("worker started", "source", source, "name", name, "indexer", indexer)
			}, "worker stopping: no new range is taken; the one in hand is finished if it completes within 10 s, else released whole", "source", source, "name", name)
		},
	}
	sourceFlag(run, &source)
	run.Flags().StringVar(&name, "name", "", "this worker's `NAME`, the lease holder (default worker-HOST-PID)")
	run.Flags().StringVar(&indexer, "indexer", "usenet", "what to do with each overview line: usenet or count")
	usenetOpts.registerSettle(run)
	workOpts.registerLease(run)
	natsOpts.registerServer(run)
	httpOpts.register(run, "")
	return run
}
