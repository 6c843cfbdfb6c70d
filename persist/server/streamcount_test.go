package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
	"github.com/switchyard-dev/switchyard/placement"
)

// waitCounted waits for the server's walk to finish and returns Streams.
func waitCounted(t *testing.T, h *harness) int64 {
	t.Helper()
	testwait.For(t, "the streams to be counted", func() bool { return h.srv.Stats().Streams >= 0 })
	return h.srv.Stats().Streams
}

// walFiles lists the -wal files under the harness's data directory.
func walFiles(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	for _, f := range streamFiles(t, h.dir) {
		if strings.HasSuffix(f, "-wal") {
			out = append(out, filepath.Base(f))
		}
	}
	return out
}

// Streams counts the streams on disk at start (scopes of another owner
// left out), follows creates and drops, and ignores ephemeral streams and
// reads of missing streams.
func TestStreamsCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.IDs = []string{"0", "1"} })
	if got := waitCounted(t, h); got != 0 {
		t.Fatalf("empty directory: Streams = %d", got)
	}
	for i := range 5 {
		h.set(fmt.Sprintf("s%d", i), "x", nil)
	}
	h.ok(persist.CmdSet, "eph", map[string]string{persist.HdrEphemeral: "true"}, []byte("x"))
	h.req(persist.CmdGet, "missing", map[string]string{persist.HdrSeq: "1"}, nil) // not found, no file
	h.set("s0", "again", nil)                                                     // exists already
	if got := h.srv.Stats().Streams; got != 5 {
		t.Fatalf("after 5 creates: Streams = %d", got)
	}
	h.drop("s4", nil)
	h.drop("s4", nil) // gone already
	if got := h.srv.Stats().Streams; got != 4 {
		t.Fatalf("after a drop: Streams = %d", got)
	}
	// A stream in a scope placement gives the other server, made while
	// the server is stopped: server 0 does not count it.
	other := ""
	for i := 0; other == ""; i++ {
		if sc := fmt.Sprintf("o%d", i); placement.Rendezvous(h.cfg.IDs, sc) == "1" {
			other = sc
		}
	}
	h.node.Stop()
	sq := store.NewSQLite(store.SQLiteConfig{Dir: h.dir})
	st, err := sq.Open(other, "x", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	h.start()
	if got := waitCounted(t, h); got != 4 {
		t.Fatalf("after a restart: Streams = %d, want 4", got)
	}
	h.set("s9", "x", nil)
	if got := h.srv.Stats().Streams; got != 5 {
		t.Fatalf("after a restart and a create: Streams = %d, want 5", got)
	}
}

// fileBytes sums the sizes of the stream files under the data directory.
func fileBytes(t *testing.T, h *harness) int64 {
	t.Helper()
	var n int64
	for _, f := range streamFiles(t, h.dir) {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// setIn writes one value to stream of scope.
func (h *harness) setIn(scope, stream string) {
	h.t.Helper()
	m := h.msg(persist.CmdSet, stream, nil, []byte("x"))
	m.Subject = strings.Replace(m.Subject, "."+h.scope+".", "."+scope+".", 1)
	if r := h.do(m); r.Header.Get(persist.HdrError) != "" {
		h.t.Fatalf("set %s/%s: %s", scope, stream, r.Data)
	}
}

// dropIn drops stream of scope.
func (h *harness) dropIn(scope, stream string) {
	h.t.Helper()
	m := h.msg(persist.CmdDelete, stream, dropHdr, nil)
	m.Subject = strings.Replace(m.Subject, "."+h.scope+".", "."+scope+".", 1)
	if r := h.do(m); r.Header.Get(persist.HdrError) != "" {
		h.t.Fatalf("drop %s/%s: %s", scope, stream, r.Data)
	}
}

// Creates and drops while the walk is half-way (scopes it has read and
// scopes it has not, new scopes among them) are each counted once.
func TestStreamsCountedDuringWalk(t *testing.T) {
	t.Parallel()
	const scopes, each = 20, 3
	h := newHarness(t, nil)
	for sc := range scopes {
		for i := range each {
			h.setIn(fmt.Sprintf("c%d", sc), fmt.Sprintf("s%d", i))
		}
	}
	if got := waitCounted(t, h); got != scopes*each {
		t.Fatalf("Streams = %d, want %d", got, scopes*each)
	}
	half, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	calls := 0
	h.onNew = func(s *Server) {
		s.beforeScan = func(string) {
			if calls++; calls == scopes/2 {
				once.Do(func() { close(half) })
				<-release
			}
		}
	}
	h.restart()
	<-half
	if got := h.srv.Stats().Streams; got != -1 {
		t.Fatalf("Streams = %d during the walk, want -1", got)
	}
	for sc := range scopes {
		h.setIn(fmt.Sprintf("c%d", sc), "new")    // +1 each
		h.dropIn(fmt.Sprintf("c%d", sc), "s0")    // -1 each
		h.setIn(fmt.Sprintf("n%d", sc), "fresh")  // a new scope: +1 each
		h.dropIn(fmt.Sprintf("c%d", sc), "never") // nothing to drop
	}
	close(release)
	if got, want := waitCounted(t, h), int64(scopes*each+scopes); got != want {
		t.Fatalf("Streams = %d after the walk, want %d", got, want)
	}
	h.restart()
	if got, want := waitCounted(t, h), int64(scopes*each+scopes); got != want {
		t.Fatalf("Streams = %d after a restart, want %d", got, want)
	}
}

// Streams closed quickly by one server still carry their -wal when it
// stops (here its closer is kept from compacting them: on its own it
// seldom can, a cap of 16 having no reserve, but a slot freed by an
// eviction is sometimes its for a moment); the next server on the
// directory finds them while it counts and compacts them, and they read
// back intact.
func TestQuickClosedCompactedAfterRestart(t *testing.T) {
	t.Parallel()
	const maxOpen, n = 16, 48
	h := newHarnessHook(t, func(c *Config) { c.MaxOpenStreams = maxOpen }, nil)
	h.srv.mu.Lock()
	h.srv.noCompact = true
	h.srv.mu.Unlock()
	for i := range n {
		h.set(fmt.Sprintf("s%d", i), fmt.Sprint(i), nil)
	}
	h.node.Stop()
	left := len(walFiles(t, h))
	if left < n-maxOpen {
		t.Fatalf("%d -wal files after the stop, want at least %d: nothing for the restart to compact", left, n-maxOpen)
	}
	before := fileBytes(t, h)
	h.start()
	// The counter follows the removal of each WAL: wait for both.
	testwait.For(t, "the WAL files to be compacted", func() bool {
		return len(walFiles(t, h)) == 0 && h.srv.Stats().StreamsCompacted >= uint64(left)
	})
	after := fileBytes(t, h)
	t.Logf("stream files: %d bytes (%d with a -wal) after the stop, %d once compacted", before, left, after)
	if after >= before {
		t.Fatalf("stream files take %d bytes once compacted, %d before", after, before)
	}
	if got := waitCounted(t, h); got != n {
		t.Fatalf("Streams = %d, want %d", got, n)
	}
	for i := range n {
		if r := h.ok(persist.CmdGet, fmt.Sprintf("s%d", i), map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != fmt.Sprint(i) {
			t.Fatalf("s%d holds %q", i, r.Data)
		}
	}
}

// A server whose storage cannot list its streams says so (-2, "unknown"),
// rather than counting (-1) forever; so does one whose walk failed.
func TestStreamsUnknownWhenUncountable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Storage = store.NewMemory() })
	if got := h.srv.Stats().Streams; got != streamsUnknown {
		t.Fatalf("Streams of a memory storage = %d, want %d", got, streamsUnknown)
	}
	c := newStreamCount()
	c.begin("a")
	c.fail()
	c.end("a", 1)
	if got := c.value(); got != streamsUnknown {
		t.Fatalf("after a failed walk value = %d, want %d", got, streamsUnknown)
	}
	if c.early != nil {
		t.Fatalf("a failed walk keeps deltas: %v", c.early)
	}
}

// TestStreamsCountedInAFreshDirectory: a data directory that does not exist
// yet (a storage without the disk reserve, which would make it, and no
// stream written) holds no stream: the count is 0, not unknown, and the
// first create counts.
func TestStreamsCountedInAFreshDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "not-yet")
	h := newHarness(t, func(c *Config) {
		c.DataDir = dir
		c.Storage = store.NewSQLite(store.SQLiteConfig{Dir: dir, ReserveBytes: -1})
	})
	if got := waitCounted(t, h); got != 0 {
		t.Fatalf("a data directory not made yet: Streams = %d, want 0", got)
	}
	h.set("s", "x", nil)
	if got := h.srv.Stats().Streams; got != 1 {
		t.Fatalf("after a create: Streams = %d, want 1", got)
	}
}
