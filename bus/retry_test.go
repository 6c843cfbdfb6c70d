package bus_test

import (
	"context"
	"errors"
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
	for _, bad := range [][]string{nil, {""}, {"a.b"}, {"*"}, {">"}, {"a b"}, {"a\tb"}, {"a\x00"}, {"0", "0"}, {"../x"}, {`a\b`}} {
		if err := bus.ValidIDs(bad); err == nil || strings.TrimSpace(err.Error()) == "" {
			t.Errorf("ValidIDs(%q) accepted", bad)
		}
	}
}
