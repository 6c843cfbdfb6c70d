package server

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testdisk"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

var dropHdr = map[string]string{persist.HdrAll: "true", persist.HdrDrop: "true"}

// streamFiles lists the stream files (database, -wal, -shm, -journal and
// temporary copies) under dir: everything but directories and the disk
// reserve.
func streamFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, f := range testdisk.Files(t, dir) {
		if filepath.Base(f) == ".reserve" || !strings.Contains(filepath.Base(f), ".db") {
			continue
		}
		out = append(out, f)
	}
	return out
}

// drop sends a drop of stream and returns the seqs it removed.
func (h *harness) drop(stream string, extra map[string]string) []uint64 {
	h.t.Helper()
	hdr := map[string]string{}
	for k, v := range dropHdr {
		hdr[k] = v
	}
	for k, v := range extra {
		hdr[k] = v
	}
	var res persist.DeleteResult
	mustJSON(h.t, h.ok(persist.CmdDelete, stream, hdr, nil).Data, &res)
	return res.Seqs
}

// wantEmptyReads checks that every read of stream answers as for a missing
// stream.
func wantEmptyReads(t *testing.T, h *harness, stream string) {
	t.Helper()
	wantCode(t, h.req(persist.CmdGet, stream, map[string]string{persist.HdrSeq: "1"}, nil), persist.CodeNotFound)
	wantCode(t, h.req(persist.CmdGet, stream, map[string]string{persist.HdrKey: "k"}, nil), persist.CodeNotFound)
	if msgs, _, _ := h.getAll(stream, nil); len(msgs) != 0 {
		t.Fatalf("getAll after the drop: %d messages", len(msgs))
	}
	var keys []string
	mustJSON(t, h.ok(persist.CmdKeys, stream, nil, nil).Data, &keys)
	if len(keys) != 0 {
		t.Fatalf("keys after the drop: %v", keys)
	}
	if inv := h.inventory(stream); inv.Count != 0 || inv.Bytes != 0 || inv.Seq != 0 {
		t.Fatalf("inventory after the drop: %+v", inv)
	}
	var c persist.Config
	mustJSON(t, h.ok(persist.CmdConfig, stream, nil, nil).Data, &c)
	if c != persist.DefaultConfig() {
		t.Fatalf("config after the drop: %+v, want the default", c)
	}
}

// A drop removes everything (reported on the change feed), then the
// stream's files in the data directory and its archive copy; reads
// afterwards answer as for a missing stream and create nothing, and the
// next write starts the stream over at seq 1 with the default config.
func TestDropRemovesStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Archive = t.TempDir() })
	for i := range 3 {
		h.set("spool", fmt.Sprintf("v%d", i), map[string]string{persist.HdrKey: fmt.Sprintf("k%d", i)})
	}
	h.config("spool", `{"max_msgs": 10}`)
	h.set("other", "stays", nil)
	h.restart() // closing backs the streams up to the archive
	if n := archiveRows(t, h.cfg.Archive, h.scope, "spool"); n != 3 {
		t.Fatalf("archive copy holds %d rows before the drop, want 3", n)
	}
	if got := h.drop("spool", nil); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("drop removed %v, want [1 2 3]", got)
	}
	if got := h.deletedSeqs(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("change feed reported %v deleted, want [1 2 3]", got)
	}
	p := func(dir, stream string) string {
		t.Helper()
		sp, err := store.StreamPath(dir, h.scope, stream)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	wantOnly := func(label string) {
		t.Helper()
		for _, dir := range []string{h.dir, h.cfg.Archive} {
			for _, f := range streamFiles(t, dir) {
				if !strings.HasPrefix(f, p(dir, "other")) {
					t.Fatalf("%s: %s is left", label, f)
				}
			}
		}
	}
	wantOnly("after the drop")
	wantEmptyReads(t, h, "spool")
	wantOnly("after reads of the dropped stream")
	// A restart must not bring it back from the archive.
	h.restart()
	wantEmptyReads(t, h, "spool")
	wantOnly("after a restart")
	if res := h.set("spool", "again", nil); res.Seq != 1 {
		t.Fatalf("first write after the drop got seq %d, want 1", res.Seq)
	}
	if c := h.config("spool", ""); c != persist.DefaultConfig() {
		t.Fatalf("config after the drop and a write: %+v, want the default", c)
	}
	if inv := h.inventory("other"); inv.Count != 1 {
		t.Fatalf("the other stream holds %d messages, want 1", inv.Count)
	}
}

// A drop of a stream that does not exist answers as an empty delete and
// leaves nothing on disk, for persistent and ephemeral streams.
func TestDropMissingCreatesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Archive = t.TempDir() })
	if got := h.drop("nothing", nil); got == nil || len(got) != 0 {
		t.Fatalf("drop of a missing stream: %#v, want []", got)
	}
	if got := h.drop("nothing", map[string]string{persist.HdrEphemeral: "true"}); len(got) != 0 {
		t.Fatalf("drop of a missing ephemeral stream: %v", got)
	}
	for _, dir := range []string{h.dir, h.cfg.Archive} {
		if files := testdisk.Files(t, dir); len(files) != 0 {
			t.Fatalf("drop of a missing stream left %v", files)
		}
	}
	// The answer can go before the worker hands the stream back (a drop
	// is answered when it is applied), so the handle may still be there a
	// moment: it must go, not stay.
	testwait.For(t, "the drop of a missing stream to keep no handle", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return len(h.srv.handles) == 0
	})
}

// An ephemeral stream dropped is gone: seqs start over.
func TestDropEphemeral(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	eph := map[string]string{persist.HdrEphemeral: "true"}
	h.set("scratch", "a", eph)
	h.set("scratch", "b", eph)
	if got := h.drop("scratch", eph); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("drop removed %v", got)
	}
	if res := h.set("scratch", "c", eph); res.Seq != 1 {
		t.Fatalf("write after the drop got seq %d, want 1", res.Seq)
	}
}

// Sy-Drop goes only with Sy-All, and only as true or false.
func TestDropNeedsAll(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("log", "x", nil)
	wantCode(t, h.req(persist.CmdDelete, "log", map[string]string{persist.HdrSeq: "1", persist.HdrDrop: "true"}, nil), persist.CodeBadRequest)
	wantCode(t, h.req(persist.CmdDelete, "log", map[string]string{persist.HdrAll: "true", persist.HdrDrop: "yes"}, nil), persist.CodeBadRequest)
	// Sy-Drop: false is a plain delete of everything: the file stays.
	var res persist.DeleteResult
	mustJSON(t, h.ok(persist.CmdDelete, "log", map[string]string{persist.HdrAll: "true", persist.HdrDrop: "false"}, nil).Data, &res)
	if !slices.Equal(res.Seqs, []uint64{1}) {
		t.Fatalf("delete removed %v", res.Seqs)
	}
	if inv := h.inventory("log"); inv.Seq != 1 {
		t.Fatalf("after a plain delete the stream's seq is %d, want 1 (kept)", inv.Seq)
	}
}

// Drops racing writes and reads on one stream: every request is answered,
// none fails, every write is either removed by exactly one drop or still
// there at the end, and afterwards the stream works and drops clean.
func TestDropRacingWrites(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Archive = t.TempDir() })
	const writers, droppers, rounds = 4, 2, 40
	var wg sync.WaitGroup
	errs := make(chan error, 3*writers*rounds+droppers) // a dropper stops at its first error
	// send is h.do for goroutines other than the test's: it reports a
	// missing or error answer (other than allowed) instead of failing the
	// test from there.
	send := func(label string, m *nats.Msg, allowed persist.Code) *nats.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := bus.Request(ctx, h.nc, m)
		if err != nil {
			errs <- fmt.Errorf("%s: no answer: %w", label, err)
			return nil
		}
		if c := r.Header.Get(persist.HdrError); c != "" {
			if persist.Code(c) != allowed {
				errs <- fmt.Errorf("%s: %s: %s", label, c, r.Data)
			}
			return nil
		}
		return r
	}
	var removed atomic.Int64 // seqs the drops removed
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				// Unkeyed: a keyed set would remove its key's older row itself.
				send("set", h.msg(persist.CmdSet, "race", nil, []byte(fmt.Sprintf("w%d-%d", w, i))), "")
				send("get", h.msg(persist.CmdGet, "race", map[string]string{persist.HdrKey: "nothing-here"}, nil), persist.CodeNotFound)
				send("inventory", h.msg(persist.CmdInventory, "race", nil, nil), "")
			}
		}()
	}
	// The droppers go on until the writers are done, so that drops meet
	// writes throughout rather than only at the start.
	writing := make(chan struct{})
	var dwg sync.WaitGroup
	for range droppers {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			for {
				select {
				case <-writing:
					return
				default:
				}
				if r := send("drop", h.msg(persist.CmdDelete, "race", dropHdr, nil), ""); r != nil {
					var res persist.DeleteResult
					if err := json.Unmarshal(r.Data, &res); err != nil {
						errs <- fmt.Errorf("drop answer %q: %w", r.Data, err)
						return
					}
					removed.Add(int64(len(res.Seqs)))
				} else {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(writing)
	dwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	left := h.inventory("race").Count
	if got := removed.Load() + left; got != writers*rounds {
		t.Fatalf("drops removed %d and %d are left: %d writes accounted for, want %d", removed.Load(), left, got, writers*rounds)
	}
	t.Logf("drops removed %d writes, %d left", removed.Load(), left)
	// The server still serves the stream, and a last drop leaves nothing.
	h.set("race", "after", nil)
	if got := h.drop("race", nil); int64(len(got)) != left+1 {
		t.Fatalf("last drop removed %d seqs, want %d", len(got), left+1)
	}
	for _, dir := range []string{h.dir, h.cfg.Archive} {
		if files := streamFiles(t, dir); len(files) != 0 {
			t.Fatalf("after the last drop %v is left", files)
		}
	}
	if res := h.set("race", "fresh", nil); res.Seq != 1 {
		t.Fatalf("write after the last drop got seq %d, want 1", res.Seq)
	}
}

// slowCloseStorage hands out streams whose first Close (the idle close of
// the first handle) waits for release, and records whether Remove ran while
// that close was still under way.
type slowCloseStorage struct {
	store.Storage
	closing       chan struct{} // closed when the slow close starts
	release       chan struct{}
	armed         atomic.Bool
	slowDone      atomic.Bool
	removedDuring atomic.Bool
	inSlowClose   atomic.Bool // the slow close is held
	openedDuring  atomic.Bool // an open began while it was
	releaseOnce   sync.Once
}

// releaseClose lets the held close go on; it may be called more than
// once (a test that fails before its own call releases it in a cleanup,
// so that the server's Stop does not wait for it for ever).
func (s *slowCloseStorage) releaseClose() { s.releaseOnce.Do(func() { close(s.release) }) }

type slowCloseStream struct {
	store.Stream
	s *slowCloseStorage
}

func (s *slowCloseStorage) Open(scope, name string, now time.Time) (store.Stream, error) {
	if s.inSlowClose.Load() {
		s.openedDuring.Store(true)
	}
	st, err := s.Storage.Open(scope, name, now)
	if err != nil {
		return st, err
	}
	return slowCloseStream{st, s}, nil
}

func (s *slowCloseStorage) OpenExisting(scope, name string, now time.Time) (store.Stream, error) {
	if s.inSlowClose.Load() {
		s.openedDuring.Store(true)
	}
	st, err := s.Storage.OpenExisting(scope, name, now)
	if err != nil {
		return st, err
	}
	return slowCloseStream{st, s}, nil
}

func (s *slowCloseStorage) Remove(scope, name string) error {
	if !s.slowDone.Load() {
		s.removedDuring.Store(true)
	}
	return s.Storage.Remove(scope, name)
}

func (c slowCloseStream) Close() error {
	if c.s.armed.CompareAndSwap(true, false) {
		c.s.inSlowClose.Store(true)
		close(c.s.closing)
		<-c.s.release
		defer c.s.slowDone.Store(true)
		defer c.s.inSlowClose.Store(false) // after the close below
	}
	return c.Stream.Close()
}

// requestDuringIdleClose writes "s" on h, whose idle close slow then
// holds; sends m once it does, releases the close when m's handle is
// scheduled on a worker, and returns the answer to m. h closes idle
// streams quickly (a short IdleClose and ExpireEvery).
func requestDuringIdleClose(t *testing.T, h *harness, slow *slowCloseStorage, m *nats.Msg) *nats.Msg {
	t.Helper()
	// Armed before the write: its stream's only close is the idle one,
	// which a loaded machine may start before a store made after the
	// write's answer (20 ms is short), and the test then waited forever.
	slow.armed.Store(true)
	h.set("s", "x", nil)
	select {
	case <-slow.closing: // the idle close of the first handle has begun, and waits
	case <-time.After(time.Minute):
		t.Fatal("the stream's idle close never began")
	}
	answered := make(chan *nats.Msg, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := bus.Request(ctx, h.nc, m)
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	testwait.For(t, "the request to reach its stream", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		hd := h.srv.handles[handleKey{scope: h.scope, name: "s"}]
		return hd != nil && hd.scheduled
	})
	slow.releaseClose()
	r := <-answered
	if r == nil {
		t.Fatalf("no answer to %s", m.Subject)
	}
	return r
}

// A drop that meets a handle of its stream evicted and still closing
// (closed outside the server's lock, while a new handle serves the drop)
// must remove the files only once that close is done: the old connection's
// close would otherwise checkpoint into, and remove the -wal of, files the
// drop had removed or a new stream created since. This test does not force
// that interleaving (the drop's open may wait on the closing connection
// first, and then Remove comes after the close anyway); it checks that the
// drop neither deadlocks on the slow close nor leaves files, and that
// Remove never runs during it.
func TestDropWaitsForEvictedClose(t *testing.T) {
	t.Parallel()
	slow := &slowCloseStorage{closing: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, func(c *Config) {
		c.IdleClose = 20 * time.Millisecond
		c.ExpireEvery = 5 * time.Millisecond
		slow.Storage = store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir})
		c.Storage = slow
	})
	// The drop opens a second handle and waits in serveDrop for the first
	// one's close.
	r := requestDuringIdleClose(t, h, slow, h.msg(persist.CmdDelete, "s", dropHdr, nil))
	if c := r.Header.Get(persist.HdrError); c != "" {
		t.Fatalf("drop: %s: %s", c, r.Data)
	}
	if slow.removedDuring.Load() {
		t.Fatal("the drop removed the files while the evicted handle was still closing")
	}
	if files := streamFiles(t, h.dir); len(files) != 0 {
		t.Fatalf("after the drop %v is left", files)
	}
	if res := h.set("s", "fresh", nil); res.Seq != 1 {
		t.Fatalf("write after the drop got seq %d, want 1", res.Seq)
	}
}
