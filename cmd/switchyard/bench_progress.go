package main

import (
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
	"github.com/switchyard-dev/switchyard/internal/progress"
)

// newBenchCmd builds switchyard bench, which groups the side-by-side
// benchmarks (switchyard bench persist|forward|nntp|...).
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run side-by-side benchmarks against their anchors",
		Long: `Each benchmark measures switchyard and its anchor (for example JetStream) on the
same load in the same run and prints both figures and their ratio.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	// Shared by every benchmark: benchProgress reads it from the command.
	cmd.PersistentFlags().Bool(noProgressFlag, false, "no progress of each phase on stderr (the results on stdout are the same)")
	cmd.AddCommand(
		newBenchEventsCmd(),
		newBenchFeedCmd(),
		newBenchForwardCmd(),
		newBenchIndexCmd(),
		newBenchIngestCmd(),
		newBenchNNTPCmd(),
		newBenchPersistCmd(),
		newBenchWSCmd(),
	)
	return cmd
}

// noProgressFlag is bench's persistent --no-progress.
const noProgressFlag = "no-progress"

// progressMode is Off when the user asked for quiet, else Auto: a bar on a
// terminal, a line every few seconds and one per finished phase otherwise.
func progressMode(off bool) progress.Mode {
	if off {
		return progress.Off
	}
	return progress.Auto
}

// benchProgress draws each phase of a benchmark on the command's stderr,
// labelled with the benchmark's name, so stdout keeps only the results
// that scripts and tests parse.
func benchProgress(cmd *cobra.Command) bench.Progress {
	name := "bench " + cmd.Name()
	off, _ := cmd.Flags().GetBool(noProgressFlag) // false when absent: the progress shows
	mode := progressMode(off)
	return func(label string, total int64, unit string) bench.Meter {
		return progress.New(cmd.ErrOrStderr(), total, unit, progress.Options{Label: name + ": " + label, Mode: mode})
	}
}

// refuseNonPositive refuses, as a usage error, each named flag given on
// the command line with a value below 1 (a duration not above 0). The
// bench configs read a zero as "the default", so an explicit 0 would have
// measured something other than what was asked (1,000 subscribers for
// --subscribers 0).
func refuseNonPositive(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		f := cmd.Flags().Lookup(n)
		if f == nil || !f.Changed {
			continue
		}
		bad := false
		if f.Value.Type() == "duration" {
			d, err := cmd.Flags().GetDuration(n)
			bad = err == nil && d <= 0
		} else {
			v, err := cmd.Flags().GetInt(n)
			bad = err == nil && v < 1
		}
		if bad {
			return usagef("--%s must be positive, got %s", n, f.Value.String())
		}
	}
	return nil
}
