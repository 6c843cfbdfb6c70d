package bench

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestForwardSlowPeer runs the slow-peer part on our queue alone (no
// anchor folder): the run's own accounting (every pushed item delivered or
// shed) must hold, or RunForward fails, and it prints the figures.
func TestForwardSlowPeer(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := RunForward(t.Context(), ForwardConfig{
		Anchor: t.TempDir(), Parts: []string{"slow-peer"},
		SlowRates: []int{20000}, SlowRTT: 20 * time.Millisecond, SlowFor: 300 * time.Millisecond,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "anchor skipped") {
		t.Fatalf("no word of the missing anchor in %q", out.String())
	}
	m := regexp.MustCompile(`slow-peer 20000/s\s+ours\s+(\d+) delivered/s\s+shed\s+(\d+) \(pushed (\d+)\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no slow-peer line in %q", out.String())
	}
	if pushed, _ := strconv.Atoi(m[3]); pushed == 0 {
		t.Fatalf("nothing pushed: %s", m[0])
	}
}

// TestForwardConfig: RunForward refuses what the command's flags refuse.
func TestForwardConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]ForwardConfig{
		"unknown part":  {Parts: []string{"everything"}},
		"zero rate":     {SlowRates: []int{0}},
		"negative rtt":  {SlowRTT: -time.Second},
		"few loop runs": {LoopItems: 10},
		"negative runs": {Runs: -1},
	} {
		if err := RunForward(t.Context(), cfg, &bytes.Buffer{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
