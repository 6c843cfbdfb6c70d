package server

import (
	"sync"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// nameGateStorage is the SQLite storage whose StreamName (the closer's read
// of a found WAL's stream name, resolveFound) waits for release.
type nameGateStorage struct {
	*store.SQLite
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *nameGateStorage) StreamName(scope, file string) (string, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	return g.SQLite.StreamName(scope, file)
}

// TestOpenWaitsForFoundNameRead: while the closer reads the name of a
// stream the start's walk found with a WAL (resolveFound), it holds an
// open-stream slot; an open meanwhile waits for that slot, as it does for
// a compaction's. It was refused "all N open streams are busy" although
// no stream was open at all (found by an audit).
func TestOpenWaitsForFoundNameRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxOpenStreams = 1 })
	h.srv.mu.Lock()
	h.srv.noCompact = true // keep the quick close's WAL for the restart
	h.srv.mu.Unlock()
	h.set("a", "1", nil)
	h.set("b", "2", nil) // no free slot: closes a quickly, its WAL stays
	h.node.Stop()
	if n := len(walFiles(t, h)); n == 0 {
		t.Fatal("no -wal left for the restart to find")
	}

	g := &nameGateStorage{SQLite: store.NewSQLite(store.SQLiteConfig{Dir: h.dir}), entered: make(chan struct{}), release: make(chan struct{})}
	h.cfg.Storage = g
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(g.release) }) }
	h.start()
	t.Cleanup(release) // before the harness's Stop (cleanups run last first)
	<-g.entered        // the closer holds the one slot, reading a's name
	testwait.For(t, "the closer to hold the slot", func() bool { return h.srv.Stats().OpenStorage == 1 })
	if st := h.srv.Stats(); st.OpenStreams != 0 {
		t.Fatalf("%d streams in the cache, want none", st.OpenStreams)
	}

	// No stream is open or busy: the open waits for the slot the name
	// read gives back, as it would for a compaction's.
	done := make(chan struct{})
	var code persist.Code
	var body string
	go func() {
		defer close(done)
		r := h.req(persist.CmdSet, "c", nil, []byte("3"))
		code, body = persist.Code(r.Header.Get(persist.HdrError)), string(r.Data)
	}()
	// Let the name read finish only once the set has met the full slot
	// (answered already, or waiting in takeSlot).
	testwait.For(t, "the set to reach takeSlot", func() bool {
		select {
		case <-done:
			return true
		default:
		}
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.inService > 0
	})
	release()
	<-done
	if code != "" {
		t.Fatalf("set of a new stream while no stream is open: %s: %s", code, body)
	}
}
