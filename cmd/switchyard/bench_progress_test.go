package main

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// TestBenchProgressOnStderr: a benchmark's phases show on stderr, as plain
// lines when stderr is not a terminal (here, a buffer: only each phase's
// final line in a run this short), and never on stdout, whose table
// scripts parse; --no-progress leaves stderr empty.
func TestBenchProgressOnStderr(t *testing.T) {
	t.Parallel()
	args := []string{"bench", "nntp", "--lines", "1000", "--chunk", "500", "--rounds", "1"}
	out, stderr, code := testproc.Run(t, cli(t, args...))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(out, "bench nntp:") || strings.Contains(out, "\r") {
		t.Fatalf("progress on stdout: %q", out)
	}
	if strings.Contains(stderr, "\r") {
		t.Fatalf("a bar drawn on a non-terminal stderr: %q", stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	want := []string{
		"bench nntp: compression off, 1 conns: 2000/2000 (100%) in ",
		"bench nntp: compression off, 4 conns: 2000/2000 (100%) in ",
		"bench nntp: compression deflate, 1 conns: 2000/2000 (100%) in ",
		"bench nntp: compression deflate, 4 conns: 2000/2000 (100%) in ",
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d: %q", len(lines), len(want), stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("stderr line %d %q, want it to start %q", i, lines[i], w)
		}
	}
	if !strings.Contains(out, "ours lines/s") {
		t.Fatalf("no result table on stdout: %q", out)
	}

	_, stderr, code = testproc.Run(t, cli(t, append(args, "--no-progress")...))
	if code != 0 || stderr != "" {
		t.Fatalf("--no-progress: exit %d, stderr %q", code, stderr)
	}
}
