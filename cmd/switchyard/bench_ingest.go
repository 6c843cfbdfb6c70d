package main

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/postproc"
	"github.com/switchyard-dev/switchyard/work"
)

// newBenchIngestCmd builds switchyard bench ingest.
func newBenchIngestCmd() *cobra.Command {
	var cfg bench.IngestConfig
	var conns, delays, indexer string
	var postprocess bool
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Articles/s end to end (NNTP → spool → worker → indexer) vs the raw OVER rate",
		Long: `Starts the NNTP test server with one group of --articles articles, an
embedded NATS and persist server, and for each connection count in --conns:
  raw   the anchor: nntptest.RawOver reads the whole overview on that many
        connections at once (no parsing, nothing stored)
  ours  the pipeline on a fresh source: the planner cuts ranges, the
        prefetcher fetches OVER through a pool of that many connections into
        the spool, --workers workers lease the ranges, read the spool, hand
        every line to the --indexer and finish under the fence (count: the
        counting indexer; usenet: parse, assemble and store binaries and
        releases in a fresh scope)
Each figure is articles (lines) per second; the ratio is ours/raw. Each row is
run at each --delays: 0 is loopback, where the test server and the pipeline
share this machine's cores; a few milliseconds stand for a provider across a
network. The CPU columns show what each side costs per article and so what
ratio the cores allow (cpu cap) when both sides are CPU-bound.
Targets (not tests): ours >= 0.8x raw at 4 connections with the counting
indexer, >= 0.7x with the usenet indexer.

--postprocess (with --indexer usenet) runs every row again with the
post-processor beside the workers (on one more connection of its own, two
releases at a time, reading each visible release's first RAR volume, par2
index and NFO as up does) and prints a second table: the ingest rate with it
on against off (target: within 10 %), how many releases it processed while
the ingest ran and how long it took to finish the rest, and its cost per
release (articles, KiB fetched, milliseconds).`,
		Example: `  switchyard bench ingest --articles 200000 --conns 1,4 --delays 0
  switchyard bench ingest --indexer usenet --postprocess`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Conns = nil
			for _, s := range strings.Split(conns, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n < 1 || n > 64 {
					return usagef("--conns %q: want a list of counts 1-64", conns)
				}
				cfg.Conns = append(cfg.Conns, n)
			}
			cfg.Delays = nil
			for _, s := range strings.Split(delays, ",") {
				d, err := time.ParseDuration(strings.TrimSpace(s))
				if err != nil || d < 0 || d > time.Second {
					return usagef("--delays %q: want a list of durations 0-1s", delays)
				}
				cfg.Delays = append(cfg.Delays, d)
			}
			if cfg.Articles < 1000 || cfg.Workers < 1 || cfg.RangeSize < 1 || cfg.Chunk < 1 {
				return usagef("--articles must be at least 1000; --workers, --range-size and --chunk positive")
			}
			switch indexer {
			case "count":
				if postprocess {
					return usagef("--postprocess needs --indexer usenet: it reads the releases the usenet indexer publishes")
				}
			case "usenet":
				// A fresh scope per run: a run over a scope another filled
				// would find its records there and do less.
				cfg.Indexer = func(c *persist.Client, run string) (work.Indexer, error) {
					st, err := usenet.NewStore(c, "usenet-"+run)
					if err != nil {
						return nil, err
					}
					return &usenet.Indexer{Store: st}, nil
				}
				if postprocess {
					cfg.PostProcess = func(c *persist.Client, run, addr string) (*postproc.Processor, error) {
						st, err := usenet.NewStore(c, "usenet-"+run)
						if err != nil {
							return nil, err
						}
						pool, err := nntp.NewPool(nntp.PoolConfig{Conn: nntp.Config{Addr: addr}, Size: 1})
						if err != nil {
							return nil, err
						}
						return postproc.New(postproc.Config{Store: st, Pool: pool, Logger: slog.New(slog.DiscardHandler)})
					}
				}
			default:
				return usagef("--indexer %q: want count or usenet", indexer)
			}
			cfg.Progress = benchProgress(cmd)
			_, err := bench.RunIngest(cmd.Context(), cfg, cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().Int64Var(&cfg.Articles, "articles", 1_000_000, "articles in the group read")
	cmd.Flags().StringVar(&conns, "conns", "1,2,4", "comma-separated connection counts to measure")
	cmd.Flags().StringVar(&delays, "delays", "0,5ms", "comma-separated provider latencies: the test server waits this long before each answer")
	cmd.Flags().IntVar(&cfg.Workers, "workers", 2, "workers indexing the spool")
	cmd.Flags().Int64Var(&cfg.RangeSize, "range-size", 20_000, "articles per range")
	cmd.Flags().Int64Var(&cfg.Chunk, "chunk", 1_000, "articles per OVER command and spool message")
	cmd.Flags().StringVar(&cfg.Dir, "data", "", "directory for the persist data (default: a temp dir)")
	cmd.Flags().StringVar(&indexer, "indexer", "count", "the workers' indexer: count or usenet")
	cmd.Flags().BoolVar(&postprocess, "postprocess", false, "with --indexer usenet: run every row again with the post-processor on and compare (see above)")
	return cmd
}
