package forward_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/forward"
)

// Two regions on loopback: "eu" (a queue and a signed sender) forwards
// deliveries to "us" (a signed receiver). While us is stalled, eu's
// backlog for it is held to MaxQueued; the oldest deliveries are shed and
// a gap policy queues one gap marker per subscription in their place, so
// us learns what it missed. Once us answers again, Stop drains the queue.
func Example() {
	quiet := slog.New(slog.DiscardHandler)
	// eu's secret, made for this run: a fixed one in code is known to
	// everyone who reads it. crypto/rand.Read never fails (it crashes the
	// program instead).
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)

	// Region us: a receiver counting what it gets, behind a gate that
	// holds every request while us is stalled.
	var delivered, markers atomic.Int64
	recv, err := forward.NewReceiver(forward.ReceiverConfig{
		Self:  "us",
		Peers: map[string][]byte{"eu": secret},
		Sink: forward.SinkFuncs{DeliverFunc: func(_ context.Context, _ string, d *forward.Delivery) bool {
			if forward.IsGapMarker(d) {
				markers.Add(1)
			} else {
				delivered.Add(1)
			}
			return false
		}},
		Logger: quiet,
	})
	if err != nil {
		panic(err)
	}
	stalled, release := make(chan struct{}, 1), make(chan struct{})
	var first atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := forward.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			stalled <- struct{}{} // us holds eu's first batch open
			<-release
		}
		recv.ServeHTTP(w, r)
	}), forward.ServerConfig{})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// Region eu: one batch in flight at most, 100 items held (gap markers
	// count against the bound too).
	sender, err := forward.NewSender(forward.SenderConfig{
		Self: "eu", Secret: secret,
		Peers: map[string]string{"us": "http://" + ln.Addr().String() + "/"},
	})
	if err != nil {
		panic(err)
	}
	if err := sender.Start(context.Background()); err != nil {
		panic(err)
	}
	defer sender.Stop(context.Background())
	gaps := forward.NewGapPolicy(forward.GapConfig{Logger: quiet})
	q, err := forward.NewPeerQueue(forward.QueueConfig{
		From: "eu", Send: sender.Send, MaxQueued: 100, MaxInFlight: 1,
		OnOverflow: gaps.Overflow, OnTaken: gaps.Taken, OnLost: gaps.Lost, Logger: quiet,
	})
	if err != nil {
		panic(err)
	}
	if err := q.Start(context.Background()); err != nil {
		panic(err)
	}

	push := func(i int) {
		ev := `{"id":"ev-` + strconv.Itoa(i) + `","subject":"demo:write","op":"write","ts":1764000000000}`
		q.Push("us", &forward.Delivery{UserID: 1, SubID: "sub-" + strconv.Itoa(i%4), Event: []byte(ev)})
	}
	push(0)
	q.Flush("us")
	<-stalled // the one batch in flight is stuck at us
	for i := 1; i <= 1000; i++ {
		push(i)
	}
	st := q.PeerStats("us")
	fmt.Printf("us stalled: eu holds %d items (the newest deliveries and 4 gap markers), shed %d\n", st.HeldItems, st.Shed)

	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.Stop(ctx); err != nil {
		panic(err)
	}
	st = q.PeerStats("us")
	fmt.Printf("drained: %d items sent, %d discarded; us received %d deliveries and %d gap markers\n",
		st.SentItems, st.Discarded, delivered.Load(), markers.Load())
	// Output:
	// us stalled: eu holds 100 items (the newest deliveries and 4 gap markers), shed 904
	// drained: 101 items sent, 0 discarded; us received 97 deliveries and 4 gap markers
}
