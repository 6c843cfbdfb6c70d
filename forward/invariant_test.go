package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The tests in this file drive a queue through scripts of pushes, flushes,
// clock advances and settles (a send answered ok or failed), with the fake
// clock and a send that blocks until the script settles it. Between two
// steps nothing runs: every batch taken has reached Send and waits there, so
// a script is deterministic and its model of what each peer received is
// exact.

// heldSend is one call to Send, waiting for the script's verdict.
type heldSend struct {
	peer    string
	taken   int // take order on its peer, from 1 (Outbound.Seq)
	items   []Item
	verdict chan error
}

// script owns a queue whose sends it settles by hand.
type script struct {
	t       *testing.T
	clk     *fakeClock
	q       *PeerQueue
	g       *GapPolicy
	arrived chan *heldSend
	held    []*heldSend       // waiting for a verdict, in arrival order
	taken   map[string]int    // batches that reached Send, per peer
	settled map[string]uint64 // sends settled, per peer

	// The model.
	takenAtPush map[Item]int // batches taken on the item's peer before it was pushed
	peerOf      map[Item]string
	received    map[string][]*heldSend // per peer: batches whose send succeeded
	lost        []Item                 // items of failed sends
	shed        []Item                 // items handed to OnOverflow
	pushed      []Item
}

func newScript(t *testing.T, mod func(*QueueConfig)) *script {
	t.Helper()
	s := &script{
		t: t, clk: newFakeClock(), arrived: make(chan *heldSend, 64),
		taken: map[string]int{}, settled: map[string]uint64{},
		takenAtPush: map[Item]int{}, peerOf: map[Item]string{}, received: map[string][]*heldSend{},
	}
	s.g = NewGapPolicy(GapConfig{Clock: s.clk, Logger: slog.New(slog.DiscardHandler)})
	cfg := QueueConfig{
		From: "eu", Clock: s.clk, Logger: slog.New(slog.DiscardHandler),
		Send: func(ctx context.Context, b *Outbound) error {
			h := &heldSend{peer: b.Peer, taken: int(b.Seq), items: append([]Item(nil), b.Items...), verdict: make(chan error, 1)}
			s.arrived <- h
			select {
			case err := <-h.verdict:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		OnOverflow: func(peer string, dropped []Item) []Item {
			s.shed = append(s.shed, dropped...)
			return s.g.Overflow(peer, dropped)
		},
		OnTaken: s.g.Taken,
		OnLost:  s.g.Lost,
	}
	if mod != nil {
		mod(&cfg)
	}
	q := startQueue(t, cfg)
	s.q = q
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = q.Stop(ctx)
	})
	return s
}

// quiesce waits until every batch taken has reached Send.
func (s *script) quiesce() {
	s.t.Helper()
	for _, peer := range []string{"us", "ap"} {
		for s.taken[peer] < int(s.q.PeerStats(peer).Batches) {
			select {
			case h := <-s.arrived:
				s.taken[h.peer]++
				s.held = append(s.held, h)
			case <-time.After(10 * time.Second):
				s.t.Fatalf("a batch taken for %s never reached Send", peer)
			}
		}
	}
}

func (s *script) push(peer string, it Item) {
	s.t.Helper()
	s.takenAtPush[it] = int(s.q.PeerStats(peer).Batches)
	s.peerOf[it] = peer
	s.pushed = append(s.pushed, it)
	s.q.Push(peer, it)
	s.quiesce()
}

func (s *script) advance(d time.Duration) {
	s.t.Helper()
	s.clk.Advance(d)
	s.quiesce()
}

func (s *script) flush(peer string) {
	s.t.Helper()
	s.q.Flush(peer)
	s.quiesce()
}

// settle answers the i-th held send and waits until the queue has dealt
// with the answer (and shipped whatever that released).
func (s *script) settle(i int, err error) {
	s.t.Helper()
	h := s.held[i]
	s.held = append(s.held[:i], s.held[i+1:]...)
	if err == nil {
		s.received[h.peer] = append(s.received[h.peer], h)
	} else {
		s.lost = append(s.lost, h.items...)
	}
	s.settled[h.peer]++
	h.verdict <- err
	want := s.settled[h.peer]
	waitQueue(s.t, s.q, func() bool {
		st := s.q.PeerStats(h.peer)
		return st.Batches-uint64(st.InFlightBatches) == want
	})
	s.quiesce()
}

// drain answers every send ok and flushes until nothing is held.
func (s *script) drain() {
	s.t.Helper()
	for range 10_000 {
		if len(s.held) > 0 {
			s.settle(0, nil)
			continue
		}
		st := s.q.Stats()
		if st.HeldItems == 0 && st.InFlightBatches == 0 {
			return
		}
		s.advance(FlushDefault)
	}
	s.t.Fatal("queue did not drain")
}

// evID is the event id of a delivery (a marker keeps its delivery's).
func evID(t *testing.T, d *Delivery) string {
	t.Helper()
	var ev struct{ ID string }
	if err := json.Unmarshal(d.Event, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.ID
}

// uncovered lists the shed or lost deliveries (not ackRequired, not
// markers) that no marker of their subscription follows on their peer: a
// marker in a successful batch taken after the delivery was pushed.
func (s *script) uncovered() []string {
	s.t.Helper()
	var out []string
	check := func(it Item, how string) {
		d, ok := it.(*Delivery)
		if !ok || d.AckRequired || IsGapMarker(d) {
			return
		}
		peer := s.peerOf[it]
		for _, b := range s.received[peer] {
			if b.taken <= s.takenAtPush[it] {
				continue
			}
			for _, r := range b.items {
				if IsGapMarker(r) && r.(*Delivery).SubID == d.SubID {
					return
				}
			}
		}
		out = append(out, fmt.Sprintf("%s %s/%s (%s)", how, peer, d.SubID, evID(s.t, d)))
	}
	for _, it := range s.shed {
		check(it, "shed")
	}
	for _, it := range s.lost {
		check(it, "lost")
	}
	return out
}

// TestShedWhileMarkerInFlightGetsItsOwnMarker is the smallest case of a
// shed delivery that went without a marker when a marker's slot freed only
// once its send returned: i5 is shed while the marker for i2 is in flight.
// One send in flight per peer, as the queue had then.
func TestShedWhileMarkerInFlightGetsItsOwnMarker(t *testing.T) {
	s := newScript(t, func(c *QueueConfig) {
		c.MaxBatchItems = 1
		c.MaxQueued = 2
		c.MaxInFlight = 1
	})
	s.push("us", del("s0", "i1"))
	for _, n := range []string{"i2", "i3", "i4"} {
		s.push("us", del("s1", n))
	}
	for range 3 {
		s.settle(0, nil)
	}
	// The marker for i2 is in flight now.
	if got := names(t, s.held[0].items); !equal(got, []string{"i2:gap"}) {
		t.Fatalf("in flight: %v", got)
	}
	for _, n := range []string{"i5", "i6", "i7"} {
		s.push("us", del("s1", n))
	}
	if got := names(t, s.shed); !equal(got, []string{"i2:write", "i5:write"}) {
		t.Fatalf("shed %v", got)
	}
	s.drain()
	if u := s.uncovered(); len(u) > 0 {
		t.Fatalf("without a marker: %v", u)
	}
	if gs := s.g.Stats(); gs.Markers != 2 || gs.Covered != 2 {
		t.Fatalf("gap stats = %+v", gs)
	}
}

// TestEveryLossFollowedByAMarker runs generated scripts against the queue
// and its gap policy and checks, on each peer, that every shed non-ack
// delivery is followed by a marker for its subscription, that the
// ackRequired ones were reported instead, and that every pushed item was
// either received or reported.
func TestEveryLossFollowedByAMarker(t *testing.T) {
	runs := 200
	if testing.Short() {
		runs = 40
	}
	for run := range runs {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(run), 12))
			runScript(t, rng)
		})
	}
}

// markerMax bounds a generated marker's encoding, so the byte bound can
// be set to hold one marker per subscription: a marker is shed only when
// nothing else is left, and a shed marker's deliveries go unnamed.
const markerMax = 200

func runScript(t *testing.T, rng *rand.Rand) {
	subs := 1 + rng.IntN(4)
	cfgDesc := ""
	s := newScript(t, func(c *QueueConfig) {
		c.MaxBatchItems = 1 + rng.IntN(4)
		c.MaxQueued = subs + 1 + rng.IntN(6)
		c.MaxInFlight = 1 + rng.IntN(3)
		if rng.IntN(2) == 0 {
			c.MaxQueuedBytes = int64(subs*markerMax + rng.IntN(1500))
		}
		if rng.IntN(2) == 0 {
			c.MaxBatchBytes = int64(100 + rng.IntN(600))
		}
		cfgDesc = fmt.Sprintf("subs %d, batch %d/%dB, queued %d/%dB, in flight %d",
			subs, c.MaxBatchItems, c.MaxBatchBytes, c.MaxQueued, c.MaxQueuedBytes, c.MaxInFlight)
	})
	var steps []string
	defer func() {
		if t.Failed() {
			t.Logf("config: %s\nsteps: %s", cfgDesc, strings.Join(steps, " "))
		}
	}()
	n := 0
	for range 40 + rng.IntN(80) {
		peer := []string{"us", "ap"}[rng.IntN(2)]
		switch r := rng.IntN(100); {
		case r < 60:
			n++
			name := fmt.Sprintf("i%d", n)
			var it Item
			switch k := rng.IntN(20); {
			case k == 0:
				it = &Ack{UserID: 1, SubID: "s0", EntryID: name}
			default:
				d := del(fmt.Sprintf("s%d", rng.IntN(subs)), name)
				if k < 3 {
					d.AckRequired = true
				}
				if rng.IntN(4) == 0 {
					d.Event = json.RawMessage(fmt.Sprintf(`{"id":%q,"op":"write","data":%q}`, name, strings.Repeat("x", rng.IntN(300))))
				}
				it = d
			}
			steps = append(steps, "push:"+peer+":"+name)
			s.push(peer, it)
		case r < 65:
			steps = append(steps, "flush:"+peer)
			s.flush(peer)
		case r < 78:
			d := time.Duration(rng.IntN(int(2 * FlushDefault)))
			steps = append(steps, "advance:"+d.String())
			s.advance(d)
		default:
			if len(s.held) == 0 {
				continue
			}
			i := rng.IntN(len(s.held))
			var err error
			if rng.IntN(10) < failTenths {
				err = errors.New("peer unreachable")
			}
			steps = append(steps, fmt.Sprintf("settle:%d:%v", i, err == nil))
			s.settle(i, err)
		}
	}
	steps = append(steps, "drain")
	s.drain()

	if u := s.uncovered(); len(u) > 0 {
		t.Errorf("%d losses with no marker after them: %v", len(u), u)
	}
	gs := s.g.Stats()
	if gs.MarkersShed != 0 {
		t.Errorf("markers were shed (%d): the bounds were meant to hold one per subscription", gs.MarkersShed)
	}
	// ackRequired deliveries are reported (shed ones to OnOverflow, lost
	// ones to OnLost), never marked.
	var acks uint64
	for _, it := range append(append([]Item(nil), s.shed...), s.lost...) {
		if d, ok := it.(*Delivery); ok && d.AckRequired {
			acks++
		}
	}
	if gs.AckRequired != acks {
		t.Errorf("gap policy saw %d ackRequired losses, the script %d", gs.AckRequired, acks)
	}
	// Every pushed item was received once, or shed, or lost.
	seen := map[Item]int{}
	for _, bs := range s.received {
		for _, b := range bs {
			for _, it := range b.items {
				seen[it]++
			}
		}
	}
	for _, it := range append(append([]Item(nil), s.shed...), s.lost...) {
		seen[it]++
	}
	for _, it := range s.pushed {
		if seen[it] != 1 {
			t.Errorf("%s seen %d times", names(t, []Item{it}), seen[it])
		}
	}
}

// failTenths is how many settles in ten fail.
const failTenths = 3

// TestFailedSendBecomesMarkers: a batch whose send fails has the outcome of
// a shed for what it carried. Its deliveries get markers (one per
// subscription), its marker is queued again, its ackRequired delivery is
// reported, all in the next batch, and the stats of the queue and of the
// policy say so.
func TestFailedSendBecomesMarkers(t *testing.T) {
	s := newScript(t, func(c *QueueConfig) { c.MaxQueued = 5 })
	ack := del("s3", "c1")
	ack.AckRequired = true
	// s4's marker: the sixth push over a bound of five sheds d1.
	for _, it := range []Item{del("s4", "d1"), del("s1", "a1"), del("s1", "a2"), del("s2", "b1"), ack} {
		s.push("us", it)
	}
	s.push("us", &Ack{UserID: 1, SubID: "s9", EntryID: "e1"})
	s.advance(FlushDefault)
	if got := names(t, s.held[0].items); !equal(got, []string{"a1:write", "a2:write", "b1:write", "c1:write", "ack", "d1:gap"}) {
		t.Fatalf("first batch = %v", got)
	}
	if st := s.q.PeerStats("us"); st.Shed != 1 || st.Replacements != 1 {
		t.Fatalf("stats before the failure = %+v", st)
	}
	s.settle(0, errors.New("connection reset"))

	st := s.q.PeerStats("us")
	if st.LostBatches != 1 || st.LostItems != 6 || st.LostReplacements != 3 || st.HeldItems != 3 {
		t.Fatalf("queue stats = %+v", st)
	}
	gs := s.g.Stats()
	if gs.LostBatches != 1 || gs.Lost != 6 || gs.Requeued != 1 || gs.AckRequired != 1 || gs.NonDelivery != 1 || gs.Markers != 3 {
		t.Fatalf("gap stats = %+v", gs)
	}
	// The peer backs off after the failure; the markers ship when it ends.
	s.advance(BackoffMinDefault - time.Millisecond)
	if len(s.held) != 0 {
		t.Fatalf("sent during the backoff: %v", names(t, s.held[0].items))
	}
	s.advance(time.Millisecond)
	b := s.held[0].items
	if got := names(t, b); !equal(got, []string{"a1:gap", "b1:gap", "d1:gap"}) {
		t.Fatalf("next batch = %v", got)
	}
	for _, it := range b[:2] {
		if r := topLevel(it.(*Delivery).Event, "reason"); string(r) != `"send_failed"` {
			t.Fatalf("reason of a lost delivery's marker = %s", r)
		}
	}
	s.drain()
	if u := s.uncovered(); len(u) > 0 {
		t.Fatalf("without a marker: %v", u)
	}
}
