package main

import (
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

func init() {
	var cfg bench.IndexConfig
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
never limits ingest.`,
		Example: `  switchyard bench index --articles 200000`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Articles < 1000 || cfg.RangeSize < 1 || cfg.Chunk < 1 {
				return usagef("--articles must be at least 1000; --range-size and --chunk positive")
			}
			_, err := bench.RunIndex(cmd.Context(), cfg, cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().Int64Var(&cfg.Articles, "articles", 1_000_000, "articles in the group read")
	cmd.Flags().IntVar(&cfg.RangeSize, "range-size", 20_000, "lines per batch, as per work range")
	cmd.Flags().Int64Var(&cfg.Chunk, "chunk", 1_000, "articles per OVER command")
	benchCmd.AddCommand(cmd)
}
