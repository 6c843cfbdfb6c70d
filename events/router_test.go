package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// routerEnv is a started router over one real persist server, on a fake
// clock that only the test moves.
type routerEnv struct {
	t   *testing.T
	r   *Router
	clk *fakeClock
	c   *persist.Client
}

func newRouterEnv(t *testing.T, tune func(*RouterConfig)) *routerEnv {
	t.Helper()
	env := persistenv.Start(t, 1)
	clk := newFakeClock()
	cfg := RouterConfig{Client: env.Client(), Clock: clk}
	if tune != nil {
		tune(&cfg)
	}
	r, err := NewRouter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return &routerEnv{t: t, r: r, clk: clk, c: env.Client()}
}

// sink collects a session's deliveries.
type sink struct {
	mu sync.Mutex
	ds []Delivery
}

func (s *sink) deliver(d Delivery) {
	s.mu.Lock()
	s.ds = append(s.ds, d)
	s.mu.Unlock()
}

func (s *sink) all() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.ds...)
}

func (s *sink) events() []*Event {
	var out []*Event
	for _, d := range s.all() {
		if d.Event != nil {
			out = append(out, d.Event)
		}
	}
	return out
}

func (s *sink) gaps() []*Gap {
	var out []*Gap
	for _, d := range s.all() {
		if d.Gap != nil {
			out = append(out, d.Gap)
		}
	}
	return out
}

func (e *routerEnv) set(stream, key, value string) persist.SetResult {
	e.t.Helper()
	res, err := e.c.Stream("project-1", stream).Set(context.Background(), []byte(value), persist.SetOptions{Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *routerEnv) subscribe(s *Session, id, anchor string, f Filter) {
	e.t.Helper()
	a, err := ParseAnchor(anchor)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.Subscribe(context.Background(), id, a, f); err != nil {
		e.t.Fatal(err)
	}
}

// warm makes the stream's watcher trust its feed before the test's own
// subscriptions: a watcher checks the first feed message it gets against
// the server, and a change made and undone before that read is counted
// skipped (a feed_loss gap) instead of delivered — right, but not what a
// test of the router's matching wants to see. A session of its own, kept
// to the end, holds the watcher.
func (e *routerEnv) warm(stream string) {
	e.t.Helper()
	var got sink
	e.subscribe(e.r.Open("warm", got.deliver), "warm", "project-1/"+stream+"/warm-up", Filter{})
	e.set(stream, "warm-up", "1")
	e.advanceUntil("the warm-up write", func() bool { return len(got.events()) == 1 })
}

// settle waits until the router has read n more changes than before the
// test's writes (from, its Stats().Changes then) and scheduled their
// windows, then ends the windows.
func (e *routerEnv) settle(from, n uint64) {
	e.t.Helper()
	testwait.Until(e.t, "the router reads the changes", func() (bool, string) {
		st := e.r.Stats()
		return st.Changes >= from+n && e.clk.Pending() > 0, fmt.Sprintf("changes %d, timers %d", st.Changes-from, e.clk.Pending())
	})
	e.clk.Advance(CoalesceWindowDefault)
}

// advanceUntil ends a coalescing window at every poll until cond holds,
// for changes whose arrival the test does not count (a delete, which the
// watcher delivers once the server confirms it).
func (e *routerEnv) advanceUntil(what string, cond func() bool) {
	e.t.Helper()
	testwait.For(e.t, what, func() bool {
		e.clk.Advance(CoalesceWindowDefault)
		return cond()
	})
}

// TestRouterAnchorTakesTheKeyAndBelow: a subscription on a path gets the
// path and every key below it, not a sibling that shares a prefix, and
// not what the stream held before it subscribed.
func TestRouterAnchorTakesTheKeyAndBelow(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	e.set("files", "a/old.txt", "before") // history: learned, not delivered
	e.warm("files")
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/files/a", Filter{})

	from := e.r.Stats().Changes
	e.set("files", "a", "self")
	e.set("files", "a/b/c.txt", "deep")
	e.set("files", "a2/x", "sibling")
	e.set("files", "b", "other")
	e.settle(from, 4)
	testwait.Until(t, "two deliveries", func() (bool, string) {
		return len(got.all()) == 2, fmt.Sprint(len(got.all()))
	})
	keys := map[string]string{}
	for _, ev := range got.events() {
		keys[ev.Subject.Key] = string(ev.Value)
		if ev.Op != OpSet || ev.Coalesced != 1 {
			t.Errorf("event %+v: want one set", ev)
		}
	}
	if len(keys) != 2 || keys["a"] != "self" || keys["a/b/c.txt"] != "deep" {
		t.Fatalf("delivered %v, want a and a/b/c.txt", keys)
	}
	if d := got.all()[0]; d.Sub != "1" {
		t.Fatalf("delivery names subscription %q, want the session's id 1", d.Sub)
	}
}

// TestRouterCoalescesAWindow: a hundred sets of one key within a window
// are one delivery with the newest value.
func TestRouterCoalescesAWindow(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	e.warm("doc")
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/doc/k", Filter{})
	from, delivered := e.r.Stats().Changes, e.r.Stats().Deliveries
	for i := 1; i <= 100; i++ {
		e.set("doc", "k", fmt.Sprint(i))
	}
	e.settle(from, 100)
	testwait.For(t, "one delivery", func() bool { return len(got.all()) == 1 })
	ev := got.events()[0]
	if string(ev.Value) != "100" || ev.Coalesced != 100 {
		t.Fatalf("delivered value %q coalescing %d, want 100 and 100", ev.Value, ev.Coalesced)
	}
	if st := e.r.Stats(); st.Coalesced != 99 || st.Deliveries != delivered+1 {
		t.Fatalf("stats %+v, want 99 coalesced into 1 delivery", st)
	}
}

// movingClock is the fake clock moved on by jump, once, inside the next
// AfterFunc call before that timer starts: the clock a busy machine may
// show between the router reading the time and starting its timer.
type movingClock struct {
	*fakeClock
	jump atomic.Int64
}

func (c *movingClock) AfterFunc(d time.Duration, f func()) forward.Timer {
	if j := c.jump.Swap(0); j > 0 {
		c.Advance(time.Duration(j))
	}
	return c.fakeClock.AfterFunc(d, f)
}

// TestRouterWindowEndsWhileArming: a window that ends while the router
// starts its timer is delivered then, not one window later — with a
// clock that moves once (a test's), not at all.
func TestRouterWindowEndsWhileArming(t *testing.T) {
	t.Parallel()
	var clk *movingClock
	e := newRouterEnv(t, func(cfg *RouterConfig) {
		clk = &movingClock{fakeClock: cfg.Clock.(*fakeClock)}
		cfg.Clock = clk
	})
	e.warm("doc")
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/doc/k", Filter{})
	clk.jump.Store(int64(CoalesceWindowDefault))
	e.set("doc", "k", "v")
	testwait.Until(t, "the delivery, the clock not moved again", func() (bool, string) {
		return len(got.all()) == 1, fmt.Sprintf("jump left %v, %+v", time.Duration(clk.jump.Load()), e.r.Stats())
	})
}

// TestRouterNoCoalescing: with no window, every change goes out without
// the clock moving, each in a delivery of its own.
func TestRouterNoCoalescing(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(cfg *RouterConfig) { cfg.Coalesce = NoCoalescing })
	e.warm("doc")
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/doc/k", Filter{})
	for i := 1; i <= 3; i++ {
		e.set("doc", "k", fmt.Sprint(i))
		testwait.Until(t, fmt.Sprint("delivery ", i), func() (bool, string) {
			return len(got.all()) == i, fmt.Sprintf("%+v", e.r.Stats())
		})
		if ev := got.events()[i-1]; string(ev.Value) != fmt.Sprint(i) || ev.Coalesced != 1 {
			t.Fatalf("delivery %d: value %q coalescing %d", i, ev.Value, ev.Coalesced)
		}
	}
	if _, err := NewRouter(RouterConfig{Client: e.c, Coalesce: -time.Second}); err == nil {
		t.Error("a negative window other than NoCoalescing was taken")
	}
}

// TestRouterRateLimitLeavesAGap: past the per-minute limit the events
// become one gap marker, and deliveries resume once the minute slides on.
func TestRouterRateLimitLeavesAGap(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.BroadcastPerMinute = 3 })
	e.warm("log")
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/log/k", Filter{})
	from := e.r.Stats().Changes
	for i := 0; i < 6; i++ {
		e.set("log", fmt.Sprint("k/", i), "v") // six subjects: six windows
	}
	e.settle(from, 6)
	testwait.For(t, "three events and a gap", func() bool { return len(got.all()) == 4 })
	gaps := got.gaps()
	if len(got.events()) != 3 || len(gaps) != 1 || gaps[0].Reason != ReasonDeliveryRateLimit || gaps[0].Sub != "1" {
		t.Fatalf("deliveries %+v, want 3 events and one delivery_rate_limit gap", got.all())
	}
	if st := e.r.Stats(); st.RateDrops != 3 || st.Gaps[ReasonDeliveryRateLimit] != 1 {
		t.Fatalf("stats %+v, want 3 dropped under one gap", st)
	}
	e.clk.Advance(61 * time.Second)
	e.set("log", "k/later", "v")
	e.settle(from, 7)
	testwait.For(t, "a delivery after the minute", func() bool { return len(got.events()) == 4 })
}

// TestRouterDeliversDeletes: a delete is an event of the deleted key,
// with no value; the set that replaces a key's row is not a delete.
func TestRouterDeliversDeletes(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	first := e.set("files", "a/x", "1")
	e.warm("files")
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/files/a", Filter{})
	e.set("files", "a/x", "2") // replaces first: a set, no delete
	second := e.set("files", "a/y", "3")
	if _, err := e.c.Stream("project-1", "files").Delete(context.Background(), persist.Delete{Seqs: []uint64{second.Seq}}); err != nil {
		t.Fatal(err)
	}
	last := func(key string) *Event {
		var ev *Event
		for _, e := range got.events() {
			if e.Subject.Key == key {
				ev = e
			}
		}
		return ev
	}
	e.advanceUntil("the delete of a/y", func() bool { y := last("a/y"); return y != nil && y.Op == OpDelete })
	if y := last("a/y"); y.Value != nil || y.Seq != second.Seq || y.ID != "project-1/files#"+fmt.Sprint(second.Seq)+DeleteIDSuffix {
		t.Fatalf("a/y: %+v, want the delete of seq %d", y, second.Seq)
	}
	for _, ev := range got.events() {
		if ev.Subject.Key == "a/x" && (ev.Op != OpSet || string(ev.Value) != "2" || ev.Seq == first.Seq) {
			t.Fatalf("a/x: %+v, want only the set of 2", ev)
		}
	}
	if last("a/x") == nil {
		t.Fatal("the set of a/x was not delivered")
	}
}

// TestRouterFilterOps: a subscription to deletes only sees no sets.
func TestRouterFilterOps(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	e.warm("files")
	f, err := ParseFilter([]string{"delete"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/files/k", f)
	res := e.set("files", "k", "v")
	if _, err := e.c.Stream("project-1", "files").Delete(context.Background(), persist.Delete{Seqs: []uint64{res.Seq}}); err != nil {
		t.Fatal(err)
	}
	e.advanceUntil("the delete", func() bool { return len(got.all()) > 0 })
	if ds := got.all(); len(ds) != 1 || ds[0].Event == nil || ds[0].Event.Op != OpDelete {
		t.Fatalf("delivered %+v, want only the delete", ds)
	}
}

// TestRouterSessionLimit: a session holds at most MaxSessionSubs; a
// replaced id does not count twice.
func TestRouterSessionLimit(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	s := e.r.Open("alice", func(Delivery) {})
	for i := 0; i < MaxSessionSubsDefault; i++ {
		e.subscribe(s, fmt.Sprint(i), "project-1/files/"+fmt.Sprint(i), Filter{})
	}
	e.subscribe(s, "0", "project-1/files/again", Filter{}) // replaces
	a, _ := ParseAnchor("project-1/files/x")
	if err := s.Subscribe(context.Background(), "one-more", a, Filter{}); !errors.Is(err, ErrTooManySubs) {
		t.Fatalf("subscription %d: %v, want ErrTooManySubs", MaxSessionSubsDefault+1, err)
	}
	if st := e.r.Stats(); st.Subs != MaxSessionSubsDefault || st.Watches != 1 {
		t.Fatalf("stats %+v, want %d subscriptions on one watcher", st, MaxSessionSubsDefault)
	}
}

// TestRouterOwnerFanOutLimit: one owner's subscriptions matching an event
// past the limit get a gap marker each instead of the event.
func TestRouterOwnerFanOutLimit(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	e.warm("files")
	var a, b sink
	sa, sb := e.r.Open("alice", a.deliver), e.r.Open("alice", b.deliver)
	for i := 0; i < 26; i++ {
		e.subscribe(sa, fmt.Sprint(i), "project-1/files", Filter{})
		e.subscribe(sb, fmt.Sprint(i), "project-1/files", Filter{})
	}
	from := e.r.Stats().Changes
	e.set("files", "k", "v")
	e.settle(from, 1)
	testwait.For(t, "52 deliveries", func() bool { return len(a.all())+len(b.all()) == 52 })
	events, gaps := len(a.events())+len(b.events()), append(a.gaps(), b.gaps()...)
	if events != MaxMatchedPerOwner || len(gaps) != 52-MaxMatchedPerOwner {
		t.Fatalf("%d events and %d gaps, want %d and %d", events, len(gaps), MaxMatchedPerOwner, 52-MaxMatchedPerOwner)
	}
	for _, g := range gaps {
		if g.Reason != ReasonMatchedSubscriptionLimit || g.Subject.Key != "k" {
			t.Fatalf("gap %+v, want matched_subscription_limit on k", g)
		}
	}
}

// TestRouterStopsTheWatcherAfterTheLast: the stream's watcher lives while
// a subscription needs it, and a closed session ends its subscriptions.
func TestRouterStopsTheWatcherAfterTheLast(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	s1, s2 := e.r.Open("alice", func(Delivery) {}), e.r.Open("bob", func(Delivery) {})
	e.subscribe(s1, "1", "project-1/files", Filter{})
	e.subscribe(s2, "1", "project-1/files/a", Filter{})
	e.subscribe(s2, "2", "project-1/other", Filter{})
	if st := e.r.Stats(); st.Watches != 2 || st.Subs != 3 || st.Sessions != 2 {
		t.Fatalf("stats %+v, want 2 watchers, 3 subscriptions, 2 sessions", st)
	}
	if !s1.Unsubscribe("1") || s1.Unsubscribe("1") {
		t.Fatal("Unsubscribe does not report the one subscription once")
	}
	if st := e.r.Stats(); st.Watches != 2 {
		t.Fatalf("stats %+v: a stream still subscribed lost its watcher", st)
	}
	s2.Close()
	if st := e.r.Stats(); st.Watches != 0 || st.Subs != 0 || st.Sessions != 1 {
		t.Fatalf("stats %+v, want nothing watched after the last", st)
	}
	a, _ := ParseAnchor("project-1/files")
	if err := s2.Subscribe(context.Background(), "3", a, Filter{}); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("subscribe on a closed session: %v", err)
	}
}

// TestRouterNeverSkipsSilently: on a stream no watcher has read yet, a
// key set and deleted at once is either delivered as both or, when the
// watcher found it gone before it could read it, a feed_loss gap: never
// nothing.
func TestRouterNeverSkipsSilently(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, nil)
	var got sink
	e.subscribe(e.r.Open("alice", got.deliver), "1", "project-1/cold", Filter{})
	res := e.set("cold", "k", "v")
	if _, err := e.c.Stream("project-1", "cold").Delete(context.Background(), persist.Delete{Seqs: []uint64{res.Seq}}); err != nil {
		t.Fatal(err)
	}
	e.advanceUntil("the delete or a feed_loss gap", func() bool {
		for _, d := range got.all() {
			if d.Gap != nil && d.Gap.Reason == ReasonFeedLoss || d.Event != nil && d.Event.Op == OpDelete {
				return true
			}
		}
		return false
	})
	for _, g := range got.gaps() {
		if g.Reason != ReasonFeedLoss || g.Subject.Stream != "cold" || g.Count < 1 {
			t.Fatalf("gap %+v, want feed_loss on the stream", g)
		}
	}
}
