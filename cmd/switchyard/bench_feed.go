package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchFeedCmd builds switchyard bench feed.
func newBenchFeedCmd() *cobra.Command {
	var cfg bench.FeedConfig
	var watchers string
	cmd := &cobra.Command{
		Use:   "feed",
		Short: "Change feed latency: persist Watch vs JetStream KV watch, on one embedded NATS",
		Long: `Starts one embedded NATS server with JetStream on, one persist server and the
balancer. For each --watchers count, and with the writer paced at --rate sets/s
and then as fast as one writer goes, it writes keyed values for --duration on
each side (persist set with Watch watchers, JetStream KV put with WatchAll
watchers) and measures the time from a write returning to each watcher
receiving it. It prints p50 and p99 for both sides and the p99 ratio.
Both sides spread their watchers over --conns NATS connections the same way:
one persist client per connection on ours (a client's watchers of a stream
share one feed subscription), one KV handle per connection on JetStream's.
Target (not a test): our p99 no worse than JetStream's (ratio <= 1.0).`,
		Example: `  switchyard bench feed
  switchyard bench feed --watchers 1,100,1000 --conns 4 --duration 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Watchers, err = positiveInts("--watchers", watchers); err != nil {
				return err
			}
			if cfg.Duration <= 0 || cfg.Rate < 1 || cfg.ValueSize < 1 || cfg.Conns < 1 {
				return usagef("--duration, --rate, --value-size and --conns must be positive")
			}
			cfg.Progress = benchProgress(cmd)
			_, err = bench.RunFeed(cmd.Context(), cfg, stdout(cmd))
			return err
		},
	}
	cmd.Flags().DurationVar(&cfg.Duration, "duration", 2*time.Second, "how long the writer writes in each workload on each side")
	cmd.Flags().StringVar(&watchers, "watchers", "1,100", "watcher counts")
	cmd.Flags().IntVar(&cfg.Rate, "rate", 1000, "paced writer's sets per second")
	cmd.Flags().IntVar(&cfg.ValueSize, "value-size", 128, "bytes per value")
	cmd.Flags().IntVar(&cfg.Conns, "conns", 1, "NATS connections each side spreads its watchers over (round robin)")
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "directory for SQLite and JetStream files (default: a temp dir)")
	return cmd
}
