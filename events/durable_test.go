package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// putDurable stores a durable row and waits until the router has it
// indexed with its stream's watcher ready (subs more subscriptions than
// before, ready more ready watchers).
func (e *routerEnv) putDurable(row DurableRow, subs, ready int) {
	e.t.Helper()
	if err := e.r.Durables().Put(context.Background(), row); err != nil {
		e.t.Fatal(err)
	}
	testwait.Until(e.t, "the durable subscription live", func() (bool, string) {
		st := e.r.Stats()
		return st.Subs == subs && st.Ready == ready, fmt.Sprintf("%+v", st)
	})
}

// TestDurableBroadcast: every open session of the row's user gets each
// delivery, marked broadcast; another user's session gets nothing.
func TestDurableBroadcast(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	e.warm("files") // 1 subscription, 1 watcher
	var a1, a2, b sink
	e.r.Open("alice", a1.deliver)
	e.r.Open("alice", a2.deliver)
	e.r.Open("bob", b.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "all", Anchor: "project-1/files", Mode: ModeBroadcast}, 2, 1)
	from := e.r.Stats().Changes
	e.set("files", "k", "v")
	e.settle(from, 1)
	testwait.For(t, "both of alice's sessions", func() bool { return len(a1.all()) == 1 && len(a2.all()) == 1 })
	for _, d := range append(a1.all(), a2.all()...) {
		if d.Sub != "all" || d.Mode != ModeBroadcast || d.Event == nil || d.Event.Subject.Key != "k" || d.Entry != "" {
			t.Fatalf("delivery %+v", d)
		}
	}
	if len(b.all()) != 0 {
		t.Fatalf("bob got %+v", b.all())
	}
}

// TestDurableSingle: exactly one session gets each delivery; unacked, it
// goes to the other session once the lease ends; acked, the next comes;
// an ack of an entry not in flight, or of another user's, is refused.
func TestDurableSingle(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	e.warm("jobs")
	var s1, s2, sb sink
	alice1, alice2 := e.r.Open("alice", s1.deliver), e.r.Open("alice", s2.deliver)
	bob := e.r.Open("bob", sb.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}, 2, 1)
	from := e.r.Stats().Changes
	e.set("jobs", "1", "first")
	e.settle(from, 1)
	total := func() int { return len(s1.all()) + len(s2.all()) }
	testwait.For(t, "one delivery", func() bool { return total() == 1 })
	first, otherSess, other := &s1, alice2, &s2
	if len(s1.all()) == 0 {
		first, otherSess, other = &s2, alice1, &s1
	}
	d := first.all()[0]
	if d.Mode != ModeSingle || d.Entry == "" || d.Attempt != 1 || string(d.Event.Value) != "first" {
		t.Fatalf("delivery %+v", d)
	}
	// No ack: after the lease, the other session gets it again.
	e.clk.Advance(LeaseDefault)
	testwait.For(t, "the redelivery", func() bool { return len(other.all()) == 1 })
	re := other.all()[0]
	if re.Entry != d.Entry || re.Attempt != 2 {
		t.Fatalf("redelivery %+v, want entry %s attempt 2", re, d.Entry)
	}
	ctx := context.Background()
	if err := bob.Ack(ctx, "q", d.Entry); !errors.Is(err, ErrUnknownEntry) {
		t.Fatalf("bob's ack of alice's entry: %v, want ErrUnknownEntry", err)
	}
	if err := otherSess.Ack(ctx, "q", "project-1/jobs#999"); !errors.Is(err, ErrUnknownEntry) {
		t.Fatalf("an ack of an entry not in flight: %v", err)
	}
	if err := otherSess.Ack(ctx, "q", d.Entry); err != nil {
		t.Fatal(err)
	}
	if err := otherSess.Ack(ctx, "q", d.Entry); err != nil {
		t.Fatalf("the same ack again: %v, want a no-op", err)
	}
	// The next delivery after the ack; then nothing more without a write.
	from = e.r.Stats().Changes
	e.set("jobs", "2", "second")
	e.settle(from, 1)
	testwait.For(t, "the second", func() bool { return total() == 3 })
	if len(sb.all()) != 0 {
		t.Fatalf("bob got %+v", sb.all())
	}
	var seen []string
	for _, d := range append(s1.all(), s2.all()...) {
		seen = append(seen, fmt.Sprintf("%s@%d", d.Event.Subject.Key, d.Attempt))
	}
	if fmt.Sprint(sortedStrings(seen)) != "[1@1 1@2 2@1]" {
		t.Fatalf("deliveries %v, want 1 twice (a redelivery) and 2 once", seen)
	}
	if st := e.r.Stats(); st.Acks != 1 || st.Redelivered != 1 {
		t.Fatalf("stats %+v, want 1 ack and 1 redelivery", st)
	}
}

// TestDurableSingleBacklog: with no session open the deliveries wait;
// past the backlog the oldest are shed into one marker, which comes
// first when the user connects, then the rest one ack at a time.
func TestDurableSingleBacklog(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{Backlog: 3} })
	e.warm("jobs")
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}, 2, 1)
	from, delivered := e.r.Stats().Changes, e.r.Stats().Deliveries
	for i := 1; i <= 5; i++ {
		e.set("jobs", fmt.Sprint(i), "v")
	}
	e.settle(from, 5)
	// All five in the lease table before anyone connects.
	testwait.For(t, "the five queued", func() bool { return e.r.Stats().Deliveries == delivered+5 })
	var got sink
	s := e.r.Open("alice", got.deliver)
	testwait.For(t, "the marker", func() bool { return len(got.all()) == 1 })
	d := got.all()[0]
	if d.Gap == nil || d.Gap.Reason != ReasonBacklogOverflow || d.Gap.Count != 2 || d.Entry == "" || d.Sub != "q" {
		t.Fatalf("first delivery %+v, want a backlog_overflow marker for 2", d)
	}
	for want := 2; want <= 4; want++ {
		if err := s.Ack(context.Background(), "q", got.all()[want-2].Entry); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, "the next", func() bool { return len(got.all()) == want })
	}
	var keys []string
	for _, d := range got.all()[1:] {
		keys = append(keys, d.Event.Subject.Key)
	}
	if fmt.Sprint(keys) != "[3 4 5]" {
		t.Fatalf("after the marker %v, want 3 4 5 in order", keys)
	}
}

// TestDurableRowsSurviveARestart: a row stored by one router is live in
// a router started later on the same persist, and a deleted row is gone.
func TestDurableRowsSurviveARestart(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	if err := e.r.Durables().Put(context.Background(), DurableRow{User: "alice", ID: "n", Anchor: "project-1/notes", Mode: ModeBroadcast}); err != nil {
		t.Fatal(err)
	}
	r2, err := NewRouter(RouterConfig{Client: e.c, Durable: &DurableConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r2.Stop(context.Background()) })
	var got sink
	r2.Open("alice", got.deliver)
	testwait.Until(t, "the row live in the new router", func() (bool, string) {
		st := r2.Stats()
		return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
	})
	e.set("notes", "k", "v") // r2 runs on the wall clock
	testwait.For(t, "the delivery", func() bool { return len(got.all()) > 0 })
	if ok, err := r2.Durables().Delete(context.Background(), "alice", "n"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	testwait.For(t, "the row gone", func() bool { return r2.Stats().Subs == 0 })
	rows, err := r2.Durables().List(context.Background(), "alice")
	if err != nil || len(rows) != 0 {
		t.Fatalf("rows after delete: %v %v", rows, err)
	}
}

// TestDurableQuotaAndBadRows: a user's rows stop at the quota (a row
// replaced does not count twice), and a row that is not one is refused.
func TestDurableQuotaAndBadRows(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{Quota: 2} })
	st := e.r.Durables()
	ctx := context.Background()
	row := func(id string) DurableRow {
		return DurableRow{User: "alice", ID: id, Anchor: "project-1/s/" + id, Mode: ModeSingle}
	}
	for _, id := range []string{"a", "b", "a"} {
		if err := st.Put(ctx, row(id)); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	if err := st.Put(ctx, row("c")); !errors.Is(err, ErrQuota) {
		t.Fatalf("a third row: %v, want ErrQuota", err)
	}
	if err := st.Put(ctx, DurableRow{User: "bob", ID: "c", Anchor: "project-1/s", Mode: ModeBroadcast}); err != nil {
		t.Fatalf("another user's row: %v", err)
	}
	for _, bad := range []DurableRow{
		{User: "a/b", ID: "x", Anchor: "p/s", Mode: ModeSingle},
		{User: "a", ID: "", Anchor: "p/s", Mode: ModeSingle},
		{User: "a", ID: "x", Anchor: "p", Mode: ModeSingle},
		{User: "a", ID: "x", Anchor: "p/s", Mode: "often"},
		{User: "a", ID: "x", Anchor: "p/s", Mode: ModeSingle, Ops: []string{"rename"}},
	} {
		if err := st.Put(ctx, bad); !errors.Is(err, ErrBadRow) {
			t.Errorf("%+v: %v, want ErrBadRow", bad, err)
		}
	}
}

// (Was: a durable row was stored with its ops as the client sent them, so a subscribe naming "set" thousands of times stored every copy in the row.)
func TestDurableRowOpsStoredOnce(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	st := e.r.Durables()
	ctx := context.Background()
	ops := append(slices.Repeat([]string{"set"}, 1000), "delete", "set")
	if err := st.Put(ctx, DurableRow{User: "alice", ID: "n", Anchor: "project-1/s", Mode: ModeBroadcast, Ops: ops}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.List(ctx, "alice")
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	if got := rows[0].Ops; !slices.Equal(got, []string{"set", "delete"}) {
		t.Fatalf("%d ops stored, beginning %v, want [set delete]", len(got), got[:min(len(got), 4)])
	}
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestDurableSubscribeAgainChangesNothing: a row put again as it stands (a
// client subscribing again after a reconnect) is not written, so a
// `single` delivery in flight stays in flight: its ack settles it and it
// is never sent again; a row that changes is written and replaces it.
func TestDurableSubscribeAgainChangesNothing(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	e.warm("jobs")
	var s sink
	alice := e.r.Open("alice", s.deliver)
	row := DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}
	e.putDurable(row, 2, 1)
	from := e.r.Stats().Changes
	e.set("jobs", "1", "first")
	e.settle(from, 1)
	testwait.For(t, "the delivery", func() bool { return len(s.all()) == 1 })
	ctx := context.Background()
	rows := e.r.Durables().Client.KV(DurableScopeDefault, DurableStreamDefault)
	before, err := rows.Get(ctx, "alice/q")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.Durables().Put(ctx, row); err != nil {
		t.Fatal(err)
	}
	if after, err := rows.Get(ctx, "alice/q"); err != nil || after.Seq != before.Seq {
		t.Fatalf("the row put again as it stands: seq %d (%v), was %d: written again", after.Seq, err, before.Seq)
	}
	if err := alice.Ack(ctx, "q", s.all()[0].Entry); err != nil {
		t.Fatalf("the ack of the delivery in flight: %v", err)
	}
	from = e.r.Stats().Changes
	e.set("jobs", "2", "second")
	e.settle(from, 1)
	testwait.For(t, "the next delivery", func() bool { return len(s.all()) == 2 })
	if d := s.all()[1]; string(d.Event.Value) != "second" || d.Attempt != 1 {
		t.Fatalf("after the ack: %+v, want second, attempt 1 (the first never again)", d)
	}
	changed := row
	changed.Glob = "*"
	if err := e.r.Durables().Put(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if after, err := rows.Get(ctx, "alice/q"); err != nil || after.Seq == before.Seq {
		t.Fatalf("a changed row: seq %d (%v), was %d: not written", after.Seq, err, before.Seq)
	}
}

// TestDurableSingleFromItsSubscribe: a `single` subscription takes every
// change committed after its Put returned, even one made before any
// router has the row live: here no router runs while the row is stored
// and the stream written, and the router started after delivers the
// write.
func TestDurableSingleFromItsSubscribe(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	c := env.Client()
	ctx := context.Background()
	if _, err := c.Stream("project-1", "jobs").Set(ctx, []byte("before"), persist.SetOptions{Key: "0"}); err != nil {
		t.Fatal(err)
	}
	store := DurableStore{Client: c}
	if err := store.Put(ctx, DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stream("project-1", "jobs").Set(ctx, []byte("after"), persist.SetOptions{Key: "1"}); err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(RouterConfig{Client: c, Durable: &DurableConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	var s sink
	r.Open("alice", s.deliver)
	testwait.Until(t, "the write made after the subscribe", func() (bool, string) {
		return len(s.all()) == 1, fmt.Sprint(s.all())
	})
	if d := s.all()[0]; d.Event == nil || string(d.Event.Value) != "after" || d.Entry == "" {
		t.Fatalf("delivery %+v, want the single delivery of after (not before, written ahead of the subscribe)", d)
	}
}

// TestDeletedRowLeavesNoCursor: a `single` delivery is acked while its row
// is being deleted, the ack waiting on the router's loop behind other work
// until the rows' follower has handled the delete. The ack is of the
// delivery in flight, so it is accepted, but the row is gone: it leaves no
// cursor.
// (Was: the follower handed the cursor's removal to the saver at once, and
// the ack's cursor, saved by the loop after it, wrote the deleted row's
// cursor back.)
func TestDeletedRowLeavesNoCursor(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 1, 1)
	var s sink
	alice := e.r.Open("alice", s.deliver)
	from := e.r.Stats().Changes
	e.set("jobs", "q/1", "v")
	e.settle(from, 1)
	testwait.For(t, "the delivery", func() bool { return len(s.all()) == 1 })
	d := s.all()[0]
	ctx := context.Background()

	// Hold the loop, so that the ack waits in its queue while the row is
	// deleted.
	held, release := make(chan struct{}), make(chan struct{})
	e.r.post(routed{do: func() { close(held); <-release }})
	<-held
	acked := make(chan error, 1)
	go func() { acked <- alice.Ack(ctx, "q", d.Entry) }()
	testwait.For(t, "the ack queued", func() bool { return len(e.r.in) == 1 })
	if ok, err := e.r.Durables().Delete(ctx, "alice", "q"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	// The rows' follower has handled the delete (the row is gone from
	// the router's subscriptions) while the loop still holds the ack. (A
	// later row's being live does not say so: the follower may confirm a
	// delete with the server after the rows written behind it.)
	id := durableID("alice", "q")
	testwait.For(t, "the delete handled", func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		_, ok := e.r.subs[id]
		return !ok
	})
	close(release)
	if err := <-acked; err != nil {
		t.Fatalf("the ack of the delivery in flight: %v", err)
	}
	noCursor := func() bool {
		_, ok, err := e.r.Durables().Cursor(ctx, "alice", "q")
		return err == nil && !ok
	}
	testwait.For(t, "the deleted row's cursor removed", noCursor)
	e.stopRouter() // the saver writes what it still holds
	if cur, ok, err := e.r.Durables().Cursor(ctx, "alice", "q"); err != nil || ok {
		t.Fatalf("the deleted row's cursor: %d %v %v, want none", cur, ok, err)
	}
}

// TestDeletedRowCursorRemovedAtStop: a `single` row is deleted while the
// router's loop is busy and its queue full, and the router stops before
// the loop takes the cursor's removal. The stop still removes the deleted
// row's cursor.
// (Was: the removal was queued on the loop alone, and a stop dropped it —
// not queued once the run had ended, or left in the queue of a loop that
// ended, or handed to the saver after its last flush: the deleted row's
// cursor stayed in the cursor stream until the id was stored again.)
func TestDeletedRowCursorRemovedAtStop(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 1, 1)
	ctx := context.Background()
	testwait.For(t, "the row resumed", func() bool { return e.resumed("alice", "q") })
	if _, ok, err := e.r.Durables().Cursor(ctx, "alice", "q"); err != nil || !ok {
		t.Fatalf("the row's cursor before the delete: %v %v", ok, err)
	}

	// Hold the loop and fill its queue: the rows' follower, handling the
	// delete, waits to queue the row's forget until the stop ends the
	// run, and then queues neither it nor the removal.
	held, release := make(chan struct{}), make(chan struct{})
	e.r.post(routed{do: func() { close(held); <-release }})
	<-held
	for len(e.r.in) < cap(e.r.in) {
		e.r.in <- routed{do: func() {}}
	}
	if ok, err := e.r.Durables().Delete(ctx, "alice", "q"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	id := durableID("alice", "q")
	testwait.For(t, "the follower handling the delete", func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		_, ok := e.r.subs[id]
		return !ok
	})
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- e.r.Stop(sctx) }()
	e.r.durable.mu.Lock()
	follower := e.r.durable.w
	e.r.durable.mu.Unlock()
	<-follower.Done() // done with the delete
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if cur, ok, err := e.r.Durables().Cursor(ctx, "alice", "q"); err != nil || ok {
		t.Fatalf("the deleted row's cursor after the stop: %d %v %v, want none", cur, ok, err)
	}
}
