package bus_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/bus"
)

func TestRetryDelay(t *testing.T) {
	p := bus.Retry{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond, Factor: 2, Jitter: -1}
	want := []time.Duration{10, 20, 40, 80, 100, 100}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
	// Jitter stays within its fraction.
	j := bus.Retry{Min: 100 * time.Millisecond, Max: time.Second, Jitter: 0.25}
	for range 1000 {
		if d := j.Delay(1); d < 75*time.Millisecond || d > 125*time.Millisecond {
			t.Fatalf("jittered delay %s outside 75ms..125ms", d)
		}
	}
	// A huge attempt number neither overflows nor loops for long.
	if d := p.Delay(1 << 30); d != 100*time.Millisecond {
		t.Fatalf("Delay(2^30) = %s", d)
	}
}

// TestRetryDelayNeverNegative: a Max at the top of time.Duration (a
// caller's "no cap") still gives waits of at least Min, jittered or not.
// (Was: the capped wait, 2^63 as a float64, converted back to a negative
// Duration, so Backoff.Wait returned at once and the retry loop spun.)
func TestRetryDelayNeverNegative(t *testing.T) {
	t.Parallel()
	for _, p := range []bus.Retry{
		{Min: time.Second, Max: math.MaxInt64, Jitter: -1},
		{Min: time.Second, Max: math.MaxInt64},
	} {
		for n := 1; n <= 100; n++ {
			if d := p.Delay(n); d < p.Min/2 {
				t.Fatalf("Retry%+v.Delay(%d) = %s: below Min (negative or zero wait: a busy retry loop)", p, n, d)
			}
		}
	}
}

// TestRetryDelayFactorOne: Factor 1 (constant waits) is a valid policy,
// and Delay of the largest attempt number with it returns Min. (Was: Delay
// multiplied once per attempt while under Max, which Factor 1 never
// leaves: Delay(n) ran n steps, about a second for 2^30 and for ever for
// this one, which the deadline below reports as a hang, not a slowness.)
func TestRetryDelayFactorOne(t *testing.T) {
	t.Parallel()
	p := bus.Retry{Min: 10 * time.Millisecond, Max: time.Second, Factor: 1, Jitter: -1}
	got := make(chan time.Duration, 1)
	go func() { got <- p.Delay(math.MaxInt) }()
	select {
	case d := <-got:
		if d != 10*time.Millisecond {
			t.Fatalf("Delay(MaxInt) with Factor 1 = %s, want 10ms", d)
		}
	case <-time.After(time.Minute):
		t.Fatal("Delay(MaxInt) with Factor 1 has not returned: it steps once per attempt")
	}
}

// After Reset the waits start over: one outage does not make every later
// failure wait the maximum.
func TestBackoffResets(t *testing.T) {
	b := bus.Retry{Min: time.Millisecond, Max: 64 * time.Millisecond, Jitter: -1}.Start()
	for range 10 {
		b.Next()
	}
	if b.Failures() != 10 {
		t.Fatalf("failures %d", b.Failures())
	}
	b.Reset()
	if d := b.Next(); d != time.Millisecond {
		t.Fatalf("first wait after Reset %s, want 1ms", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (bus.Retry{Min: time.Hour}).Start().Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context: %v", err)
	}
}

func TestValidIDs(t *testing.T) {
	for _, ok := range [][]string{{"0"}, {"0", "1", "2"}, {"east-1", "west_2", "ü"}} {
		if err := bus.ValidIDs(ok); err != nil {
			t.Errorf("ValidIDs(%q) = %v", ok, err)
		}
	}
	for _, bad := range [][]string{nil, {""}, {"a.b"}, {"*"}, {">"}, {"a b"}, {"a\tb"}, {"a\x00"}, {"0", "0"}, {"../x"}, {`a\b`}, {"a,b"}} {
		if err := bus.ValidIDs(bad); err == nil || strings.TrimSpace(err.Error()) == "" {
			t.Errorf("ValidIDs(%q) accepted", bad)
		}
	}
}
