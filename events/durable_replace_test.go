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
