package work

import (
	"context"
	"time"
)

// TakeLeased runs the second step of Acquire (the range's compare-and-set)
// for a caller that created lease le with token tok and stalled since.
func (l *Leases) TakeLeased(ctx context.Context, r Versioned[Range], le Lease, tok uint64) (*Held, error) {
	return l.takeLeased(ctx, r, le, tok)
}

// SetBeforeAcquire makes w call f just before each Acquire.
func SetBeforeAcquire(w *Worker, f func()) { w.beforeAcquire = f }

// SetHeartbeatCall makes w renew its lease with f.
func SetHeartbeatCall(w *Worker, f func(ctx context.Context, h *Held, progress int64) error) {
	w.heartbeatCall = f
}

// StopAsked is closed once Stop was called on w.
func StopAsked(w *Worker) <-chan struct{} { return w.stop }

// SetClock makes l's Retire judge a done range's age by now (set it before
// l is used).
func SetClock(l *Leases, now func() time.Time) { l.now = now }

// SetPlannerHook makes p call f before it claims a group record (step
// "claim") and before it writes a claim's ranges ("write"), with the record
// as it read it (set it before p is used).
func SetPlannerHook(p *Planner, f func(step string, g Group)) { p.hook = f }

// SetShareClock makes s stamp its entry and judge the others' staleness by
// now (set it before s is used).
func SetShareClock(s *Share, now func() time.Time) { s.now = now }
