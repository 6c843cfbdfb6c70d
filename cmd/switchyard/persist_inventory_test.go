package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestPersistInventoryServers: persist inventory without arguments asks
// each server of --ids for its figures: the streams on disk (once the
// walk at start counted them), the open ones and the cap; a server that
// does not answer is on its line and fails the command.
func TestPersistInventoryServers(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	for i := range 3 {
		mustRun(t, sy, nil, "kv", "set", "hub", fmt.Sprintf("s%d", i), "k", "v")
	}
	var sts []persist.ServerStats
	testwait.Until(t, "the streams counted", func() (bool, string) {
		out := mustRun(t, sy, nil, "persist", "inventory", "--ids", "0", "--json")
		sts = nil
		if err := json.Unmarshal([]byte(out), &sts); err != nil {
			t.Fatalf("--json: %v: %s", err, out)
		}
		return len(sts) == 1 && sts[0].Streams >= 0, out
	})
	if st := sts[0]; st.ID != "0" || st.Streams != 3 || st.OpenStorage != 3 || st.MaxOpenStreams <= 0 || st.OpenStoragePeak < 3 {
		t.Fatalf("server 0: %+v, want 3 streams, 3 open", st)
	}
	out := mustRun(t, sy, nil, "persist", "inventory", "--ids", "0")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Fields(lines[0])[1] != "STREAMS" {
		t.Fatalf("table:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 8 || f[0] != "0" || f[1] != "3" || f[2] != "3" || f[5] != "9" || f[7] != "0" {
		t.Fatalf("server 0's line %q: want 3 streams, 3 open, 9 descriptors, none to compact", lines[1])
	}
	// Without --ids, the servers the balancer places over: here 0 alone.
	// (Was: 0 and 1 by default, so a fleet of one server failed, and one
	// of four was asked about half of its servers.)
	out = mustRun(t, sy, nil, "persist", "inventory")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || strings.Fields(lines[1])[0] != "0" {
		t.Fatalf("without --ids:\n%s", out)
	}
	// Server 1 is not running: no responders, reported on its line.
	out, _, code := sy(nil, "persist", "inventory", "--ids", "0,1")
	if code == 0 || !strings.Contains(out, "no answer") || !strings.Contains(out, "\n0 ") {
		t.Fatalf("with a server missing: exit %d, out:\n%s", code, out)
	}
	if _, _, code := sy(nil, "persist", "inventory", "hub"); code == 0 {
		t.Fatal("one argument accepted")
	}
	// The stream form is unchanged.
	var inv persist.Inventory
	if err := json.Unmarshal([]byte(mustRun(t, sy, nil, "persist", "inventory", "hub", "s0")), &inv); err != nil || inv.Count != 1 {
		t.Fatalf("stream inventory: %+v, %v", inv, err)
	}
}
