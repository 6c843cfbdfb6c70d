package main

import (
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// TestBenchForwardUsage: bad flags are a usage error (the runs themselves
// are tested in package bench).
func TestBenchForwardUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--only", "everything"},
		{"--slow-rates", "0"},
		{"--slow-rtt", "0s"},
		{"--runs", "0"},
	} {
		_, stderr, code := testproc.Run(t, cli(t, append([]string{"bench", "forward", "--anchor", t.TempDir()}, args...)...))
		if code != exitUsage {
			t.Errorf("%v: exit %d (%s), want usage", args, code, stderr)
		}
	}
}
