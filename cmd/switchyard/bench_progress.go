package main

import (
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bench"
	"github.com/switchyard-dev/switchyard/internal/progress"
)

// benchNoProgress is bench's --no-progress, shared by every benchmark.
var benchNoProgress bool

func init() {
	benchCmd.PersistentFlags().BoolVar(&benchNoProgress, "no-progress", false, "no progress of each phase on stderr (the results on stdout are the same)")
}

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
	mode := progressMode(benchNoProgress)
	return func(label string, total int64, unit string) bench.Meter {
		return progress.New(cmd.ErrOrStderr(), total, unit, progress.Options{Label: name + ": " + label, Mode: mode})
	}
}
