package events

import (
	"testing"
	"time"
)

// TestCoalesceOneDeliveryPerWindow is the case: 100 sets of one
// key in 100 ms make one delivery, with the last value, when the window
// opened by the first ends.
func TestCoalesceOneDeliveryPerWindow(t *testing.T) {
	c := NewCoalescer[int](0)
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		c.Add(t0.Add(time.Duration(i)*time.Millisecond), "s", "p/notes/k", i)
	}
	if next, ok := c.Next(); !ok || !next.Equal(t0.Add(CoalesceWindowDefault)) {
		t.Fatalf("next %v %v: the window must end 250 ms after the first event", next, ok)
	}
	if got := c.Due(t0.Add(249*time.Millisecond), nil); len(got) != 0 {
		t.Fatalf("delivered before the window ended: %+v", got)
	}
	got := c.Due(t0.Add(CoalesceWindowDefault), nil)
	if len(got) != 1 || got[0].Value != 99 || got[0].Events != 100 {
		t.Fatalf("got %+v, want one delivery of 99 standing for 100 events", got)
	}
	if c.Replaced() != 99 || c.Open() != 0 {
		t.Errorf("replaced %d open %d", c.Replaced(), c.Open())
	}
	// The next event opens a new window.
	if !c.Add(t0.Add(300*time.Millisecond), "s", "p/notes/k", 100) {
		t.Error("an event after the window did not open a new one")
	}
}

// TestCoalesceWindowNotRestarted: events keep coming, and a delivery still
// goes out every window.
func TestCoalesceWindowNotRestarted(t *testing.T) {
	c := NewCoalescer[int](100 * time.Millisecond)
	t0 := time.Unix(0, 0)
	var got []Coalesced[int]
	for i := range 50 { // one event each 10 ms for 500 ms
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		got = c.Due(now, got)
		c.Add(now, "s", "x", i)
	}
	got = c.Due(t0.Add(time.Second), got)
	if len(got) != 5 {
		t.Fatalf("%d deliveries, want 5 (one per 100 ms window)", len(got))
	}
	for i, d := range got {
		if d.Value != i*10+9 {
			t.Errorf("window %d delivered %d, want its newest %d", i, d.Value, i*10+9)
		}
	}
}

// TestNoCoalescing: with no window, an event is due when it is added;
// only events added before the owner asks share a delivery.
func TestNoCoalescing(t *testing.T) {
	c := NewCoalescer[int](NoCoalescing)
	t0 := time.Unix(0, 0)
	c.Add(t0, "s", "x", 1)
	if next, ok := c.Next(); !ok || !next.Equal(t0) {
		t.Fatalf("next %v %v, want the time it was added", next, ok)
	}
	if got := c.Due(t0, nil); len(got) != 1 || got[0].Value != 1 {
		t.Fatalf("got %+v, want the event at once", got)
	}
	c.Add(t0, "s", "x", 2)
	c.Add(t0, "s", "x", 3)
	if got := c.Due(t0, nil); len(got) != 1 || got[0].Value != 3 || got[0].Events != 2 {
		t.Fatalf("got %+v, want one delivery of the newest of the two taken together", got)
	}
}

func TestCoalesceKeysApart(t *testing.T) {
	c := NewCoalescer[string](0)
	t0 := time.Unix(0, 0)
	c.Add(t0, "s1", "a", "1")
	c.Add(t0, "s2", "a", "2")
	c.Add(t0.Add(time.Millisecond), "s1", "b", "3")
	if n := c.Drop("s2"); n != 1 {
		t.Errorf("Drop s2: %d", n)
	}
	got := c.Due(t0.Add(time.Second), nil)
	if len(got) != 2 || got[0].Subject != "a" || got[1].Subject != "b" || got[0].Sub != "s1" {
		t.Fatalf("got %+v", got)
	}
	if _, ok := c.Next(); ok {
		t.Error("windows left open")
	}
}
