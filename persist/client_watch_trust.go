package persist

// The watcher's trust checks. Anyone who may publish on a feed subject can
// forge a feed message, so a watcher takes the feed's word only where a lie
// is cheap to catch later, and checks it against the server's own reads:
// sets it cannot place are read from the server (confirmSets), deletes of
// delivered seqs wait for the server to confirm them (confirmDeletes), two
// different messages with one number undo what was delivered on their word
// (conflict, rollback), and a quiet spell ends with an inventory check
// (idleCheck). What it remembers for this is bounded (watchFeedWindow,
// watchMaxEpochs, watchMaxPreDeleted): past a bound it re-reads the stream
// instead. See the trust model in docs/architecture.md.

import (
	"fmt"
	"slices"
)

// feedEpoch is what a watcher applied of one publisher's feed.
type feedEpoch struct {
	// n is the last Sy-Feed-N applied; 0 means the watcher (re)read the
	// stream since, so the next message is taken as it comes, but its
	// frames are not taken on its word (see apply).
	n uint64
	// win holds the last watchFeedWindow messages applied, oldest first.
	win []feedSeen
}

// feedSeen is one applied feed message, remembered to undo it.
type feedSeen struct {
	n, sum uint64
	// lo is the lowest seq delivered from the message's own set frames, 0
	// if none: the server's reads are not in question.
	lo uint64
	// deleted lists the seqs whose delete was delivered on the message's
	// word (the older row of a key it set).
	deleted []uint64
}

// apply handles one feed message and returns why a resync is needed, or "".
// b is shared with the client's other watchers of the stream: read only.
//
// Anyone who may publish on the feed subject can forge a message, so the
// feed's word is taken only where that is cheap to check later: a set is
// delivered from its frame only when the message is the next number of a
// publisher the watcher already follows and the set's seq is the next one
// (a forgery there is caught when the server's own message with that
// number arrives, or by the idle check). Any other set (a jump, the first
// message after a read, a seq a delete named first) is read from the
// server instead, and a delete of a delivered seq waits for the server to
// confirm it, except the older row of a key the message itself set.
func (w *Watcher) apply(b *feedBatch) string {
	epoch, n, server := b.epoch, b.n, b.server
	e, known := w.epochs[epoch]
	switch {
	case known && e.n != 0 && n <= e.n:
		return w.conflict(e, b)
	case known && e.n != 0 && n != e.n+1:
		return fmt.Sprintf("lost feed messages %d..%d of server %q", e.n+1, n-1, server)
	case !known && len(w.epochs) > 0:
		// A restarted or new owner: the previous one may have committed
		// changes it never published.
		w.rememberEpoch(epoch)
		return fmt.Sprintf("new publisher (server %q, epoch %q)", server, epoch)
	}
	trusted := known && e.n != 0
	if !known {
		e = w.rememberEpoch(epoch)
	}
	e.n = n
	seen := feedSeen{n: n, sum: b.sum}
	defer func() {
		if len(e.win) >= watchFeedWindow {
			e.win = slices.Delete(e.win, 0, len(e.win)-watchFeedWindow+1)
		}
		e.win = append(e.win, seen)
	}()
	if !trusted {
		// Read what the message announces from the server rather than
		// take it on the message's word.
		var hi uint64
		for i := range b.frames {
			if f := &b.frames[i]; f.Op == "" || f.Op == FeedOpSet || f.Op == FeedOpRef {
				hi = max(hi, f.Seq)
			}
		}
		if hi > w.last.Load() {
			if err := w.confirmSets(hi); err != nil {
				return "feed: " + err.Error()
			}
		}
	}
	var replaced map[uint64]struct{} // older rows of keys this message set
	var named []uint64               // delivered seqs the message's deletes name
	for i := range b.frames {
		f := &b.frames[i]
		switch f.Op {
		case "", FeedOpSet:
			m := &b.msgs[i]
			w.noteFeedSeq(m.Seq)
			last := w.last.Load()
			_, preDeleted := w.preDeleted[m.Seq]
			switch {
			case m.Seq <= last:
			case !trusted:
				// Read from the server above, which did not hold it.
			case m.Seq == last+1 && !preDeleted:
				if old, ok := w.keySeq[m.Key]; ok && m.Key != "" && w.live.Has(old) {
					if replaced == nil {
						replaced = map[uint64]struct{}{}
					}
					replaced[old] = struct{}{}
				}
				w.deliverSet(m, false)
				if seen.lo == 0 {
					seen.lo = m.Seq
				}
			default:
				// A jump the feed's numbers do not explain, or a seq a
				// delete named first: the server says what is there.
				w.gaps.Add(1)
				if err := w.confirmSets(m.Seq); err != nil {
					return "feed: " + err.Error()
				}
			}
		case FeedOpRef:
			w.noteFeedSeq(f.Seq)
			if f.Seq > w.last.Load() {
				// confirmSets, not fill: a message deleted before it is
				// fetched is counted skipped rather than left unaccounted.
				if err := w.confirmSets(f.Seq); err != nil {
					return "feed: " + err.Error()
				}
			}
		case FeedOpDelete:
			if !w.deliverDelete(f.Seqs, &named) {
				// Forgetting would let a set whose delete came first be
				// delivered and never deleted; the re-read knows better.
				return fmt.Sprintf("more than %d deletes of seqs not yet seen", w.maxPre)
			}
		}
		// Unknown operations come from a newer server; they change nothing
		// a watcher of this version can show.
	}
	// A server writes a key's older row's delete before the set that
	// replaces it, so the sets of the whole message are known only now.
	var out []uint64
	for _, q := range named {
		if _, r := replaced[q]; r && w.live.Remove(q) {
			out = append(out, q)
		} else if w.live.Has(q) {
			w.pendingDel = append(w.pendingDel, q)
		}
	}
	if len(out) > 0 {
		// A message's frames name the rows they replace in frame order,
		// which is not seq order (key x's row 2 replaced before key y's
		// row 1); Seqs are ascending.
		slices.Sort(out)
		seen.deleted = out
		w.fn(Event{Kind: EventDelete, Seqs: out})
	}
	if b.err != nil {
		return "feed: " + b.err.Error()
	}
	return ""
}

// conflict handles a message whose number the watcher already applied
// from the same publisher. Servers never send a number twice, so either
// this message or the one applied is not the server's: the watcher undoes
// what it delivered on the word of the applied one and of those after it,
// and re-reads the stream from the server. A byte-identical replay changes
// nothing and is only counted.
func (w *Watcher) conflict(e *feedEpoch, b *feedBatch) string {
	w.forged.Add(1)
	from := 0
	for i, s := range e.win {
		if s.n == b.n {
			if s.sum == b.sum {
				return ""
			}
			from = i
			break
		}
	}
	// Not found: older than the window, which is all the watcher can undo.
	lo := uint64(0)
	var undo []uint64
	for _, s := range e.win[from:] {
		if s.lo != 0 && (lo == 0 || s.lo < lo) {
			lo = s.lo
		}
		undo = append(undo, s.deleted...)
	}
	w.rollback(lo, undo)
	return fmt.Sprintf("two different feed messages %d of server %q: one is forged", b.n, b.server)
}

// rollback takes back what the watcher delivered on the feed's word from
// seq lo on (0: nothing): the seqs it holds from lo are reported deleted
// and LastSeq returns to lo-1, so the resync that must follow delivers the
// server's messages for them. The seqs in undo had their delete delivered
// on the feed's word; the resync delivers again those the server holds.
func (w *Watcher) rollback(lo uint64, undo []uint64) {
	w.restore = append(w.restore, undo...)
	last := w.last.Load()
	if lo == 0 || lo > last {
		return
	}
	gone := w.live.CutFrom(lo)
	w.quietTo = max(w.quietTo, last)
	w.last.Store(lo - 1)
	// The index may name rows just taken back; it only saves reading.
	clear(w.keySeq)
	if len(gone) > 0 {
		w.fn(Event{Kind: EventDelete, Seqs: gone})
	}
}

// restoreDeleted delivers again, read from the server, the messages at the
// seqs in restore that the server still holds: their delete came from a
// message the watcher took back.
func (w *Watcher) restoreDeleted() error {
	slices.Sort(w.restore)
	w.restore = slices.Compact(w.restore)
	for len(w.restore) > 0 {
		q := w.restore[0]
		if q <= w.last.Load() && !w.live.Has(q) {
			err := w.scanPaged(q, q, func(m *Message) error {
				if m.Seq == q {
					w.redeliver(m)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("restore seq %d: %w", q, err)
			}
		}
		w.restore = w.restore[1:]
	}
	w.restore = nil
	return nil
}

// redeliver hands the application again a message at or below LastSeq that
// the server holds and the watcher let go on a forged word. It is the one
// case where a set comes out of seq order.
func (w *Watcher) redeliver(m *Message) {
	w.forged.Add(1)
	w.live.Insert(m.Seq)
	w.fn(Event{Kind: EventSet, Msg: m})
}

func (w *Watcher) rememberEpoch(epoch string) *feedEpoch {
	if _, ok := w.epochs[epoch]; !ok && len(w.epochs) >= watchMaxEpochs {
		for e := range w.epochs {
			delete(w.epochs, e)
			break
		}
	}
	e := &feedEpoch{}
	w.epochs[epoch] = e
	return e
}

// confirmSets delivers the messages up to seq to read from the server, never
// the feed's frames for them. A seq the server does not return was removed
// meanwhile (skipped) or never assigned (a forgery, counted, and LastSeq
// stays below it so the real message at that seq is still delivered).
func (w *Watcher) confirmSets(to uint64) error {
	if err := w.fill(to); err != nil {
		return err
	}
	if w.last.Load() >= to {
		return nil
	}
	inv, err := w.s.Inventory(w.ctx)
	if err != nil {
		return fmt.Errorf("confirm seq %d: %w", to, err)
	}
	upTo := min(inv.Seq, to)
	if inv.Seq < to {
		w.forged.Add(1)
	}
	if upTo > w.last.Load() {
		// Seqs assigned between the read and the inventory.
		if err := w.fill(upTo); err != nil {
			return err
		}
	}
	w.passTo(upTo)
	return nil
}

// deliverDelete handles a delete frame: the delivered seqs it names are
// added to named (apply reports the older rows of keys the same message set
// at once, and the others once the server confirms them); a seq not seen
// yet (a misrouted writer's set still on its way) is remembered, so its set
// is read from the server rather than taken from the feed. It returns
// false, having remembered what fits, when that memory is full: the caller
// resyncs.
func (w *Watcher) deliverDelete(seqs []uint64, named *[]uint64) bool {
	last := w.last.Load()
	ok := true
	for _, q := range seqs {
		switch {
		case w.live.Has(q):
			*named = append(*named, q)
		case q > last:
			if _, dup := w.preDeleted[q]; !dup && len(w.preDeleted) >= w.maxPre {
				ok = false
				continue
			}
			w.preDeleted[q] = struct{}{}
		}
	}
	return ok
}

// confirmDeletes delivers the deletes waiting in pendingDel that the server
// confirms: it reads each run of nearby seqs with one getAll, which returns
// only what is still there (nothing, for a run of honest deletes). A seq
// the server still holds was not deleted: its delete is dropped and
// counted. The cost is one request per burst of deletes, not per delete.
func (w *Watcher) confirmDeletes() error {
	qs := w.pendingDel
	w.pendingDel = nil
	slices.Sort(qs)
	qs = slices.Compact(qs)
	qs = slices.DeleteFunc(qs, func(q uint64) bool { return !w.live.Has(q) })
	held := map[uint64]struct{}{}
	for i := 0; i < len(qs); {
		j := i
		for j+1 < len(qs) && qs[j+1]-qs[j] <= watchConfirmGap {
			j++
		}
		err := w.scanPaged(qs[i], qs[j], func(m *Message) error {
			held[m.Seq] = struct{}{}
			return nil
		})
		if err != nil {
			return fmt.Errorf("confirm deletes of seqs %d..%d: %w", qs[i], qs[j], err)
		}
		i = j + 1
	}
	var out []uint64
	for _, q := range qs {
		if _, ok := held[q]; ok {
			w.forged.Add(1)
			continue
		}
		w.live.Remove(q)
		out = append(out, q)
	}
	if len(out) > 0 {
		w.fn(Event{Kind: EventDelete, Seqs: out})
	}
	return nil
}

// idleCheck asks the server for the stream's inventory after a quiet spell:
// sets the feed did not bring are filled, a count that disagrees with what
// the watcher holds (a lost delete) means a resync.
func (w *Watcher) idleCheck() string {
	defer w.idles.Add(1)
	inv, err := w.s.Inventory(w.ctx)
	if err != nil {
		if permanentWatchErr(err) {
			// The resync meets it again and ends the watcher with it.
			return "idle check: " + err.Error()
		}
		return "" // the server is away; the feed will tell when it is back
	}
	// Below From the watcher accounted for nothing of the stream's: a
	// From past the stream's end is the application's choice, not a
	// forgery.
	floor := max(inv.Seq, w.opts.From-min(w.opts.From, 1))
	if last := w.last.Load(); floor < last {
		// The watcher delivered seqs the server never assigned: only a
		// forged feed message does that. Take back what the feed's word
		// delivered above the server's last seq and re-read.
		w.forged.Add(1)
		var undo []uint64
		for _, e := range w.epochs {
			for _, s := range e.win {
				if s.lo > inv.Seq {
					undo = append(undo, s.deleted...)
				}
			}
		}
		w.rollback(floor+1, undo)
		return fmt.Sprintf("idle check: delivered up to seq %d, server assigned only %d", last, inv.Seq)
	}
	if inv.Seq > w.last.Load() {
		if err := w.fill(inv.Seq); err != nil {
			return err.Error()
		}
		// Seqs the server assigned that the read did not find were
		// removed before the watcher could read them.
		w.passTo(inv.Seq)
	}
	if w.opts.From <= 1 && inv.Seq <= w.last.Load() && uint64(inv.Count) != w.live.Count() {
		return fmt.Sprintf("idle check: server has %d messages, watcher %d", inv.Count, w.live.Count())
	}
	return ""
}
