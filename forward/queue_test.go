package forward

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOneRequestPerWindow(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, nil)
	for _, n := range []string{"a", "b", "c"} {
		q.Push("us", del("s1", n))
	}
	clk.Advance(FlushDefault - time.Millisecond)
	if s := q.PeerStats("us"); s.InFlight != 0 || s.HeldItems != 3 {
		t.Fatalf("shipped before the window closed: %+v", s)
	}
	clk.Advance(time.Millisecond)
	b := rec.next(t)
	if got := names(t, b.items); !equal(got, []string{"a:write", "b:write", "c:write"}) {
		t.Fatalf("batch = %v", got)
	}
	idle(t, q, "us", 1)
	if s := q.PeerStats("us"); s.Batches != 1 || s.SentItems != 3 || s.HeldItems != 0 {
		t.Fatalf("stats = %+v", s)
	}
	// The body is the batch, and decodes to the same items.
	dec, err := DecodeBatch(b.body)
	if err != nil {
		t.Fatal(err)
	}
	if dec.From != "eu" || !equal(names(t, dec.Items), []string{"a:write", "b:write", "c:write"}) {
		t.Fatalf("decoded %q %v", dec.From, names(t, dec.Items))
	}
}

func TestOneBatchPerPeer(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, nil)
	q.Push("us", del("s1", "a"))
	q.Push("ap", del("s1", "b"))
	q.Push("us", del("s1", "c"))
	q.Push("ap", del("s1", "d"))
	clk.Advance(FlushDefault)
	got := map[string][]string{}
	for range 2 {
		b := rec.next(t)
		if _, dup := got[b.peer]; dup {
			t.Fatalf("two batches to %s", b.peer)
		}
		got[b.peer] = names(t, b.items)
	}
	if !equal(got["us"], []string{"a:write", "c:write"}) || !equal(got["ap"], []string{"b:write", "d:write"}) {
		t.Fatalf("batches = %v", got)
	}
	idle(t, q, "us", 1)
	idle(t, q, "ap", 1)
	if s := q.Stats(); s.Batches != 2 || s.SentItems != 4 || s.HeldItems != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestEarlyShipOnItemBound(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) { c.MaxBatchItems = 3 })
	q.Push("us", del("s1", "a"))
	q.Push("us", del("s1", "b"))
	if s := q.PeerStats("us"); s.InFlight != 0 {
		t.Fatalf("shipped under the bound: %+v", s)
	}
	q.Push("us", del("s1", "c"))
	// No clock advance: the third item closes the batch.
	if got := names(t, rec.next(t).items); len(got) != 3 {
		t.Fatalf("batch = %v", got)
	}
}

func TestEarlyShipOnByteBound(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	big := func(n string) *Delivery {
		d := del("s1", n)
		d.Event = []byte(`{"id":"` + n + `","op":"write","data":"` + strings.Repeat("x", 400) + `"}`)
		return d
	}
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) { c.MaxBatchBytes = 1000 })
	q.Push("us", big("a"))
	q.Push("us", big("b"))
	if s := q.PeerStats("us"); s.InFlight != 0 || s.HeldBytes >= 1000 {
		t.Fatalf("shipped under the bound: %+v", s)
	}
	q.Push("us", big("c"))
	if got := names(t, rec.next(t).items); !equal(got, []string{"a:write", "b:write", "c:write"}) {
		t.Fatalf("batch = %v", got)
	}
}

func TestBatchClosesAtBoundsLeavingTheRest(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) { c.MaxBatchItems = 2 })
	rec.gate = make(chan struct{})
	q.Push("us", del("s1", "a"))
	q.Push("us", del("s1", "b")) // ships a, b; the send blocks
	rec.next(t)
	for _, n := range []string{"c", "d", "e"} {
		q.Push("us", del("s1", n))
	}
	rec.mu.Lock()
	close(rec.gate)
	rec.gate = nil
	rec.mu.Unlock()
	// c, d already fill a batch: it ships as soon as the first returns.
	if got := names(t, rec.next(t).items); !equal(got, []string{"c:write", "d:write"}) {
		t.Fatalf("second batch = %v", got)
	}
	idle(t, q, "us", 2)
	clk.Advance(FlushDefault)
	if got := names(t, rec.next(t).items); !equal(got, []string{"e:write"}) {
		t.Fatalf("third batch = %v", got)
	}
}

func TestShedsReported(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	var shed []string
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxQueued = 3
		c.OnOverflow = func(peer string, dropped []Item) []Item {
			if peer != "us" {
				t.Errorf("overflow for %s", peer)
			}
			shed = append(shed, names(t, dropped)...)
			return nil
		}
	})
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		q.Push("us", del("s1", n))
	}
	if !equal(shed, []string{"a:write", "b:write"}) {
		t.Fatalf("shed = %v", shed)
	}
	s := q.PeerStats("us")
	if s.Shed != 2 || s.Overflows != 2 || s.HeldItems != 3 {
		t.Fatalf("stats = %+v", s)
	}
	clk.Advance(FlushDefault)
	if got := names(t, rec.next(t).items); !equal(got, []string{"c:write", "d:write", "e:write"}) {
		t.Fatalf("batch = %v", got)
	}
}

func TestByteSheddingIndependentOfCount(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	size := int64(len(AppendJSON(nil, del("s1", "a"))))
	var shed []string
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxQueuedBytes = 2 * size // room for two, far under the count bound
		c.OnOverflow = func(_ string, dropped []Item) []Item {
			shed = append(shed, names(t, dropped)...)
			return nil
		}
	})
	q.Push("us", del("s1", "a"))
	q.Push("us", del("s1", "b"))
	if len(shed) != 0 {
		t.Fatalf("shed at the bound: %v", shed)
	}
	q.Push("us", del("s1", "c"))
	if !equal(shed, []string{"a:write"}) {
		t.Fatalf("shed = %v", shed)
	}
	if s := q.PeerStats("us"); s.HeldBytes != 2*size || s.HeldItems != 2 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestFailedSendDoesNotLoseTheRest(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	rec.fail["us"] = errors.New("connection refused")
	var mu sync.Mutex
	shipped := map[string]error{}
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.OnShipped = func(peer string, _ []Item, err error) {
			mu.Lock()
			shipped[peer] = err
			mu.Unlock()
		}
	})
	q.Push("us", del("s1", "a"))
	q.Push("ap", del("s1", "b"))
	clk.Advance(FlushDefault)
	got := map[string][]string{}
	for range 2 {
		b := rec.next(t)
		got[b.peer] = names(t, b.items)
	}
	if !equal(got["ap"], []string{"b:write"}) || !equal(got["us"], []string{"a:write"}) {
		t.Fatalf("batches = %v", got)
	}
	idle(t, q, "us", 1)
	idle(t, q, "ap", 1)
	if s := q.PeerStats("us"); s.LostBatches != 1 || s.LostItems != 1 {
		t.Fatalf("us stats = %+v", s)
	}
	if s := q.PeerStats("ap"); s.LostBatches != 0 {
		t.Fatalf("ap stats = %+v", s)
	}
	mu.Lock()
	if shipped["us"] == nil || shipped["ap"] != nil {
		t.Errorf("OnShipped saw %v", shipped)
	}
	mu.Unlock()
	// The failed batch is not retried, and the peer keeps working once its
	// backoff is over.
	rec.mu.Lock()
	delete(rec.fail, "us")
	rec.mu.Unlock()
	q.Push("us", del("s1", "c"))
	clk.Advance(BackoffMinDefault)
	if got := names(t, rec.next(t).items); !equal(got, []string{"c:write"}) {
		t.Fatalf("next batch = %v", got)
	}
	idle(t, q, "us", 2)
	if s := q.PeerStats("us"); s.Batches != 2 || s.SentItems != 2 || s.LostBatches != 1 || s.HeldItems != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestMidFlightArrivalsGetTheNextWindow(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) { c.MaxInFlight = 1 })
	gate := make(chan struct{})
	rec.gate = gate
	q.Push("us", del("s1", "a"))
	clk.Advance(FlushDefault)
	rec.next(t)
	q.Push("us", del("s1", "b"))
	// The window that opened with b closes while a is still in flight, and
	// a holds the only send slot: nothing ships.
	clk.Advance(FlushDefault)
	if s := q.PeerStats("us"); s.Batches != 1 || s.InFlightBatches != 1 || s.HeldItems != 1 {
		t.Fatalf("stats = %+v", s)
	}
	rec.mu.Lock()
	rec.gate = nil
	rec.mu.Unlock()
	close(gate)
	idle(t, q, "us", 1)
	// b gets a window of its own from the moment a returned.
	clk.Advance(FlushDefault - time.Millisecond)
	if s := q.PeerStats("us"); s.Batches != 1 || s.HeldItems != 1 {
		t.Fatalf("stats = %+v", s)
	}
	clk.Advance(time.Millisecond)
	if got := names(t, rec.next(t).items); !equal(got, []string{"b:write"}) {
		t.Fatalf("batch = %v", got)
	}
}

// TestArrivalsShipInTheirWindowWhileASlotIsFree: with two send slots, a
// window that closes while one batch is in flight ships at once; with
// both busy, the next waits.
func TestArrivalsShipInTheirWindowWhileASlotIsFree(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) { c.MaxInFlight = 2 })
	rec.gate = make(chan struct{}) // released by the cleanup's Stop
	for i, n := range []string{"a", "b", "c"} {
		q.Push("us", del("s1", n))
		clk.Advance(FlushDefault)
		s := q.PeerStats("us")
		want := uint64(min(i+1, 2))
		if s.Batches != want || s.InFlightBatches != int(want) || s.HeldItems != i+1-int(want) {
			t.Fatalf("after %s: stats = %+v", n, s)
		}
	}
	// Two sends started together reach Send in either order.
	if a, b := rec.next(t), rec.next(t); a.seq+b.seq != 3 || a.seq*b.seq != 2 {
		t.Fatalf("batch seqs %d and %d, want 1 and 2", a.seq, b.seq)
	}
}

// TestNothingSentAfterStop: Stop drains what was held ("a"), and after it
// nothing is taken or sent.
func TestNothingSentAfterStop(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, nil)
	q.Push("us", del("s1", "a"))
	if err := q.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := rec.next(t); len(b.items) != 1 {
		t.Fatalf("drained batch has %d items, want 1", len(b.items))
	}
	clk.Advance(FlushDefault)
	q.Push("us", del("s1", "b"))
	q.Push("new-peer", del("s1", "c"))
	q.Flush("us")
	if err := q.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(FlushDefault)
	if s := q.Stats(); s.Discarded != 2 || s.Batches != 1 || s.HeldItems != 0 {
		t.Fatalf("stats = %+v", s)
	}
	if err := q.Stop(context.Background()); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

func TestStopCancelsASendThatOutlivesItsDeadline(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, nil)
	rec.gate = make(chan struct{}) // never released
	q.Push("us", del("s1", "a"))
	q.Flush("us")
	rec.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop = %v", err)
	}
	if s := q.PeerStats("us"); s.LostBatches != 1 || s.InFlight != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestOverflowReplacementsQueuedWithoutSheddingAgain(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxQueued = 2
		c.OnOverflow = func(_ string, dropped []Item) []Item {
			out := make([]Item, 0, len(dropped))
			for _, it := range dropped {
				d := *it.(*Delivery)
				d.Event = []byte(`{"id":"a","op":"gap"}`)
				out = append(out, &d)
			}
			return out
		}
	})
	q.Push("us", del("s1", "a"))
	q.Push("us", del("s1", "b"))
	q.Push("us", del("s1", "c"))
	if s := q.PeerStats("us"); s.Shed != 1 || s.Replacements != 1 || s.HeldItems != 3 {
		t.Fatalf("stats = %+v", s)
	}
	clk.Advance(FlushDefault)
	if got := names(t, rec.next(t).items); !equal(got, []string{"b:write", "c:write", "a:gap"}) {
		t.Fatalf("batch = %v", got)
	}
}

func TestDeliveriesShedBeforeMarkers(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	var shed []string
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxQueued = 3
		c.OnOverflow = func(_ string, dropped []Item) []Item {
			shed = append(shed, names(t, dropped)...)
			return nil
		}
	})
	q.Push("us", del("s1", "m1:gap"))
	q.Push("us", del("s1", "a"))
	q.Push("us", del("s1", "m2:gap"))
	q.Push("us", del("s1", "b")) // over: a goes, not the older m1
	q.Push("us", del("s1", "c")) // over: b goes
	if !equal(shed, []string{"a:write", "b:write"}) {
		t.Fatalf("shed = %v", shed)
	}
	// Push order survives the split between deliveries and markers.
	clk.Advance(FlushDefault)
	if got := names(t, rec.next(t).items); !equal(got, []string{"m1:gap", "m2:gap", "c:write"}) {
		t.Fatalf("batch = %v", got)
	}
	idle(t, q, "us", 1)

	// Markers go last, oldest first, once nothing else is held.
	shed = nil
	for _, n := range []string{"m3:gap", "m4:gap", "m5:gap", "m6:gap"} {
		q.Push("us", del("s1", n))
	}
	if !equal(shed, []string{"m3:gap"}) {
		t.Fatalf("shed = %v", shed)
	}
}

func TestPushAllocatesNothingBeyondTheItem(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxQueued = 100
		c.OnOverflow = func(string, []Item) []Item { return nil }
	})
	items := make([]Item, 256)
	for i := range items {
		items[i] = del("s1", "a")
	}
	for _, it := range items { // reach the bound, arm the window once
		q.Push("us", it)
	}
	i := 0
	allocs := testing.AllocsPerRun(10000, func() {
		q.Push("us", items[i%len(items)])
		i++
	})
	// Encodings are packed into shared blocks, so the average rounds to 0.
	if allocs != 0 {
		t.Fatalf("push allocates %.0f times", allocs)
	}
}

func TestConfigValidation(t *testing.T) {
	send := func(context.Context, *Outbound) error { return nil }
	for name, cfg := range map[string]QueueConfig{
		"no from":  {Send: send},
		"no send":  {From: "eu"},
		"negative": {From: "eu", Send: send, MaxQueued: -1},
	} {
		if _, err := NewPeerQueue(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// (Was: no backoff; counted per failed send, one outage failing 25 sends in flight would make the first retry wait BackoffMax.)
func TestSendsFailingTogetherStartTheBackoffOnce(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	outage := make(chan struct{})
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxBatchItems = 10
		c.Send = func(ctx context.Context, b *Outbound) error {
			if err := rec.send(ctx, b); err != nil {
				return err
			}
			select {
			case <-outage:
				return errors.New("connection reset")
			default:
				return nil
			}
		}
	})
	gate := make(chan struct{})
	rec.gate = gate
	for i := range 30 {
		q.Push("us", del("s1", fmt.Sprint(i)))
	}
	for range 3 {
		rec.next(t)
	}
	// The peer goes down with three sends in flight: all three fail.
	close(outage)
	rec.mu.Lock()
	rec.gate = nil
	rec.mu.Unlock()
	close(gate)
	idle(t, q, "us", 3)
	q.Push("us", del("s1", "after"))
	clk.Advance(BackoffMinDefault - time.Millisecond)
	if st := q.PeerStats("us"); st.LostBatches != 3 || st.Batches != 3 || st.HeldItems != 1 {
		t.Fatalf("stats before the backoff ended = %+v", st)
	}
	clk.Advance(time.Millisecond)
	if got := names(t, rec.next(t).items); !equal(got, []string{"after:write"}) {
		t.Fatalf("probe = %v", got)
	}
}
