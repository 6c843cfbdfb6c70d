package main

import (
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
)

// newBenchNNTPCmd builds switchyard bench nntp.
func newBenchNNTPCmd() *cobra.Command {
	var cfg bench.NNTPConfig
	cmd := &cobra.Command{
		Use:   "nntp",
		Short: "OVER throughput of nntp.Conn vs a raw line reader on the same server",
		Long: `Starts the NNTP test server on loopback with one group of --lines articles and
reads its whole overview, in OVER commands of --chunk articles, two ways:
  raw   the anchor: read lines until the terminating dot, no parsing, no
        unstuffing (nntptest.RawOver), one OVER at a time
  ours  nntp.Pool + Conn.OverPipelined, every line parsed into an Overview
with compression off and COMPRESS DEFLATE, over 1 and 4 connections (the
range split between them). Each case runs --rounds times, alternating raw
and ours; the best round of each is printed with the ratio ours/raw in
lines/s. Target (not a test): ours >= 0.9x raw.`,
		Example: `  switchyard bench nntp
  switchyard bench nntp --lines 500000 --chunk 5000 --rounds 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Lines < 1000 || cfg.Chunk < 1 || cfg.Rounds < 1 {
				return usagef("--lines must be at least 1000, --chunk and --rounds positive")
			}
			cfg.Progress = benchProgress(cmd)
			return bench.RunNNTP(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	cmd.Flags().Int64Var(&cfg.Lines, "lines", bench.NNTPLinesDefault, "overview lines read per run")
	cmd.Flags().Int64Var(&cfg.Chunk, "chunk", bench.NNTPChunkDefault, "articles per OVER command")
	cmd.Flags().IntVar(&cfg.Rounds, "rounds", bench.NNTPRoundsDefault, "runs per case (best one counts)")
	return cmd
}
