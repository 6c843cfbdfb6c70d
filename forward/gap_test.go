package forward

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestGapPolicyMarkers(t *testing.T) {
	clk := newFakeClock()
	var logs bytes.Buffer
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a1, a2, b1 := del("sa", "a1"), del("sa", "a2"), del("sb", "b1")
	ack := del("sa", "x")
	ack.AckRequired = true
	out := g.Overflow("us", []Item{a1, ack, &Ack{SubID: "sa", EntryID: "e"}, a2, b1})
	if len(out) != 2 {
		t.Fatalf("markers = %d, want one per subscription", len(out))
	}
	m := out[0].(*Delivery)
	if m.SubID != "sa" || m.UserID != a1.UserID || !IsGapMarker(m) {
		t.Fatalf("marker = %+v", m)
	}
	var ev map[string]any
	if err := json.Unmarshal(m.Event, &ev); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "a1", "subject": "fs:a1:write", "op": "gap", "reason": "backlog_overflow", "ts": 1764000000000.0}
	if len(ev) != len(want) {
		t.Fatalf("marker event = %v", ev)
	}
	for k, v := range want {
		if ev[k] != v {
			t.Fatalf("marker event %s = %v, want %v", k, ev[k], v)
		}
	}
	s := g.Stats()
	if s.Markers != 2 || s.Covered != 3 || s.AckRequired != 1 || s.NonDelivery != 1 || s.Overflows != 1 {
		t.Fatalf("stats = %+v", s)
	}
	// Still pending: no second marker for sa, but another peer gets its own.
	if out := g.Overflow("us", []Item{del("sa", "a3")}); len(out) != 0 {
		t.Fatalf("second marker while one pends: %v", out)
	}
	if out := g.Overflow("ap", []Item{del("sa", "a4")}); len(out) != 1 {
		t.Fatalf("other peer got %d markers", len(out))
	}
	// Shipping the marker frees the slot; shipping an equal-looking
	// delivery that is not the marker does not.
	g.Taken("us", []Item{del("sa", "a1:gap")})
	if !g.Pending("us", "sa") {
		t.Fatal("slot freed by an item that is not the marker")
	}
	g.Taken("us", []Item{m})
	if g.Pending("us", "sa") || !g.Pending("us", "sb") {
		t.Fatal("wrong slots after ship")
	}
	if out := g.Overflow("us", []Item{del("sa", "a5")}); len(out) != 1 {
		t.Fatal("no new marker after the old one shipped")
	}
	// A shed marker frees its slot too.
	g.Overflow("us", []Item{out[1]})
	if g.Pending("us", "sb") {
		t.Fatal("shed marker still pending")
	}
	// One warning per peer per interval.
	if n := strings.Count(logs.String(), "events_forward_overflow"); n != 2 {
		t.Fatalf("%d warnings, want one per peer:\n%s", n, logs.String())
	}
	clk.Advance(WarnEveryDefault)
	g.Overflow("us", []Item{del("sc", "c1")})
	if n := strings.Count(logs.String(), "peer=us"); n != 2 {
		t.Fatalf("%d warnings for us after the interval:\n%s", n, logs.String())
	}
}

func TestGapMarkerWithoutTimestampUsesClock(t *testing.T) {
	clk := newFakeClock()
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	d := &Delivery{SubID: "s", Event: json.RawMessage(`{"data":"x"}`)}
	m := g.Overflow("us", []Item{d})[0].(*Delivery)
	var ev struct {
		ID any
		Op string
		TS int64
	}
	if err := json.Unmarshal(m.Event, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Op != "gap" || ev.ID != nil || ev.TS != clk.Now().UnixMilli() {
		t.Fatalf("marker = %s", m.Event)
	}
}

// (Was: a marker lifted id, subject and ts out of its event as the scanner
// found them, so an event that is not valid JSON (`"id":1e`) gave a marker
// that is not either: its batch got 400, Lost queued it again, and every
// batch to the peer after it failed the same way.)
func TestMarkerOfMalformedEventDecodes(t *testing.T) {
	clk := newFakeClock()
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	d := &Delivery{SubID: "s", Event: json.RawMessage(`{"id":1e,"subject":"fs:\q","ts":1764000000000}`)}
	for _, m := range []Item{g.Overflow("us", []Item{d})[0], g.Lost("eu", []Item{d}, nil)[0]} {
		ev := m.(*Delivery).Event
		if !json.Valid(ev) {
			t.Fatalf("marker event %s is not JSON", ev)
		}
		if _, err := DecodeBatch(batchBody("eu", m)); err != nil {
			t.Fatalf("a receiver refuses the marker %s: %v", ev, err)
		}
		if !IsGapMarker(m) || topLevel(ev, "id") != nil || string(topLevel(ev, "ts")) != "1764000000000" {
			t.Fatalf("marker = %s, want op gap, no id, the event's ts", ev)
		}
	}
}

func TestGapPolicyInQueue(t *testing.T) {
	clk, rec := newFakeClock(), newRecorder()
	g := NewGapPolicy(GapConfig{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	q := newTestQueue(t, clk, rec, func(c *QueueConfig) {
		c.MaxQueued = 3
		c.OnOverflow = g.Overflow
		c.OnTaken = g.Taken
	})
	gate := make(chan struct{})
	rec.gate = gate
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		q.Push("us", del("s1", n))
	}
	if !g.Pending("us", "s1") {
		t.Fatal("no marker pending after a shed")
	}
	clk.Advance(FlushDefault)
	// d sheds a, whose marker joins the queue past the bound; e then sheds
	// b and c (deliveries before the marker), which the pending marker
	// already stands for.
	if got := names(t, rec.next(t).items); !equal(got, []string{"d:write", "a:gap", "e:write"}) {
		t.Fatalf("batch = %v", got)
	}
	if s := g.Stats(); s.Markers != 1 || s.Covered != 3 {
		t.Fatalf("gap stats = %+v", s)
	}
	// The send has not returned, but the marker is on its way: the slot is
	// free, so the next shed delivery gets a marker of its own.
	if g.Pending("us", "s1") {
		t.Fatal("marker slot still taken while its batch is in flight")
	}
	for _, n := range []string{"f", "g", "h", "i"} {
		q.Push("us", del("s1", n))
	}
	if s := g.Stats(); s.Markers != 2 || !g.Pending("us", "s1") {
		t.Fatalf("gap stats = %+v", s)
	}
	rec.mu.Lock()
	rec.gate = nil
	rec.mu.Unlock()
	close(gate)
	idle(t, q, "us", 1)
}
