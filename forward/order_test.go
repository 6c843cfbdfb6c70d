package forward

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// numbered is a batch body with its place in the sender's order.
func numbered(t *testing.T, epoch, seq, base uint64, items ...Item) []byte {
	t.Helper()
	return bytes.Replace(batchBody("eu", items...), []byte(`,"items":[`),
		fmt.Appendf(nil, `,"epoch":%d,"seq":%d,"base":%d,"items":[`, epoch, seq, base), 1)
}

func TestReceiverOrdersNumberedBatches(t *testing.T) {
	tr := newTestReceiver(t, nil)
	now := tr.clk.Now().Unix()
	nonce := uint64(0)
	post := func(body []byte) chan int {
		nonce++
		req := signedReq{peer: "eu", secret: secretEU, ts: now, nonce: nonce, body: body}
		done := make(chan int, 1)
		go func() {
			code, _ := tr.do(t, req)
			done <- code
		}()
		return done
	}
	expect := func(what string, c chan int, want int) {
		t.Helper()
		select {
		case code := <-c:
			if code != want {
				t.Fatalf("%s: status %d, want %d", what, code, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer", what)
		}
	}
	waitsForItsTurn := func(what string) {
		t.Helper()
		testwait.For(t, what, func() bool { return tr.clk.waiting() == 1 })
	}

	// 2 arrives before 1: it waits, then goes once 1 is applied.
	c2 := post(numbered(t, 10, 2, 1, del("b2", "x")))
	waitsForItsTurn("2 waits for 1")
	expect("1", post(numbered(t, 10, 1, 1, del("b1", "x"))), 200)
	expect("2", c2, 200)

	// 4 waits for 3, which does not come: after OrderWait 4 goes, and 3
	// is stale when it comes (its sender counts it lost).
	c4 := post(numbered(t, 10, 4, 3, del("b4", "x")))
	waitsForItsTurn("4 waits for 3")
	tr.clk.Advance(OrderWaitDefault)
	expect("4", c4, 200)
	expect("late 3", post(numbered(t, 10, 3, 3, del("b3", "x"))), 409)

	// 6 waits for 5; 7's base says 5 has returned at the sender, so 6
	// goes at once, then 7.
	c6 := post(numbered(t, 10, 6, 5, del("b6", "x")))
	waitsForItsTurn("6 waits for 5")
	c7 := post(numbered(t, 10, 7, 6, del("b7", "x")))
	expect("6", c6, 200)
	expect("7", c7, 200)

	// 10 waits for 8 and 9. 8 comes halfway through OrderWait, 9 after
	// more than OrderWait in all: 10 does not give up on 9, since the line
	// moved in between.
	c10 := post(numbered(t, 10, 10, 8, del("b10", "x")))
	waitsForItsTurn("10 waits for 8")
	tr.clk.Advance(OrderWaitDefault / 2)
	expect("8", post(numbered(t, 10, 8, 8, del("b8", "x"))), 200)
	tr.clk.Advance(OrderWaitDefault/2 + time.Millisecond)
	expect("9", post(numbered(t, 10, 9, 8, del("b9", "x"))), 200)
	expect("10", c10, 200)

	// A new epoch (a restarted sender) starts over; the old run is stale.
	expect("new run", post(numbered(t, 11, 1, 1, del("n1", "x"))), 200)
	expect("old run", post(numbered(t, 10, 11, 11, del("b11", "x"))), 409)

	calls, _ := tr.log.snapshot()
	want := []string{"delivery:b1", "delivery:b2", "delivery:b4", "delivery:b6", "delivery:b7",
		"delivery:b8", "delivery:b9", "delivery:b10", "delivery:n1"}
	if !equal(calls, want) {
		t.Fatalf("sink saw %v, want %v", calls, want)
	}
	if st := tr.recv.Stats(); st.Stale != 2 || st.Skipped != 1 || st.Accepted != 9 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestReceiverRefusesBadNumbering(t *testing.T) {
	tr := newTestReceiver(t, nil)
	now := tr.clk.Now().Unix()
	for i, body := range [][]byte{
		numbered(t, 0, 1, 1, del("s", "a")), // no epoch
		numbered(t, 5, 1, 0, del("s", "a")), // no base
		numbered(t, 5, 1, 2, del("s", "a")), // base above seq
		numbered(t, 5, 0, 1, del("s", "a")), // base without seq
	} {
		req := signedReq{peer: "eu", secret: secretEU, ts: now, nonce: uint64(i + 1), body: body}
		if code, out := tr.do(t, req); code != 400 {
			t.Fatalf("%s: status %d %s", body, code, out)
		}
	}
}

// TestDelayedPeerDrainsSeveralBatchesPerRoundTrip runs a queue, a sender
// and a receiver on loopback behind a front that holds every request until
// the test lets it go: a peer with a long round trip. Five full batches go
// out in one round trip, reach the receiver in reverse order, and are
// applied in push order.
func TestDelayedPeerDrainsSeveralBatchesPerRoundTrip(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) {
		c.Clock = nil
		c.OrderWait = time.Hour // order comes from the numbering, not from a timeout
	})
	arrived := make(chan chan struct{}, 16)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release := make(chan struct{})
		arrived <- release
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		tr.recv.ServeHTTP(w, r)
	}))
	defer front.Close()
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": front.URL}})
	q := startQueue(t, QueueConfig{From: "eu", Send: s.Send, MaxBatchItems: 10, MaxInFlight: 5, Logger: slog.New(slog.DiscardHandler)})
	defer q.Stop(context.Background())

	var want []string
	for i := range 50 {
		sub := fmt.Sprintf("i%02d", i)
		q.Push("us", del(sub, "x"))
		want = append(want, "delivery:"+sub)
	}
	var held []chan struct{}
	for range 5 {
		select {
		case r := <-arrived:
			held = append(held, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d requests in flight, want 5", len(held))
		}
	}
	if st := q.PeerStats("us"); st.InFlightBatches != 5 || st.InFlight != 50 || st.HeldItems != 0 {
		t.Fatalf("stats with the peer holding every request = %+v", st)
	}
	for i := len(held) - 1; i >= 0; i-- {
		close(held[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	calls, _ := tr.log.snapshot()
	if !equal(calls, want) {
		t.Fatalf("sink saw %v", calls)
	}
	if st, rs := q.PeerStats("us"), tr.recv.Stats(); st.LostBatches != 0 || rs.Accepted != 5 || rs.Stale != 0 || rs.Skipped != 0 {
		t.Fatalf("queue %+v, receiver %+v", st, rs)
	}
}

// TestBatchOverTheReceiverLimitBecomesMarkers: a batch closes once its
// bytes reach MaxBatchBytes, so its last item can take it past the bound
// and past a receiver's MaxBodyBytes. The 413 is a lost batch: its
// deliveries come back as gap markers, which the receiver takes.
func TestBatchOverTheReceiverLimitBecomesMarkers(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) {
		c.Clock = nil
		c.MaxBodyBytes = 4096
	})
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": tr.srv.URL}})
	g := NewGapPolicy(GapConfig{Logger: slog.New(slog.DiscardHandler)})
	q := startQueue(t, QueueConfig{
		From: "eu", Send: s.Send, MaxBatchBytes: 1024, Logger: slog.New(slog.DiscardHandler),
		OnOverflow: g.Overflow, OnTaken: g.Taken, OnLost: g.Lost,
	})
	defer q.Stop(context.Background())
	q.Push("us", del("s2", "small"))
	big := del("s1", "big")
	big.Event = fmt.Appendf(nil, `{"id":"big","op":"write","data":%q}`, bytes.Repeat([]byte("z"), 8<<10))
	q.Push("us", big) // reaches MaxBatchBytes: the batch ships with it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	st, rs := q.PeerStats("us"), tr.recv.Stats()
	if st.Batches != 2 || st.LostBatches != 1 || st.LostItems != 2 || st.LostReplacements != 2 {
		t.Fatalf("queue stats = %+v", st)
	}
	if rs.TooLarge != 1 || rs.Accepted != 1 || rs.Items != 2 {
		t.Fatalf("receiver stats = %+v", rs)
	}
	if calls, _ := tr.log.snapshot(); !equal(calls, []string{"delivery:s2", "delivery:s1"}) {
		t.Fatalf("sink saw %v", calls)
	}
	if gs := g.Stats(); gs.Markers != 2 || gs.Lost != 2 {
		t.Fatalf("gap stats = %+v", gs)
	}
}

// TestWaitingLowerBatchNotStaleWhenHigherTimesOut: batch 3 arrives first
// and waits for 1 and 2; batch 2 arrives later and waits for 1. When 3's
// OrderWait runs out, 1 is given up on, and 2, waiting, is applied, then
// 3. (Was: 3 moved the order to itself, and 2 was refused as stale: a
// batch that arrived in time lost, and its sender queued needless gap
// markers.)
func TestWaitingLowerBatchNotStaleWhenHigherTimesOut(t *testing.T) {
	t.Parallel()
	tr := newTestReceiver(t, nil)
	now := tr.clk.Now().Unix()
	nonce := uint64(0)
	post := func(body []byte) chan int {
		nonce++
		req := signedReq{peer: "eu", secret: secretEU, ts: now, nonce: nonce, body: body}
		done := make(chan int, 1)
		go func() {
			code, _ := tr.do(t, req)
			done <- code
		}()
		return done
	}
	answer := func(what string, c chan int) int {
		t.Helper()
		select {
		case code := <-c:
			return code
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer", what)
			return 0
		}
	}

	c3 := post(numbered(t, 10, 3, 1, del("b3", "x")))
	testwait.For(t, "3 waits for 1", func() bool { return tr.clk.waiting() == 1 })
	tr.clk.Advance(OrderWaitDefault / 2)
	c2 := post(numbered(t, 10, 2, 1, del("b2", "x")))
	testwait.For(t, "2 waits for 1", func() bool { return tr.clk.waiting() == 2 })
	tr.clk.Advance(OrderWaitDefault / 2) // 3's OrderWait is over, 2's is not

	code2, code3 := answer("2", c2), answer("3", c3)
	calls, _ := tr.log.snapshot()
	if code2 != 200 || code3 != 200 {
		t.Fatalf("batch 2 (waiting when 3 gave up on 1) answered %d, batch 3 %d; want both 200; sink saw %v; stats %+v",
			code2, code3, calls, tr.recv.Stats())
	}
	if want := []string{"delivery:b2", "delivery:b3"}; !equal(calls, want) {
		t.Fatalf("sink saw %v, want %v", calls, want)
	}
}
