package server

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestIdleCloseIgnoresOwnJobs: only requests are use. The server's own
// jobs, the timer's expiry (every ExpireEvery on a stream with max_age)
// and the archive's backup (every ArchiveEvery on every open stream),
// stamped the stream as used, so such a stream never idled out.
func TestIdleCloseIgnoresOwnJobs(t *testing.T) {
	t.Parallel()
	t.Run("max_age", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *Config) {
			c.IdleClose = 100 * time.Millisecond
			c.ExpireEvery = 10 * time.Millisecond
		})
		h.set("plain", "p", nil)
		h.config("aged", `{"max_age": 3600000}`)
		h.set("aged", "a", nil)
		testwait.For(t, "the plain stream to be closed for idleness", func() bool {
			return !slices.Contains(cached(h), "plain")
		})
		// aged was last asked for just after plain: it is as idle.
		testwait.UntilWithin(t, 3*time.Second, "the stream with max_age nobody used for IdleClose to be closed", func() (bool, string) {
			got := cached(h)
			return !slices.Contains(got, "aged"), fmt.Sprintf("cache holds %v", got)
		})
	})
	t.Run("archive", func(t *testing.T) {
		t.Parallel()
		archive := t.TempDir()
		h := newHarness(t, func(c *Config) {
			c.IdleClose = 100 * time.Millisecond
			c.ExpireEvery = 10 * time.Millisecond
			c.Archive = archive
			c.ArchiveEvery = 10 * time.Millisecond
		})
		h.set("plain", "p", nil)
		testwait.For(t, "the first backup", func() bool { return archiveRows(t, archive, h.scope, "plain") == 1 })
		testwait.UntilWithin(t, 3*time.Second, "the stream nobody used for IdleClose to be closed", func() (bool, string) {
			got := cached(h)
			return !slices.Contains(got, "plain"), fmt.Sprintf("cache holds %v", got)
		})
	})
}
