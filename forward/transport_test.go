package forward

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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
