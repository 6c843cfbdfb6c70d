package bus

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Retry is switchyard's one retry policy: waits that grow from Min by Factor
// up to Max, each varied by ±Jitter so that many clients of a restarted
// server do not return in step. A Backoff follows it and starts over from
// Min after Reset, which callers make on success: an outage long ago does
// not make the next failure wait the maximum.
type Retry struct {
	// Min is the first wait. Zero means 50ms.
	Min time.Duration
	// Max caps the wait. Zero means 5s.
	Max time.Duration
	// Factor multiplies the wait after each failure. Zero means 2.
	Factor float64
	// Jitter varies each wait by up to this fraction either way. Zero means
	// 0.25; negative means none.
	Jitter float64
}

func (p Retry) withDefaults() Retry {
	if p.Min <= 0 {
		p.Min = 50 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 5 * time.Second
	}
	if p.Max < p.Min {
		p.Max = p.Min
	}
	if !(p.Factor >= 1) { // NaN too: it would make every wait NaN
		p.Factor = 2
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = 0.25
	case p.Jitter > 1:
		p.Jitter = 1
	}
	return p // a negative Jitter stays negative (none), so this is idempotent
}

// Delay is the wait before retry n (1-based): Min·Factor^(n-1), capped at
// Max, jittered. It takes the same time for any n: a loop per attempt ran
// n times when Factor 1 never reaches Max.
func (p Retry) Delay(n int) time.Duration {
	p = p.withDefaults()
	d := float64(p.Min)
	if n > 1 {
		// Factor ≥ 1, so the power is finite or +Inf, which the cap takes.
		d *= math.Pow(p.Factor, float64(n-1))
	}
	d = min(d, float64(p.Max))
	if p.Jitter > 0 {
		d *= 1 + p.Jitter*(2*rand.Float64()-1)
	}
	// A Max near the top of time.Duration (a caller's "no cap"), jittered
	// up or not, rounds to 2^63 as a float64, which converts to a negative
	// Duration: a wait that ends at once, and a retry loop that spins.
	if d >= float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// Start returns a Backoff following p, before its first failure.
func (p Retry) Start() *Backoff { return &Backoff{p: p.withDefaults()} }

// Backoff is one run of retries under a Retry policy. It is not safe for
// concurrent use.
type Backoff struct {
	p Retry
	n int // failures since the last Reset
}

// Failures is the number of failures since the last Reset.
func (b *Backoff) Failures() int { return b.n }

// Next records a failure and returns the wait before the next try.
func (b *Backoff) Next() time.Duration {
	b.n++
	return b.p.Delay(b.n)
}

// Wait records a failure and waits Next, or returns ctx's error if ctx ends
// first.
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Reset starts over from Min: call it after a success.
func (b *Backoff) Reset() { b.n = 0 }
