package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestBenchForwardSlowPeer runs the slow-peer part on our queue alone (no
// anchor folder): the run's own accounting (every pushed item delivered or
// shed) must hold, or the command fails, and it prints the figures.
func TestBenchForwardSlowPeer(t *testing.T) {
	t.Parallel()
	out, stderr, code := run(t, cli(t, "bench", "forward", "--anchor", t.TempDir(), "--only", "slow-peer",
		"--slow-rates", "20000", "--slow-rtt", "20ms", "--slow-for", "300ms"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "anchor skipped") {
		t.Fatalf("no word of the missing anchor in %q", out)
	}
	m := regexp.MustCompile(`slow-peer 20000/s\s+ours\s+(\d+) delivered/s\s+shed\s+(\d+) \(pushed (\d+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no slow-peer line in %q", out)
	}
	if pushed, _ := strconv.Atoi(m[3]); pushed == 0 {
		t.Fatalf("nothing pushed: %s", m[0])
	}
}

func TestBenchForwardUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--only", "everything"},
		{"--slow-rates", "0"},
		{"--slow-rtt", "0s"},
		{"--runs", "0"},
	} {
		_, stderr, code := run(t, cli(t, append([]string{"bench", "forward", "--anchor", t.TempDir()}, args...)...))
		if code != exitUsage {
			t.Errorf("%v: exit %d (%s), want usage", args, code, stderr)
		}
	}
}
