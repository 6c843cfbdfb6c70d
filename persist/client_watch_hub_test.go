package persist_test

import (
	"context"
	"sync"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestWatchSharesSubscription: the watchers of one stream in one client
// share one feed subscription, another stream gets its own, and the last
// watcher to stop unsubscribes; each watcher still gets every change.
func TestWatchSharesSubscription(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	reader := newClient(t, env.Conn())
	writer := newClient(t, env.Conn())
	ctx := context.Background()
	// Feed subscriptions are counted apart from the connection's others:
	// a watcher's reads (history, confirmations) each hold a reply
	// subscription of their own while they run.

	var ws []*persist.Watcher
	var cols []*collector
	for range 3 {
		col := newCollector()
		w, err := reader.Stream("project-h", "a").Watch(ctx, persist.WatchOptions{}, col.fn)
		if err != nil {
			t.Fatal(err)
		}
		ws, cols = append(ws, w), append(cols, col)
	}
	if got := persist.FeedSubscriptions(reader); got != 1 {
		t.Errorf("3 watchers of one stream hold %d subscriptions, want 1", got)
	}
	colB := newCollector()
	wb, err := reader.Stream("project-h", "b").Watch(ctx, persist.WatchOptions{}, colB.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := persist.FeedSubscriptions(reader); got != 2 {
		t.Errorf("two streams hold %d subscriptions, want 2", got)
	}
	for _, col := range append(cols, colB) {
		col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	}
	for i := 0; i < 20; i++ {
		if _, err := writer.Stream("project-h", "a").Set(ctx, []byte("v"), persist.SetOptions{Key: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writer.Stream("project-h", "b").Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first feed message after the history is read from the server,
	// not taken on the feed's word; when the key was rewritten by then,
	// its seq is skipped rather than delivered.
	for _, col := range cols {
		col.waitFor(t, "seq 20, the only one live", func(c *collector) bool {
			var skipped uint64
			for _, ev := range c.skipped {
				skipped += ev.Count
			}
			_, ok := c.live[20]
			return ok && len(c.live) == 1 && uint64(len(c.sets))+skipped == 20
		})
		col.mu.Lock()
		if len(col.errs) > 0 {
			t.Error(col.errs)
		}
		col.mu.Unlock()
	}
	colB.waitFor(t, "1 set", func(c *collector) bool { return len(c.sets) == 1 })
	colB.check(t, seqs(1, 1))

	// Stopping some keeps the subscription for the rest; a watcher that
	// joins later still follows.
	_ = ws[0].Stop(context.Background())
	_ = ws[1].Stop(context.Background())
	if got := persist.FeedSubscriptions(reader); got != 2 {
		t.Errorf("after stopping 2 of 3: %d subscriptions, want 2", got)
	}
	late := newCollector()
	wl, err := reader.Stream("project-h", "a").Watch(ctx, persist.WatchOptions{From: 20}, late.fn)
	if err != nil {
		t.Fatal(err)
	}
	late.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	if _, err := writer.Stream("project-h", "a").Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	late.waitFor(t, "seq 21", func(c *collector) bool { return len(c.sets) == 2 })
	late.check(t, seqs(20, 21))
	cols[2].waitFor(t, "seq 21", func(c *collector) bool { _, ok := c.live[21]; return ok })
	_ = wl.Stop(context.Background())
	_ = ws[2].Stop(context.Background())
	_ = wb.Stop(context.Background())
	if got := persist.FeedSubscriptions(reader); got != 0 {
		t.Errorf("after every watcher stopped: %d subscriptions left", got)
	}
}

// TestWatchSlowSharesHub: among watchers sharing one subscription, a
// blocked one overflows its own buffer and resyncs while the others go on
// without a resync; all end complete.
func TestWatchSlowSharesHub(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-h", "slow")
	fast := []*collector{newCollector(), newCollector()}
	for _, col := range fast {
		watch(t, s, persist.WatchOptions{}, col) // room for every change below
	}
	slowCol := newCollector()
	release := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	slow, err := s.Watch(ctx, persist.WatchOptions{Buffer: 8}, func(ev persist.Event) {
		if ev.Kind == persist.EventSet && ev.Msg.Seq == 1 {
			once.Do(func() { close(blocked) })
			<-release
		}
		slowCol.fn(ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Stop(context.Background()) })
	for _, col := range append(fast, slowCol) {
		col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	}
	if _, err := s.Set(ctx, []byte("first"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	<-blocked
	const n = 100
	for i := 0; i < n; i++ {
		if _, err := s.Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The fast watchers have everything while the slow one is still blocked.
	for _, col := range fast {
		col.waitFor(t, "all sets", func(c *collector) bool { return len(c.sets) == n+1 })
		col.check(t, seqs(1, n+1))
		col.mu.Lock()
		if col.resynced != 0 {
			t.Errorf("a fast watcher resynced %d times", col.resynced)
		}
		col.mu.Unlock()
	}
	close(release)
	slowCol.waitFor(t, "all sets", func(c *collector) bool { return len(c.sets) == n+1 && c.caughtUp == 2 })
	slowCol.check(t, seqs(1, n+1))
	if slow.Resyncs() == 0 {
		t.Error("the slow watcher did not resync")
	}
}
