package server

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestCompactionWaitsForRequests: the closer compacts the streams it
// closed quickly only while no request is being served, unless more than
// compactMax of them wait; once the requests are done it compacts the
// rest.
func TestCompactionWaitsForRequests(t *testing.T) {
	t.Parallel()
	const maxOpen, streams, backlog = 64, 90, 5
	hw := newHeldWrite()
	h := newHarnessHook(t, func(c *Config) { c.MaxOpenStreams = maxOpen }, hw.hook(backlog))
	t.Cleanup(hw.free)

	// Streams past the cap are evicted and closed quickly; the closer may
	// not compact them yet.
	for i := range streams {
		h.set(fmt.Sprintf("s%d", i), "v", nil)
	}
	srv := h.srv
	var listed int
	testwait.For(t, "the evicted streams closed and listed for compaction", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		listed = len(srv.toCompact)
		return srv.toClose.n == 0 && len(srv.closing) == 0 && listed > backlog
	})

	// A write held in its commit keeps the server busy. Its open evicted
	// one more stream; the closer may have left its upkeep for later
	// before (the writes above were requests too), but it cannot while
	// this many are listed.
	done := hw.hold(h, "s0")

	// Allowed to compact while busy, the closer works the list down to the
	// backlog and no further. The backlog counts what the start's walk of
	// the data directory found with a WAL too: on a slow machine that
	// walk can still be running during the writes above and list some
	// of their streams.
	allowCompaction(srv)
	waiting := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.toCompact) + len(srv.foundWAL)
	}
	testwait.For(t, "the closer to leave its upkeep for later, or to run out of work", func() bool {
		select {
		case <-hw.skipped:
			return true
		default:
		}
		return waiting() == 0
	})
	left := waiting()
	st := srv.Stats()
	busy := st.StreamsCompacted
	if left != backlog || busy == 0 {
		t.Fatalf("while busy: %d compacted, %d left listed (of about %d); want some compacted and %d left", busy, left, listed, backlog)
	}
	if st.CompactBacklog != backlog {
		t.Errorf("Stats.CompactBacklog %d while busy, want %d", st.CompactBacklog, backlog)
	}

	// Done serving, the server is idle: the rest are compacted (all but
	// a stream open again since, which leaves the list uncompacted).
	hw.free()
	<-done
	testwait.For(t, "the rest compacted", func() bool {
		srv.mu.Lock()
		closing := len(srv.closing)
		srv.mu.Unlock()
		return waiting() == 0 && closing == 0 // none listed, none being compacted
	})
	if st := srv.Stats(); st.StreamsCompacted < busy+backlog-1 || st.CompactBacklog != 0 {
		t.Fatalf("%d compacted in all, %d while busy, %d still waiting: the %d left were not compacted once idle", st.StreamsCompacted, busy, st.CompactBacklog, backlog)
	}
}

// upkeepLocked's rule alone: upkeep waits while requests are in service or
// queued, unless the backlog (the streams listed for compaction and those
// the start's walk found with a WAL) is over compactMax.
func TestUpkeepRule(t *testing.T) {
	s := &Server{compactMax: 2}
	for _, c := range []struct {
		inService, ready, listed, found int
		want                            bool
	}{
		{0, 0, 1, 0, true}, {1, 0, 1, 0, false}, {0, 1, 1, 0, false}, {1, 1, 2, 0, false}, {1, 0, 3, 0, true},
		{0, 0, 0, 1, true}, {1, 0, 0, 2, false}, {1, 0, 0, 3, true}, {1, 0, 1, 2, true}, {0, 1, 2, 1, true},
	} {
		s.inService, s.ready, s.toCompact = c.inService, make([]*handle, c.ready), make([]handleKey, c.listed)
		s.foundWAL = make([]foundWAL, c.found)
		if got := s.upkeepLocked(); got != c.want {
			t.Errorf("in service %d, ready %d, listed %d, found %d: upkeep %v, want %v", c.inService, c.ready, c.listed, c.found, got, c.want)
		}
	}
}

// TestFoundWALsCompactedWhileBusy: the streams a start's walk finds with a
// WAL left by the last run count towards compactMax like the ones this
// server closed quickly, so a server busy from its start compacts them
// down to that backlog instead of waiting for an idle moment.
func TestFoundWALsCompactedWhileBusy(t *testing.T) {
	t.Parallel()
	const maxOpen, streams, backlog = 16, 48, 5
	hw := newHeldWrite()
	h := newHarnessHook(t, func(c *Config) { c.MaxOpenStreams = maxOpen }, hw.hook(backlog))
	// Deferred, not a cleanup: the restarted server's stop (a cleanup
	// registered later, so run first) waits for the held write.
	defer hw.free()

	// The first server closes the streams past its cap quickly and, not
	// allowed to compact, stops with their WALs on disk.
	for i := range streams {
		h.set(fmt.Sprintf("s%d", i), "v", nil)
	}
	h.node.Stop()
	left := len(walFiles(t, h))
	if left <= backlog+1 {
		t.Fatalf("%d -wal files after the stop, want more than %d", left, backlog+1)
	}

	// The next one finds them all (its walk done), compacts none yet, and
	// is kept busy by a write held in its commit.
	h.start()
	srv := h.srv
	waitCounted(t, h)
	srv.mu.Lock()
	found := len(srv.foundWAL)
	srv.mu.Unlock()
	if found != left {
		t.Fatalf("the walk found %d streams with a WAL, want %d", found, left)
	}
	done := hw.hold(h, "s0")

	// Allowed to compact while busy, the closer works the backlog down to
	// compactMax and no further.
	allowCompaction(srv)
	testwait.For(t, "the closer to leave its upkeep for later", func() bool {
		select {
		case <-hw.skipped:
			return true
		default:
			return false
		}
	})
	st := srv.Stats()
	if st.StreamsCompacted == 0 || st.CompactBacklog != backlog {
		t.Fatalf("while busy: %d compacted, %d still waiting (of %d found); want some compacted and %d waiting", st.StreamsCompacted, st.CompactBacklog, found, backlog)
	}

	// Idle again, it compacts the rest.
	hw.free()
	<-done
	testwait.For(t, "the rest compacted", func() bool {
		return srv.Stats().CompactBacklog == 0 && len(walFiles(t, h)) <= 1 // s0 is open again
	})
}

// heldWrite keeps a server busy for a test: once holdNext is set, the
// next write waits in its commit (entered closed) until free; skipped
// hears each time the closer leaves its upkeep for later.
type heldWrite struct {
	holdNext           atomic.Bool
	entered, release   chan struct{}
	skipped            chan struct{}
	block, releaseOnce sync.Once
}

func newHeldWrite() *heldWrite {
	return &heldWrite{entered: make(chan struct{}), release: make(chan struct{}), skipped: make(chan struct{}, 1)}
}

// hook sets a new server up for it: no compaction until the test allows
// it, a backlog of backlog, the held write and the closer's skips.
func (hw *heldWrite) hook(backlog int) func(*Server) {
	return func(s *Server) {
		s.noCompact = true
		s.compactMax = backlog
		s.beforeWrite = func(int) {
			if hw.holdNext.Load() {
				hw.block.Do(func() {
					close(hw.entered)
					<-hw.release
				})
			}
		}
		s.upkeepWaits = func() {
			select {
			case hw.skipped <- struct{}{}:
			default:
			}
		}
	}
}

// hold sets a value in stream and keeps that write in its commit; it
// returns once the write is held (with any skip heard before forgotten),
// and the channel it returns closes when the write is done (after free).
func (hw *heldWrite) hold(h *harness, stream string) <-chan struct{} {
	hw.holdNext.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.set(stream, "held", nil)
	}()
	<-hw.entered
	select {
	case <-hw.skipped:
	default:
	}
	return done
}

// free lets the held write go on; it may be called more than once.
func (hw *heldWrite) free() { hw.releaseOnce.Do(func() { close(hw.release) }) }

// allowCompaction lifts the hook's noCompact and wakes the closer.
func allowCompaction(srv *Server) {
	srv.mu.Lock()
	srv.noCompact = false
	srv.closeWork.Signal()
	srv.mu.Unlock()
}
