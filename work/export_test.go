package work

import "context"

// TakeLeased runs the second step of Acquire (the range's compare-and-set)
// for a caller that created lease le with token tok and stalled since.
func (l *Leases) TakeLeased(ctx context.Context, r Versioned[Range], le Lease, tok uint64) (*Held, error) {
	return l.takeLeased(ctx, r, le, tok)
}
