package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	calls := 0
	For(t, "three increments", func() bool { calls++; return n.Load() == 3 })
	if n.Load() != 3 || calls == 0 {
		t.Fatalf("returned with n=%d after %d calls", n.Load(), calls)
	}
}

func TestPollGivesUpWithTheLastState(t *testing.T) {
	got := poll(20*time.Millisecond, func() (bool, string) { return false, "still 2" })
	if got != "; last: still 2" {
		t.Fatalf("poll = %q", got)
	}
	if got := poll(20*time.Millisecond, func() (bool, string) { return false, "" }); got == "" {
		t.Fatal("poll of a condition that never holds returned as if it held")
	}
	if got := poll(time.Hour, func() (bool, string) { return true, "" }); got != "" {
		t.Fatalf("poll of a holding condition = %q", got)
	}
}
