package forward

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestMemoryBoundedUnderDeadPeer pushes a million items to a peer whose
// send never returns: the first half small (the count bound sheds), the
// second half 16 KiB (the byte bound sheds).
func TestMemoryBoundedUnderDeadPeer(t *testing.T) {
	n := 1_000_000
	if raceEnabled {
		// The race detector makes each push ~10x slower; the bounds are
		// the same at 100k, which still crosses both of them many times.
		n = 100_000
	}
	clk := newFakeClock()
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	dead := func(ctx context.Context, _ *Outbound) error { <-ctx.Done(); return ctx.Err() }

	var droppedDeliveries, ackDrops, uncovered uint64
	q := startQueue(t, QueueConfig{
		From: "eu", Send: dead, Clock: clk,
		Logger:  slog.New(slog.DiscardHandler),
		OnTaken: g.Taken,
		OnOverflow: func(peer string, dropped []Item) []Item {
			out := g.Overflow(peer, dropped)
			for _, it := range dropped {
				d := it.(*Delivery)
				switch {
				case IsGapMarker(d):
				case d.AckRequired:
					ackDrops++
					droppedDeliveries++
				default:
					droppedDeliveries++
					if !g.Pending(peer, d.SubID) {
						uncovered++
					}
				}
			}
			return out
		},
	})
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = q.Stop(ctx)
	}()

	const subs = 64
	pool := make([]*Delivery, 4096)
	for i := range pool {
		size := 100
		if i >= len(pool)/2 {
			size = 16 << 10
		}
		ev := fmt.Sprintf(`{"id":"ev-%d","subject":"fs:uid-%d:write","op":"write","ts":%d,"data":%q}`,
			i, i, 1764000000000+i, strings.Repeat("y", size))
		pool[i] = &Delivery{UserID: int64(i % 1000), SubID: fmt.Sprintf("sub-%d", i%subs), Event: []byte(ev), AckRequired: i%7 == 0}
	}
	var maxItems int
	var maxBytes int64
	for i := range n {
		half := 0
		if i >= n/2 {
			half = len(pool) / 2
		}
		q.Push("dead", pool[half+i%(len(pool)/2)])
		if i%1000 == 999 || i == n-1 {
			s := q.PeerStats("dead")
			maxItems, maxBytes = max(maxItems, s.HeldItems), max(maxBytes, s.HeldBytes)
		}
	}
	// Markers are appended past the bounds (that is what keeps a shed from
	// cascading), at most one per subscription, so the bounds hold up to
	// the markers pending.
	markers := 0
	for i := range subs {
		if g.Pending("dead", fmt.Sprintf("sub-%d", i)) {
			markers++
		}
	}
	const markerBytes = 256 // a marker's encoding, generously
	if maxItems > MaxQueuedDefault+markers {
		t.Errorf("held %d items, bound %d + %d markers", maxItems, MaxQueuedDefault, markers)
	}
	if maxBytes > MaxQueuedBytesDefault+int64(markers*markerBytes) {
		t.Errorf("held %d bytes, bound %d + %d markers", maxBytes, MaxQueuedBytesDefault, markers)
	}
	s := q.PeerStats("dead")
	if s.Shed < uint64(n/2) || s.ShedBytes == 0 {
		t.Fatalf("stats = %+v", s)
	}
	if uncovered != 0 {
		t.Errorf("%d shed deliveries with no gap marker pending for their subscription", uncovered)
	}
	gs := g.Stats()
	if gs.Covered+gs.AckRequired != droppedDeliveries || gs.AckRequired != ackDrops || gs.MarkersShed != 0 {
		t.Errorf("gap stats %+v, dropped deliveries %d (ack %d)", gs, droppedDeliveries, ackDrops)
	}
	if gs.Markers != uint64(markers) {
		t.Errorf("%d markers made, %d pending: a marker went missing", gs.Markers, markers)
	}
	t.Logf("pushes %d, shed %d, max held %d items / %d bytes, markers %d", n, s.Shed, maxItems, maxBytes, markers)
}
