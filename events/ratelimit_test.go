package events

import (
	"testing"
	"time"
)

// TestLimiterGapThenDeliveriesAgain: past the limit, the first refused
// event becomes the gap and the rest are covered by it; once the minute
// slides on, deliveries go out again.
func TestLimiterGapThenDeliveriesAgain(t *testing.T) {
	l := NewLimiter(0)
	t0 := time.Unix(0, 0)
	for i := range SinglePerMinute {
		if ok, _ := l.Allow(t0.Add(time.Duration(i)*time.Millisecond), "s", SinglePerMinute); !ok {
			t.Fatalf("delivery %d refused under the limit", i)
		}
	}
	ok, gap := l.Allow(t0.Add(time.Second), "s", SinglePerMinute)
	if ok || !gap {
		t.Fatalf("first over the limit: ok %v gap %v, want a gap", ok, gap)
	}
	ok, gap = l.Allow(t0.Add(2*time.Second), "s", SinglePerMinute)
	if ok || gap {
		t.Fatalf("second over the limit: ok %v gap %v, want covered by the first gap", ok, gap)
	}
	// Another subscription has its own minute.
	if ok, _ := l.Allow(t0.Add(2*time.Second), "other", SinglePerMinute); !ok {
		t.Error("another subscription was limited")
	}
	// Half a minute into the next one, half the previous still counts.
	if ok, _ := l.Allow(t0.Add(90*time.Second), "s", SinglePerMinute); !ok {
		t.Error("refused after the minute slid on")
	}
	// Two minutes on, nothing counts.
	n := 0
	for i := range 2 * SinglePerMinute {
		if ok, _ := l.Allow(t0.Add(5*time.Minute+time.Duration(i)*time.Millisecond), "s", SinglePerMinute); ok {
			n++
		}
	}
	if n != SinglePerMinute {
		t.Errorf("%d allowed in a fresh minute, want %d", n, SinglePerMinute)
	}
}

// TestLimiterSlidingBound: events spread evenly at twice the rate are let
// through at about the rate, never more than the limit in a fixed minute.
func TestLimiterSlidingBound(t *testing.T) {
	l := NewLimiter(time.Minute)
	t0 := time.Unix(0, 0)
	perMinute := map[int64]int{}
	for i := range 10 * 2 * BroadcastPerMinute { // 10 minutes at 1200/min
		now := t0.Add(time.Duration(i) * 50 * time.Millisecond)
		if ok, _ := l.Allow(now, "s", BroadcastPerMinute); ok {
			perMinute[now.Unix()/60]++
		}
	}
	for m, n := range perMinute {
		if n > BroadcastPerMinute {
			t.Errorf("minute %d let %d through, over %d", m, n, BroadcastPerMinute)
		}
		if m > 0 && n < BroadcastPerMinute*9/10 {
			t.Errorf("minute %d let only %d through at twice the rate", m, n)
		}
	}
}
