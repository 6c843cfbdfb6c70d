package forward

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// sized is a delivery whose encoding is exactly n bytes.
func sized(t *testing.T, sub string, n int) *Delivery {
	t.Helper()
	d := &Delivery{UserID: 7, SubID: sub, Event: []byte(`{"p":""}`)}
	pad := n - len(AppendJSON(nil, d))
	if pad < 0 {
		t.Fatalf("no delivery encodes to %d bytes", n)
	}
	d.Event = []byte(`{"p":"` + strings.Repeat("x", pad) + `"}`)
	if got := len(AppendJSON(nil, d)); got != n {
		t.Fatalf("sized(%d) encodes to %d", n, got)
	}
	return d
}

// TestWorstCaseBodyFitsDefaultReceiver builds the largest batch a queue
// with the default bounds can: the longest From, items just short of
// MaxBatchBytes, then an item of MaxItemBytes. Its body must be within
// BodyLimit (with no more slack than the wrapper's headroom) and a
// receiver with the default MaxBodyBytes must take it over loopback.
func TestWorstCaseBodyFitsDefaultReceiver(t *testing.T) {
	tr := newTestReceiver(t, func(c *ReceiverConfig) {
		c.Clock = nil
		c.Peers = map[string][]byte{"eu": secretEU}
	})
	s := startSender(t, SenderConfig{Self: "eu", Secret: secretEU, Peers: map[string]string{"us": tr.srv.URL}})
	var mu sync.Mutex
	var sizes []int
	send := func(ctx context.Context, b *Outbound) error {
		mu.Lock()
		sizes = append(sizes, len(b.Body))
		mu.Unlock()
		return s.Send(ctx, b)
	}
	from := strings.Repeat("f", MaxFromBytes-2) // the quotes make it MaxFromBytes
	// A frozen clock: only the byte bound may close the batch.
	q := startQueue(t, QueueConfig{From: from, Send: send, Clock: newFakeClock(), Logger: slog.New(slog.DiscardHandler)})
	defer q.Stop(context.Background())
	if q.BodyLimit() != MaxBodyBytesDefault {
		t.Fatalf("BodyLimit %d, MaxBodyBytesDefault %d", q.BodyLimit(), MaxBodyBytesDefault)
	}
	q.Push("us", sized(t, "a", 100<<10))
	q.Push("us", sized(t, "b", 100<<10))
	q.Push("us", sized(t, "c", MaxBatchBytesDefault-1-200<<10))
	q.Push("us", sized(t, "d", MaxItemBytesDefault)) // trips the byte bound
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 1 {
		t.Fatalf("%d batches (%v), want the four items in one", len(sizes), sizes)
	}
	// The limit's only slack: the wrapper's headroom, seq and base of one
	// digit where the limit allows 20, and 3 commas where it allows 199.
	slack := int64(batchWrapperMax-103-MaxFromBytes) + 2*19 + (MaxBatchItemsDefault - 1 - 3)
	if limit := q.BodyLimit(); int64(sizes[0]) > limit || limit-int64(sizes[0]) > slack {
		t.Fatalf("body %d bytes, limit %d, slack allowed %d", sizes[0], limit, slack)
	}
	if st := q.Stats(); st.LostBatches != 0 || st.Oversized != 0 {
		t.Fatalf("queue stats = %+v", st)
	}
	if rs := tr.recv.Stats(); rs.Accepted != 1 || rs.Items != 4 {
		t.Fatalf("receiver stats = %+v", rs)
	}
}

// TestPushRefusesOversizedItem: an item encoding to more than MaxItemBytes
// is never queued (it could take a body past BodyLimit); it is counted and
// handed to OnOverflow, so a gap policy names it with a marker.
func TestPushRefusesOversizedItem(t *testing.T) {
	clk := newFakeClock()
	rec := newRecorder()
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	var refused []Item
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxItemBytes = 1000
		c.OnTaken = g.Taken
		c.OnOverflow = func(peer string, dropped []Item) []Item {
			refused = append(refused, dropped...)
			return g.Overflow(peer, dropped)
		}
	})
	q.Push("us", sized(t, "fits", 1000))
	big := sized(t, "big", 1001)
	q.Push("us", big)
	if len(refused) != 1 || refused[0] != big {
		t.Fatalf("OnOverflow got %v", refused)
	}
	st := q.Stats()
	if st.Oversized != 1 || st.Pushed != 1 || st.Replacements != 1 || st.HeldItems != 2 {
		t.Fatalf("stats = %+v", st)
	}
	q.Flush("us")
	b := rec.next(t)
	if len(b.items) != 2 || b.items[0].(*Delivery).SubID != "fits" || !IsGapMarker(b.items[1].(*Delivery)) || b.items[1].(*Delivery).SubID != "big" {
		t.Fatalf("batch = %v", names(t, b.items))
	}
}

func TestQueueRefusesLongFrom(t *testing.T) {
	send := func(context.Context, *Outbound) error { return nil }
	if _, err := NewPeerQueue(QueueConfig{From: strings.Repeat("f", MaxFromBytes-1), Send: send}); err == nil {
		t.Fatal("a From over MaxFromBytes encoded was taken")
	}
	q := startQueue(t, QueueConfig{From: strings.Repeat("f", MaxFromBytes-2), Send: send})
	_ = q.Stop(context.Background())
}

func TestNewServerSafeDefaults(t *testing.T) {
	srv := NewServer(http.NotFoundHandler(), ServerConfig{IdleTimeout: -1})
	if srv.ReadHeaderTimeout != ReadHeaderTimeoutDefault || srv.IdleTimeout != IdleTimeoutDefault || srv.MaxHeaderBytes != MaxHeaderBytesDefault {
		t.Fatalf("server = %+v", srv)
	}
	// The sender must give up an idle connection before the server does.
	if IdleTimeoutDefault <= idleConnTimeout {
		t.Fatalf("IdleTimeoutDefault %v is not above the sender's %v", IdleTimeoutDefault, idleConnTimeout)
	}
	// No connection-wide read deadline: see NewServer.
	if srv.ReadTimeout != 0 || srv.WriteTimeout != 0 {
		t.Fatalf("server = %+v", srv)
	}
}

func TestNewReceiverRefusesNegativeLimits(t *testing.T) {
	for _, mod := range []func(*ReceiverConfig){
		func(c *ReceiverConfig) { c.MaxReading = -1 },
		func(c *ReceiverConfig) { c.MaxReadingPerPeer = -1 },
		func(c *ReceiverConfig) { c.BodyReadTimeout = -1 },
	} {
		cfg := ReceiverConfig{Self: "us", Peers: map[string][]byte{"eu": secretEU}, Sink: SinkFuncs{}}
		mod(&cfg)
		if _, err := NewReceiver(cfg); err == nil {
			t.Fatalf("%+v taken", cfg)
		}
	}
}
