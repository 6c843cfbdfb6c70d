// Package testwait is the tests' one way to wait for a condition that
// another goroutine or process makes true: poll it with a deadline, never
// sleep a guessed time.
package testwait

import (
	"testing"
	"time"
)

// Timeout is how long For and Until wait before failing the test: long,
// because a slow CI machine under the race detector is not a failure.
const Timeout = 60 * time.Second

// Interval is the time between two polls.
const Interval = 5 * time.Millisecond

// For polls cond until it holds, failing t with what after Timeout.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Until(t, what, func() (bool, string) { return cond(), "" })
}

// Until polls cond until it holds, failing t after Timeout with what and
// the last state cond described.
func Until(t testing.TB, what string, cond func() (ok bool, last string)) {
	t.Helper()
	UntilWithin(t, Timeout, what, cond)
}

// UntilWithin is Until with a timeout of its own, for a condition that
// takes longer than Timeout to come true even on a fast machine (a
// system test working through a large data set).
func UntilWithin(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, last string)) {
	t.Helper()
	if err := poll(timeout, cond); err != "" {
		t.Fatalf("timed out after %v waiting for %s%s", timeout, what, err)
	}
}

// poll returns "" once cond holds, or a description of the last state if
// timeout passes first.
func poll(timeout time.Duration, cond func() (bool, string)) string {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return ""
		}
		select {
		case <-deadline.C:
			if last == "" {
				return "; the condition never held"
			}
			return "; last: " + last
		case <-tick.C:
		}
	}
}
