package events

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSingleOneInFlight: the next delivery only after the ack; an ack of
// anything else is an error; a repeated ack is a no-op.
func TestSingleOneInFlight(t *testing.T) {
	s := NewSingle[string](SingleConfig{})
	now := time.Unix(0, 0)
	s.Push("sub", "e1", "one", 0)
	s.Push("sub", "e2", "two", 0)
	e, ok := s.Next(now, "sub")
	if !ok || e.ID != "e1" || e.Attempt != 1 {
		t.Fatalf("first: %+v %v", e, ok)
	}
	if _, ok := s.Next(now, "sub"); ok {
		t.Fatal("a second delivery went out before the first was acked")
	}
	if _, err := s.Ack("sub", "e2"); !errors.Is(err, ErrUnknownEntry) {
		t.Errorf("ack of e2 while e1 is in flight: %v", err)
	}
	if _, err := s.Ack("nosub", "e1"); !errors.Is(err, ErrUnknownEntry) {
		t.Errorf("ack on an unknown subscription: %v", err)
	}
	if dup, err := s.Ack("sub", "e1"); err != nil || dup {
		t.Fatalf("ack e1: %v %v", dup, err)
	}
	if dup, err := s.Ack("sub", "e1"); err != nil || !dup {
		t.Errorf("second ack of e1: dup %v err %v, want a no-op", dup, err)
	}
	e, ok = s.Next(now, "sub")
	if !ok || e.ID != "e2" {
		t.Fatalf("after the ack: %+v %v", e, ok)
	}
}

// TestSingleLeaseRedelivers: no ack within the lease → the same entry
// again, attempt 2; the ack then settles it.
func TestSingleLeaseRedelivers(t *testing.T) {
	s := NewSingle[int](SingleConfig{})
	t0 := time.Unix(0, 0)
	s.Push("a", "e1", 1, 0)
	s.Push("b", "f1", 1, 0)
	s.Next(t0, "a")
	s.Next(t0.Add(10*time.Second), "b")
	if exp, ok := s.NextExpiry(); !ok || !exp.Equal(t0.Add(LeaseDefault)) {
		t.Fatalf("next expiry %v %v", exp, ok)
	}
	if got := s.Expired(t0.Add(LeaseDefault-time.Millisecond), nil); len(got) != 0 {
		t.Fatalf("expired early: %v", got)
	}
	if _, ok := s.Next(t0.Add(LeaseDefault-time.Millisecond), "a"); ok {
		t.Fatal("redelivered within the lease")
	}
	got := s.Expired(t0.Add(LeaseDefault), nil)
	if fmt.Sprint(got) != "[a]" {
		t.Fatalf("expired %v, want [a]", got)
	}
	e, ok := s.Next(t0.Add(LeaseDefault), "a")
	if !ok || e.ID != "e1" || e.Attempt != 2 {
		t.Fatalf("redelivery: %+v %v", e, ok)
	}
	if _, err := s.Ack("a", "e1"); err != nil {
		t.Fatal(err)
	}
	// b's lease is the next to end; a has nothing in flight.
	if exp, ok := s.NextExpiry(); !ok || !exp.Equal(t0.Add(10*time.Second+LeaseDefault)) {
		t.Errorf("next expiry %v %v, want b's", exp, ok)
	}
}

// TestSingleBacklogOverflow: past the backlog the oldest are shed into one
// marker at the front, delivered (and acked) in their place.
func TestSingleBacklogOverflow(t *testing.T) {
	s := NewSingle[int](SingleConfig{Backlog: 10})
	now := time.Unix(0, 0)
	for i := range 25 {
		s.Push("s", fmt.Sprintf("e%02d", i), i, int64(i))
	}
	if w := s.Waiting("s"); w != 11 {
		t.Fatalf("waiting %d, want 10 and the marker", w)
	}
	if s.Shed() != 15 {
		t.Errorf("shed %d, want 15", s.Shed())
	}
	e, ok := s.Next(now, "s")
	if !ok || e.Gap == nil {
		t.Fatalf("first delivery %+v, want the marker", e)
	}
	if e.Gap.Reason != ReasonBacklogOverflow || e.Gap.Count != 15 || e.Gap.From != 10 || e.Gap.To != 24 || e.Gap.Sub != "s" {
		t.Errorf("marker %+v", *e.Gap)
	}
	if _, err := s.Ack("s", e.ID); err != nil {
		t.Fatal(err)
	}
	e, _ = s.Next(now, "s")
	if e.ID != "e15" {
		t.Errorf("after the marker: %s, want the oldest kept, e15", e.ID)
	}
}

// TestSingleDefaultBacklog is the figure: 10,000 waiting, then one
// backlog_overflow marker for the rest.
func TestSingleDefaultBacklog(t *testing.T) {
	s := NewSingle[struct{}](SingleConfig{})
	for i := range BacklogDefault + 500 {
		s.Push("s", fmt.Sprint(i), struct{}{}, 0)
	}
	e, _ := s.Next(time.Unix(0, 0), "s")
	if e.Gap == nil || e.Gap.Count != 500 {
		t.Fatalf("front %+v, want a marker for 500", e)
	}
	if w := s.Waiting("s"); w != BacklogDefault {
		t.Errorf("waiting %d after the marker went out, want %d", w, BacklogDefault)
	}
}

// Resume puts entries read back ahead of those waiting (behind a backlog
// marker), skips ids already queued or in flight, and makes a later Push
// of a resumed id a no-op; Pending lists what is unsettled.
func TestSingleResume(t *testing.T) {
	s := NewSingle[string](SingleConfig{Backlog: 3})
	now := time.Unix(0, 0)
	s.Push("q", "s#5", "five", 5)
	if e, ok := s.Next(now, "q"); !ok || e.ID != "s#5" {
		t.Fatalf("first delivery %+v", e)
	}
	s.Push("q", "s#9", "nine", 9)
	s.Resume("q", []Resumed[string]{{ID: "s#3", Value: "three", TS: 3}, {ID: "s#5", Value: "five", TS: 5}, {ID: "s#7", Value: "seven", TS: 7}})
	s.Push("q", "s#7", "seven", 7) // read back and still on its way: once
	if got := s.Pending("q"); !slices.Equal(got, []string{"s#5", "s#3", "s#7", "s#9"}) {
		t.Fatalf("pending %v", got)
	}
	if _, err := s.Ack("q", "s#5"); err != nil {
		t.Fatal(err)
	}
	var order []string
	for {
		e, ok := s.Next(now, "q")
		if !ok {
			break
		}
		order = append(order, e.ID)
		if _, err := s.Ack("q", e.ID); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(order, []string{"s#3", "s#7", "s#9"}) {
		t.Fatalf("delivered %v, want the resumed ones first", order)
	}
	// The read-back s#7 came on its way once: the same id again is
	// another change (the delete of row 7, whose id is its seq's), and so
	// is one through PushNew.
	s.Push("q", "s#7", "deleted", 10)
	s.Resume("q", []Resumed[string]{{ID: "s#11", Value: "eleven", TS: 11}})
	s.PushNew("q", "s#11", "deleted", 12)
	if got := s.Pending("q"); !slices.Equal(got, []string{"s#11", "s#7", "s#11"}) {
		t.Fatalf("pending %v, want the read-back s#11 first, then the second s#7 and the other s#11", got)
	}
	for {
		e, ok := s.Next(now, "q")
		if !ok {
			break
		}
		if _, err := s.Ack("q", e.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Past the bound, the oldest resumed entries are shed into the marker.
	s.Resume("q", []Resumed[string]{{ID: "t#1", TS: 1}, {ID: "t#2", TS: 2}, {ID: "t#3", TS: 3}, {ID: "t#4", TS: 4}, {ID: "t#5", TS: 5}})
	e, ok := s.Next(now, "q")
	if !ok || e.Gap == nil || e.Gap.Reason != ReasonBacklogOverflow || e.Gap.Count != 2 {
		t.Fatalf("front after an overlong resume %+v", e)
	}
	if got := s.Pending("q"); !slices.Equal(got, []string{e.ID, "t#3", "t#4", "t#5"}) {
		t.Fatalf("pending %v", got)
	}
}

// TestSingleTotals: the backlog and lease totals that /metrics reads stay
// the sums over the subscriptions through every kind of change (pushes
// past the backlog, resumes, deliveries, acks, expired leases, drops),
// checked after each of a long random run of them.
func TestSingleTotals(t *testing.T) {
	s := NewSingle[int](SingleConfig{Backlog: 5, Lease: time.Second})
	r := rand.New(rand.NewPCG(1, 2))
	subs := []SubID{"a", "b", "c"}
	now := time.Unix(0, 0)
	n := 0
	for step := range 5000 {
		sub := subs[r.IntN(len(subs))]
		switch r.IntN(7) {
		case 0, 1:
			n++
			s.Push(sub, fmt.Sprint("e", n), n, int64(n))
		case 2:
			var rs []Resumed[int]
			for range r.IntN(8) {
				n++
				rs = append(rs, Resumed[int]{ID: fmt.Sprint("e", n), Value: n, TS: int64(n)})
			}
			s.Resume(sub, rs)
		case 3:
			s.Next(now, sub)
		case 4:
			if e, ok := s.InFlight(sub); ok {
				if _, err := s.Ack(sub, e.ID); err != nil {
					t.Fatal(err)
				}
			}
		case 5:
			now = now.Add(time.Duration(r.IntN(1500)) * time.Millisecond)
			for _, id := range s.Expired(now, nil) {
				s.Next(now, id)
			}
		case 6:
			if r.IntN(10) == 0 {
				s.Drop(sub)
			}
		}
		wantW, wantF := 0, 0
		for _, id := range subs {
			wantW += s.Waiting(id)
			if _, ok := s.InFlight(id); ok {
				wantF++
			}
		}
		if w, f := s.Totals(); w != wantW || f != wantF {
			t.Fatalf("step %d: Totals %d waiting, %d in flight; the subscriptions hold %d and %d", step, w, f, wantW, wantF)
		}
	}
	if s.Shed() == 0 {
		t.Error("the run never went past the backlog: the shedding paths are untested")
	}
}

// TestSingleShedMarkerAddsItsCount: a marker shed into the backlog
// marker at the front adds its Count and span (From/To) to it: Resume puts
// its own backlog_overflow marker (for read-back changes it shed) behind
// the one at the front, and past the bound that marker is shed. A
// region_restart marker is not shed: it keeps its reason and count, and
// the entry behind it goes instead. (A shed marker counted as one entry:
// the changes it stood for vanished from the count, 2 instead of 6 here,
// and a region_restart marker became a backlog_overflow one for 1.)
func TestSingleShedMarkerAddsItsCount(t *testing.T) {
	s := NewSingle[string](SingleConfig{Backlog: 1})
	s.Push("q", "s#1", "one", 1)
	s.Push("q", "s#2", "two", 2) // s#1 shed: a marker for 1, then s#2
	s.Resume("q", []Resumed[string]{
		{ID: "gap-resumed-1", TS: 3, Marker: &Gap{Reason: ReasonBacklogOverflow, Sub: "q", Count: 5, From: 1, To: 3}},
	})
	total := 0
	for e := range s.Unsettled("q") {
		if e.Gap != nil {
			total += e.Gap.Count
		}
	}
	if total != 6 {
		t.Fatalf("pending %v: markers count %d shed changes, want 6 (1 shed live + 5 shed while reading back)", s.Pending("q"), total)
	}
	if e, _ := s.Next(time.Unix(0, 0), "q"); e.Gap == nil || e.Gap.From != 1 || e.Gap.To != 3 {
		t.Fatalf("front %+v, want the marker spanning 1 to 3", e)
	}

	// A region_restart marker is kept, the entries behind it shed.
	s = NewSingle[string](SingleConfig{Backlog: 1})
	s.Resume("q", []Resumed[string]{
		{ID: "gap-restart", TS: 1, Marker: &Gap{Reason: ReasonRegionRestart, Sub: "q", Count: 3, From: 1, To: 1}},
		{ID: "s#2", Value: "two", TS: 2},
	})
	s.Push("q", "s#3", "three", 3)
	var got []string
	for e := range s.Unsettled("q") {
		if e.Gap == nil {
			t.Fatalf("pending %v: entry %s kept past the bound", s.Pending("q"), e.ID)
		}
		got = append(got, fmt.Sprintf("%s %d", e.Gap.Reason, e.Gap.Count))
	}
	if !slices.Equal(got, []string{"backlog_overflow 2", "region_restart 3"}) {
		t.Fatalf("markers %v, want backlog_overflow 2 then region_restart 3", got)
	}
}
