package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchIndexCmd builds switchyard bench index.
func newBenchIndexCmd() *cobra.Command {
	var cfg bench.IndexConfig
	var sizes string
	var queries int
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Usenet header parsing and assembly (lines/s) vs the raw OVER rate",
		Long: `Starts the NNTP test server with one group of --articles articles and measures:
  raw   the anchor: the server's OVER rate on one connection (no parsing,
        nothing kept)
  ours  the same overview lines, read into memory first, parsed into
        articles and assembled into binaries in batches of --range-size (as a
        worker does per range), on one goroutine
The ratio is ours/raw. Target (not a test): ours >= 3x raw, so that indexing
never limits ingest.

Then, for each size in --search, it builds a full-text search index of that
many generated releases and times --queries t=search queries from a mix of
what downloaders send (p50, p99). Target: p99 <= 50 ms at 1,000,000 releases
(building that index takes a few minutes; --search 0 skips the search part).`,
		Example: `  switchyard bench index --articles 200000 --search 0
  switchyard bench index --search 100000,1000000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Articles < 1000 || cfg.RangeSize < 1 || cfg.Chunk < 1 {
				return usagef("--articles must be at least 1000; --range-size and --chunk positive")
			}
			var ns []int
			for _, f := range strings.Split(sizes, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 0 || n > 100_000_000 {
					return usagef("--search %q: want a list of release counts (0: none)", sizes)
				}
				if n > 0 {
					ns = append(ns, n)
				}
			}
			if queries < 100 {
				return usagef("--queries %d: want at least 100", queries)
			}
			if _, err := bench.RunIndex(cmd.Context(), cfg, cmd.OutOrStdout()); err != nil {
				return err
			}
			if len(ns) == 0 {
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout())
			_, err := bench.RunSearch(cmd.Context(), ns, "", queries, cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().Int64Var(&cfg.Articles, "articles", 1_000_000, "articles in the group read")
	cmd.Flags().IntVar(&cfg.RangeSize, "range-size", 20_000, "lines per batch, as per work range")
	cmd.Flags().Int64Var(&cfg.Chunk, "chunk", 1_000, "articles per OVER command")
	cmd.Flags().StringVar(&sizes, "search", "100000", "comma-separated release counts of the search indexes to time (0: none)")
	cmd.Flags().IntVar(&queries, "queries", 2000, "t=search queries timed per index")
	return cmd
}
