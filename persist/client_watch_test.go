package persist_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// collector is a Watch callback that checks the contract as events arrive:
// sets in increasing seq order, each once; deletes only of live seqs.
type collector struct {
	mu       sync.Mutex
	live     map[uint64]string // seq -> value of what the application holds
	sets     []uint64          // every set seq, in delivery order
	deleted  []uint64
	resynced int
	caughtUp int
	skipped  []persist.Event // EventSkipped events
	ended    []error         // EventEnded errors
	reasons  []string        // EventResynced reasons
	// setsSinceResync counts the sets delivered since the last
	// EventResynced (all of them before the first).
	setsSinceResync int
	errs            []string
	changed         chan struct{} // closed and replaced on every event
}

func newCollector() *collector {
	return &collector{live: map[uint64]string{}, changed: make(chan struct{})}
}

func (c *collector) fn(ev persist.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ended) > 0 {
		c.errs = append(c.errs, fmt.Sprintf("%s event after ended", ev.Kind))
	}
	switch ev.Kind {
	case persist.EventSet:
		if n := len(c.sets); n > 0 && ev.Msg.Seq <= c.sets[n-1] {
			c.errs = append(c.errs, fmt.Sprintf("set %d after %d", ev.Msg.Seq, c.sets[n-1]))
		}
		c.sets = append(c.sets, ev.Msg.Seq)
		c.setsSinceResync++
		c.live[ev.Msg.Seq] = string(ev.Msg.Value)
	case persist.EventDelete:
		for _, q := range ev.Seqs {
			if _, ok := c.live[q]; !ok {
				c.errs = append(c.errs, fmt.Sprintf("delete of %d, which is not live", q))
			}
			delete(c.live, q)
			c.deleted = append(c.deleted, q)
		}
	case persist.EventResynced:
		c.resynced++
		c.reasons = append(c.reasons, ev.Reason)
		c.setsSinceResync = 0
	case persist.EventCaughtUp:
		c.caughtUp++
	case persist.EventSkipped:
		if ev.Count == 0 || ev.First > ev.Last || ev.Last-ev.First+1 < ev.Count {
			c.errs = append(c.errs, fmt.Sprintf("malformed skipped event %+v", ev))
		}
		c.skipped = append(c.skipped, ev)
	case persist.EventEnded:
		if len(c.ended) > 0 {
			c.errs = append(c.errs, "a second ended event")
		}
		c.ended = append(c.ended, ev.Err)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitFor waits until cond holds (checked under the lock after each event).
func (c *collector) waitFor(t *testing.T, what string, cond func(c *collector) bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok, ch := cond(c), c.changed
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("timed out waiting for %s: %d sets (last %v), %d live, %d resyncs, errors %v", what, len(c.sets), c.sets[max(0, len(c.sets)-3):], len(c.live), c.resynced, c.errs)
		}
	}
}

// check fails on contract violations and on sets that are not exactly want.
func (c *collector) check(t *testing.T, want []uint64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		t.Error(e)
	}
	if len(c.sets) != len(want) {
		t.Fatalf("got %d sets, want %d", len(c.sets), len(want))
	}
	for i := range want {
		if c.sets[i] != want[i] {
			t.Fatalf("set #%d is seq %d, want %d", i, c.sets[i], want[i])
		}
	}
}

func seqs(from, to uint64) []uint64 {
	var out []uint64
	for q := from; q <= to; q++ {
		out = append(out, q)
	}
	return out
}

func watchEnv(t *testing.T) (*persist.Client, *nats.Conn) {
	t.Helper()
	nc := testpersist.Start(t, 1).Conn()
	return newClient(t, nc), nc
}

func watch(t *testing.T, s *persist.Stream, opts persist.WatchOptions, c *collector) *persist.Watcher {
	t.Helper()
	w, err := s.Watch(context.Background(), opts, c.fn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

func TestWatchHistoryThenLive(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "log")
	for i := 1; i <= 10; i++ {
		if _, err := s.Set(ctx, []byte("v"+strconv.Itoa(i)), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col := newCollector()
	w := watch(t, s, persist.WatchOptions{}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	col.mu.Lock()
	if len(col.sets) != 10 {
		t.Fatalf("caught up after %d sets, want 10", len(col.sets))
	}
	col.mu.Unlock()

	// Live: single sets, a batch (one commit, one feed message), a keyed
	// replace (a set and the delete of the older row) and a delete. The
	// first live write is a plain set: the first feed message after a read
	// is checked against the server (docs/persist.md), so a keyed row it
	// carried that was already replaced would be counted skipped, not set.
	if _, err := s.Set(ctx, []byte("p"), persist.SetOptions{}); err != nil { // 11
		t.Fatal(err)
	}
	col.waitFor(t, "the first live set", func(c *collector) bool { return len(c.sets) == 11 })
	if _, err := s.Set(ctx, []byte("k1"), persist.SetOptions{Key: "k"}); err != nil { // 12
		t.Fatal(err)
	}
	batch := make([]persist.Entry, 5)
	for i := range batch {
		batch[i].Value = []byte("b" + strconv.Itoa(i))
	}
	if _, err := s.SetMany(ctx, batch); err != nil { // 13..17
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, []byte("k2"), persist.SetOptions{Key: "k"}); err != nil { // 18, deletes 12
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, persist.Delete{Seqs: []uint64{2, 3}}); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "live changes", func(c *collector) bool { return len(c.sets) == 18 && len(c.deleted) == 3 })
	col.check(t, seqs(1, 18))
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.live[18] != "k2" || col.live[13] != "b0" || col.live[11] != "p" {
		t.Errorf("live values: 18=%q 13=%q 11=%q", col.live[18], col.live[13], col.live[11])
	}
	for _, q := range []uint64{2, 3, 12} {
		if _, ok := col.live[q]; ok {
			t.Errorf("seq %d still live after its delete", q)
		}
	}
	if col.resynced != 0 {
		t.Errorf("%d resyncs on a quiet path", col.resynced)
	}
	if w.LastSeq() != 18 {
		t.Errorf("LastSeq %d, want 18", w.LastSeq())
	}
}

func TestWatchFrom(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "from")
	for i := 0; i < 5; i++ {
		if _, err := s.Set(ctx, []byte("x"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col := newCollector()
	watch(t, s, persist.WatchOptions{From: 4}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	if _, err := s.Set(ctx, []byte("y"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "seq 6", func(c *collector) bool { return len(c.sets) == 3 })
	col.check(t, seqs(4, 6))
}

// TestWatchLimitDeletes: removals a limit causes reach the watcher as deletes.
func TestWatchLimitDeletes(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "capped")
	if _, err := s.UpdateConfig(ctx, persist.ConfigUpdate{MaxMsgs: ptr(int64(3))}); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	watch(t, s, persist.WatchOptions{}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	// The first feed message after the history is checked against the
	// server; were seq 1 already gone by then (the limit removes it when
	// seq 4 comes), it would be counted skipped, as documented. Seq 1 is
	// seen before the limit acts.
	if _, err := s.Set(ctx, []byte("x"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "seq 1", func(c *collector) bool { return len(c.sets) == 1 })
	for i := 1; i < 6; i++ {
		if _, err := s.Set(ctx, []byte("x"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "six sets, three deletes", func(c *collector) bool { return len(c.sets) == 6 && len(c.deleted) == 3 })
	col.check(t, seqs(1, 6))
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.live) != 3 || col.live[4] == "" || col.live[6] == "" {
		t.Errorf("live %v, want seqs 4..6", col.live)
	}
}

// TestWatchSlowConsumer: a callback that blocks while the writer goes on
// overflows the buffer; the watcher resyncs and ends complete, with every
// seq once and the deletes made meanwhile reported.
func TestWatchSlowConsumer(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "slow")
	col := newCollector()
	release := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	slow := func(ev persist.Event) {
		if ev.Kind == persist.EventSet && ev.Msg.Seq == 1 {
			once.Do(func() { close(blocked) })
			<-release
		}
		col.fn(ev)
	}
	w, err := s.Watch(ctx, persist.WatchOptions{Buffer: 8}, slow)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	if _, err := s.Set(ctx, []byte("first"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	<-blocked
	const n = 200 // one commit each, far more than the buffer
	for i := 0; i < n; i++ {
		if _, err := s.Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A delete the watcher can only learn about from the resync.
	if _, err := s.Delete(ctx, persist.Delete{Seqs: []uint64{1}}); err != nil {
		t.Fatal(err)
	}
	close(release)
	col.waitFor(t, "all sets", func(c *collector) bool { return len(c.sets) == n+1 && len(c.deleted) == 1 && c.caughtUp == 2 })
	col.check(t, seqs(1, n+1))
	if w.Resyncs() == 0 {
		t.Error("no resync after the buffer overflowed")
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.resynced == 0 || col.caughtUp < 2 {
		t.Errorf("resynced %d, caught up %d times", col.resynced, col.caughtUp)
	}
}

// TestWatchServerRestart: the server stops and a new one (a new feed epoch)
// takes over the same data; the watcher resyncs and misses nothing, without
// any new write needed to notice the writes made while it was away.
func TestWatchServerRestart(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	c := newClient(t, env.Conn())
	ctx := context.Background()
	s := c.Stream("project-w", "restart")
	col := newCollector()
	watch(t, s, persist.WatchOptions{IdleCheck: 200 * time.Millisecond}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	for i := 0; i < 5; i++ {
		if _, err := s.Set(ctx, []byte("a"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "5 sets", func(c *collector) bool { return len(c.sets) == 5 })
	env.Restart("0")
	for i := 0; i < 5; i++ {
		if _, err := s.Set(ctx, []byte("b"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "10 sets", func(c *collector) bool { return len(c.sets) == 10 })
	col.check(t, seqs(1, 10))
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.resynced == 0 {
		t.Error("a new publisher did not cause a resync")
	}
}

// TestWatchReconnect: the watcher's own NATS connection reconnects while the
// writer goes on; feed messages sent meanwhile are lost on the wire and the
// watcher resyncs to recover them.
func TestWatchReconnect(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	writer := newClient(t, env.Conn())
	wnc := env.Conn()
	reader := newClient(t, wnc)
	ctx := context.Background()
	s := writer.Stream("project-w", "reconnect")
	col := newCollector()
	w := watch(t, reader.Stream("project-w", "reconnect"), persist.WatchOptions{}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	for i := 0; i < 50; i++ {
		if i == 20 {
			if err := wnc.ForceReconnect(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "50 sets", func(c *collector) bool { return len(c.sets) == 50 })
	col.check(t, seqs(1, 50))
	if w.Resyncs() == 0 {
		t.Error("no resync after a reconnect")
	}
}

// TestWatchMisroute: two servers both believe they own the scope and write
// the same stream (the failure a placement disagreement causes). Each
// publishes on the stream's feed subject, so every watcher still sees every
// change, in seq order, once.
func TestWatchMisroute(t *testing.T) {
	t.Parallel()
	// Servers "0" and "1" each place every scope on itself; the balancer
	// sends the client to "0".
	env := testpersist.Start(t, 2,
		testpersist.Tune(func(cfg *server.Config) {
			self := cfg.ID
			cfg.Placement = func([]string, string) string { return self }
		}),
		testpersist.BalancerPlacement(func([]string, string) string { return "0" }))
	nc := env.Conn()
	c := newClient(t, nc)
	ctx := context.Background()
	const scope, name = "project-m", "shared"
	s := c.Stream(scope, name)

	const watchers = 3
	cols := make([]*collector, watchers)
	for i := range cols {
		cols[i] = newCollector()
		watch(t, s, persist.WatchOptions{}, cols[i])
	}
	for _, col := range cols {
		col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	}
	// Writes alternate: through the client (server a) and straight to
	// server b's API subject, as a client with a stale owner would.
	var acked []uint64
	for i := 0; i < 40; i++ {
		if i%2 == 0 {
			res, err := s.Set(ctx, []byte("via-a"), persist.SetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			acked = append(acked, res.Seq)
			continue
		}
		m := nats.NewMsg("persist." + scope + ".api.1")
		m.Header.Set(persist.HdrCmd, persist.CmdSet)
		m.Header.Set(persist.HdrStream, name)
		m.Data = []byte("via-b")
		reply, err := nc.RequestMsg(m, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := reply.Header.Get(persist.HdrError); code != "" {
			t.Fatalf("set via b: %s: %s", code, reply.Data)
		}
		var res persist.SetResult
		if err := json.Unmarshal(reply.Data, &res); err != nil {
			t.Fatalf("set via b: reply %q: %v", reply.Data, err)
		}
		acked = append(acked, res.Seq)
	}
	for _, col := range cols {
		col.waitFor(t, "40 sets", func(c *collector) bool { return len(c.sets) >= 40 })
		col.check(t, acked)
	}
}

func TestFeedSubject(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		ephemeral bool
		want      string
	}{
		{"log", false, "persist.hub.feed.log"},
		{"log", true, "persist.hub.feed.log~e"},
		{"A_b-9", false, "persist.hub.feed.A_b-9"},
	}
	for _, tc := range cases {
		if got := persist.FeedSubject("", "hub", tc.name, tc.ephemeral); got != tc.want {
			t.Errorf("FeedSubject(%q, %v) = %q, want %q", tc.name, tc.ephemeral, got, tc.want)
		}
	}
	// Names that are not plain tokens become a hash: distinct, one token,
	// no wildcard characters.
	seen := map[string]string{}
	for _, name := range []string{"a.b", "a*b", "a>b", "a b", "", string(make([]byte, 65)), "ä"} {
		got := persist.FeedSubject("svc", "hub", name, false)
		tok := got[len("svc.hub.feed."):]
		if len(tok) != 33 || tok[0] != '~' {
			t.Errorf("FeedSubject(%q) = %q: want ~ and 32 hex digits", name, got)
		}
		if other, dup := seen[tok]; dup {
			t.Errorf("%q and %q share feed token %s", name, other, tok)
		}
		seen[tok] = name
	}
}

// TestWatchFromBeyondEnd: a watcher asked for seqs from past the stream's
// end is not a forgery: its idle checks must not take it back to the
// stream's end and deliver seqs below From.
func TestWatchFromBeyondEnd(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "from-beyond")
	for i := 0; i < 3; i++ {
		if _, err := s.Set(ctx, []byte("x"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col := newCollector()
	w := watch(t, s, persist.WatchOptions{From: 10, IdleCheck: 20 * time.Millisecond}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	testwait.For(t, "idle checks", func() bool { return w.Stats().IdleChecks >= 3 })
	for i := 0; i < 8; i++ {
		if _, err := s.Set(ctx, []byte("y"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "seq 11", func(c *collector) bool { return len(c.sets) > 0 && c.sets[len(c.sets)-1] == 11 })
	col.check(t, seqs(10, 11))
	if st := w.Stats(); st.Resyncs != 0 || st.Forged != 0 {
		t.Errorf("honest stream: %d resyncs, %d forged", st.Resyncs, st.Forged)
	}
}

// TestWatchRefGoneCountedSkipped: a set too large for the feed travels as a
// reference; when the message is deleted before the watcher fetches it, the
// seq can never be delivered and must be counted skipped, not left
// unaccounted (LastSeq below the stream's last seq for ever, which also
// turns off the idle check's count comparison).
func TestWatchRefGoneCountedSkipped(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1, testpersist.NATS(testnats.Options{MaxPayload: 64 << 10}))
	c := newClient(t, env.Conn())
	ctx := context.Background()
	s := c.Stream("project-w", "ref-gone")
	if _, err := s.Set(ctx, []byte("a"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	fn, blocked, release := blockAt(col, 3)
	w, err := s.Watch(ctx, persist.WatchOptions{IdleCheck: 20 * time.Millisecond}, fn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	// Seq 2 makes the watcher follow the publisher; seq 3 comes on the
	// feed's word and holds the callback.
	for _, v := range []string{"b", "c"} {
		if _, err := s.Set(ctx, []byte(v), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	<-blocked
	big := make([]byte, 63000)
	res, err := s.Set(ctx, big, persist.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, persist.Delete{Seqs: []uint64{res.Seq}}); err != nil {
		t.Fatal(err)
	}
	close(release)
	testwait.For(t, "the deleted reference accounted for", func() bool {
		return w.LastSeq() == res.Seq && w.Stats().Skipped == 1
	})
	col.check(t, seqs(1, 3))
}

// A keyed set the watcher reads from the server (here its first feed
// message, which a watcher checks against the server) comes as the set and
// then the delete of the row it replaced: the order the feed itself uses,
// so that an application (the events router) tells the replaced row's
// delete from a real one the same way on both paths.
// (Was: a read delivered the replaced row's delete first, which the events
// router took for a delete of the key and sent on, "coalesced": 2, beside
// the set.)
func TestWatchReadReplaceOrder(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "kv")
	if _, err := s.Set(ctx, []byte("v1"), persist.SetOptions{Key: "k"}); err != nil { // 1
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	w, err := s.Watch(ctx, persist.WatchOptions{}, func(ev persist.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Kind {
		case persist.EventSet:
			got = append(got, fmt.Sprintf("set %d", ev.Msg.Seq))
		case persist.EventDelete:
			got = append(got, fmt.Sprintf("delete %v", ev.Seqs))
		case persist.EventCaughtUp:
			got = append(got, "caught-up")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	snapshot := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	testwait.For(t, "caught up", func() bool { return slices.Contains(snapshot(), "caught-up") })
	if _, err := s.Set(ctx, []byte("v2"), persist.SetOptions{Key: "k"}); err != nil { // 2, replaces 1
		t.Fatal(err)
	}
	testwait.For(t, "the replace", func() bool { return len(snapshot()) >= 4 })
	want := []string{"set 1", "caught-up", "set 2", "delete [1]"}
	if g := snapshot(); !slices.Equal(g, want) {
		t.Fatalf("events %q, want %q", g, want)
	}
	if w.Stats().Resyncs != 0 {
		t.Fatalf("the watcher re-read: %+v", w.Stats())
	}
}

// A watcher whose connection NATS closed for good (its user's password
// changed, as a revocation does) ends with ErrWatchConnClosed and says
// why the connection closed.
// (Was: "watch: NATS connection closed", which hid the refused
// credentials from the operator.)
func TestWatchEndNamesWhyConnClosed(t *testing.T) {
	t.Parallel()
	url, revoke := testnats.PasswordBus(t)
	connect := func() *nats.Conn {
		t.Helper()
		nc, err := nats.Connect(url, nats.UserInfo("sy", "first"), nats.ReconnectWait(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	srvConn := connect()
	srv, err := server.New(server.Config{Conn: srvConn, ID: "0", IDs: []string{"0"}, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(ctx) })
	owner, err := srvConn.Subscribe(bus.IDSubject(bus.DefaultService, "*"), func(m *nats.Msg) { _ = m.Respond([]byte("0")) })
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Unsubscribe()
	c := newClient(t, connect())
	ended := make(chan error, 1)
	caught := make(chan struct{})
	w, err := c.Stream("hub", "log").Watch(ctx, persist.WatchOptions{}, func(ev persist.Event) {
		switch ev.Kind {
		case persist.EventCaughtUp:
			close(caught)
		case persist.EventEnded:
			ended <- ev.Err
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	<-caught
	revoke()
	select {
	case err := <-ended:
		if !errors.Is(err, persist.ErrWatchConnClosed) || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("ended with %v, want ErrWatchConnClosed naming the authorization violation", err)
		}
	case <-time.After(testwait.Timeout):
		t.Fatalf("the watcher did not end %v after its connection's password was changed", testwait.Timeout)
	}
}
