package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// durableRegions are two regions on one fake clock, with durable
// subscriptions, the streams warmed in a.
type durableRegions struct {
	t    *testing.T
	clk  *fakeClock
	a, b *testRegion
}

func newDurableRegions(t *testing.T, shed *atomic.Bool, streams ...string) *durableRegions {
	t.Helper()
	return newDurableRegionsWith(t, regionOpts{shedAToB: shed}, streams...)
}

// newDurableRegionsWith is newDurableRegions with the regions' options o
// (its clock and durable set here).
func newDurableRegionsWith(t *testing.T, o regionOpts, streams ...string) *durableRegions {
	t.Helper()
	clk := newFakeClock()
	o.clk, o.durable = clk, true
	a, b := twoRegionsWith(t, o)
	e := &durableRegions{t: t, clk: clk, a: a, b: b}
	for _, s := range streams {
		// A session on a key of the stream makes its watcher trust its
		// feed before the durable rows (which would take the warm-up)
		// subscribe.
		var got sink
		an, _ := ParseAnchor("project-1/" + s + "/warm-up")
		if err := a.r.Open("warm", got.deliver).Subscribe(context.Background(), "warm", an, Filter{}); err != nil {
			t.Fatal(err)
		}
		a.set(t, s, "warm-up", "1")
		testwait.For(t, "the warm-up write", func() bool {
			clk.Advance(CoalesceWindowDefault)
			return len(got.events()) == 1
		})
	}
	return e
}

// put stores a durable row in a and waits until a's router holds it.
func (e *durableRegions) put(row DurableRow) {
	e.t.Helper()
	if err := e.a.r.Durables().Put(context.Background(), row); err != nil {
		e.t.Fatal(err)
	}
	id := durableID(row.User, row.ID)
	testwait.For(e.t, "the row live in a", func() bool {
		e.a.r.mu.Lock()
		defer e.a.r.mu.Unlock()
		return e.a.r.subs[id] != nil && slices.Contains(e.a.r.durableUsersOf0(userKey(row.User)), row.User)
	})
}

// durableUsersOf0 is durableUsersOf with r.mu held.
func (r *Router) durableUsersOf0(k int64) []string {
	var out []string
	for u := range r.durableUsers[k] {
		out = append(out, u)
	}
	return out
}

// write sets stream/key in a and ends its coalescing window.
func (e *durableRegions) write(stream, key string) {
	e.t.Helper()
	from := e.a.r.Stats().Changes
	e.a.set(e.t, stream, key, "v"+key)
	testwait.For(e.t, "a reads the write", func() bool { return e.a.r.Stats().Changes > from })
	e.clk.Advance(CoalesceWindowDefault)
}

// TestRegionsSingleDelivery: two sessions of one user in two regions, a
// `single` row in a. Exactly one gets each delivery; the one holding it
// closes before it acks, and the other, in the other region, gets it
// after the lease; its ack travels back to a and settles it; a forged ack
// is refused; then with acks, N deliveries come once each, taking turns
// between the regions.
func TestRegionsSingleDelivery(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	ctx := context.Background()
	e.put(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	var sa, sb sink
	inA := e.a.r.Open("alice", sa.deliver)
	inB := e.b.r.Open("alice", sb.deliver)

	e.write("jobs", "1")
	testwait.For(t, "one delivery", func() bool { return len(sa.all())+len(sb.all()) == 1 })
	first, other, holder, otherSess := &sa, &sb, inA, inB
	if len(sa.all()) == 0 {
		first, other, holder, otherSess = &sb, &sa, inB, inA
	}
	d := first.all()[0]
	if d.Mode != ModeSingle || d.Sub != "q" || d.Entry == "" || d.Attempt != 1 || d.Event == nil || string(d.Event.Value) != "v1" {
		t.Fatalf("delivery %+v", d)
	}
	// The holder goes before acking: after the lease the other gets it.
	holder.Close()
	e.clk.Advance(LeaseDefault)
	testwait.For(t, "the redelivery in the other region", func() bool { return len(other.all()) == 1 })
	re := other.all()[0]
	if homeEntry(re.Entry) != homeEntry(d.Entry) || re.Attempt != 2 || re.Event == nil || re.Event.Subject != d.Event.Subject || string(re.Event.Value) != "v1" {
		t.Fatalf("redelivery %+v, want entry %s (at home) attempt 2", re, homeEntry(d.Entry))
	}
	if n := len(first.all()); n != 1 {
		t.Fatalf("the closed session got %d deliveries", n)
	}

	// Forged acks: another user's session, in either region, and an ack
	// item naming alice's subscription under another user's number.
	for _, g := range []*testRegion{e.a, e.b} {
		var ms sink
		for _, entry := range []string{d.Entry, re.Entry} {
			if err := g.r.Open("mallory", ms.deliver).Ack(ctx, "q", entry); !errors.Is(err, ErrUnknownEntry) {
				t.Fatalf("mallory's ack of %s in %s: %v, want ErrUnknownEntry", entry, g.name, err)
			}
		}
	}
	e.a.r.Sink().Ack(ctx, "b", &forward.Ack{UserID: userKey("mallory"), SubID: "alice/q", EntryID: d.Entry})
	e.a.r.Sink().Ack(ctx, "b", &forward.Ack{UserID: userKey("alice"), SubID: "alice/q", EntryID: "project-1/jobs#999"})
	testwait.Until(t, "a refuses both ack items", func() (bool, string) {
		st := e.a.r.RegionStats()
		return st.AcksRefused == 2, fmt.Sprintf("%+v", st)
	})
	if err := otherSess.Ack(ctx, "q", "project-1/jobs#999"); !errors.Is(err, ErrUnknownEntry) {
		t.Fatalf("an ack of an entry not delivered: %v", err)
	}
	if e.a.r.Stats().Acks != 0 {
		t.Fatal("a forged ack settled the lease")
	}
	// The real ack, twice (a client resending after a reconnect).
	for range 2 {
		if err := otherSess.Ack(ctx, "q", re.Entry); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, "the ack settles the lease in a", func() (bool, string) {
		st := e.a.r.Stats()
		return st.Acks == 1, fmt.Sprintf("%+v", st)
	})

	// A session in each region again; N deliveries, each acked by whoever
	// got it: each comes once, and both regions get some.
	var s2 sink
	again := e.a.r.Open("alice", s2.deliver)
	sinks := map[*sink]*Session{&s2: again, other: otherSess}
	seen := map[string]int{}
	counts := func() int {
		n := 0
		for s := range sinks {
			n += len(s.all())
		}
		return n
	}
	base := counts()
	const n = 8
	for i := range n {
		key := fmt.Sprint("n", i)
		e.write("jobs", key)
		testwait.For(t, "delivery "+key, func() bool { return counts() == base+i+1 })
		for s, sess := range sinks {
			for _, d := range s.all() {
				if d.Event == nil || d.Event.Subject.Key != key {
					continue
				}
				seen[key]++
				if d.Attempt != 1 {
					t.Errorf("%s: attempt %d", key, d.Attempt)
				}
				if err := sess.Ack(ctx, "q", d.Entry); err != nil {
					t.Fatal(err)
				}
			}
		}
		testwait.For(t, "ack "+key, func() bool { return e.a.r.Stats().Acks == uint64(i+2) })
	}
	for i := range n {
		if key := fmt.Sprint("n", i); seen[key] != 1 {
			t.Errorf("%s delivered %d times", key, seen[key])
		}
	}
	for s := range sinks {
		if len(s.all()) == 0 {
			t.Errorf("a session got none of the %d: the regions did not take turns", n)
		}
	}
	st := e.a.r.RegionStats()
	if st.DeliveriesOut == 0 || st.AcksIn == 0 || e.b.r.RegionStats().AcksOut == 0 {
		t.Errorf("region stats a %+v, b %+v", st, e.b.r.RegionStats())
	}
}

// TestRegionsSingleNoSocket: a `single` delivery sent to a region where
// its user has no session is answered noSocket, which passes that region
// over (nothing more goes there) until the user's first session there
// bumps presence; the delivery then comes, and after its ack the next.
func TestRegionsSingleNoSocket(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	ctx := context.Background()
	e.put(DurableRow{User: "dave", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	e.write("jobs", "1")
	testwait.Until(t, "b answers noSocket and a passes b over", func() (bool, string) {
		sa, sb := e.a.r.RegionStats(), e.b.r.RegionStats()
		return sa.NoSocket == 1 && sb.NoSocketOut == 1, fmt.Sprintf("a %+v, b %+v", sa, sb)
	})
	e.write("jobs", "2") // waits behind the first
	if st := e.a.r.RegionStats(); st.DeliveriesOut != 1 {
		t.Fatalf("a sent %d deliveries, want 1 (b is passed over)", st.DeliveriesOut)
	}
	var got sink
	dave := e.b.r.Open("dave", got.deliver) // bumps presence in a
	testwait.For(t, "the first delivery in b", func() bool { return len(got.all()) == 1 })
	d := got.all()[0]
	if d.Event == nil || d.Event.Subject.Key != "1" || d.Mode != ModeSingle || d.Attempt != 2 {
		t.Fatalf("delivery %+v, want key 1 on its second attempt", d)
	}
	if err := dave.Ack(ctx, "q", d.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the second after the ack", func() bool { return len(got.all()) == 2 })
	if d := got.all()[1]; d.Event == nil || d.Event.Subject.Key != "2" || d.Attempt != 1 {
		t.Fatalf("delivery %+v, want key 2", d)
	}
	if st := e.b.r.RegionStats(); st.BumpsOut == 0 || e.a.r.RegionStats().BumpsIn == 0 {
		t.Fatalf("no presence bump: b %+v", st)
	}
}

// TestRegionsBroadcast: a broadcast row in a reaches its user's sessions
// in both regions; after the user's session in b is gone, b's noSocket
// stops the deliveries to b.
func TestRegionsBroadcast(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "news")
	e.put(DurableRow{User: "alice", ID: "all", Anchor: "project-1/news", Mode: ModeBroadcast})
	var sa, sb sink
	e.a.r.Open("alice", sa.deliver)
	inB := e.b.r.Open("alice", sb.deliver)
	e.write("news", "1")
	testwait.For(t, "both regions", func() bool { return len(sa.all()) == 1 && len(sb.all()) == 1 })
	for _, d := range []Delivery{sa.all()[0], sb.all()[0]} {
		if d.Mode != ModeBroadcast || d.Sub != "all" || d.Entry != "" || d.Event == nil || d.Event.Subject.Key != "1" || string(d.Event.Value) != "v1" {
			t.Fatalf("delivery %+v", d)
		}
	}
	// b's bump for the close only invalidates what a knows of b (a bump
	// says that presence moved, not which way): the next delivery still
	// goes to b, whose noSocket then passes b over.
	inB.Close()
	testwait.For(t, "b's bumps for the open and the close", func() bool { return e.a.r.RegionStats().BumpsIn == 2 })
	e.write("news", "2")
	testwait.Until(t, "b's noSocket", func() (bool, string) {
		st := e.a.r.RegionStats()
		return st.NoSocket == 1, fmt.Sprintf("%+v", st)
	})
	out := e.a.r.RegionStats().DeliveriesOut
	e.write("news", "3")
	testwait.For(t, "a's session has all three", func() bool { return len(sa.all()) == 3 })
	if st := e.a.r.RegionStats(); st.DeliveriesOut != out {
		t.Fatalf("a still sends to b: %d deliveries, want %d", st.DeliveriesOut, out)
	}
	if len(sb.all()) != 1 {
		t.Fatalf("b's closed session got %+v", sb.all())
	}
}

// TestRegionsShedDeliveries: deliveries a's queue sheds on their way to
// b: the broadcast one becomes a backlog_overflow gap for its
// subscription in b; the `single` one gets no marker and comes again,
// to b, once its lease ends.
func TestRegionsShedDeliveries(t *testing.T) {
	t.Parallel()
	var shed atomic.Bool
	e := newDurableRegions(t, &shed, "jobs", "news")
	e.put(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	e.put(DurableRow{User: "alice", ID: "all", Anchor: "project-1/news", Mode: ModeBroadcast})
	var got sink
	inB := e.b.r.Open("alice", got.deliver)
	shed.Store(true)
	e.write("jobs", "1")
	e.write("news", "1")
	testwait.Until(t, "the broadcast delivery's gap in b", func() (bool, string) {
		return len(got.gaps()) == 1, fmt.Sprint(got.all())
	})
	if g := got.gaps()[0]; g.Reason != ReasonBacklogOverflow || g.Sub != "all" || g.Count < 1 {
		t.Fatalf("gap %+v", g)
	}
	if d := got.all()[0]; d.Mode != ModeBroadcast {
		t.Fatalf("the gap came as %+v", d)
	}
	shed.Store(false)
	e.clk.Advance(LeaseDefault)
	testwait.For(t, "the single delivery after its lease", func() bool { return len(got.events()) == 1 })
	var d Delivery
	for _, x := range got.all() {
		if x.Event != nil {
			d = x
		}
	}
	if d.Mode != ModeSingle || d.Event.Subject.Key != "1" || d.Attempt != 2 {
		t.Fatalf("delivery %+v, want the shed one again", d)
	}
	if err := inB.Ack(context.Background(), "q", d.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the ack in a", func() bool { return e.a.r.Stats().Acks == 1 })
}

// TestDeliveryCodec: deliveries come back as they went, and items that
// are not ours are refused.
func TestDeliveryCodec(t *testing.T) {
	ev := &Event{ID: "p/s#3", Subject: Subject{"p", "s", "a/b"}, Op: OpSet, Seq: 3, Value: []byte{0xff, 1}, TS: 5, Coalesced: 2}
	for _, d := range []Delivery{
		{Sub: "q", Mode: ModeSingle, Entry: "p/s#3", Attempt: 2, Event: ev},
		{Sub: "all", Mode: ModeBroadcast, Event: &Event{ID: "p/s#4", Subject: Subject{"p", "s", "k"}, Op: OpDelete, Seq: 4, TS: 6, Coalesced: 1}},
		{Sub: "q", Mode: ModeSingle, Entry: "gap-1", Attempt: 1, Gap: &Gap{Reason: ReasonBacklogOverflow, Count: 7, From: 1, To: 9}},
	} {
		fd := encodeDelivery("a", "alice", d)
		user, got, ok := decodeDelivery(fd)
		if !ok || user != "alice" || got.Sub != d.Sub || got.Mode != d.Mode || got.Entry != d.Entry || got.Attempt != max(d.Attempt, 1) {
			t.Fatalf("%+v came back as %+v (%v)", d, got, ok)
		}
		switch {
		case d.Event != nil:
			if got.Event == nil || got.Event.ID != d.Event.ID || got.Event.Subject != d.Event.Subject || got.Event.Op != d.Event.Op ||
				string(got.Event.Value) != string(d.Event.Value) || got.Event.Coalesced != d.Event.Coalesced {
				t.Fatalf("event %+v came back as %+v", d.Event, got.Event)
			}
		default:
			if got.Gap == nil || got.Gap.Reason != d.Gap.Reason || got.Gap.Count != 7 || got.Gap.From != 1 || got.Gap.To != 9 {
				t.Fatalf("gap %+v came back as %+v", d.Gap, got.Gap)
			}
		}
		if fd.AckRequired != (d.Mode == ModeSingle) || fd.Origin != "a" || !forward.IsGapMarker(fd) == (d.Gap != nil) {
			t.Fatalf("item %+v", fd)
		}
	}
	good := encodeDelivery("a", "alice", Delivery{Sub: "q", Mode: ModeBroadcast, Event: ev})
	for name, mut := range map[string]func(*forward.Delivery){
		"another user's number": func(d *forward.Delivery) { d.UserID = userKey("bob") },
		"no user":               func(d *forward.Delivery) { d.SubID = "q" },
		"single without ack id": func(d *forward.Delivery) { d.AckRequired = true },
		"not json":              func(d *forward.Delivery) { d.Event = []byte(`{"op":`) },
		"unknown op":            func(d *forward.Delivery) { d.Event = []byte(`{"op":"rename","id":"x","subject":"p/s/k"}`) },
		"unknown reason":        func(d *forward.Delivery) { d.Event = []byte(`{"op":"gap","reason":"made_up"}`) },
		"no subject":            func(d *forward.Delivery) { d.Event = []byte(`{"op":"set","id":"x"}`) },
	} {
		d := *good
		mut(&d)
		if _, _, ok := decodeDelivery(&d); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeDelivery: no peer's delivery item makes the decoder panic,
// and what it accepts encodes back to an item it accepts again.
func FuzzDecodeDelivery(f *testing.F) {
	f.Add("alice/q", true, "e1", []byte(`{"id":"p/s#1","subject":"p/s/k","op":"set","value":"v","ts":1,"attempt":1}`))
	f.Add("alice/all", false, "", []byte(`{"id":"p/s#1","subject":"p/s","op":"gap","reason":"send_failed","ts":1}`))
	f.Fuzz(func(t *testing.T, sub string, ack bool, ackID string, ev []byte) {
		user, _, _ := splitRowKey(sub)
		fd := &forward.Delivery{UserID: userKey(user), SubID: sub, AckRequired: ack, AckID: ackID, Event: ev}
		u, d, ok := decodeDelivery(fd)
		if !ok {
			return
		}
		if _, d2, ok := decodeDelivery(encodeDelivery("a", u, d)); !ok || d2.Sub != d.Sub || d2.Mode != d.Mode {
			t.Fatalf("%+v did not come back: %+v", d, d2)
		}
	})
}

// TestRegionsSingleEntriesOfTwoHomes: alice's `single` subscription q is
// stored in both regions (her client subscribed in each, so each region
// is the home of a q of its own), and her one session is in b. Both
// streams "project-1/jobs" commit a change at seq 2, and every delivery
// of them reaches her under an entry of its own: b's own change
// "project-1/jobs#2"; a's change as a's row delivers it, handed out by b
// under a's name ("@a/project-1/jobs#2"); and a's change as b's row
// matches it (the home hears its peers' changes: "project-1/jobs#2@a",
// whose seq moves no cursor of b's). Each ack settles its own home's
// lease. The entries were one: the first ack settled b's, the second was
// b's "acked already", and a's lease was never settled, its subscription
// stuck behind that delivery for good.
func TestRegionsSingleEntriesOfTwoHomes(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	ctx := context.Background()
	row := DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}
	e.put(row)
	e.putInB(row)

	var sb sink
	inB := e.b.r.Open("alice", sb.deliver)
	e.write("jobs", "1")
	from := e.b.r.Stats().Changes
	e.b.set(t, "jobs", "1", "v1 in b")
	testwait.For(t, "b reads its write", func() bool { return e.b.r.Stats().Changes > from })
	// Each delivery acked as it comes (b's row may bring the warm-ups
	// first), until key 1 came from a's home and from b's own stream.
	acked, fromA := 0, 0
	var ones []Delivery
	seen := map[string]bool{}
	testwait.Until(t, "key 1 from each home", func() (bool, string) {
		e.clk.Advance(CoalesceWindowDefault)
		for _, d := range sb.all()[acked:] {
			if d.Event == nil {
				t.Fatalf("delivery %+v", d)
			}
			if d.Event.Subject.Key == "1" {
				ones = append(ones, d)
				if seen[d.Entry] {
					t.Fatalf("two deliveries of key 1 under the entry %q", d.Entry)
				}
				seen[d.Entry] = true
			}
			if err := inB.Ack(ctx, "q", d.Entry); err != nil {
				t.Fatalf("ack of %s: %v", d.Entry, err)
			}
			if peer, _, ok := splitRemoteEntry(d.Entry); ok && peer == "a" {
				fromA++
			}
			acked++
		}
		return seen["@a/project-1/jobs#2"] && seen["project-1/jobs#2"], fmt.Sprint(seen)
	})
	for _, d := range ones {
		want := "v1"
		if d.Entry == "project-1/jobs#2" {
			want = "v1 in b"
		}
		if string(d.Event.Value) != want {
			t.Errorf("entry %s: %q, want %q", d.Entry, d.Event.Value, want)
		}
	}
	testwait.Until(t, "each home's lease settled", func() (bool, string) {
		a, b := e.a.r.Stats().Acks, e.b.r.Stats().Acks
		return a == uint64(fromA) && b == uint64(acked-fromA), fmt.Sprintf("acks: a %d of %d, b %d of %d", a, fromA, b, acked-fromA)
	})
}

// putInB warms b's stream "jobs" up and stores row in b as well, as
// newDurableRegions and put do in a: b is then a home of the row too.
func (e *durableRegions) putInB(row DurableRow) {
	e.t.Helper()
	ctx := context.Background()
	var warm sink
	an, _ := ParseAnchor("project-1/jobs/warm-up")
	if err := e.b.r.Open("warm", warm.deliver).Subscribe(ctx, "warm", an, Filter{}); err != nil {
		e.t.Fatal(err)
	}
	e.b.set(e.t, "jobs", "warm-up", "1")
	testwait.For(e.t, "b's warm-up write", func() bool {
		e.clk.Advance(CoalesceWindowDefault)
		return len(warm.events()) == 1
	})
	if err := e.b.r.Durables().Put(ctx, row); err != nil {
		e.t.Fatal(err)
	}
	testwait.For(e.t, "the row live in b", func() bool {
		e.b.r.mu.Lock()
		defer e.b.r.mu.Unlock()
		return e.b.r.subs[durableID(row.User, row.ID)] != nil
	})
}

// TestHomeCursorIgnoresPeerSeqs: b is a home of alice's `single` row q,
// and hears a's changes of the same stream name, at seqs far past the
// end of b's own stream. Acked, they move no cursor of b's: its cursor is
// a seq of b's stream, and one past that stream's end made the next start
// take the stream for dropped and made again, starting over past b's own
// unsettled changes.
func TestHomeCursorIgnoresPeerSeqs(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	ctx := context.Background()
	row := DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle}
	e.putInB(row)
	// b's two tokens (its warm-up session's and the row's anchor), and
	// a's stand-ins for them beside a's warm-up session, on a's stream
	// read: a forwards from then on.
	testwait.Until(t, "a holds b's watches", func() (bool, string) {
		rs, st := e.a.r.RegionStats(), e.a.r.Stats()
		return rs.Remote == 2 && st.Subs == 3 && st.Ready == st.Watches, fmt.Sprintf("%+v %+v", rs, st)
	})
	var sb sink
	inB := e.b.r.Open("alice", sb.deliver)
	for i := range 6 {
		e.write("jobs", fmt.Sprint("a", i)) // seqs 2..7 of a's stream
	}
	acked, peerSeq := 0, uint64(0)
	testwait.Until(t, "a's six changes, through b's row", func() (bool, string) {
		e.clk.Advance(CoalesceWindowDefault)
		for _, d := range sb.all()[acked:] {
			if d.Event != nil && d.Event.Origin == "a" {
				peerSeq = max(peerSeq, d.Event.Seq)
			}
			if err := inB.Ack(ctx, "q", d.Entry); err != nil {
				t.Fatalf("ack of %s: %v", d.Entry, err)
			}
			acked++
		}
		return peerSeq >= 7, fmt.Sprint(acked, " acked, a's seq ", peerSeq)
	})
	e.b.r.Stop(ctx) // writes the cursors of the last acks
	cur, ok, err := e.b.r.Durables().Cursor(ctx, "alice", "q")
	if err != nil {
		t.Fatal(err)
	}
	if ok && cur > 1 { // b's stream holds its warm-up, seq 1
		t.Fatalf("b's cursor %d, past its own stream's end 1 (a's seqs reached %d)", cur, peerSeq)
	}
}

// homeEntry is the entry a delivery has at its home: a peer's is handed
// out under the peer's name (remoteEntryID).
func homeEntry(entry string) string {
	if _, e, ok := splitRemoteEntry(entry); ok {
		return e
	}
	return entry
}
