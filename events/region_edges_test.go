package events

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/forward"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestRegionsCarryAnyKey: persist accepts any key up to
// persist.MaxKeyBytes (4096) with no rule on slashes, so "dir/" (a
// trailing slash), "a//b" (an empty segment) and a 1,500-byte path are
// keys a write may have, and a's own sessions anchored on the stream hear
// them. Crossing to b, the event item carries the subject as its KV key,
// and b's decodeRemote (events/region.go:491) reads it back with
// ParseAnchor, which refuses all three (trailing '/', "//", over
// MaxAnchorBytes = 1024): receive (region.go:399-401) drops the item with
// no delivery, no gap and no noWatch. b's session misses the writes
// silently; what is expected is the events (or at the least a gap).
func TestRegionsCarryAnyKey(t *testing.T) {
	t.Parallel()
	a, b := twoRegions(t)
	var inA, inB sink
	an, _ := ParseAnchor("project-1/notes")
	if err := b.r.Open("bob", inB.deliver).Subscribe(context.Background(), "n", an, Filter{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a watches the stream for b", func() (bool, string) {
		return a.r.RegionStats().Remote == 1 && a.r.Stats().Ready == 1, fmt.Sprintf("%+v", a.r.RegionStats())
	})
	if err := a.r.Open("alice", inA.deliver).Subscribe(context.Background(), "n", an, Filter{}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("d/", 700) + "file.txt" // 1,408 bytes: a valid persist key
	keys := []string{"dir/", "a//b", long}
	for _, k := range keys {
		a.set(t, "notes", k, "v")
	}
	a.set(t, "notes", "fence", "v") // batches are applied in order: after it, b had the rest
	testwait.Until(t, "every write in a, and the fence in b", func() (bool, string) {
		fenced := false
		for _, ev := range inB.events() {
			fenced = fenced || ev.Subject.Key == "fence"
		}
		return len(inA.events()) == len(keys)+1 && fenced, fmt.Sprintf("a %d events, b %d", len(inA.events()), len(inB.events()))
	})
	got := map[string]bool{}
	for _, ev := range inB.events() {
		got[ev.Subject.Key] = true
	}
	lost := 0
	for _, k := range keys {
		if !got[k] {
			lost++
			t.Errorf("b's session never got the write of key %.40q (a's session did)", k)
		}
	}
	if lost > 0 && len(inB.gaps()) == 0 {
		t.Errorf("and no gap told b's session of the %d lost: %+v", lost, b.r.RegionStats())
	}
}

// TestRegionsSingleDeliveryOfAnyKey: the same refusal on the
// durable path. alice's `single` row q lives in a, her one session in b. A
// write of the key "dir/" (valid in persist) becomes a delivery item whose
// subject b's decodeDelivery (events/deliver.go:150-154) refuses with
// ParseAnchor: receiveDelivery counts a BadItem and returns false (no
// noSocket, deliver.go:313-317), so a keeps the lease and, each time it
// ends, sends the entry to b again, which drops it again. The delivery
// never reaches her, and everything behind it in q waits for good.
// Expected: the entry reaches her session in b (and, after her ack, the
// next one).
func TestRegionsSingleDeliveryOfAnyKey(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	e.put(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	var sb sink
	e.b.r.Open("alice", sb.deliver)
	e.write("jobs", "dir/")
	testwait.Until(t, "a's delivery of dir/ reached b", func() (bool, string) {
		st := e.b.r.RegionStats()
		return st.DeliveriesIn+st.BadItems >= 1, fmt.Sprintf("%+v", st)
	})
	e.write("jobs", "next")
	for attempt := 2; attempt <= 3; attempt++ {
		e.clk.Advance(LeaseDefault)
		testwait.Until(t, fmt.Sprint("attempt ", attempt, " reached b"), func() (bool, string) {
			st := e.b.r.RegionStats()
			return st.DeliveriesIn+st.BadItems >= uint64(attempt), fmt.Sprintf("%+v", st)
		})
	}
	if len(sb.all()) == 0 {
		t.Fatalf("after 3 attempts alice's only session (in b) got nothing of q: b refused each delivery as not ours (%+v); a holds %d lease(s), %d waiting behind",
			e.b.r.RegionStats(), e.a.r.Stats().Leases, e.a.r.Stats().Backlog)
	}
	if d := sb.all()[0]; d.Event == nil || d.Event.Subject.Key != "dir/" {
		t.Fatalf("first delivery %+v, want key dir/", d)
	}
}

// TestRegionsStandInStartedAgain: a peer's watch that a region could
// not start a stand-in for is never started again, though the peer keeps
// announcing it. onWatch (events/region.go:212-223) calls addRemote only
// for the first announcement of a token (g.remote had no entry);
// addRemote (region.go:336-350) drops the stand-in when r.add fails (here:
// a's persist is down, the stream's first read does not finish within
// StandInTimeout, here 1 s), but the token stays in g.remote, and every
// later announcement only renews its expiry (region.go:219), so it never
// expires and is never added again. Once a's persist is back, a watches
// nothing for b, and b's session never hears a's writes, for as long as
// it stays subscribed. Expected: a later announcement (or the round)
// starts the stand-in again.

func TestRegionsStandInStartedAgain(t *testing.T) {
	t.Parallel()
	a, b := twoRegionsWith(t, regionOpts{announce: 100 * time.Millisecond, remoteTTL: time.Second, standIn: time.Second})
	a.env.StopServer("0") // a's persist unavailable for a while
	var inB sink
	an, _ := ParseAnchor("project-1/notes")
	if err := b.r.Open("bob", inB.deliver).Subscribe(context.Background(), "n", an, Filter{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a starts a stand-in for b's watch", func() (bool, string) {
		return a.r.RegionStats().Remote == 1 && a.r.Stats().Subs == 1, fmt.Sprintf("%+v %+v", a.r.RegionStats(), a.r.Stats())
	})
	testwait.Until(t, "the stand-in gives up (StandInTimeout)", func() (bool, string) {
		return a.r.Stats().Subs == 0, fmt.Sprintf("%+v", a.r.Stats())
	})
	a.env.StartServer("0")
	// b goes on announcing: several rounds reach a, and a still holds
	// b's watch, renewed.
	from := a.r.RegionStats().WatchesIn
	testwait.Until(t, "b's announcements after a's persist is back", func() (bool, string) {
		st := a.r.RegionStats()
		return st.WatchesIn >= from+5, fmt.Sprintf("%+v", st)
	})
	// A session of a's on the stream: a reads the stream again, and a
	// write there reaches it; b's is not forwarded.
	var inA sink
	if err := a.r.Open("alice", inA.deliver).Subscribe(context.Background(), "n", an, Filter{}); err != nil {
		t.Fatal(err)
	}
	a.set(t, "notes", "k", "after the outage")
	testwait.For(t, "a's session hears the write", func() bool { return len(inA.events()) == 1 })
	// take forwards a change before its window is flushed to a's session.
	if st := a.r.RegionStats(); st.EventsOut == 0 {
		t.Fatalf("a holds b's watch of project-1/notes (renewed by %d announcements since its persist came back) but no stand-in for it (%d subs: its own session's): the write was not forwarded, and b's session will never hear a's writes (%+v)",
			st.WatchesIn-from, a.r.Stats().Subs, st)
	}
	testwait.For(t, "b's session hears the write", func() bool { return len(inB.events()) == 1 })
}

// TestRegionsDeliveryNamesItsHome: a durable row's delivery of its
// home's change, handed to the user's session in a peer, comes there as a
// change of the peer's own data. docs/events.md ("`id` names the change
// by its stream and seq; a change committed in another region's data has
// that region's name after it (project-1/notes#3@eu)") and Event's
// contract (events/router.go, ID and Origin: "@REGION" after the id and
// Origin set for a change committed in a peer's data, whose Seq moves no
// cursor here) are kept on the session path (region.go:406) but not on the
// delivery path: decodeDelivery (deliver.go:176) builds the event with
// the home's bare id and no Origin, and deliverRemote (deliver.go:330)
// hands it on as is. b's session gets a's seq under "project-1/news#N",
// the name of b's own change N of that stream. Expected: id
// "project-1/news#N@a", Origin "a".
func TestRegionsDeliveryNamesItsHome(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "news")
	e.put(DurableRow{User: "alice", ID: "all", Anchor: "project-1/news", Mode: ModeBroadcast})
	var sa, sb sink
	e.a.r.Open("alice", sa.deliver)
	e.b.r.Open("alice", sb.deliver)
	e.write("news", "1")
	testwait.For(t, "both regions", func() bool { return len(sa.events()) == 1 && len(sb.events()) == 1 })
	home, far := sa.events()[0], sb.events()[0]
	if home.Origin != "" || far.Seq != home.Seq {
		t.Fatalf("home %+v, far %+v", home, far)
	}
	if far.ID != home.ID+"@a" || far.Origin != "a" {
		t.Fatalf("b's session got a's change as id %q, origin %q: want %q, origin \"a\" (a change of a's data, not b's seq %d)",
			far.ID, far.Origin, home.ID+"@a", far.Seq)
	}
}

// TestRegionsValueBound: a value crosses when its form on the wire (text
// escaped as JSON, anything else in base64) is at most
// MaxRemoteValueBytes, and without its value otherwise, as an event all
// the same. The bound was checked on the raw value: a 96 KiB binary value
// (128 KiB in base64) or 64 KiB of HTML-like text (each '<' 6 bytes as
// JSON) made an item over the queue's bound, refused at its Push, and b's
// session got a backlog_overflow gap for a change a's session got whole.
func TestRegionsValueBound(t *testing.T) {
	t.Parallel()
	a, b := twoRegions(t)
	var inA, inB sink
	an, _ := ParseAnchor("project-1/blobs")
	if err := b.r.Open("bob", inB.deliver).Subscribe(context.Background(), "n", an, Filter{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a watches the stream for b", func() (bool, string) {
		return a.r.RegionStats().Remote == 1 && a.r.Stats().Ready == 1, fmt.Sprintf("%+v", a.r.RegionStats())
	})
	if err := a.r.Open("alice", inA.deliver).Subscribe(context.Background(), "n", an, Filter{}); err != nil {
		t.Fatal(err)
	}
	values := map[string]struct {
		value string
		whole bool // crosses with its value
	}{
		"bin-fits":  {strings.Repeat("\xff", MaxRemoteValueBytes/4*3), true}, // exactly the bound in base64
		"bin-over":  {strings.Repeat("\xff", MaxRemoteValueBytes), false},
		"html-fits": {strings.Repeat("<p>", MaxRemoteValueBytes/6/3), true},
		"html-over": {strings.Repeat("<p>a&amp;b</p>", 64<<10/14), false}, // 64 KiB, about 150 KiB as JSON
	}
	for key, v := range values {
		a.set(t, "blobs", key, v.value)
	}
	a.set(t, "blobs", "fence", "v")
	testwait.Until(t, "a's session has them all, and b the fence", func() (bool, string) {
		fenced := false
		for _, ev := range inB.events() {
			fenced = fenced || ev.Subject.Key == "fence"
		}
		return len(inA.events()) == len(values)+1 && fenced, fmt.Sprint(len(inA.events()), " in a; b: ", len(inB.all()))
	})
	if gaps := inB.gaps(); len(gaps) > 0 {
		t.Errorf("b's session got %d gaps, the first %+v", len(gaps), *gaps[0])
	}
	got := map[string]*Event{}
	for _, ev := range inB.events() {
		got[ev.Subject.Key] = ev
	}
	for key, v := range values {
		ev := got[key]
		switch {
		case ev == nil:
			t.Errorf("b's session never got the %d-byte value of %s", len(v.value), key)
		case v.whole && string(ev.Value) != v.value:
			t.Errorf("%s: %d bytes, want the %d", key, len(ev.Value), len(v.value))
		case !v.whole && len(ev.Value) != 0:
			t.Errorf("%s: %d bytes, want none (over the bound)", key, len(ev.Value))
		}
	}
}

// TestRegionsSingleValueBound: the same on the durable
// path, for a `single` row, whose refused item was never delivered: no
// marker for a `single` delivery, the lease ran out, and the next attempt
// was refused again. encodeDelivery (events/deliver.go:100-110)
// checks the raw value against MaxRemoteValueBytes, then base64-encodes
// it; a 96 KiB binary value makes a delivery item over the queue's 128 KiB
// item bound, which the queue refuses at Push (forward/queue.go:351-365)
// and reports to QueueLosses.Overflow, which, as for any shed `single`
// delivery, makes no marker and leaves the lease to run out. Every attempt
// that goes to b is refused so: with alice's only session in b, q never
// delivers it, nor anything behind it. Expected: the delivery crosses
// (with its value, or without it as one over the bound does).
func TestRegionsSingleValueBound(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	e.put(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	var sb sink
	alice := e.b.r.Open("alice", sb.deliver)
	from := e.a.r.Stats().Changes
	if _, err := e.a.c.Stream("project-1", "jobs").Set(context.Background(), []byte(strings.Repeat("\xff", MaxRemoteValueBytes)), persist.SetOptions{Key: "blob"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a reads the write", func() bool { return e.a.r.Stats().Changes > from })
	e.clk.Advance(CoalesceWindowDefault)
	testwait.Until(t, "the delivery in b", func() (bool, string) {
		return len(sb.all()) >= 1, fmt.Sprintf("a %+v, b %+v", e.a.r.RegionStats(), e.b.r.RegionStats())
	})
	d := sb.all()[0]
	if d.Event == nil || d.Event.Subject.Key != "blob" || len(d.Event.Value) != 0 {
		t.Fatalf("delivery %+v (event %+v), want the set of blob without its value (over the bound)", d, d.Event)
	}
	// Acked, it lets the next through.
	e.write("jobs", "next")
	if err := alice.Ack(context.Background(), "q", d.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the next delivery in b", func() (bool, string) {
		e.clk.Advance(CoalesceWindowDefault)
		return len(sb.all()) >= 2, fmt.Sprint(len(sb.all()))
	})
}

// (Was: a peer's announcements were held without bound: each new token took an entry, a stand-in subscription and, on a new stream, a watcher here for as long as the peer renewed it.)
func TestRegionRemoteTokensBounded(t *testing.T) {
	t.Parallel()
	a, _ := twoRegionsWith(t, regionOpts{maxRemoteTokens: 3})
	ctx := context.Background()
	watch := func(op string, i int) {
		a.r.Sink().Watch(ctx, "b", &forward.Watch{Op: op, Token: fmt.Sprint("project-1/s", i)})
	}
	for i := range 5 {
		watch("add", i)
	}
	if st := a.r.RegionStats(); st.Remote != 3 || st.RemoteByPeer["b"] != 3 || st.RemoteRefused != 2 {
		t.Fatalf("b announced 5 new tokens to a region holding at most 3 of a peer's: %+v, want 3 held and 2 refused", st)
	}
	testwait.Until(t, "a stand-in for each token held", func() (bool, string) {
		return a.r.Stats().Subs == 3 && a.r.Stats().Ready == 3, fmt.Sprintf("%+v", a.r.Stats())
	})
	// Renewing a token held is no new one; dropping one makes room.
	watch("add", 0)
	watch("drop", 0)
	watch("add", 3)
	if st := a.r.RegionStats(); st.Remote != 3 || st.RemoteRefused != 2 {
		t.Fatalf("after a renewal, a drop and a new token: %+v, want 3 held, still 2 refused", st)
	}
	testwait.Until(t, "the stand-ins follow", func() (bool, string) {
		return a.r.Stats().Subs == 3, fmt.Sprintf("%+v", a.r.Stats())
	})
	if n := a.r.region.cfg.MaxRemoteTokens; n != 3 {
		t.Fatalf("MaxRemoteTokens %d", n)
	}
	if g, err := newRegion(RegionConfig{Self: "a", Peers: []string{"b"}, Push: func(string, forward.Item) {}}, newFakeClock()); err != nil || g.cfg.MaxRemoteTokens != MaxRemoteTokensDefault {
		t.Fatalf("zero MaxRemoteTokens: %v, %+v", err, g)
	}
}

// (Was: a region remembered every peer's `single` delivery by (origin, user, subscription) for RemoteEntryTTL without bound, so a peer sending ever new subscription ids for a connected user grew that memory at its send rate.)
func TestRegionRemoteEntriesBounded(t *testing.T) {
	t.Parallel()
	e := newDurableRegionsWith(t, regionOpts{maxRemoteEntries: 2}, "jobs")
	ctx := context.Background()
	e.put(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	var sb sink
	alice := e.b.r.Open("alice", sb.deliver)
	// What a peer holding the forward secret may send b: `single`
	// deliveries for alice of subscriptions it never had.
	forged := func(sub string) *forward.Delivery {
		return encodeDelivery("a", "alice", Delivery{Sub: sub, Mode: ModeSingle, Entry: "project-1/junk#1", Attempt: 1,
			Event: &Event{ID: "project-1/junk#1", Subject: Subject{"project-1", "junk", "k"}, Op: OpSet, Seq: 1, TS: 1}})
	}
	for i := range 2 {
		e.b.r.Sink().Deliver(ctx, "a", forged(fmt.Sprint("junk", i)))
	}
	testwait.Until(t, "b hands out the 2 it may remember of a's", func() (bool, string) {
		return len(sb.all()) == 2, fmt.Sprint(len(sb.all()))
	})
	// A delivery of a subscription remembered takes no new entry.
	e.b.r.Sink().Deliver(ctx, "a", forged("junk0"))
	testwait.Until(t, "b hands out junk0 again", func() (bool, string) {
		return len(sb.all()) == 3, fmt.Sprint(len(sb.all()))
	})
	// a's real delivery of q is a third subscription: refused.
	e.write("jobs", "1")
	testwait.Until(t, "b takes a's delivery of q, or refuses it", func() (bool, string) {
		st := e.b.r.RegionStats()
		return st.RemoteEntriesRefused > 0 || len(sb.all()) > 3, fmt.Sprintf("%+v", st)
	})
	if n := len(sb.all()); n != 3 {
		t.Fatalf("b handed out a's delivery of a third subscription while holding MaxRemoteEntries (2) of a's: %+v", sb.all()[3:])
	}
	// It still comes: a hands it out again at each lease's end, and once
	// the forged ones are RemoteEntryTTL old (b's round forgets them) b
	// takes it.
	var got Delivery
	testwait.Until(t, "q's delivery in b once the forged entries expired", func() (bool, string) {
		e.clk.Advance(LeaseDefault)
		for _, d := range sb.all() {
			if d.Sub == "q" {
				got = d
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", e.b.r.RegionStats())
	})
	if got.Event == nil || got.Event.Subject.Key != "1" || got.Attempt < 2 {
		t.Fatalf("delivery %+v, want the write of 1, handed out again", got)
	}
	if err := alice.Ack(ctx, "q", got.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the ack settles the lease in a", func() (bool, string) {
		return e.a.r.Stats().Acks == 1, fmt.Sprintf("%+v", e.a.r.Stats())
	})
	// Once the entries held are forgotten there is room for a new one
	// again. (b may still hold a forged one re-sent after the other, or
	// q's: time moves on a RemoteEntryTTL per try until b's round has
	// forgotten them, and the new delivery is sent again each try.)
	before := len(sb.all())
	testwait.Until(t, "b hands out a new subscription's delivery", func() (bool, string) {
		if len(sb.all()) > before {
			return true, ""
		}
		e.clk.Advance(RemoteEntryTTL)
		e.b.r.Sink().Deliver(ctx, "a", forged("junk2"))
		return false, fmt.Sprintf("%d, %+v", len(sb.all()), e.b.r.RegionStats())
	})
	if st := e.b.r.RegionStats(); st.RemoteEntriesRefused == 0 {
		t.Fatalf("%+v, want the refusals counted", st)
	}
	if g, err := newRegion(RegionConfig{Self: "a", Peers: []string{"b"}, Push: func(string, forward.Item) {}}, newFakeClock()); err != nil || g.cfg.MaxRemoteEntries != MaxRemoteEntriesDefault {
		t.Fatalf("zero MaxRemoteEntries: %v, %+v", err, g)
	}
}

// (Was: a peer's event whose id began with "@HOME/" reached the home's `single` row as the entry "@HOME/…@PEER", which the home's own session acked in vain: Session.Ack read it as one of its own entries handed out by a peer, and the row's queue stayed blocked behind it.)
func TestRegionsPeerEventIDIsNoEntryName(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	ctx := context.Background()
	e.put(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	var sa sink
	alice := e.a.r.Open("alice", sa.deliver)
	from := e.a.r.Stats().Changes
	for i, id := range []string{"@a/project-1/jobs#1", "project-1/jobs#2"} {
		ev := &Event{ID: id, Subject: Subject{"project-1", "jobs", fmt.Sprint("k", i)}, Op: OpSet, Seq: uint64(i + 1), Value: []byte("v"), TS: 1}
		e.a.r.Sink().Event(ctx, "b", encodeRemote(ev))
	}
	testwait.For(t, "a takes b's well-named event", func() bool { return e.a.r.Stats().Changes > from })
	e.clk.Advance(CoalesceWindowDefault)
	testwait.For(t, "a delivery to alice's session", func() bool { return len(sa.all()) >= 1 })
	d := sa.all()[0]
	if err := alice.Ack(ctx, "q", d.Entry); err != nil {
		t.Fatalf("alice's session got entry %q (event %+v) and cannot ack it: %v", d.Entry, d.Event, err)
	}
	if d.Event == nil || d.Event.ID != "project-1/jobs#2@b" {
		t.Fatalf("first delivery %+v, want b's change project-1/jobs#2", d.Event)
	}
}

// (Was: a peer's ack item settled the `single` delivery in flight whatever the region it came from, one the delivery never went to included: a lease held by a session here was settled by a peer that never had it.)
func TestRegionsAckOnlyFromAPeerHandedTheEntry(t *testing.T) {
	t.Parallel()
	e := newDurableRegions(t, nil, "jobs")
	ctx := context.Background()
	e.put(DurableRow{User: "alice", ID: "q", Anchor: "project-1/jobs", Mode: ModeSingle})
	var sa, sb sink
	inA := e.a.r.Open("alice", sa.deliver) // the first target: the delivery stays home
	e.write("jobs", "1")
	testwait.For(t, "the delivery to alice's session in a", func() bool { return len(sa.all()) == 1 })
	d := sa.all()[0]
	e.a.r.Sink().Ack(ctx, "b", &forward.Ack{UserID: userKey("alice"), SubID: "alice/q", EntryID: d.Entry})
	testwait.Until(t, "a takes b's ack item", func() (bool, string) {
		st := e.a.r.RegionStats()
		return st.AcksIn+st.AcksRefused == 1, fmt.Sprintf("%+v", st)
	})
	if st, rs := e.a.r.RegionStats(), e.a.r.Stats(); st.AcksRefused != 1 || rs.Acks != 0 || rs.Leases != 1 {
		t.Fatalf("b acked %s, which went to a session in a, never to b: a %+v, %+v; want it refused and the lease still held", d.Entry, st, rs)
	}
	if err := inA.Ack(ctx, "q", d.Entry); err != nil {
		t.Fatal(err)
	}

	// A peer that was handed the entry may ack it after its lease went
	// elsewhere: its client did get it.
	inA.Close()
	inB := e.b.r.Open("alice", sb.deliver)
	e.write("jobs", "2")
	testwait.For(t, "the next delivery in b", func() bool { return len(sb.all()) == 1 })
	late := sb.all()[0]
	var sa2 sink
	e.a.r.Open("alice", sa2.deliver)
	e.clk.Advance(LeaseDefault)
	testwait.For(t, "its second attempt, in a", func() bool { return len(sa2.all()) == 1 })
	if err := inB.Ack(ctx, "q", late.Entry); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "b's late ack settles it", func() (bool, string) {
		return e.a.r.Stats().Acks == 2, fmt.Sprintf("%+v, %+v", e.a.r.Stats(), e.a.r.RegionStats())
	})
}

// (Was: a peer's gap markers' counts were taken as sent, and two of them in one window added up past the largest int: the session got a gap with a negative count.)
func TestRegionsPeerGapCountBounded(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, b := twoRegionsWith(t, regionOpts{clk: clk})
	ctx := context.Background()
	var got sink
	an, _ := ParseAnchor("project-1/log")
	if err := b.r.Open("bob", got.deliver).Subscribe(ctx, "log", an, Filter{}); err != nil {
		t.Fatal(err)
	}
	huge := math.MaxInt/2 + 1
	for range 2 {
		v, _ := json.Marshal(remoteValue{Reason: string(ReasonBacklogOverflow), Count: huge})
		b.r.Sink().Event(ctx, "a", &forward.Event{Family: "kv", ID: "gap:project-1/log#1", TS: 1, KV: &forward.KVChange{KVKey: "project-1/log", Op: remoteGap, Value: v}})
	}
	// An event after them: once the loop has taken it, it took both
	// markers, in the window the clock has not ended yet.
	from := b.r.Stats().Changes
	b.r.Sink().Event(ctx, "a", encodeRemote(&Event{ID: "project-1/log#1", Subject: Subject{"project-1", "log", "k"}, Op: OpSet, Seq: 1, TS: 1}))
	testwait.For(t, "b takes the fence", func() bool { return b.r.Stats().Changes > from })
	clk.Advance(CoalesceWindowDefault)
	testwait.For(t, "the gap", func() bool { return len(got.gaps()) == 1 })
	if g := got.gaps()[0]; g.Count < 1 {
		t.Fatalf("two markers of %d lost events each came to the session as a gap of %d", huge, g.Count)
	}
}
