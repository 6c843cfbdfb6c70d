package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
)

// FollowBatch bounds the events applied in one transaction.
const FollowBatch = 1000

// Follower keeps an Index current from a releases stream; see Index.Follow.
// It follows the lifecycle package's rules: Start twice fails, Stop before
// Start or twice is safe, and a stopped follower does not start again.
type Follower struct {
	ix   *Index
	s    *persist.Stream
	w    *persist.Watcher
	base lifecycle.Base

	ctx    context.Context // the run context's child, so that run can end it too
	cancel context.CancelFunc
	events chan persist.Event
	// dropping is set, on the watcher's goroutine, when the first event
	// could not be queued because the follower is stopping: every later
	// event is dropped too, so what reaches the index is always a prefix
	// of the feed and LastSeq never passes an event it did not apply.
	dropping atomic.Bool
	done     chan struct{}
	caughtUp chan struct{}

	malformed atomic.Uint64
	errMu     sync.Mutex // protects err
	err       error
}

// Follow is NewFollower and Start: it applies the stream s (the releases
// stream, usenet.Store.Releases) to the index until Stop or a permanent
// error; ctx is used only to start. It starts after
// LastSeq, so a restarted index resumes exactly where it left off: each
// batch of events is applied in one transaction together with the seq it
// brings the index to. At each caught-up point it removes the releases the
// stream no longer holds (deleted while the index was not following): when
// its count of releases or its LastSeq differs from the stream's, it
// compares the stream's keys with its own.
//
// A message whose value is not a JSON release is skipped and counted
// (Malformed). A failure to write the index ends the follower (Err): going
// on would leave a hole that no later event fills.
func (ix *Index) Follow(ctx context.Context, s *persist.Stream) (*Follower, error) {
	f := NewFollower(ix, s)
	if err := f.Start(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// NewFollower returns a follower of s into ix, not yet started; see
// Index.Follow for what it does once started.
func NewFollower(ix *Index, s *persist.Stream) *Follower {
	return &Follower{
		ix: ix, s: s,
		events:   make(chan persist.Event, FollowBatch),
		done:     make(chan struct{}),
		caughtUp: make(chan struct{}),
	}
}

// Start watches the stream from after the index's LastSeq and applies it
// until Stop; ctx is used only to start.
func (f *Follower) Start(ctx context.Context) error {
	return f.base.Start(ctx, "search: follower", func(ctx context.Context) error {
		f.ctx, f.cancel = context.WithCancel(f.base.Run())
		w, err := f.s.Watch(f.ctx, persist.WatchOptions{From: f.ix.LastSeq() + 1}, f.offer)
		if err != nil {
			f.cancel()
			return fmt.Errorf("search: follow %s/%s: %w", f.s.Scope(), f.s.Name(), err)
		}
		f.w = w
		go f.run()
		return nil
	})
}

// offer runs on the watcher's goroutine. Blocking here when the index is
// slow is fine: the watcher buffers and, past its buffer, resyncs.
func (f *Follower) offer(ev persist.Event) {
	if f.dropping.Load() {
		return
	}
	select {
	case f.events <- ev:
	case <-f.ctx.Done():
		f.dropping.Store(true)
	}
}

// Stop stops following and returns why the follower ended, if not because
// it was asked to; past ctx it gives up waiting for the batch being
// applied and returns ctx's error. Events received but not yet applied are
// not applied; the next Follow reads them again.
func (f *Follower) Stop(ctx context.Context) error {
	return f.base.Stop(ctx, func(ctx context.Context) error {
		f.cancel()
		_ = f.w.Stop(ctx)
		select {
		case <-f.done:
			return f.Err()
		case <-ctx.Done():
			return fmt.Errorf("search: follower stop: %w", ctx.Err())
		}
	})
}

// Done is closed when the follower has ended.
func (f *Follower) Done() <-chan struct{} { return f.done }

// CaughtUp is closed once the index holds everything the stream held when
// following started.
func (f *Follower) CaughtUp() <-chan struct{} { return f.caughtUp }

// Stats is the stats of the follower's stream watcher (zero before
// Start), for the metrics and the dashboard.
func (f *Follower) Stats() persist.WatchStats {
	if f.w == nil {
		return persist.WatchStats{}
	}
	return f.w.Stats()
}

// Malformed counts the messages skipped because their value was not a
// JSON release.
func (f *Follower) Malformed() uint64 { return f.malformed.Load() }

// Err is why the follower ended on its own: a write to the index failed
// or the watcher ended (persist.Event EventEnded). Nil while it runs and
// after Stop or the end of its context.
func (f *Follower) Err() error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}

func (f *Follower) fail(err error) {
	f.errMu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.errMu.Unlock()
}

func (f *Follower) run() {
	defer close(f.done)
	defer f.cancel()
	sawCaughtUp := false
	for {
		var batch []persist.Event
		select {
		case <-f.ctx.Done():
			return
		case ev := <-f.events:
			batch = append(batch, ev)
		}
	drain:
		for len(batch) < FollowBatch {
			select {
			case ev := <-f.events:
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		b, caughtUp, ended := f.toBatch(batch)
		// Stop cancels ctx: a batch cut short by it is rolled back whole
		// and read again by the next Follow.
		if err := f.ix.Apply(f.ctx, b); err != nil {
			if f.ctx.Err() == nil {
				f.fail(err)
			}
			return
		}
		if ended != nil {
			f.fail(ended)
			return
		}
		if caughtUp {
			if err := f.reconcile(); err != nil {
				if f.ctx.Err() == nil {
					f.fail(err)
				}
				return
			}
			if !sawCaughtUp {
				sawCaughtUp = true
				close(f.caughtUp)
			}
		}
	}
}

// toBatch turns watcher events into one Batch; it reports whether they
// included a caught-up point and the error of an EventEnded.
func (f *Follower) toBatch(evs []persist.Event) (b Batch, caughtUp bool, ended error) {
	for _, ev := range evs {
		switch ev.Kind {
		case persist.EventSet:
			m := ev.Msg
			b.LastSeq = max(b.LastSeq, m.Seq)
			var r usenet.Release
			if err := json.Unmarshal(m.Value, &r); err != nil {
				f.malformed.Add(1)
				continue
			}
			if m.Key != "" {
				// The stream is keyed by release ID: the key is the truth.
				r.ID = m.Key
			}
			if r.ID == "" {
				f.malformed.Add(1)
				continue
			}
			b.Changes = append(b.Changes, Change{Seq: m.Seq, Release: r})
		case persist.EventDelete:
			for _, q := range ev.Seqs {
				b.Changes = append(b.Changes, Change{Seq: q, Delete: true})
			}
		case persist.EventSkipped:
			b.LastSeq = max(b.LastSeq, ev.Last)
		case persist.EventCaughtUp:
			caughtUp = true
		case persist.EventEnded:
			ended = ev.Err
			if ended == nil {
				ended = errors.New("watcher ended")
			}
			ended = fmt.Errorf("search: follow %s/%s: %w", f.s.Scope(), f.s.Name(), ended)
		}
	}
	return b, caughtUp, ended
}

// reconcile removes the releases the stream no longer holds. A watch that
// resumes after a seq hears of no delete of a message older than that seq,
// so the releases deleted while the index was away, or since from among
// those it applied before, are found by comparing the stream's keys with
// the index. It costs one inventory call when nothing changed: equal
// counts say so only when the index has applied every seq the stream
// assigned (its last seq), since messages not applied yet (published after
// the caught-up point) can make up for a release deleted while away.
// Keys read ahead of the index are fine: an id the stream no longer holds
// goes (its delete, if still to come, then changes nothing), and one the
// index lacks yet is left to its set, which follows.
func (f *Follower) reconcile() error {
	inv, err := f.s.Inventory(f.ctx)
	if err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	n, err := f.ix.Count(f.ctx)
	if err != nil {
		return err
	}
	if int64(n) == inv.Count && inv.Seq == f.ix.LastSeq() {
		return nil
	}
	keys, err := f.s.Keys(f.ctx)
	if err != nil {
		return fmt.Errorf("search: reconcile: %w", err)
	}
	held := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		held[k] = struct{}{}
	}
	return f.ix.removeMissing(f.ctx, held)
}
