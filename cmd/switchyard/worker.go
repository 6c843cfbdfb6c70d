package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/web/metrics"
	"github.com/switchyard-dev/switchyard/work"
)

// workerStopWait bounds how long a stopping worker tries to finish the
// range in hand before it releases it.
const workerStopWait = 10 * time.Second

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
			ph := newProcHTTP(httpOpts)
			st, done, err := natsOpts.workStore("switchyard-"+name, source, ph)
			if err != nil {
				return err
			}
			defer done()
			ix, settler, err := usenetOpts.indexerFor(indexer, st.Client())
			if err != nil {
				return err
			}
			if indexer == "usenet" {
				ix = countedIndexer(ix, usenetCounters(ph))
			}
			w, err := work.NewWorker(st, ix, work.WorkerConfig{Name: name, Lease: workOpts.leaseConfig(), Heartbeat: workOpts.heartbeat()})
			if err != nil {
				return err
			}
			run := lifecycles{stopWithin{w, workerStopWait}}
			if settler != nil {
				run = append(run, settler)
			}
			slog.Info("worker started", "source", source, "name", name, "indexer", indexer)
			ph.addMetrics(func(r *metrics.Registry) { r.AddWorker(w) })
			return runUntilSignal(cmd.Context(), run, ph)
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

// stopWithin bounds a Stop by d.
type stopWithin struct {
	lifecycle
	d time.Duration
}

func (s stopWithin) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.d)
	defer cancel()
	return s.lifecycle.Stop(ctx)
}
