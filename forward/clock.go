package forward

import "time"

// Clock is the time source of a [PeerQueue], a [Sender] and a [Receiver].
// Tests inject a fake one; the zero config uses the wall clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call made by [Clock.AfterFunc].
type Timer interface {
	// Stop prevents the call if it has not run yet and reports whether it did.
	Stop() bool
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// WallClock is the real clock; configs default to it.
var WallClock Clock = wallClock{}
