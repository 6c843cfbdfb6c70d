package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
)

// TestStopDrainsToALiveReceiver: Stop without FlushAll first ships what
// the queue holds; nothing is discarded.
func TestStopDrainsToALiveReceiver(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.Clock = nil })
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": tr.srv.URL}})
	q := startQueue(t, QueueConfig{From: "eu", Send: s.Send, Logger: slog.New(slog.DiscardHandler)})
	const n = 1000
	for range n {
		q.Push("us", del("s1", "a"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.SentItems != n || st.Discarded != 0 || st.LostBatches != 0 || st.HeldItems != 0 {
		t.Fatalf("queue stats = %+v", st)
	}
	if rs := tr.recv.Stats(); rs.Items != n {
		t.Fatalf("receiver got %d items, want %d (stats %+v)", rs.Items, n, rs)
	}
}

// TestStopDiscardsWhatAnUnreachablePeerCannotTake: a peer that never
// answers holds one batch in flight; at Stop's deadline the items still
// held are discarded and counted, the batch in flight is cancelled and
// lost, and a push after Stop is discarded too.
func TestStopDiscardsWhatAnUnreachablePeerCannotTake(t *testing.T) {
	started := make(chan struct{}, 1)
	q := startQueue(t, QueueConfig{
		From: "eu",
		Send: func(ctx context.Context, _ *Outbound) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		},
		MaxBatchItems: 10, MaxInFlight: 1, Clock: newFakeClock(),
		Logger: slog.New(slog.DiscardHandler),
	})
	for range 100 {
		q.Push("us", del("s1", "a"))
	}
	<-started // the first full batch is in flight, the other 90 wait for its slot
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := q.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop = %v, want the deadline", err)
	}
	q.Push("us", del("s1", "late"))
	st := q.Stats()
	if st.Discarded != 91 || st.LostItems != 10 || st.Batches != 1 || st.HeldItems != 0 || st.InFlight != 0 {
		t.Fatalf("stats = %+v, want 90 held + 1 late discarded, 10 lost in flight", st)
	}
}

// TestPushAfterStopCountsInPeerStats: a push refused after Stop is counted
// once, in the Discarded of its peer's PeerStats when the queue knows the
// peer, and only in the queue-wide Stats otherwise. Before, every refused
// push went to the queue-wide counter, so the peer's own stats missed it.
func TestPushAfterStopCountsInPeerStats(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	q := newTestQueue(t, clk, rec, nil)
	q.Push("us", del("s", "a"))
	if err := q.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.next(t) // Stop drained a
	q.Push("us", del("s", "b"))
	if s := q.PeerStats("us"); s.Discarded != 1 {
		t.Fatalf("PeerStats(us).Discarded = %d after a push to us past Stop, want 1", s.Discarded)
	}
	q.Push("ap", del("s", "c")) // a peer never seen
	if s := q.PeerStats("ap"); s != (Stats{}) {
		t.Fatalf("PeerStats(ap) = %+v, want zero: a refused push makes no peer", s)
	}
	if d := q.Stats().Discarded; d != 2 {
		t.Fatalf("Stats().Discarded = %d after 2 pushes past Stop, want 2", d)
	}
}

// TestQueueLifecycle: pushes before Start are discarded; Start twice is
// ErrStarted, Start after Stop ErrStopped; Stop before Start and twice
// are no-ops.
func TestQueueLifecycle(t *testing.T) {
	q, err := NewPeerQueue(QueueConfig{From: "eu", Send: newRecorder().send, Clock: newFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	q.Push("us", del("s1", "early"))
	if st := q.Stats(); st.Discarded != 1 || st.Pushed != 0 {
		t.Fatalf("push before Start: stats = %+v", st)
	}
	lifecycletest.Start(t, q)
	lifecycletest.Stop(t, q)
	never, err := NewPeerQueue(QueueConfig{From: "eu", Send: newRecorder().send})
	if err != nil {
		t.Fatal(err)
	}
	lifecycletest.Stop(t, never) // before Start
}

// TestSenderLifecycle: a sender sends between Start and Stop; outside,
// Send fails with ErrNotRunning (a lost batch) without dialling.
func TestSenderLifecycle(t *testing.T) {
	tr := newTestReceiver(t, nil)
	s, err := NewSender(SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": tr.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	b := &Outbound{Peer: "us", Seq: 1, Body: []byte(`{}`)}
	if err := s.Send(t.Context(), b); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("send before Start: %v, want ErrNotRunning", err)
	}
	lifecycletest.Start(t, s)
	lifecycletest.Stop(t, s)
	if err := s.Send(t.Context(), b); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("send after Stop: %v, want ErrNotRunning", err)
	}
	if rs := tr.recv.Stats(); rs.Accepted != 0 || rs.BadRequest != 0 {
		t.Fatalf("the receiver was reached: %+v", rs)
	}
}

// TestSenderStopClosesConnectionsOfSendsInFlight: a send still in flight
// when the sender stops puts its connection back in the pool after Stop
// closed the idle ones; it must be closed then, not kept for the idle
// timeout (90 s) by a sender that will never send again.
func TestSenderStopClosesConnectionsOfSendsInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	closed := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(entered)
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			close(closed)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s, err := NewSender(SenderConfig{Self: "eu", InsecureSkipSignature: true, Peers: map[string]string{"us": srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() { sent <- s.Send(t.Context(), &Outbound{Peer: "us", Body: []byte(`{}`)}) }()
	<-entered
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-sent; err != nil {
		t.Fatalf("send in flight at Stop: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of the send in flight at Stop is still open 10 s after it ended")
	}
}

// (Was: no backoff; with one, a drain must not wait it out, nor FlushAll call a held backlog flushed.)
func TestStopDuringBackoffDrainsAtOnce(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.Clock = nil })
	var down atomic.Bool
	down.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "upstream down", http.StatusServiceUnavailable)
			return
		}
		tr.recv.ServeHTTP(w, r)
	}))
	defer front.Close()
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": front.URL}})
	clk := newFakeClock()
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	q := startQueue(t, QueueConfig{
		From: "eu", Send: s.Send, Clock: clk, Logger: slog.New(slog.DiscardHandler), MaxBatchItems: 10,
		OnOverflow: g.Overflow, OnTaken: g.Taken, OnLost: g.Lost,
	})
	settled := func(batches uint64) {
		t.Helper()
		waitQueue(t, q, func() bool {
			st := q.PeerStats("us")
			return st.Batches == batches && st.InFlightBatches == 0
		})
	}
	// Two failures: the first send and the probe after BackoffMin. The
	// peer now waits 2 × BackoffMin, and the fake clock stays put.
	q.Push("us", del("s1", "a"))
	clk.Advance(FlushDefault)
	settled(1)
	clk.Advance(BackoffMinDefault)
	settled(2)
	for i := range 25 {
		q.Push("us", del("s2", fmt.Sprint(i)))
	}
	down.Store(false)
	st := q.PeerStats("us")
	if st.LostBatches != 2 || st.HeldItems != 26 || st.InFlightBatches != 0 {
		t.Fatalf("stats in the backoff = %+v, want 2 lost, s1's marker and 25 held", st)
	}
	// A barrier waits the backoff out: it does not report a held backlog
	// as flushed.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.FlushAll(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("FlushAll in the backoff = %v, want it still waiting", err)
	}
	if st := q.PeerStats("us"); st.Batches != 2 || st.HeldItems != 26 {
		t.Fatalf("FlushAll sent during the backoff: %+v", st)
	}
	// Stop does not wait: it drains at once to the peer, which is back.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.HeldItems != 0 || st.Discarded != 0 || st.LostBatches != 2 || st.SentItems != 2+26 {
		t.Fatalf("stats after Stop = %+v", st)
	}
	if rs := tr.recv.Stats(); rs.Items != 26 {
		t.Fatalf("receiver got %d items, want s1's marker and 25: %+v", rs.Items, rs)
	}
}
