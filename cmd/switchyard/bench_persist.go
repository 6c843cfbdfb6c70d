package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchPersistCmd builds switchyard bench persist.
func newBenchPersistCmd() *cobra.Command {
	var cfg bench.PersistConfig
	var clients string
	var secure bool
	cmd := &cobra.Command{
		Use:   "persist",
		Short: "persist set/setMany/pipelined sets vs JetStream KV put/async publish, on one embedded NATS",
		Long: `Starts one embedded NATS server with JetStream on, one persist server and the
balancer, then runs each workload on both sides for --duration:
  set (keyed, --value-size bytes) vs JetStream KV put, at each --clients level
  setMany of --batch vs JetStream async publish of --batch
  --batch pipelined sets (Stream.Pipeline, one future each) vs the same async publish
and prints ops/s for both and the ratio. Targets (not tests): set >= 0.6x KV put
at 1 client and >= 2x at 16; setMany and pipelined sets >= 1x async publish. Beside the table it
prints the bus floor (a bare request/reply) and the storage ceiling (the SQLite
store alone), which bound what persist can reach.

With --auth it measures what securing the bus costs instead: the same persist
workloads on a bus with per-role NATS users and TLS for clients (as
"switchyard up --auth" runs it) and on an open one, back to back in one run.
Target: the secured bus keeps >= 0.9x (costs at most 10 %).

With --durable both sides fsync every acknowledged write: persist with every
stream synchronous=FULL (persist serve --sync), one fsync per group commit,
against JetStream with sync_interval: always. Targets: set >= 1x at 1 client,
>= 5x at 16.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Clients, err = positiveInts("--clients", clients); err != nil {
				return err
			}
			if cfg.Duration <= 0 || cfg.ValueSize < 1 || cfg.Batch < 1 {
				return usagef("--duration, --value-size and --batch must be positive")
			}
			cfg.Progress = benchProgress(cmd)
			if secure && cfg.Durable {
				return usagef("--auth and --durable measure different things; give one")
			}
			if secure {
				_, err = bench.RunPersistAuth(cmd.Context(), cfg, stdout(cmd))
				return err
			}
			_, err = bench.RunPersist(cmd.Context(), cfg, stdout(cmd))
			return err
		},
	}
	cmd.Flags().DurationVar(&cfg.Duration, "duration", 3*time.Second, "how long each workload runs on each side")
	cmd.Flags().IntVar(&cfg.ValueSize, "value-size", 128, "bytes per value")
	cmd.Flags().StringVar(&clients, "clients", "1,16", "concurrency levels for set vs put")
	cmd.Flags().IntVar(&cfg.Batch, "batch", 1000, "messages per setMany / async publish batch")
	cmd.Flags().BoolVar(&secure, "auth", false, "compare a bus with per-role users and TLS against an open one instead of persist against JetStream")
	cmd.Flags().BoolVar(&cfg.Durable, "durable", false, "both sides in their durable tier: persist with every stream fsynced per commit (persist serve --sync) vs JetStream with sync_interval: always")
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "directory for SQLite and JetStream files (default: a temp dir)")
	return cmd
}

// positiveInts parses a comma-separated list of positive integers given to
// flag, as a usage error when it is not one.
func positiveInts(flag, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, usagef("%s %q: want positive integers separated by commas, for example 1,16", flag, list)
		}
		out = append(out, n)
	}
	return out, nil
}
