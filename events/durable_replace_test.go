package events

import (
	"context"
	"fmt"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestDurableReplacedSingleCursor: a `single` row that replaces another
// row of its id starts where a new one would — at its stream's end when
// Put returns — unless it replaces a `single` row in the same stream,
// whose cursor it takes over. Before, a replacement never wrote a cursor:
// one replacing a `single` row in another stream resumed from that
// stream's seq and delivered its own stream's history, and one replacing
// a broadcast row had none and skipped what was committed before a router
// had it live.
func TestDurableReplacedSingleCursor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		old  DurableRow
		new  DurableRow
	}{
		{"single in another stream",
			DurableRow{Anchor: "project-1/old", Mode: ModeSingle},
			DurableRow{Anchor: "project-1/jobs", Mode: ModeSingle}},
		{"broadcast",
			DurableRow{Anchor: "project-1/jobs", Mode: ModeBroadcast},
			DurableRow{Anchor: "project-1/jobs", Mode: ModeSingle}},
		{"single in the same stream",
			DurableRow{Anchor: "project-1/jobs", Ops: []string{"delete"}, Mode: ModeSingle},
			DurableRow{Anchor: "project-1/jobs", Mode: ModeSingle}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := persistenv.Start(t, 1)
			c := env.Client()
			ctx := context.Background()
			set := func(stream, key, value string) {
				t.Helper()
				if _, err := c.Stream("project-1", stream).Set(ctx, []byte(value), persist.SetOptions{Key: key}); err != nil {
					t.Fatal(err)
				}
			}
			set("old", "0", "x")
			for i := range 5 {
				set("jobs", fmt.Sprint("h", i), "history") // jobs' seqs 1-5, before either row
			}
			store := DurableStore{Client: c}
			tc.old.User, tc.old.ID = "alice", "q"
			tc.new.User, tc.new.ID = "alice", "q"
			if err := store.Put(ctx, tc.old); err != nil {
				t.Fatal(err)
			}
			// Committed while only the old row stands: the same stream's
			// `single` row left it unsettled for its successor, the others
			// came before the new row.
			set("jobs", "between", "between")
			if err := store.Put(ctx, tc.new); err != nil {
				t.Fatal(err)
			}
			set("jobs", "after", "after") // after the new row's Put

			r, err := NewRouter(RouterConfig{Client: c, Durable: &DurableConfig{}})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Stop(context.Background()) })
			var s sink
			sess := r.Open("alice", s.deliver)
			want := []string{"after"}
			if tc.old.Mode == ModeSingle && tc.old.Anchor == tc.new.Anchor {
				want = []string{"between", "after"}
			}
			var got []string
			for len(got) < len(want) {
				testwait.Until(t, "the next delivery", func() (bool, string) {
					return len(s.all()) > len(got), fmt.Sprintf("got %v, stats %+v", got, r.Stats())
				})
				d := s.all()[len(got)]
				if d.Event == nil {
					t.Fatalf("delivery %d: %+v, want an event", len(got), d)
				}
				got = append(got, string(d.Event.Value))
				if err := sess.Ack(ctx, d.Sub, d.Entry); err != nil {
					t.Fatal(err)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("deliveries %v, want %v", got, want)
			}
		})
	}
}

// TestReplacedSingleRowsLateSaveKeepsTheNewCursor: alice's `single` row q
// on project-1/old/q is replaced by one on project-1/jobs/q while an ack of
// the old row's delivery waits on the router's loop. The ack is taken
// before the old row's forget and saves the old row's cursor, a seq of
// project-1/old; the new row's cursor, which Put started at jobs' end,
// stays as it is, and after a restart jobs' history is not delivered.
// (Was: the old row's save was written over the new row's cursor, so the
// new row resumed from a seq of another stream and delivered jobs'
// history, written before it was subscribed.)
func TestReplacedSingleRowsLateSaveKeepsTheNewCursor(t *testing.T) {
	t.Parallel()
	durable := func(c *RouterConfig) { c.Durable = &DurableConfig{} }
	e := newRouterEnv(t, durable)
	e.warm("old")
	var s sink
	alice := e.r.Open("alice", s.deliver)
	e.putDurable(DurableRow{User: "alice", ID: "q", Anchor: "project-1/old/q", Mode: ModeSingle}, 2, 1)
	from := e.r.Stats().Changes
	e.set("old", "q/1", "v")
	e.settle(from, 1)
	testwait.For(t, "the old row's delivery", func() bool { return len(s.all()) == 1 })
	d := s.all()[0]
	var jobsEnd uint64
	for i := range 5 {
		jobsEnd = e.set("jobs", fmt.Sprintf("q/h%d", i), "history").Seq // before the new row
	}
	ctx := context.Background()

	// Hold the loop, so that the old row's ack waits in its queue while
	// the row is replaced.
	held, release := make(chan struct{}), make(chan struct{})
	e.r.post(routed{do: func() { close(held); <-release }})
	<-held
	acked := make(chan error, 1)
	go func() { acked <- alice.Ack(ctx, "q", d.Entry) }()
	testwait.For(t, "the ack queued", func() bool { return len(e.r.in) == 1 })
	if err := e.r.Durables().Put(ctx, DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs/q", Mode: ModeSingle}); err != nil {
		t.Fatal(err)
	}
	id := durableID("alice", "q")
	testwait.For(t, "the new row started", func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		rs := e.r.subs[id]
		return rs != nil && rs.sub.Anchor.Stream == "jobs"
	})
	close(release)
	if err := <-acked; err != nil {
		t.Fatalf("the ack of the old row's delivery in flight: %v", err)
	}
	testwait.For(t, "the new row resumed", func() bool { return e.resumed("alice", "q") })
	e.stopRouter() // the saver writes what it still holds
	cur, ok, err := e.r.Durables().Cursor(ctx, "alice", "q")
	if err != nil || !ok || cur != jobsEnd {
		t.Fatalf("the new row's cursor: %d %v %v, want %d (jobs' end when it was stored); %d is the old row's delivery's seq in project-1/old",
			cur, ok, err, jobsEnd, d.Event.Seq)
	}
	e.restart(durable)
	if before := deliveriesAfterRestart(t, e); len(before) != 0 {
		t.Fatalf("after a restart the new row delivered %v, written before it was stored", before)
	}
}
