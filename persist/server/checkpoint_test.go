package server

import (
	"os"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/persist/store"
)

// TestCheckpointBetweenRequests: sets one after another, each answered
// before the next is sent, leave the stream idle between them, so the
// server checkpoints its WAL there when it has grown to
// store.IdleCheckpointPages; the WAL never reaches SQLite's own
// checkpoint size (1,000 pages), which a commit would have waited for.
func TestCheckpointBetweenRequests(t *testing.T) {
	t.Parallel()
	for _, exclusive := range []bool{false, true} {
		h := newHarness(t, func(c *Config) { c.ExclusiveFiles = exclusive })
		p, err := store.StreamPath(h.dir, h.scope, "s")
		if err != nil {
			t.Fatal(err)
		}
		value := strings.Repeat("v", 1500) // a page of its own each (compressed, still over half of one)
		const frame = 24 + 2048            // a WAL frame of a new file's page
		var most int64
		for range 2000 {
			h.set("s", value, nil)
			if fi, err := os.Stat(p + "-wal"); err == nil {
				most = max(most, fi.Size())
			}
		}
		st := h.srv.Stats()
		if st.Checkpoints == 0 || st.CheckpointFails != 0 || most/frame > store.IdleCheckpointPages+8 {
			t.Fatalf("exclusive %v: %d checkpoints (%d failed), the WAL reached %d pages: want some, none failed, and at most a commit past %d",
				exclusive, st.Checkpoints, st.CheckpointFails, most/frame, store.IdleCheckpointPages)
		}
		t.Logf("exclusive %v: %d checkpoints, the WAL reached %d pages", exclusive, st.Checkpoints, most/frame)
	}
}
