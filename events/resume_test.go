package events

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// stopRouter stops the env's router alone: its region is down.
func (e *routerEnv) stopRouter() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.r.Stop(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// restart stops the env's router (a no-op when stopped already) and
// starts another on the same persist server and clock.
func (e *routerEnv) restart(tune func(*RouterConfig)) {
	e.t.Helper()
	e.stopRouter()
	cfg := RouterConfig{Client: e.c, Clock: e.clk}
	if tune != nil {
		tune(&cfg)
	}
	r, err := NewRouter(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.r = r
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			e.t.Error(err)
		}
	})
}

// TestSingleResumesAfterRestart: a `single` subscription's region stops
// with a delivery unacked and changes come while it is down. The next
// router delivers, in order and one ack at a time, a region_restart gap
// for the change the stream no longer holds (a key deleted meanwhile), the
// unacked delivery again and the change made while it was down; what was
// acked then is not delivered again by the router after that.
func TestSingleResumesAfterRestart(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e := newRouterEnv(t, durable)
	e.warm("jobs")
	var s1 sink
	e.r.Open("alice", s1.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}, 2, 1)
	from := e.r.Stats().Changes
	one := e.set("jobs", "1", "one")
	two := e.set("jobs", "2", "two")
	e.settle(from, 2)
	testwait.For(t, "the first delivery", func() bool { return len(s1.all()) == 1 })
	if d := s1.all()[0]; d.Event == nil || d.Event.Seq != one.Seq {
		t.Fatalf("first delivery %+v, want seq %d", d, one.Seq)
	}

	// Down: nothing acked; key 2 deleted and key 3 written meanwhile.
	e.stopRouter()
	if _, err := e.c.KV("project-1", "jobs").Delete(context.Background(), "2"); err != nil {
		t.Fatal(err)
	}
	three := e.set("jobs", "3", "three")
	e.restart(durable)
	var s2 sink
	alice := e.r.Open("alice", s2.deliver)
	var got []string
	ackNext := func(want int) Delivery {
		t.Helper()
		testwait.Until(t, fmt.Sprintf("delivery %d", want), func() (bool, string) { return len(s2.all()) >= want, fmt.Sprint(len(s2.all())) })
		d := s2.all()[want-1]
		switch {
		case d.Gap != nil:
			got = append(got, fmt.Sprintf("gap %s %d", d.Gap.Reason, d.Gap.Count))
		case d.Event != nil:
			got = append(got, fmt.Sprintf("%s@%d", d.Event.Subject.Key, d.Event.Seq))
		}
		if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
			t.Fatalf("ack of %+v: %v", d, err)
		}
		return d
	}
	for i := 1; i <= 3; i++ {
		ackNext(i)
	}
	want := []string{"gap region_restart 1", fmt.Sprintf("1@%d", one.Seq), fmt.Sprintf("3@%d", three.Seq)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the restart %v, want %v (seq %d of key 2 deleted meanwhile)", got, want, two.Seq)
	}
	if st := e.r.Stats(); st.Gaps[ReasonRegionRestart] != 1 {
		t.Fatalf("region_restart gaps counted %d, want 1", st.Gaps[ReasonRegionRestart])
	}
	// Everything acked: the cursor reaches the last seq given, and a
	// router after the next restart delivers nothing again.
	testwait.For(t, "the cursor saved", func() bool {
		cur, ok, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
		return err == nil && ok && cur == three.Seq
	})
	e.restart(durable)
	var s3 sink
	e.r.Open("alice", s3.deliver)
	testwait.Until(t, "the row live again", func() (bool, string) {
		st := e.r.Stats()
		return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
	})
	from = e.r.Stats().Changes
	four := e.set("jobs", "4", "four")
	e.settle(from, 1)
	testwait.For(t, "the new change", func() bool { return len(s3.all()) == 1 })
	if d := s3.all()[0]; d.Event == nil || d.Event.Seq != four.Seq {
		t.Fatalf("after a restart with everything acked, first delivery %+v, want seq %d only", d, four.Seq)
	}
}

// TestSingleResumeBounded: what is read back after a restart is held to
// the backlog's bound, the oldest counted into one backlog_overflow marker
// that comes first.
func TestSingleResumeBounded(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{Backlog: 3} }
	e := newRouterEnv(t, durable)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}, 1, 1)
	testwait.For(t, "the new row's cursor", func() bool {
		_, err := e.c.KV(DurableScopeDefault, DurableCursorStreamDefault).Get(context.Background(), "alice/q")
		return err == nil
	})
	e.stopRouter()
	var seqs []uint64
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		seqs = append(seqs, e.set("jobs", k, k).Seq)
	}
	e.restart(durable)
	var s sink
	alice := e.r.Open("alice", s.deliver)
	var got []string
	for i := 1; i <= 4; i++ {
		testwait.Until(t, fmt.Sprintf("delivery %d", i), func() (bool, string) { return len(s.all()) >= i, fmt.Sprint(len(s.all())) })
		d := s.all()[i-1]
		if d.Gap != nil {
			got = append(got, fmt.Sprintf("gap %s %d", d.Gap.Reason, d.Gap.Count))
		} else {
			got = append(got, fmt.Sprintf("%s@%d", d.Event.Subject.Key, d.Event.Seq))
		}
		if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"gap backlog_overflow 2", fmt.Sprintf("c@%d", seqs[2]), fmt.Sprintf("d@%d", seqs[3]), fmt.Sprintf("e@%d", seqs[4])}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the restart %v, want %v", got, want)
	}
}

// TestResumedSetThenItsDelete: a `single` subscription's region
// restarts; a set made while it was down is read back (Resume) and acked.
// Then the key is deleted: the delete's event id is the removed row's
// seq, the same id as the read-back set, and the lease table took it for
// that set on its way again and dropped it: the delete was never
// delivered and no gap said so (found by an audit).
func TestResumedSetThenItsDelete(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e := newRouterEnv(t, durable)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 1, 1)
	testwait.For(t, "the new row's cursor", func() bool {
		_, err := e.c.KV(DurableScopeDefault, DurableCursorStreamDefault).Get(context.Background(), "alice/q")
		return err == nil
	})
	e.stopRouter()
	k := e.set("jobs", "q/k", "written while down")
	e.restart(durable)
	e.warm("jobs")
	var s sink
	alice := e.r.Open("alice", s.deliver)
	testwait.Until(t, "the read-back delivery", func() (bool, string) {
		e.clk.Advance(CoalesceWindowDefault)
		return len(s.all()) >= 1, fmt.Sprint(len(s.all()))
	})
	d := s.all()[0]
	if d.Event == nil || d.Event.Seq != k.Seq || d.Event.Op != OpSet {
		t.Fatalf("first delivery %+v, want the set of k at seq %d", d, k.Seq)
	}
	if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
		t.Fatal(err)
	}

	// Delete k, wait until the router read it, end its window; then write m.
	from := e.r.Stats().Changes
	if _, err := e.c.KV("project-1", "jobs").Delete(context.Background(), "q/k"); err != nil {
		t.Fatal(err)
	}
	e.advanceUntil("the router reads the delete", func() bool { return e.r.Stats().Changes > from })
	e.clk.Advance(CoalesceWindowDefault)
	from = e.r.Stats().Changes
	e.set("jobs", "q/m", "after the delete")
	e.settle(from, 1)
	testwait.Until(t, "a second delivery", func() (bool, string) {
		e.clk.Advance(CoalesceWindowDefault)
		return len(s.all()) >= 2, fmt.Sprint(len(s.all()))
	})
	d2 := s.all()[1]
	if d2.Gap == nil && (d2.Event == nil || d2.Event.Op != OpDelete || d2.Event.Subject.Key != "q/k") {
		t.Fatalf("delivery after the ack: %+v (event %+v); want the delete of k (entry %s), which was lost without a gap", d2, d2.Event, d.Entry)
	}
}

// TestShedMarkerSurvivesRestart: a `single` subscription's backlog
// sheds an entry into a backlog_overflow marker, and the delivery in
// flight is acked while the marker is not yet. The region restarts: the
// shed change comes again, or a marker for it, before anything later.
// (The ack saved the cursor past the shed change, since a marker carries
// no seq: the next router read back from there, and the change was lost
// with no marker; found by an audit.)
func TestShedMarkerSurvivesRestart(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{Backlog: 3} }
	e := newRouterEnv(t, durable)
	e.warm("jobs")
	var s1 sink
	alice := e.r.Open("alice", s1.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 2, 1)
	from := e.r.Stats().Changes
	var seqs []uint64
	for i := 1; i <= 5; i++ {
		seqs = append(seqs, e.set("jobs", fmt.Sprintf("q/%d", i), "v").Seq)
	}
	e.settle(from, 5)
	testwait.For(t, "the first delivery", func() bool { return len(s1.all()) == 1 })
	d := s1.all()[0]
	if d.Event == nil || d.Event.Seq != seqs[0] {
		t.Fatalf("first delivery %+v, want seq %d", d, seqs[0])
	}
	// Behind it: a marker for q/2, then q/3..q/5. Ack the first: the
	// marker goes out (and stays unacked).
	if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the marker", func() bool { return len(s1.all()) == 2 })
	if m := s1.all()[1]; m.Gap == nil || m.Gap.Reason != ReasonBacklogOverflow || m.Gap.Count != 1 {
		t.Fatalf("second delivery %+v, want a backlog_overflow marker for 1", m)
	}
	// The marker's delivery follows the ack's handling, cursor and all.
	e.stopRouter()
	cur, _, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
	if err != nil {
		t.Fatal(err)
	}
	e.restart(durable)
	var s2 sink
	alice2 := e.r.Open("alice", s2.deliver)
	var got []string
	covered := false // q/2 delivered, or a backlog marker before any later change
	for i := 1; ; i++ {
		testwait.Until(t, fmt.Sprintf("delivery %d after the restart", i), func() (bool, string) {
			return len(s2.all()) >= i, fmt.Sprint(got)
		})
		d := s2.all()[i-1]
		switch {
		case d.Gap != nil:
			got = append(got, fmt.Sprintf("gap %s %d", d.Gap.Reason, d.Gap.Count))
			covered = covered || d.Gap.Reason == ReasonBacklogOverflow
		default:
			got = append(got, fmt.Sprintf("%s@%d", d.Event.Subject.Key, d.Event.Seq))
			if d.Event.Seq == seqs[1] {
				covered = true
			}
			if d.Event.Seq > seqs[1] && !covered {
				t.Fatalf("after the restart %v: q/2@%d (shed into a marker never acked) is lost with no gap; cursor saved %d", got, seqs[1], cur)
			}
		}
		if err := alice2.Ack(context.Background(), "q", d.Entry); err != nil {
			t.Fatal(err)
		}
		if d.Event != nil && d.Event.Seq == seqs[4] {
			break
		}
	}
	t.Logf("after the restart: %v (cursor %d, seqs %v)", got, cur, seqs)
}

// TestLastAckCursorSavedAtStop: a router stopped right after an ack
// writes that ack's cursor before it is gone, eight rounds in a row. The
// saver's flush takes the wanted cursors out before it writes them, and
// when the stop ended a flush under way, its writes failed and the last
// flush had nothing left to write: the acked delivery came again after
// the restart (found by an audit).
func TestLastAckCursorSavedAtStop(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e := newRouterEnv(t, durable)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 1, 1)
	for round := 1; round <= 8; round++ {
		testwait.Until(t, "the row live", func() (bool, string) {
			st := e.r.Stats()
			return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
		})
		var s sink
		alice := e.r.Open("alice", s.deliver)
		// Anything read back (none after a clean stop) is acked first.
		from := e.r.Stats().Changes
		res := e.set("jobs", fmt.Sprintf("q/%d", round), "v")
		var last Delivery
		testwait.Until(t, "the delivery", func() (bool, string) {
			if e.r.Stats().Changes > from {
				e.clk.Advance(CoalesceWindowDefault)
			}
			for _, d := range s.all() {
				if d.Event != nil && d.Event.Seq == res.Seq {
					last = d
					return true, ""
				}
			}
			// Ack what came before it (re-deliveries after a lost cursor).
			if all := s.all(); len(all) > 0 {
				_ = alice.Ack(context.Background(), "q", all[len(all)-1].Entry)
			}
			return false, fmt.Sprint(len(s.all()))
		})
		if err := alice.Ack(context.Background(), "q", last.Entry); err != nil {
			t.Fatal(err)
		}
		e.stopRouter() // right after the ack
		cur, ok, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
		if err != nil {
			t.Fatal(err)
		}
		if !ok || cur < res.Seq {
			t.Fatalf("round %d: the router stopped right after the ack of seq %d, and the cursor saved is %d (ok %v): the last ack's cursor was not written",
				round, res.Seq, cur, ok)
		}
		e.restart(durable)
	}
}

// TestResentSetAckLeavesItsDelete: a client whose ack's answer was lost
// sends the ack again; by then the row may be deleted and its delete in
// flight to another session. The delete's entry is its own
// (STREAM#SEQ/delete), so the old ack is a no-op and the delete stays in
// flight for its own ack. (They shared STREAM#SEQ: the old ack settled the
// delete, which was lost without a gap if its session had died.)
func TestResentSetAckLeavesItsDelete(t *testing.T) {
	t.Parallel()
	e := newRouterEnv(t, func(c *RouterConfig) { c.Durable = &DurableConfig{} })
	e.warm("jobs")
	var s1, s2 sink
	first := e.r.Open("alice", s1.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 2, 1)
	from := e.r.Stats().Changes
	e.set("jobs", "q/k", "v")
	e.settle(from, 1)
	testwait.Until(t, "the set's delivery", func() (bool, string) {
		e.clk.Advance(CoalesceWindowDefault)
		return len(s1.all()) >= 1, fmt.Sprint(len(s1.all()))
	})
	set := s1.all()[0]
	if err := first.Ack(context.Background(), "q", set.Entry); err != nil {
		t.Fatal(err)
	}
	first.Close() // the first session dies; the user comes back on a second
	second := e.r.Open("alice", s2.deliver)
	from = e.r.Stats().Changes
	if _, err := e.c.KV("project-1", "jobs").Delete(context.Background(), "q/k"); err != nil {
		t.Fatal(err)
	}
	e.settle(from, 1)
	testwait.Until(t, "the delete's delivery", func() (bool, string) {
		e.clk.Advance(CoalesceWindowDefault)
		return len(s2.all()) >= 1, fmt.Sprint(len(s2.all()))
	})
	del := s2.all()[0]
	if del.Event == nil || del.Event.Op != OpDelete {
		t.Fatalf("delivery %+v, want the delete", del)
	}
	if del.Entry == set.Entry {
		t.Fatalf("the delete's entry is the set's, %q", del.Entry)
	}
	// The set's ack again, as the browser client sends it after a
	// reconnect: answered as a second ack, and the delete stays leased.
	if err := second.Ack(context.Background(), "q", set.Entry); err != nil {
		t.Fatalf("the set's ack again: %v", err)
	}
	if got := e.r.Stats().Leases; got != 1 {
		t.Fatalf("%d leases after the set's ack came again, want the delete's still held", got)
	}
	if err := second.Ack(context.Background(), "q", del.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "no lease after the delete's ack", func() (bool, string) {
		st := e.r.Stats()
		return st.Leases == 0, fmt.Sprintf("%+v", st)
	})
}

// resumed reports whether the router's loop has taken the resume of
// user's `single` row id (its read-back, or the cursor it starts from):
// the first of the row's work to set the cursor the loop knows as saved,
// before any ack of the row.
func (e *routerEnv) resumed(user, id string) bool {
	got := make(chan bool, 1)
	e.r.post(routed{do: func() {
		_, known := e.r.singleSaved[durableID(user, id)]
		got <- known
	}})
	select {
	case known := <-got:
		return known
	case <-e.r.base.Run().Done():
		return false
	}
}

// deliveriesAfterRestart opens a session of alice on e's (restarted)
// router, waits until her row q has resumed, writes key "q/after" and acks
// every delivery until that write's comes, returning what came before it,
// in order.
// (Was: it waited for the row's watcher only, and under load "q/after"
// could reach the loop, and be handed out, before the read-back that goes
// ahead of the backlog: what came before it was then [].)
func deliveriesAfterRestart(t *testing.T, e *routerEnv) (before []string) {
	t.Helper()
	var s sink
	alice := e.r.Open("alice", s.deliver)
	testwait.Until(t, "the row live again", func() (bool, string) {
		st := e.r.Stats()
		return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
	})
	testwait.For(t, "the row resumed", func() bool { return e.resumed("alice", "q") })
	from := e.r.Stats().Changes
	after := e.set("jobs", "q/after", "v")
	e.settle(from, 1)
	for i := 1; ; i++ {
		testwait.Until(t, fmt.Sprintf("delivery %d after the restart", i), func() (bool, string) {
			if len(s.all()) < i {
				e.clk.Advance(CoalesceWindowDefault)
			}
			return len(s.all()) >= i, fmt.Sprint(before)
		})
		d := s.all()[i-1]
		if d.Event != nil && d.Event.Seq == after.Seq && d.Event.Op == OpSet {
			return before
		}
		switch {
		case d.Gap != nil:
			before = append(before, fmt.Sprintf("gap %s %d", d.Gap.Reason, d.Gap.Count))
		default:
			before = append(before, fmt.Sprintf("%s %s@%d", d.Event.Op, d.Event.Subject.Key, d.Event.Seq))
		}
		if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
			t.Fatal(err)
		}
	}
}

// changesRead waits until the router has read n changes more than from.
func changesRead(t *testing.T, e *routerEnv, from, n uint64) {
	t.Helper()
	testwait.Until(t, "the router reads the changes", func() (bool, string) {
		st := e.r.Stats()
		return st.Changes >= from+n, fmt.Sprint(st.Changes - from)
	})
}

// TestSingleCursorStaysBelowAnOpenWindow: key a written at seq A1, key b
// at B, key a again at A2 > B; a's window (opened first) ends first and
// delivers A2, which is acked while b@B still waits in its coalescing
// window, and the region stops before b's window ends. The cursor saved
// stays below B, so the next router reads b back. (saveCursor looked at
// the lease table and the highest seq given only, so the ack saved A2 and
// b was lost with no marker.)
func TestSingleCursorStaysBelowAnOpenWindow(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e := newRouterEnv(t, durable)
	e.warm("jobs")
	var s1 sink
	alice := e.r.Open("alice", s1.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 2, 1)

	from := e.r.Stats().Changes
	e.set("jobs", "q/a", "1")
	changesRead(t, e, from, 1)
	e.clk.Advance(10 * time.Millisecond) // b's window opens 10 ms after a's
	b := e.set("jobs", "q/b", "1")
	changesRead(t, e, from, 2)
	a2 := e.set("jobs", "q/a", "2")
	changesRead(t, e, from, 3)
	e.clk.Advance(CoalesceWindowDefault - 10*time.Millisecond) // a's window ends, b's not yet

	testwait.For(t, "a's delivery", func() bool { return len(s1.all()) == 1 })
	d := s1.all()[0]
	if d.Event == nil || d.Event.Seq != a2.Seq {
		t.Fatalf("first delivery %+v, want a@%d", d, a2.Seq)
	}
	if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
		t.Fatal(err)
	}
	e.stopRouter() // b's window still open
	cur, _, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
	if err != nil {
		t.Fatal(err)
	}
	e.restart(durable)
	before := deliveriesAfterRestart(t, e)
	covered := false
	for _, s := range before {
		if s == fmt.Sprintf("set q/b@%d", b.Seq) || len(s) > 3 && s[:4] == "gap " {
			covered = true
		}
	}
	if !covered {
		t.Fatalf("cursor saved %d past b@%d, which was still in its coalescing window; after the restart b never came, nor a gap (before the next write: %v)", cur, b.Seq, before)
	}
}

// TestSingleCursorStaysBelowARateLimitMarker: a change refused by the
// `single` rate limit (120/min) becomes a delivery_rate_limit marker that
// knows the lowest seq it stands for; while it is unsettled the cursor
// stays below that seq (and moves up to it with the acks before it), so a
// restart before the marker's ack reads the refused change back first.
// (Only backlog_overflow markers held the cursor: the ack of the entry
// before the marker, a later change queued behind it, saved the cursor
// past the refused change, lost at the restart with no marker.)
func TestSingleCursorStaysBelowARateLimitMarker(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e := newRouterEnv(t, durable)
	e.warm("jobs")
	var s1 sink
	alice := e.r.Open("alice", s1.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 2, 1)

	from := e.r.Stats().Changes
	var seqs []uint64
	for i := 1; i <= SinglePerMinute+1; i++ {
		seqs = append(seqs, e.set("jobs", fmt.Sprintf("q/%03d", i), "v").Seq)
	}
	refused := seqs[SinglePerMinute]
	e.settle(from, uint64(len(seqs)))
	testwait.Until(t, "the refused change's marker", func() (bool, string) {
		st := e.r.Stats()
		return st.Gaps[ReasonDeliveryRateLimit] == 1, fmt.Sprintf("%+v", st)
	})
	// Ack all but the last allowed delivery: it is in flight, the marker
	// behind it.
	for i := 1; i < SinglePerMinute; i++ {
		testwait.For(t, "the next delivery", func() bool { return len(s1.all()) >= i })
		d := s1.all()[i-1]
		if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "the last allowed delivery", func() bool { return len(s1.all()) >= SinglePerMinute })
	last := s1.all()[SinglePerMinute-1]
	if last.Event == nil || last.Event.Seq != seqs[SinglePerMinute-1] {
		t.Fatalf("delivery %d: %+v, want seq %d", SinglePerMinute, last, seqs[SinglePerMinute-1])
	}
	// The limit's minute passes (the lease ends too: the entry comes again,
	// same entry); a later change is allowed and queued behind the marker.
	e.clk.Advance(2 * time.Minute)
	from = e.r.Stats().Changes
	later := e.set("jobs", "q/later", "v")
	e.settle(from, 1)
	testwait.Until(t, "the later change queued", func() (bool, string) {
		st := e.r.Stats()
		return st.Backlog == 2, fmt.Sprintf("%+v", st) // marker, later
	})
	if err := alice.Ack(context.Background(), "q", last.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the marker's delivery", func() bool {
		all := s1.all()
		return all[len(all)-1].Gap != nil
	})
	e.stopRouter() // the marker unacked
	cur, _, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
	if err != nil {
		t.Fatal(err)
	}
	e.restart(durable)
	before := deliveriesAfterRestart(t, e)
	if len(before) == 0 || before[0] != fmt.Sprintf("set q/%03d@%d", SinglePerMinute+1, refused) && before[0][:4] != "gap " {
		t.Fatalf("seq %d was refused by the rate limit, its marker unacked at the stop; after the restart (cursor %d), before the next write: %v (later@%d), want the refused change (or a gap) first",
			refused, cur, before, later.Seq)
	}
}

// ackedSingleSet is a router with alice's `single` row q on
// project-1/jobs/q and one session of hers, s1, which got the set of q/k
// (k) and acked it; durable is the config to restart the router with.
func ackedSingleSet(t *testing.T) (e *routerEnv, durable func(*RouterConfig), s1 *sink, k persist.SetResult) {
	t.Helper()
	durable = func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e = newRouterEnv(t, durable)
	e.warm("jobs")
	s1 = &sink{}
	alice := e.r.Open("alice", s1.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 2, 1)
	from := e.r.Stats().Changes
	k = e.set("jobs", "q/k", "v")
	e.settle(from, 1)
	testwait.For(t, "the set's delivery", func() bool { return len(s1.all()) == 1 })
	if err := alice.Ack(context.Background(), "q", s1.all()[0].Entry); err != nil {
		t.Fatal(err)
	}
	return e, durable, s1, k
}

// TestSingleUnackedDeleteSurvivesRestart: a delete's entry carries the
// removed row's seq, at or below the cursor once that row's set was acked;
// such a delete moves the cursor back below it, so a delete delivered and
// not acked when the region stops is covered after the restart by a
// region_restart marker (the row is gone), read back from there. (The
// cursor never moved back: the delete was neither read back nor counted
// missing, lost with no marker.)
func TestSingleUnackedDeleteSurvivesRestart(t *testing.T) {
	t.Parallel()
	e, durable, s1, k := ackedSingleSet(t)
	if _, err := e.c.KV("project-1", "jobs").Delete(context.Background(), "q/k"); err != nil {
		t.Fatal(err)
	}
	e.advanceUntil("the delete's delivery", func() bool { return len(s1.all()) == 2 })
	if d := s1.all()[1]; d.Event == nil || d.Event.Op != OpDelete {
		t.Fatalf("second delivery %+v, want the delete of k", d)
	}
	e.stopRouter() // the delete unacked
	cur, _, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
	if err != nil {
		t.Fatal(err)
	}
	e.restart(durable)
	before := deliveriesAfterRestart(t, e)
	if len(before) == 0 {
		t.Fatalf("the delete of k (row seq %d) was delivered and not acked when the region stopped; after the restart (cursor %d) it never came again and no gap stood for it", k.Seq, cur)
	}
	if before[0] != "gap region_restart 1" {
		t.Fatalf("after the restart: %v, want a region_restart gap for the delete of k first", before)
	}
}

// TestSingleDeleteAfterRestartMovesTheCursorBack: as above, for a delete
// that comes to a restarted router before any ack there: the cursor that
// router read when it started the row is the one the delete moves back.
// (The loop knew no saved cursor until its first ack, so such a delete
// moved nothing and was lost at the next restart.)
func TestSingleDeleteAfterRestartMovesTheCursorBack(t *testing.T) {
	t.Parallel()
	e, durable, _, k := ackedSingleSet(t)
	e.restart(durable) // the cursor saved at k, nothing to read back
	var s2 sink
	e.r.Open("alice", s2.deliver)
	testwait.Until(t, "the row live again", func() (bool, string) {
		st := e.r.Stats()
		return st.Subs == 1 && st.Ready == 1, fmt.Sprintf("%+v", st)
	})
	if _, err := e.c.KV("project-1", "jobs").Delete(context.Background(), "q/k"); err != nil {
		t.Fatal(err)
	}
	e.advanceUntil("the delete's delivery", func() bool { return len(s2.all()) == 1 })
	if d := s2.all()[0]; d.Event == nil || d.Event.Op != OpDelete {
		t.Fatalf("first delivery after the restart %+v, want the delete of k", d)
	}
	e.stopRouter() // the delete unacked
	cur, _, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
	if err != nil {
		t.Fatal(err)
	}
	e.restart(durable)
	before := deliveriesAfterRestart(t, e)
	if len(before) == 0 || before[0] != "gap region_restart 1" {
		t.Fatalf("the delete of k (row seq %d) came to a restarted router and was not acked when it stopped; after the next restart (cursor %d): %v, want a region_restart gap for it first", k.Seq, cur, before)
	}
}

// TestSingleRestartMarkerHoldsTheCursor: a region_restart marker stands
// for changes a restart found gone; until it is acked it holds the cursor
// below them, so that a second restart before the ack finds them gone
// again and delivers a marker for them again. (The cursor moved to just
// below the first change read back, past the gone ones, so the second
// restart read nothing missing and the gap was lost with no marker.)
func TestSingleRestartMarkerHoldsTheCursor(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e := newRouterEnv(t, durable)
	e.warm("jobs")
	var s1 sink
	e.r.Open("alice", s1.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}, 2, 1)
	from := e.r.Stats().Changes
	one := e.set("jobs", "q/1", "one")
	two := e.set("jobs", "q/2", "two")
	e.settle(from, 2)
	testwait.For(t, "the first delivery", func() bool { return len(s1.all()) == 1 })

	// Down with q/1 unacked, and q/1 deleted meanwhile: the restart reads
	// q/2 back and a region_restart marker stands for q/1's seq.
	e.stopRouter()
	if _, err := e.c.KV("project-1", "jobs").Delete(context.Background(), "q/1"); err != nil {
		t.Fatal(err)
	}
	e.restart(durable)
	var s2 sink
	e.r.Open("alice", s2.deliver)
	testwait.For(t, "the marker's delivery", func() bool { return len(s2.all()) >= 1 })
	if d := s2.all()[0]; d.Gap == nil || d.Gap.Reason != ReasonRegionRestart {
		t.Fatalf("first delivery after the restart %+v, want a region_restart gap for seq %d", d, one.Seq)
	}
	e.stopRouter() // the marker unacked
	cur, _, err := e.r.Durables().Cursor(context.Background(), "alice", "q")
	if err != nil {
		t.Fatal(err)
	}
	if cur >= one.Seq {
		t.Errorf("cursor %d with the region_restart marker for seq %d unacked, want it below", cur, one.Seq)
	}
	e.restart(durable)
	before := deliveriesAfterRestart(t, e)
	want := []string{"gap region_restart 1", fmt.Sprintf("set q/2@%d", two.Seq)}
	if fmt.Sprint(before) != fmt.Sprint(want) {
		t.Fatalf("after a second restart with the marker unacked (cursor %d): %v, want %v", cur, before, want)
	}
}
