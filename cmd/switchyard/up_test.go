package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUpChecksFlagsBeforeCreatingData: up checks every flag before it
// writes anything, so a usage error leaves no --data directory behind.
// Before, it created --data before checking --workers, the work flags,
// --source, the settle flags and the region flags.
func TestUpChecksFlagsBeforeCreatingData(t *testing.T) {
	t.Parallel()
	for _, bad := range [][]string{
		{"--workers", "99"},
		{"--peer", "us=http://127.0.0.1:1"},
		{"--settle", "-1s"},
	} {
		dir := filepath.Join(t.TempDir(), "new-data")
		args := append([]string{"up", "--data", dir, "--http", ""}, bad...)
		_, stderr, code := execute(t, args...)
		if code != exitUsage {
			t.Fatalf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%q: refused as a usage error, but created --data %s", args, dir)
		}
	}
}
