package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestQueueOverSignedTransport runs a queue, a sender and a receiver on
// loopback, with the wall clock, and checks the reply reaches OnReply.
func TestQueueOverSignedTransport(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.Clock = nil })
	var mu sync.Mutex
	var replies []Reply
	s := startSender(t, SenderConfig{
		Self: "eu", Secret: secretEU, Peers: map[string]string{"us": tr.srv.URL},
		OnReply: func(peer string, r Reply) {
			mu.Lock()
			replies = append(replies, r)
			mu.Unlock()
		},
	})
	q := startQueue(t, QueueConfig{From: "eu", Send: s.Send, Logger: slog.New(slog.DiscardHandler)})
	defer q.Stop(context.Background())
	const n = 1000
	for i := range n {
		d := del("s1", "a")
		if i == 0 {
			d.UserID = 404 // the sink reports no socket for this user
		}
		q.Push("us", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.SentItems != n || st.LostBatches != 0 || st.Batches < n/MaxBatchItemsDefault {
		t.Fatalf("queue stats = %+v", st)
	}
	if rs := tr.recv.Stats(); rs.Items != n || rs.Accepted != st.Batches {
		t.Fatalf("receiver stats = %+v", rs)
	}
	// FlushAll returned, so every send has, and OnReply ran inside each.
	// Replies come back as sends return, in any order: one of them names
	// the user without a socket.
	mu.Lock()
	defer mu.Unlock()
	var noSocket []SocketRef
	for _, r := range replies {
		noSocket = append(noSocket, r.NoSocket...)
	}
	if len(noSocket) != 1 || noSocket[0].UserID != 404 {
		t.Fatalf("replies = %+v", replies)
	}
}

func TestSenderErrors(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.Clock = nil })
	s := startSender(t, SenderConfig{Self: "eu", Secret: []byte("wrong"), Peers: map[string]string{"us": tr.srv.URL}})
	body := batchBody("eu", del("s", "a"))
	var se *StatusError
	if err := s.Send(context.Background(), &Outbound{Peer: "us", Body: body}); !errors.As(err, &se) || se.Code != 403 {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := s.Send(context.Background(), &Outbound{Peer: "nowhere", Body: body}); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("unknown peer: %v", err)
	}
	if _, err := NewSender(SenderConfig{Self: "eu", Peers: map[string]string{"us": tr.srv.URL}}); err == nil {
		t.Fatal("sender without a secret accepted")
	}
}

// TestAcceptedBatchWithLargeReplyIsNotLost: a batch the receiver accepts
// is delivered, and its reply reaches OnReply whole, even when the reply
// names many (user, app) pairs whose appUids are full of <, > and &. Here
// one ordinary batch (~250 KiB) of 200 deliveries for users without a
// socket, each with its own appUid, gets a reply naming all 200. Before,
// the receiver's json.Marshal reply (each of those bytes escaped to six)
// outgrew the 1 MiB the sender reads, and the sender returned the cut,
// undecodable reply as an error: the queue counted the batch lost.
func TestAcceptedBatchWithLargeReplyIsNotLost(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) {
		c.Clock = nil
		c.Sink = SinkFuncs{DeliverFunc: func(context.Context, string, *Delivery) bool { return true }}
	})
	var mu sync.Mutex
	noSocket := map[SocketRef]bool{}
	s := startSender(t, SenderConfig{
		Self: "eu", Secret: secretEU, Peers: map[string]string{"us": tr.srv.URL},
		OnReply: func(_ string, r Reply) {
			mu.Lock()
			defer mu.Unlock()
			for _, ref := range r.NoSocket {
				noSocket[ref] = true
			}
		},
	})
	q := startQueue(t, QueueConfig{From: "eu", Send: s.Send, Logger: slog.New(slog.DiscardHandler)})
	defer q.Stop(context.Background())
	const n = 200
	appUID := func(i int) string { return fmt.Sprintf("R&D-%d-", i) + strings.Repeat("<&>", 380) }
	for i := range n {
		d := del("s1", "a")
		d.AppUID = appUID(i)
		q.Push("us", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	st, rs := q.Stats(), tr.recv.Stats()
	if rs.Accepted != st.Batches || st.LostBatches != 0 {
		t.Fatalf("receiver accepted %d of %d batches, yet the queue counted %d lost (%d items)",
			rs.Accepted, st.Batches, st.LostBatches, st.LostItems)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if !noSocket[SocketRef{UserID: 7, AppUID: appUID(i)}] {
			t.Fatalf("no reply named delivery %d's (user, app); %d of %d named, %d bad replies", i, len(noSocket), n, s.Stats().BadReplies)
		}
	}
}

// TestSenderBadReplyIsNotALostBatch: a 2xx answer means the receiver
// applied the batch, so Send returns nil for it even when its reply cannot
// be decoded or read to its end; the sender counts that in
// SenderStats.BadReplies, and OnReply does not run. Before, Send returned
// an error, and the queue counted a delivered batch lost.
func TestSenderBadReplyIsNotALostBatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/short" {
			// Fewer bytes than the Content-Length: the read fails.
			w.Header().Set("Content-Length", "100")
		}
		_, _ = w.Write([]byte(`{"noSocket":[{"userId":7,`))
	}))
	defer srv.Close()
	var replies atomic.Int32
	s := startSender(t, SenderConfig{
		Self: "eu", Secret: secretEU, Peers: map[string]string{"cut": srv.URL + "/cut", "short": srv.URL + "/short"},
		OnReply: func(string, Reply) { replies.Add(1) },
		Logger:  slog.New(slog.DiscardHandler),
	})
	for i, peer := range []string{"cut", "short"} {
		if err := s.Send(context.Background(), &Outbound{Peer: peer, Body: batchBody("eu", del("s", "a"))}); err != nil {
			t.Fatalf("Send to %s answered 200 with a bad reply: %v, want nil (delivered)", peer, err)
		}
		if got := s.Stats().BadReplies; got != uint64(i+1) {
			t.Fatalf("BadReplies = %d after %d bad replies", got, i+1)
		}
	}
	if n := replies.Load(); n != 0 {
		t.Fatalf("OnReply ran %d times for undecodable replies", n)
	}
}

// lateTransport answers every request at once and reads its body only when
// the next request comes, or at the end: what the RoundTripper contract
// allows ("the body may be read even after the response is returned"), and
// what net/http's transport does when a server answers before reading the
// whole body, though on loopback only in a window too narrow to hit at will.
type lateTransport struct {
	mu      sync.Mutex
	held    *http.Request
	late    int      // bodies read after their answer
	corrupt []string // those that were not the bytes signed
}

func (lt *lateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	lt.mu.Lock()
	prev := lt.held
	lt.held = req
	lt.mu.Unlock()
	if prev != nil {
		lt.read(prev)
	}
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader("{}")), ContentLength: 2, Request: req,
	}, nil
}

// read reads and closes what the transport still holds of req's body. The
// sender's Send returned long ago, and the queue built its next batch: bytes
// read now must be the ones signed or none at all.
func (lt *lateTransport) read(req *http.Request) {
	got, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.late++
	if len(got) > 0 && hexSHA256(got) != req.Header.Get(HeaderBodySHA256) {
		lt.corrupt = append(lt.corrupt, fmt.Sprintf("read %d bytes (err %v) not matching the signed hash, starting %.60q", len(got), err, got))
	}
}

func (lt *lateTransport) finish() {
	lt.mu.Lock()
	prev := lt.held
	lt.held = nil
	lt.mu.Unlock()
	if prev != nil {
		lt.read(prev)
	}
}

// (Was: Send returned while the transport could still read the batch body,
// and the queue built its next batch in the same buffer, so a late read sent
// that batch's bytes under the previous batch's signature, racing the queue.)
func TestSenderReleasesBodyWhenSendReturns(t *testing.T) {
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": "http://us.invalid"}})
	lt := &lateTransport{}
	s.clients["us"].client.Transport = lt
	// One batch at a time, each item a batch: the second is built in the
	// buffer of the first, whose send has returned.
	q := startQueue(t, QueueConfig{From: "eu", Send: s.Send, MaxInFlight: 1, MaxBatchItems: 1, Logger: slog.New(slog.DiscardHandler)})
	defer q.Stop(context.Background())
	const n = 4
	for i := range n {
		q.Push("us", del("s1", fmt.Sprint("e", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	lt.finish()
	if st := q.Stats(); st.Batches != n || st.LostBatches != 0 {
		t.Fatalf("queue stats = %+v", st)
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.late != n {
		t.Fatalf("%d bodies read late, want %d", lt.late, n)
	}
	if len(lt.corrupt) > 0 {
		t.Fatalf("the transport read another batch's bytes from %d of %d bodies after their send returned:\n%s",
			len(lt.corrupt), n, strings.Join(lt.corrupt, "\n"))
	}
}

// (Was: Push queued items a receiver refuses, so their whole batch got 400;
// a delivery without subId became, through GapPolicy, a marker without one,
// queued again after every failed send, and no batch reached the peer
// again.)
func TestPushRefusesItemsTheReceiverRefuses(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) { c.Clock = nil })
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": tr.srv.URL}})
	quiet := slog.New(slog.DiscardHandler)
	g := NewGapPolicy(GapConfig{Logger: quiet})
	var refused []Item
	q := startQueue(t, QueueConfig{
		From: "eu", Send: s.Send, Logger: quiet, OnTaken: g.Taken, OnLost: g.Lost,
		OnOverflow: func(peer string, dropped []Item) []Item {
			refused = append(refused, dropped...)
			return g.Overflow(peer, dropped)
		},
	})
	defer q.Stop(context.Background())

	noSub := del("", "a")
	badEvent := &Delivery{UserID: 7, SubID: "s-bad-event", Event: json.RawMessage(`["not","an","object"]`)}
	bad := []Item{
		noSub,
		badEvent,
		&Delivery{UserID: 7, SubID: "s-no-event"},
		&Ack{SubID: "s", EntryID: ""},
		&Ack{SubID: "", EntryID: "e"},
		&Watch{Op: "keep", Token: "t"},
		&Watch{Op: "add"},
		&Event{Family: "fs", ID: "x"},
		&Event{Family: "kv", FS: &FSChange{Key: "write"}, ID: "x"},
		&Event{Family: "kv", KV: &KVChange{Op: "set"}},
		&Bump{Scope: "everything"},
		(*Delivery)(nil),
	}
	spaced := &Delivery{UserID: 7, SubID: "s-spaced", Event: json.RawMessage(" \n{\"id\":\"c\",\"op\":\"write\"}")}
	good := []Item{
		del("s1", "a"), spaced, &Ack{SubID: "s", EntryID: "e"}, &Watch{Op: "drop", Token: "t"},
		&Event{Family: "kv", KV: &KVChange{Op: "set"}, ID: "x"}, &Bump{Scope: "presence"}, del("s2", "b"),
	}
	for _, it := range bad {
		if err := CheckItem(it); !errors.Is(err, ErrBadItem) {
			t.Errorf("CheckItem(%#v) = %v, want ErrBadItem", it, err)
		}
	}
	for _, it := range good {
		if err := CheckItem(it); err != nil {
			t.Errorf("CheckItem(%#v) = %v, want nil", it, err)
		}
	}
	for i := range max(len(bad), len(good)) {
		if i < len(good) {
			q.Push("us", good[i])
		}
		if i < len(bad) {
			q.Push("us", bad[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatalf("%v: stats %+v, receiver %+v", err, q.Stats(), tr.recv.Stats())
	}
	st := q.Stats()
	// The marker made for noSub has no subId either: refused in its turn.
	if st.LostBatches != 0 || st.Pushed != uint64(len(good)) || st.Invalid != uint64(len(bad))+1 {
		t.Fatalf("queue stats = %+v, want nothing lost, %d pushed, %d invalid", st, len(good), len(bad)+1)
	}
	// Refused like a shed item: each (but the nil one) reached OnOverflow,
	// noSub's refused marker after it, and the deliveries with a subId but
	// no event object are named by markers that ship.
	if len(refused) != len(bad) || refused[0] != noSub || !IsGapMarker(refused[1]) || refused[2] != badEvent {
		t.Fatalf("OnOverflow got %d items, want the %d non-nil refused ones and noSub's marker", len(refused), len(bad)-1)
	}
	if rs := tr.recv.Stats(); rs.BadRequest != 0 || rs.Items != uint64(len(good))+2 {
		t.Fatalf("receiver stats = %+v, want %d items, no 400", rs, len(good)+2)
	}
	calls, _ := tr.log.snapshot()
	slices.Sort(calls)
	want := []string{"ack:e", "bump:presence", "delivery:s-bad-event", "delivery:s-no-event", "delivery:s-spaced", "delivery:s1", "delivery:s2", "event:x", "watch:t"}
	if !slices.Equal(calls, want) {
		t.Fatalf("sink got %v, want %v", calls, want)
	}
}

// (Was: the sender followed redirects: to a page answering 200 a lost batch
// counted as delivered, and a 307 or 308 sent the signed batch to another
// host.)
func TestSenderFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write([]byte("<html>sign in</html>"))
	}))
	defer other.Close()
	target := other.URL + "/login"
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			redirector := httptest.NewServer(http.RedirectHandler(target, code))
			defer redirector.Close()
			s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": redirector.URL}})
			err := s.Send(context.Background(), &Outbound{Peer: "us", Body: batchBody("eu", del("s", "a"))})
			var se *StatusError
			if !errors.As(err, &se) || se.Code != code || se.Location != target || !strings.Contains(err.Error(), target) {
				t.Fatalf("Send through a %d redirect: %v; want a StatusError %d naming %s", code, err, code, target)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Fatalf("the sender followed the redirect: %d requests reached %s", n, target)
			}
		})
	}
}

// (Was: after the 1 MiB reply it reads, the sender drained the rest of an
// answer, however long, until its Timeout.)
func TestSenderStopsReadingALongReply(t *testing.T) {
	const long = 256 << 20
	type result struct {
		wrote int
		err   error
	}
	done := make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		wrote := 0
		for wrote < long {
			n, err := w.Write(chunk)
			wrote += n
			if err != nil {
				done <- result{wrote, err}
				return
			}
		}
		done <- result{wrote, nil}
	}))
	defer srv.Close()
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": srv.URL},
		Timeout: time.Hour, OnReply: func(string, Reply) {}, Logger: slog.New(slog.DiscardHandler)})
	if err := s.Send(context.Background(), &Outbound{Peer: "us", Body: batchBody("eu", del("s", "a"))}); err != nil {
		t.Fatalf("Send answered 200: %v, want nil (delivered)", err)
	}
	if got := s.Stats().BadReplies; got != 1 {
		t.Fatalf("BadReplies = %d after a reply over the bound, want 1", got)
	}
	select {
	case r := <-done:
		// What the sender read, and what the connection's buffers took
		// before it hung up: far below the answer's length.
		if r.err == nil || r.wrote > 64<<20 {
			t.Fatalf("the peer wrote %d bytes of a %d-byte reply (write error %v): the sender read on past its %d-byte bound",
				r.wrote, long, r.err, maxReplyBytes)
		}
	case <-time.After(time.Minute):
		t.Fatal("the peer is still writing a minute after Send returned")
	}
}

// (Was: a down peer got a request and a lost-batch warning every 25 ms window for ever: OnLost's markers shipped again and failed again.)
func TestDownPeerBacksOffAndRecovers(t *testing.T) {
	type delivered struct {
		mu  sync.Mutex
		got []*Delivery
	}
	receive := func(self string, into *delivered) *testReceiver {
		return newTestReceiver(t, func(c *ReceiverConfig) {
			c.Self, c.Clock, c.OrderWait = self, nil, time.Hour
			c.Sink = SinkFuncs{DeliverFunc: func(_ context.Context, _ string, d *Delivery) bool {
				into.mu.Lock()
				into.got = append(into.got, d)
				into.mu.Unlock()
				return false
			}}
		})
	}
	var atUS, atAP delivered
	us, ap := receive("us", &atUS), receive("ap", &atAP)
	// us sits behind a proxy that answers 503 while us is down.
	var down atomic.Bool
	down.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "upstream down", http.StatusServiceUnavailable)
			return
		}
		us.recv.ServeHTTP(w, r)
	}))
	defer front.Close()
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": front.URL, "ap": ap.srv.URL}})

	clk := newFakeClock()
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	var mu sync.Mutex
	var attempts []time.Time // fake time of each send to us while it is down
	const maxQueued = 40
	q := startQueue(t, QueueConfig{
		From: "eu", Clock: clk, Logger: slog.New(slog.DiscardHandler),
		MaxQueued: maxQueued, MaxBatchItems: 10, // 4 sends in flight
		OnOverflow: g.Overflow, OnTaken: g.Taken, OnLost: g.Lost,
		Send: func(ctx context.Context, b *Outbound) error {
			if b.Peer == "us" && down.Load() {
				mu.Lock()
				attempts = append(attempts, clk.Now())
				mu.Unlock()
			}
			return s.Send(ctx, b)
		},
	})
	defer q.Stop(context.Background())
	settled := func() {
		t.Helper()
		waitQueue(t, q, func() bool {
			return q.PeerStats("us").InFlightBatches == 0 && q.PeerStats("ap").InFlightBatches == 0
		})
	}

	// 30 s of steady traffic, one delivery per window to each peer, with
	// us down all along.
	const subs = 4
	const steps = int(30 * time.Second / FlushDefault)
	pushed := 0
	maxHeld := 0
	push := func() {
		sub, name := fmt.Sprintf("s%d", pushed%subs), fmt.Sprintf("%d", pushed)
		q.Push("us", del(sub, name))
		q.Push("ap", del(sub, name))
		pushed++
	}
	for range steps {
		push()
		clk.Advance(FlushDefault)
		settled()
		maxHeld = max(maxHeld, q.PeerStats("us").HeldItems)
	}
	mu.Lock()
	var gaps []time.Duration
	for i := 1; i < len(attempts); i++ {
		gaps = append(gaps, attempts[i].Sub(attempts[i-1]))
	}
	mu.Unlock()
	for i, gap := range gaps {
		want := BackoffMaxDefault
		if i < 8 {
			want = min(BackoffMinDefault<<i, BackoffMaxDefault)
		}
		if gap != want {
			t.Fatalf("%d sends to the down peer in %v; wait before send %d was %v, want %v (waits %v)",
				len(attempts), time.Duration(steps)*FlushDefault, i+2, gap, want, gaps[:min(len(gaps), 12)])
		}
	}
	// Held to its bound, plus at most one marker per subscription.
	if maxHeld > maxQueued+subs {
		t.Errorf("held up to %d items for the down peer, bound %d + %d markers", maxHeld, maxQueued, subs)
	}
	// The other peer is not held up: one batch per window, none lost.
	if st := q.PeerStats("ap"); st.Batches != uint64(steps) || st.LostBatches != 0 || st.Shed != 0 {
		t.Errorf("ap stats while us was down = %+v", st)
	}

	// us comes back: within one backoff, everything held reaches it.
	down.Store(false)
	for i := 0; ; i++ {
		if st := q.PeerStats("us"); st.HeldItems == 0 && st.InFlightBatches == 0 && st.Batches > st.LostBatches {
			break
		}
		if i > int(BackoffMaxDefault/FlushDefault) {
			t.Fatalf("us not drained one backoff after it came back: %+v", q.PeerStats("us"))
		}
		clk.Advance(FlushDefault)
		settled()
	}
	// And the backoff is over: the next delivery ships in its window.
	lost := q.PeerStats("us").LostBatches
	push()
	clk.Advance(FlushDefault)
	settled()
	if st := q.PeerStats("us"); st.HeldItems != 0 || st.LostBatches != lost {
		t.Fatalf("us stats after it came back = %+v", st)
	}

	// Every delivery pushed to us either arrived, once and in order, or was
	// shed or lost and counted under a marker that arrived after.
	atUS.mu.Lock()
	defer atUS.mu.Unlock()
	arrived, last, marked := 0, map[string]int{}, map[string]bool{}
	for _, d := range atUS.got {
		id := evID(t, d)
		if IsGapMarker(d) {
			marked[d.SubID] = true
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[d.SubID]; ok && n <= prev {
			t.Fatalf("%s: delivery %d arrived after %d", d.SubID, n, prev)
		}
		last[d.SubID] = n
		arrived++
	}
	gs := g.Stats()
	if uint64(arrived)+gs.Covered != uint64(pushed) || gs.MarkersShed != 0 || gs.Covered == 0 {
		t.Errorf("pushed %d to us, %d arrived, gap stats %+v", pushed, arrived, gs)
	}
	for i := range subs {
		if sub := fmt.Sprintf("s%d", i); !marked[sub] {
			t.Errorf("no marker reached us for %s", sub)
		}
	}
	if rs := us.recv.Stats(); rs.Stale != 0 || rs.Skipped != 0 {
		t.Errorf("us receiver stats = %+v", rs)
	}
	atAP.mu.Lock()
	defer atAP.mu.Unlock()
	if len(atAP.got) != pushed {
		t.Errorf("ap got %d deliveries, want %d", len(atAP.got), pushed)
	}
	t.Logf("%d sends to the down peer in %v, held at most %d, gap stats %+v", len(attempts), time.Duration(steps)*FlushDefault, maxHeld, gs)
}
