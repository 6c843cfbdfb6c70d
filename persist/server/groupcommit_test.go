package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// queued is how many requests wait on stream name of h's scope.
func (h *harness) queued(name string) int {
	h.srv.mu.Lock()
	defer h.srv.mu.Unlock()
	if hd := h.srv.handles[handleKey{scope: h.scope, name: name}]; hd != nil {
		return len(hd.queue)
	}
	return 0
}

// gate holds the first group commit until released, so a test can line up
// concurrent writes behind it. It also records the size of every commit.
type gate struct {
	release chan struct{}
	once    sync.Once
	held    atomic.Bool
	first   atomic.Int64 // messages in the held commit

	mu    sync.Mutex
	sizes []int // messages in each commit, in commit order
}

// newGate returns a shut gate; tests register g.open as a cleanup after
// their harness (cleanups run last-in first-out), so a failing test cannot
// leave a worker stuck in Stop.
func newGate() *gate { return &gate{release: make(chan struct{})} }

// commitSizes is the size of every commit so far, in order.
func (g *gate) commitSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) hook(s *Server) {
	s.beforeWrite = func(n int) {
		g.mu.Lock()
		g.sizes = append(g.sizes, n)
		g.mu.Unlock()
		if g.held.CompareAndSwap(false, true) {
			g.first.Store(int64(n))
			<-g.release
		}
	}
}

// sendSets sends n sets of "v{i}" concurrently and returns their replies.
func (h *harness) sendSets(stream string, n int) []*nats.Msg {
	replies := make([]*nats.Msg, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			replies[i], errs[i] = h.nc.RequestMsgWithContext(ctx, h.msg(persist.CmdSet, stream, nil, fmt.Appendf(nil, "v%d", i)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			h.t.Fatalf("set %d: %v", i, err)
		}
	}
	return replies
}

// TestGroupCommit: 200 concurrent sets on one stream share transactions,
// each caller is answered after the commit holding its write, and every
// answered seq is durable.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	const n = 200
	g := newGate()
	h := newHarnessHook(t, nil, g.hook)
	t.Cleanup(g.open)
	var replies []*nats.Msg
	done := make(chan struct{})
	go func() {
		defer close(done)
		replies = h.sendSets("gc", n)
	}()
	// Everything but the held commit's messages lines up behind it.
	testwait.For(t, "writes to queue behind the held commit", func() bool {
		return g.held.Load() && int64(h.queued("gc")) == n-g.first.Load()
	})
	select {
	case <-done:
		t.Fatal("a caller was answered before its commit")
	default:
	}
	g.open()
	<-done
	// Two commits: the held one, then everything that queued behind it. If
	// all the sets reached the queue before the worker took the first batch,
	// the held commit holds them all and there is only one.
	want := uint64(2)
	if g.first.Load() == n {
		want = 1
	}
	if c := h.srv.commits.Load(); c != want {
		t.Fatalf("%d sets took %d commits (%d in the first); want %d", n, c, g.first.Load(), want)
	}
	seqs := map[uint64]string{}
	for i, r := range replies {
		if c := r.Header.Get(persist.HdrError); c != "" {
			t.Fatalf("set %d: %s %s", i, c, r.Data)
		}
		var res persist.SetResult
		mustJSON(t, r.Data, &res)
		if _, dup := seqs[res.Seq]; dup {
			t.Fatalf("seq %d given twice", res.Seq)
		}
		seqs[res.Seq] = fmt.Sprintf("v%d", i)
	}
	h.restart()
	for seq, v := range seqs {
		if r := h.ok(persist.CmdGet, "gc", map[string]string{persist.HdrSeq: itoa(seq)}, nil); string(r.Data) != v {
			t.Fatalf("seq %d holds %q after restart, want %q", seq, r.Data, v)
		}
	}
}

// TestStopAnswersInFlight: writes queued when Stop begins are committed and
// answered before Stop returns.
func TestStopAnswersInFlight(t *testing.T) {
	t.Parallel()
	const n = 50
	g := newGate()
	h := newHarnessHook(t, nil, g.hook)
	t.Cleanup(g.open)
	var replies []*nats.Msg
	done := make(chan struct{})
	go func() {
		defer close(done)
		replies = h.sendSets("s", n)
	}()
	testwait.For(t, "writes to queue", func() bool {
		return g.held.Load() && int64(h.queued("s")) == n-g.first.Load()
	})
	stopped := make(chan error, 1)
	go func() { stopped <- h.srv.Stop(context.Background()) }()
	testwait.For(t, "stop to begin", h.srv.base.Stopped)
	g.open()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	<-done
	for i, r := range replies {
		if c := r.Header.Get(persist.HdrError); c != "" {
			t.Fatalf("set %d: %s %s", i, c, r.Data)
		}
	}
	h.start()
	if inv := h.inventory("s"); inv.Count != n {
		t.Fatalf("%d of %d answered writes found after restart", inv.Count, n)
	}
	// A stopped server refuses nothing silently: it is simply gone, and
	// Stop again is a no-op.
	if err := h.srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStreamCache(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxOpenStreams = 2 })
	open := func() int {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return len(h.srv.handles)
	}
	for i := range 6 {
		h.set(fmt.Sprintf("s%d", i), fmt.Sprint(i), nil)
		testwait.For(t, "the cache to shrink", func() bool { return open() <= 2 })
	}
	for i := range 6 {
		if r := h.ok(persist.CmdGet, fmt.Sprintf("s%d", i), map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != fmt.Sprint(i) {
			t.Fatalf("s%d holds %q after being closed and reopened", i, r.Data)
		}
	}
}

func TestIdleClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.IdleClose = 20 * time.Millisecond; c.ExpireEvery = 5 * time.Millisecond })
	h.set("s", "x", nil)
	testwait.For(t, "the idle stream to close", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return len(h.srv.handles) == 0
	})
	if r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != "x" {
		t.Fatalf("after idle close: %q", r.Data)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, nc := testnatsStart(t)
	for name, c := range map[string]Config{
		"no conn":     {ID: "0", IDs: []string{"0"}},
		"no ids":      {Conn: nc, ID: "0"},
		"id not in":   {Conn: nc, ID: "2", IDs: []string{"0", "1"}},
		"dup ids":     {Conn: nc, ID: "0", IDs: []string{"0", "0"}},
		"wildcard id": {Conn: nc, ID: "*", IDs: []string{"*"}},
		"dotted id":   {Conn: nc, ID: "a.b", IDs: []string{"a.b"}},
		"spaced id":   {Conn: nc, ID: "0", IDs: []string{"0", "a b"}},
		"bad service": {Conn: nc, ID: "0", IDs: []string{"0"}, Service: "p.q"},
		// (Was: accepted, though its subjects pass for reply inboxes.)
		"inbox service":       {Conn: nc, ID: "0", IDs: []string{"0"}, Service: "_INBOX"},
		"named inbox service": {Conn: nc, ID: "0", IDs: []string{"0"}, Service: "_INBOX_acme"},
		"negative":            {Conn: nc, ID: "0", IDs: []string{"0"}, Workers: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
	// Stop without Start is fine.
	s, err := New(Config{Conn: nc, ID: "0", IDs: []string{"0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestInlineLoneRequests: on an open stream, a request with nothing queued
// and nothing behind it is served on the subscription's goroutine, in
// order, with the same answers; a stream with sync on, a getAll, a large
// write and the request that opens a stream still go through the workers.
func TestInlineLoneRequests(t *testing.T) {
	h := newHarness(t, nil)
	h.set("s", "v1", nil) // opens the stream: a worker
	h.ok(persist.CmdConfig, "f", nil, []byte(`{"sync":true}`))
	base := h.srv.inlined.Load()
	const n = 20
	for i := 2; i <= n; i++ {
		if res := h.set("s", fmt.Sprintf("v%d", i), nil); res.Seq != uint64(i) {
			t.Fatalf("set %d got seq %d", i, res.Seq)
		}
		if r := h.ok(persist.CmdGet, "s", map[string]string{persist.HdrSeq: itoa(uint64(i))}, nil); string(r.Data) != fmt.Sprintf("v%d", i) {
			t.Fatalf("get %d: %q", i, r.Data)
		}
	}
	if got, want := h.srv.inlined.Load()-base, uint64(2*(n-1)); got != want {
		t.Fatalf("%d requests served inline, want %d", got, want)
	}
	base = h.srv.inlined.Load()
	h.set("f", "synced", nil)
	h.ok(persist.CmdGetAll, "s", nil, nil)
	h.set("s", strings.Repeat("x", inlineMaxBytes+1), nil)
	if got := h.srv.inlined.Load() - base; got != 0 {
		t.Fatalf("%d requests served inline, want 0 (sync stream, getAll, large set)", got)
	}
}

// burstOf16 makes stream's recent commits hold 16 writes: a first commit
// of one write, held by g, with 16 writes queued behind it, then released.
// g must be fresh (its first commit is the one it holds).
func burstOf16(t *testing.T, h *harness, g *gate, stream string) {
	t.Helper()
	first := make(chan struct{})
	go func() { defer close(first); h.sendSets(stream, 1) }()
	testwait.For(t, "the first commit to be held", g.held.Load)
	burst := make(chan struct{})
	go func() { defer close(burst); h.sendSets(stream, 16) }()
	testwait.For(t, "16 writes to queue", func() bool { return h.queued(stream) == 16 })
	g.open()
	<-first
	<-burst
	if sizes := g.commitSizes(); !slices.Equal(sizes, []int{1, 16}) {
		t.Fatalf("commit sizes %v, want [1 16]", sizes)
	}
}

// TestSyncCommitGathersWriters: on a server whose commits wait for the
// disk, a group commit with fewer writes queued than the stream's recent
// commits waits for the writers still coming, so 16 writers arriving in two
// waves share one commit instead of alternating halves; and no write of
// such a server is served on the subscription's goroutine, which would
// hold every other stream behind an fsync.
func TestSyncCommitGathersWriters(t *testing.T) {
	t.Parallel()
	g := newGate()
	h := newHarnessHook(t, func(c *Config) { c.Sync = true }, func(s *Server) {
		g.hook(s)
		s.gatherWait = time.Minute // the test says when the writers come
	})
	t.Cleanup(g.open)
	burstOf16(t, h, g, "g")
	wave := func(n int) chan struct{} {
		done := make(chan struct{})
		go func() { defer close(done); h.sendSets("g", n) }()
		return done
	}
	waiting := func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		hd := h.srv.handles[handleKey{scope: h.scope, name: "g"}]
		return hd != nil && hd.waiting
	}
	w1 := wave(8)
	testwait.For(t, "the worker to wait for more writers", waiting)
	w2 := wave(8)
	<-w1
	<-w2
	if sizes := g.commitSizes(); !slices.Equal(sizes, []int{1, 16, 16}) {
		t.Fatalf("commit sizes %v, want [1 16 16]: the two waves of 8 should share a commit", sizes)
	}
	if n := h.srv.inlined.Load(); n != 0 {
		t.Fatalf("%d writes of a sync server served on the subscription's goroutine, want 0", n)
	}
	if inv := h.inventory("g"); inv.Count != 33 {
		t.Fatalf("stream holds %d messages, want 33", inv.Count)
	}
}

// TestDecayPeak: after a burst the peak falls back to a lone writer's 1,
// from any height, and never below the commit just made.
func TestDecayPeak(t *testing.T) {
	for _, start := range []int{2, 7, 16, 1000} {
		peak, steps := start, 0
		for peak > 1 {
			next := decayPeak(peak, 1)
			if next >= peak {
				t.Fatalf("from %d: the peak stuck at %d", start, peak)
			}
			peak, steps = next, steps+1
		}
		if start == 16 && steps > 12 {
			t.Fatalf("from 16: %d lone commits to fall back to 1, want at most 12", steps)
		}
	}
	if got := decayPeak(3, 9); got != 9 {
		t.Fatalf("decayPeak(3, 9) = %d, want 9", got)
	}
}

// TestSyncLoneWriterStopsGathering: after a burst of 16 writers a lone
// writer of a sync stream waits for others (gather) only while the burst is
// recent: within a dozen commits its writes commit at once again. (The peak
// used to stop decaying at 7, so every later write waited its gather out.)
func TestSyncLoneWriterStopsGathering(t *testing.T) {
	t.Parallel()
	g := newGate()
	h := newHarnessHook(t, func(c *Config) { c.Sync = true }, func(s *Server) {
		g.hook(s)
		s.gatherWait = time.Millisecond // short: this test counts the waits, it does not time them
	})
	t.Cleanup(g.open)
	burstOf16(t, h, g, "p")
	const lone = 24
	var gathered [lone]uint64
	for i := range lone {
		h.set("p", fmt.Sprintf("lone%d", i), nil)
		gathered[i] = h.srv.gathered.Load()
	}
	if gathered[0] == 0 {
		t.Fatal("the first lone write after the burst did not wait for more writers")
	}
	if gathered[lone-1] != gathered[lone/2] {
		t.Fatalf("gathers after each lone write %v: the last %d lone writes still waited for writers that never came", gathered, lone/2)
	}
}
