package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
