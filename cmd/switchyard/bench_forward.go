package main

import (
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchForwardCmd builds switchyard bench forward.
func newBenchForwardCmd() *cobra.Command {
	var cfg bench.ForwardConfig
	cmd := &cobra.Command{
		Use:   "forward",
		Short: "forward.PeerQueue vs the reference Node queue, and signed vs unsigned sends",
		Long: `Runs three workloads on forward.PeerQueue and, when node is installed, the same
three on the reference queue under Node (the anchor folder's bench.mjs), the two
sides taking turns --runs times, then prints the best figure of each side and
the ratio:
  steady-8-peers         1,000,000 deliveries round-robin over 8 peers whose send
                         returns at once; items/s until everything is sent
  dead-peer-count-bound  100,000 deliveries (128-byte payload) to a peer whose
                         send never returns: the 5,000-item bound sheds; pushes/s
  dead-peer-byte-bound   4,000 deliveries (64 KiB payload) to a dead peer: the
                         32 MiB bound sheds; pushes/s
  slow-peer              deliveries pushed at a steady rate (--slow-rates, each
                         above one batch per round trip) for --slow-for to one
                         peer whose send returns after --slow-rtt; items
                         delivered per second and items shed, ours and the
                         reference queue's (driven by a script of ours on the
                         anchor folder's forwardQueue.mjs)
Then it measures loopback HTTP send throughput, signed vs unsigned, with 1 and
8 peers, and prints items/s and the ratio.
Targets (not tests): >= 3x the anchor on steady, >= 10x on both bound
workloads; on slow-peer, delivered >= 1.0x and shed <= 1.0x the anchor's;
signed >= 0.8x unsigned.`,
		Example: `  switchyard bench forward
  switchyard bench forward --only queue --runs 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.LoopItems < 1000 {
				return usagef("--loop-items must be at least 1000")
			}
			if cfg.SlowRTT <= 0 || cfg.SlowFor <= 0 {
				return usagef("--slow-rtt and --slow-for must be positive")
			}
			for _, r := range cfg.SlowRates {
				if r < 1 {
					return usagef("--slow-rates must be positive")
				}
			}
			if cfg.Runs < 1 {
				return usagef("--runs must be at least 1")
			}
			for _, o := range cfg.Parts {
				if !slices.Contains(bench.ForwardParts, o) {
					return usagef("--only %q: want %s", o, strings.Join(bench.ForwardParts, ", "))
				}
			}
			cfg.Progress = benchProgress(cmd)
			return bench.RunForward(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&cfg.SlowRTT, "slow-rtt", bench.ForwardSlowRTTDefault, "round trip of the slow peer")
	cmd.Flags().IntSliceVar(&cfg.SlowRates, "slow-rates", bench.ForwardSlowRatesDefault, "push rates (items/s) of the slow-peer runs")
	cmd.Flags().DurationVar(&cfg.SlowFor, "slow-for", bench.ForwardSlowForDefault, "how long each slow-peer run pushes")
	cmd.Flags().StringVar(&cfg.Anchor, "anchor", os.Getenv("SWITCHYARD_FORWARD_ANCHOR"),
		"folder holding the reference queue's bench.mjs (default $SWITCHYARD_FORWARD_ANCHOR; the anchor is skipped when unset, missing or node is not installed)")
	cmd.Flags().IntVar(&cfg.LoopItems, "loop-items", bench.ForwardLoopItemsDefault, "items per loopback send run")
	cmd.Flags().StringSliceVar(&cfg.Parts, "only", nil, "run only these parts: "+strings.Join(bench.ForwardParts, ", ")+" (default all)")
	cmd.Flags().IntVar(&cfg.Runs, "runs", bench.ForwardRunsDefault, "runs of each queue workload per side, taking turns; the best of each side is reported")
	return cmd
}
