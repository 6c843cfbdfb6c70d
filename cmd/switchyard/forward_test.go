package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestForwardDemoShowsLoss runs the demo with a stall long enough to overflow
// the queue and checks that the summary accounts for the loss: items were
// shed and the receiver got gap markers for them.
func TestForwardDemoShowsLoss(t *testing.T) {
	t.Parallel()
	// One batch in flight: the stalled receiver holds at most 200 items on
	// the wire, so the 1,000-item queue sheds at any push rate the machine
	// manages (with the default 25 in flight it holds 5,000 more).
	out, stderr, code := run(t, cli(t, "forward", "demo", "--duration", "1500ms", "--stall-after", "300ms", "--stall-for", "700ms", "--interval", "200ms", "--max-queued", "1000", "--max-in-flight", "1"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`(\d+) shed, (\d+) gap markers made.*us received (\d+) deliveries and (\d+) markers`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line in %q", out)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	if n(1) == 0 || n(2) == 0 || n(4) == 0 || n(3) == 0 {
		t.Fatalf("stalled demo should shed, mark and deliver: %s", m[0])
	}
	if n(4) > n(2) {
		t.Fatalf("receiver saw %d markers but only %d were made", n(4), n(2))
	}
}
