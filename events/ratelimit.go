package events

import "time"

// The seed system's delivery limits per subscription over a sliding
// minute.
const (
	BroadcastPerMinute = 600
	SinglePerMinute    = 120
)

// Limiter counts deliveries per subscription over a sliding minute. The
// minute is estimated from two fixed ones, the current and the previous,
// the previous weighted by how much of it the sliding minute still covers
// (the usual sliding-window counter: three words per subscription rather
// than a timestamp per delivery, exact when deliveries are spread evenly,
// and never letting more than twice the limit through in any minute). Not
// safe for concurrent use.
type Limiter struct {
	window time.Duration
	subs   map[SubID]*rate
}

type rate struct {
	start     time.Time // of the current fixed window
	cur, prev int
	limited   bool // the last Allow refused
}

// NewLimiter returns a limiter over window; zero means a minute.
func NewLimiter(window time.Duration) *Limiter {
	if window <= 0 {
		window = time.Minute
	}
	return &Limiter{window: window, subs: make(map[SubID]*rate)}
}

// Allow reports whether sub may have one more delivery at now under limit
// per window, and counts it if so. When it may not, gap says whether this
// is the first refusal since the last delivery: the one event that becomes
// the gap marker, the later ones being covered by it.
func (l *Limiter) Allow(now time.Time, sub SubID, limit int) (ok, gap bool) {
	r := l.subs[sub]
	if r == nil {
		r = &rate{start: now}
		l.subs[sub] = r
	}
	if el := now.Sub(r.start); el >= l.window {
		if el >= 2*l.window {
			r.prev = 0
		} else {
			r.prev = r.cur
		}
		r.cur = 0
		r.start = r.start.Add(el / l.window * l.window)
	}
	weight := 1 - float64(now.Sub(r.start))/float64(l.window)
	if float64(r.prev)*weight+float64(r.cur) < float64(limit) {
		r.cur++
		r.limited = false
		return true, false
	}
	gap = !r.limited
	r.limited = true
	return false, gap
}

// Forget drops sub's counts (the subscription is gone).
func (l *Limiter) Forget(sub SubID) { delete(l.subs, sub) }

// Len is the number of subscriptions counted.
func (l *Limiter) Len() int { return len(l.subs) }
