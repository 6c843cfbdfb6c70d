package forward

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestMarkerTooLargeFreesItsSlot: a shed delivery whose gap marker
// encodes larger than the delivery itself (the marker adds
// "reason":"backlog_overflow") and past MaxItemBytes is refused by the
// queue, and handed to OnOverflow as a refused push is, so GapPolicy
// frees the slot it recorded for it and a later loss of that
// subscription gets a marker that ships. Every later loss was counted as
// covered by the refused marker, and none was ever named (found by an
// audit).
func TestMarkerTooLargeFreesItsSlot(t *testing.T) {
	clk := newFakeClock()
	rec := newRecorder()
	g := NewGapPolicy(GapConfig{Clock: clk})
	big := &Delivery{UserID: 7, SubID: "s", Event: json.RawMessage(
		`{"id":"1","subject":"` + strings.Repeat("x", 900) + `","op":"set","ts":1764000000000}`)}
	enc, _, raw := big.appendWire(nil)
	limit := int64(len(enc) + len(raw)) // big fits exactly
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxQueued = 1
		c.MaxItemBytes = limit
		c.OnOverflow, c.OnTaken, c.OnLost = g.Overflow, g.Taken, g.Lost
	})

	q.Push("us", big)           // held
	q.Push("us", del("s", "2")) // sheds big: its marker is too large
	q.Push("us", del("s", "3")) // sheds 2: "covered" by that marker
	q.Push("us", del("s", "4")) // sheds 3: likewise
	if err := q.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for len(rec.ch) > 0 {
		sent = append(sent, names(t, rec.next(t).items)...)
	}
	st, gs := q.Stats(), g.Stats()
	marker := false
	for _, n := range sent {
		marker = marker || strings.HasSuffix(n, ":gap")
	}
	if !marker {
		t.Fatalf("3 deliveries of sub s shed (Stats.Shed %d, GapStats.Covered %d, Markers %d, queue Oversized %d), "+
			"but no gap marker for s was ever sent: sent %v; policy still has one pending: %v",
			st.Shed, gs.Covered, gs.Markers, st.Oversized, sent, g.Pending("us", "s"))
	}
}
