package forward

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errStale is a batch whose place in its peer's order has passed: a later
// one was applied, or its sender's run (epoch) was replaced by a newer one.
var errStale = errors.New("stale batch")

// linkOrder applies one peer's numbered batches one at a time, in number
// order, however their requests overtake each other on the way: a sender
// keeps several in flight, each on its own connection.
//
// A batch waits until every lower number has been applied, or until the
// sender says it stopped waiting for them (a later batch's base is above
// them), or until OrderWait passes with no batch entering or leaving the
// sink; then the batches it waited for are stale. A stale batch is refused, and its sender treats the refusal as a
// lost batch (gap markers), so nothing is applied out of order or twice,
// and nothing is skipped silently.
type linkOrder struct {
	mu      sync.Mutex    // protects the fields below
	epoch   uint64        // the sender's run being applied
	next    uint64        // the number applied next; lower ones are stale
	busy    bool          // a batch is in the sink now
	changed chan struct{} // closed and replaced when the fields change
	// waiting are the batches in enter now. A batch whose wait ran out
	// gives up only on the numbers below the lowest of them of this
	// epoch: a lower one that arrived meanwhile goes first, not stale.
	waiting map[*Batch]struct{}
	// skipped: next was moved past numbers never applied, by a batch that
	// gave up on them for a lower one; that one reports the skip.
	skipped bool
}

func newLinkOrder() *linkOrder {
	return &linkOrder{changed: make(chan struct{}), waiting: make(map[*Batch]struct{})}
}

// lowestWaitingLocked is the lowest number of the batches waiting in the
// current epoch at or above next, and whether there is one.
func (o *linkOrder) lowestWaitingLocked() (uint64, bool) {
	low, ok := uint64(0), false
	for w := range o.waiting {
		if w.Epoch == o.epoch && w.Seq >= o.next && (!ok || w.Seq < low) {
			low, ok = w.Seq, true
		}
	}
	return low, ok
}

func (o *linkOrder) bumpLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// enter waits for b's turn. On success the caller applies b and then
// calls leave(b); skipped says batches below b were given up on.
func (o *linkOrder) enter(ctx context.Context, b *Batch, clk Clock, wait time.Duration) (skipped bool, err error) {
	o.mu.Lock()
	if b.Epoch > o.epoch {
		// A new run of the sender (or the first we see): nothing of the
		// old one is applied any more, and nothing below base is coming.
		o.epoch, o.next = b.Epoch, b.Base
		o.bumpLocked()
	}
	if b.Epoch == o.epoch && b.Base > o.next {
		// Every send below base has returned at the sender: those that
		// have not been applied never will be.
		o.next = b.Base
		o.bumpLocked()
	}
	// The clock runs only while nothing happens: it restarts whenever a
	// batch enters or leaves the sink, and stops while one is in it. So a
	// batch gives up on the ones before it only after OrderWait in which
	// the missing one neither arrived nor anything else moved, never merely
	// because a long line ahead of it took that long.
	var timer Timer
	var expired chan struct{}
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer, expired = nil, nil
		}
	}
	defer stopTimer()
	o.waiting[b] = struct{}{}
	defer func() {
		o.mu.Lock()
		delete(o.waiting, b)
		o.mu.Unlock()
	}()
	timedOut := false
	for {
		if b.Epoch != o.epoch || b.Seq < o.next {
			o.mu.Unlock()
			return false, errStale
		}
		if !o.busy && timedOut {
			if low, ok := o.lowestWaitingLocked(); ok && low < b.Seq {
				// Give up on the missing numbers only: the lowest batch
				// waiting goes first, then this one in its turn.
				o.next, o.skipped, timedOut = low, true, false
				o.bumpLocked()
				continue
			}
		}
		if !o.busy && (b.Seq == o.next || timedOut) {
			break
		}
		stopTimer()
		if !o.busy {
			ch := make(chan struct{})
			timer, expired = clk.AfterFunc(wait, func() { close(ch) }), ch
		}
		changed := o.changed
		o.mu.Unlock()
		select {
		case <-changed:
			o.mu.Lock()
		case <-expired:
			o.mu.Lock()
			// Unless something moved just as the clock ran out.
			timedOut = o.changed == changed
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	skipped = b.Seq > o.next || o.skipped
	o.next, o.busy, o.skipped = b.Seq, true, false
	o.bumpLocked()
	o.mu.Unlock()
	return skipped, nil
}

// leave ends b's turn: the next number may go.
func (o *linkOrder) leave(b *Batch) {
	o.mu.Lock()
	o.busy = false
	if o.epoch == b.Epoch && o.next <= b.Seq {
		o.next = b.Seq + 1
	}
	o.bumpLocked()
	o.mu.Unlock()
}
