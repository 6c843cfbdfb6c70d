package events

// `single` subscriptions across a restart of their region.
//
// A `single` subscription's backlog and lease live in the router's memory.
// What survives a restart is a cursor per subscription, a row of the
// durable scope's cursor stream (DurableConfig.CursorStream, key USER/ID):
// the seq of its stream up to which every change has been settled — the
// lowest seq still unsettled (in flight, waiting, or in its coalescing
// window; a marker counts as the lowest seq it stands for, and one that
// knows none holds the cursor where it was) less one, or, with nothing
// unsettled, the highest seq the subscription was given. It moves after
// acks, and back when a change at or below it comes (a delete of a row
// settled before: see noteWindow), and is written by a saver goroutine of
// the router, the newest value per subscription at a time, so an ack
// costs no write in its own path; it is written only over a cursor of the
// same row (DurableRow.Gen), so a save of a row replaced or deleted since
// never lands on its successor's.
//
// When a router starts a `single` row (at its start, or when the row is
// written), it reads the cursor and the stream's changes after it, up to
// where the stream's watcher began: those the subscription takes go ahead
// of its backlog (Single.Resume), and one region_restart gap stands for
// the seqs in that range the stream no longer holds (a delete, an expiry,
// or a row replaced by a newer one of its key: which of them is not
// known). Delivery stays at least once: what was delivered and not yet
// acked when the region stopped comes again. A row without a cursor (a
// new one) starts one where its watcher began.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// cursorRow is a cursor's stored value.
type cursorRow struct {
	Seq uint64 `json:"seq"`
	// Gen is the DurableRow.Gen of the row the cursor is of.
	Gen string `json:"gen,omitempty"`
}

// cursorSaver writes cursors in the background: the newest value per key,
// or its removal. A write is of one generation of the key's row (Gen), and
// is made only over a cursor of that generation (or one without a Gen, or
// none): a compare-and-set, so that a save of a row replaced meanwhile —
// queued before the router knew, or on its way — never lands on the
// cursor Put started for the new row, nor does a removal of a deleted
// row's on the cursor of a row stored again under its key.
type cursorSaver struct {
	kv  *persist.KV
	log *slog.Logger

	mu   sync.Mutex
	want map[string]cursorWrite
	// removing holds the removals of deleted rows' cursors accepted and
	// not yet handed over by the loop (see onRow): finish makes them.
	removing map[string]string // key -> Gen
	// wrote is, per key, the cursor row this saver last wrote (its seq,
	// the compare-and-set's, and its Gen): the next save of that Gen
	// tries it without reading the cursor first. Owned by flush.
	wrote map[string]cursorWrote
	wake  chan struct{}
}

// cursorWrite is a cursor to write: seq, or a removal (nil), of gen's.
type cursorWrite struct {
	seq *uint64
	gen string
}

type cursorWrote struct {
	seq uint64 // of the cursor row in its stream
	gen string
}

func newCursorSaver(kv *persist.KV, log *slog.Logger) *cursorSaver {
	return &cursorSaver{
		kv: kv, log: log,
		want: make(map[string]cursorWrite), removing: make(map[string]string), wrote: make(map[string]cursorWrote),
		wake: make(chan struct{}, 1),
	}
}

// Cursor is the seq of the stream of user's `single` subscription id up
// to which every change is settled, as last saved; ok is false when none
// is (a broadcast row, or a row no router has started).
func (s DurableStore) Cursor(ctx context.Context, user, id string) (seq uint64, ok bool, err error) {
	c := s.Config.withDefaults()
	return readCursor(ctx, s.Client.KV(c.Scope, c.CursorStream), user+"/"+id)
}

// readCursor reads key's cursor from kv; ok is false when there is none.
func readCursor(ctx context.Context, kv *persist.KV, key string) (seq uint64, ok bool, err error) {
	m, err := kv.Get(ctx, key)
	if errors.Is(err, persist.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("events: read the cursor of %s: %w", key, err)
	}
	var row cursorRow
	if err := json.Unmarshal(m.Value, &row); err != nil {
		return 0, false, fmt.Errorf("events: the cursor of %s: %w", key, err)
	}
	return row.Seq, true, nil
}

func (c *cursorSaver) put(key, gen string, seq uint64) { c.set(key, cursorWrite{seq: &seq, gen: gen}) }

// del removes key's cursor of gen, an accepted removal handed over.
func (c *cursorSaver) del(key, gen string) {
	c.mu.Lock()
	if g, ok := c.removing[key]; ok && g == gen {
		delete(c.removing, key)
	}
	c.mu.Unlock()
	c.set(key, cursorWrite{gen: gen})
}

// accept records the removal of key's cursor of gen, to be handed over
// by del; a stop before then makes it in finish.
func (c *cursorSaver) accept(key, gen string) {
	c.mu.Lock()
	c.removing[key] = gen
	c.mu.Unlock()
}

func (c *cursorSaver) set(key string, w cursorWrite) {
	c.mu.Lock()
	c.want[key] = w
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run writes what is wanted until ctx ends. What is wanted then, and
// what the loop hands over before it ends, finish writes.
func (c *cursorSaver) run(ctx context.Context) {
	for {
		select {
		case <-c.wake:
			c.flush(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// cursorFlushTimeout bounds the last writes of a stopping router.
const cursorFlushTimeout = 2 * time.Second

// finish writes, under a short deadline of its own, what is still wanted
// once the router's loop has ended and run has returned: the cursors of
// the last acks before a stop, and the removals accepted that the loop
// never handed over (it saves no cursor any more, so a removal comes
// after the last save of its row).
func (c *cursorSaver) finish(ctx context.Context) {
	c.mu.Lock()
	for key, gen := range c.removing {
		// A save of another Gen wanted is of a row stored again since,
		// which the removal would not touch anyway.
		if w, ok := c.want[key]; !ok || w.gen == gen {
			c.want[key] = cursorWrite{gen: gen}
		}
	}
	clear(c.removing)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cursorFlushTimeout)
	defer cancel()
	c.flush(ctx)
}

func (c *cursorSaver) flush(ctx context.Context) {
	c.mu.Lock()
	want := c.want
	c.want = make(map[string]cursorWrite)
	c.mu.Unlock()
	for key, w := range want {
		if err := c.write(ctx, key, w); err != nil {
			// Wanted again, unless a newer cursor came meanwhile: the
			// next flush writes it, the stop's last one included (the
			// run's context ends while a flush is under way, failing its
			// writes). A restart before any write replays from the older
			// cursor (at least once).
			c.mu.Lock()
			if _, newer := c.want[key]; !newer {
				c.want[key] = w
			}
			c.mu.Unlock()
			if ctx.Err() == nil {
				c.log.Warn("events: write a single subscription's cursor", "key", key, "err", err)
			}
		}
	}
}

// write makes w: over the cursor this saver last wrote of w's Gen if it is
// still there, else over the one stored if it is of w's Gen (or has none);
// a cursor of another Gen is left as it is, and w dropped.
func (c *cursorSaver) write(ctx context.Context, key string, w cursorWrite) error {
	last, known := c.wrote[key]
	for {
		var prev uint64 // the cursor row's seq; 0: there is none
		if known && last.gen == w.gen && w.seq != nil {
			prev = last.seq // tried first: a wrong guess fails the set
		} else {
			m, err := c.kv.Get(ctx, key)
			switch {
			case errors.Is(err, persist.ErrNotFound):
			case err != nil:
				return fmt.Errorf("events: read the cursor of %s: %w", key, err)
			default:
				var row cursorRow
				if json.Unmarshal(m.Value, &row) == nil && row.Gen != "" && row.Gen != w.gen {
					// Put started another row's cursor (a replacement, a
					// row stored again after a delete) after w was made.
					delete(c.wrote, key)
					return nil
				}
				prev = m.Seq
			}
		}
		known = false // a guess that failed is read next time
		if w.seq == nil {
			if prev == 0 {
				return nil
			}
			seqs, err := c.kv.Stream().Delete(ctx, persist.Delete{Seqs: []uint64{prev}})
			if err != nil {
				return fmt.Errorf("events: remove the cursor of %s: %w", key, err)
			}
			if len(seqs) == 1 {
				delete(c.wrote, key)
				return nil
			}
			continue // replaced meanwhile: look again
		}
		b, err := json.Marshal(cursorRow{Seq: *w.seq, Gen: w.gen})
		if err != nil {
			return err
		}
		res, err := c.kv.Set(ctx, key, b, persist.SetOptions{PrevSeq: &prev})
		if errors.Is(err, persist.ErrWrongLastSequence) {
			continue // written meanwhile: look again
		}
		if err != nil {
			delete(c.wrote, key)
			return fmt.Errorf("events: write the cursor of %s: %w", key, err)
		}
		c.wrote[key] = cursorWrote{seq: res.Seq, gen: w.gen}
		return nil
	}
}

// rowKey is the durable row key (USER/ID) of a durable subscription id.
func rowKey(id SubID) string { return strings.TrimPrefix(string(id), durablePrefix) }

// noteTop records that sub was given the change seq. It runs on the loop.
func (r *Router) noteTop(id SubID, seq uint64) {
	if seq > r.singleTop[id] {
		r.singleTop[id] = seq
	}
}

// noteWindow records that the coalescing window of the durable
// subscription id on key (a coalescer subject) took the change ev of this
// region's stream: until the window ends, the lowest seq it took holds a
// `single` subscription's cursor below it (saveCursor), since a stop
// before then loses the window. A change at or below the cursor saved
// already — a delete, whose seq is the removed row's, of a row settled
// before — moves the cursor back below it, so that a restart before it is
// settled reads back from there (the row gone, a region_restart marker
// stands for it). It runs on the loop.
func (r *Router) noteWindow(id SubID, key string, ev *Event) {
	if r.single == nil || ev.Origin != "" || !strings.HasPrefix(string(id), durablePrefix) {
		return
	}
	w := r.windowLow[id]
	if w == nil {
		w = make(map[string]uint64)
		r.windowLow[id] = w
	}
	if low, ok := w[key]; !ok || ev.Seq < low {
		w[key] = ev.Seq
	}
	if saved, ok := r.singleSaved[id]; ok && ev.Seq <= saved {
		r.singleSaved[id] = ev.Seq - 1
		r.putCursor(id, ev.Seq-1)
	}
}

// closeWindow forgets the window of id on key, which ended, and returns
// the lowest seq it took (0: none noted). It runs on the loop.
func (r *Router) closeWindow(id SubID, key string) uint64 {
	w := r.windowLow[id]
	low := w[key]
	if w != nil {
		delete(w, key)
		if len(w) == 0 {
			delete(r.windowLow, id)
		}
	}
	return low
}

// saveCursor hands sub's cursor to the saver when it moved: forward, or
// back below a change at or under it still unsettled (see noteWindow). It
// runs on the loop, after an ack.
func (r *Router) saveCursor(id SubID) {
	cur := r.singleTop[id]
	lowest := uint64(0)
	held := false
	note := func(seq uint64) {
		if seq > 0 && (lowest == 0 || seq < lowest) {
			lowest = seq
		}
	}
	for e := range r.single.Unsettled(id) {
		switch {
		case e.Gap == nil:
			// Not in seq order: coalescing windows end in the order they
			// opened, each with its newest change. A peer's changes
			// cannot be read back (their seqs are of its stream).
			if ev := e.Value.ev; ev != nil && ev.Origin == "" {
				note(ev.Seq)
			}
		case e.Value.low > 0:
			// A marker of the router's (a rate limit's, a fan-out
			// limit's) stands for changes from its low on, which a
			// restart reads back; a region_restart one for changes from
			// its low on that a restart finds gone again, and so marks
			// again.
			note(e.Value.low)
		default:
			// A backlog_overflow marker stands for shed changes it
			// carries no seq of, older than every entry behind it (and so
			// does any marker with no seq known): until it is acked the
			// cursor stays where the saves before it left it, so that a
			// restart reads them back (again, at least once) rather than
			// passing them with no marker.
			held = true
		}
	}
	// And the changes still in their coalescing windows: in neither the
	// lease table nor singleTop yet.
	for _, seq := range r.windowLow[id] {
		note(seq)
	}
	if lowest > 0 {
		cur = min(cur, lowest-1)
	}
	saved, known := r.singleSaved[id]
	back := known && cur < saved // a change at or below it came (noteWindow)
	if !back && (held || cur <= saved) {
		return
	}
	r.singleSaved[id] = cur
	r.putCursor(id, cur)
}

// putCursor hands id's cursor to the saver, as of the generation of id's
// row the loop is at (singleGen): until the loop takes a replaced row's
// forget, its work saves the old row's cursor, under the old row's Gen,
// which the saver then drops rather than write over the new row's. It
// runs on the loop.
func (r *Router) putCursor(id SubID, seq uint64) {
	r.saver.put(rowKey(id), r.singleGen[id], seq)
}

// resume starts the `single` row rs where its cursor left it (see the top
// of this file). It runs on the rows' watcher, after add.
func (r *Router) resume(ctx context.Context, rs *routerSub) {
	id, a := rs.sub.ID, rs.sub.Anchor
	r.mu.Lock()
	sw := r.watches[streamRef{a.Scope, a.Stream}]
	var w *persist.Watcher
	if sw != nil {
		w = sw.w
	}
	r.mu.Unlock()
	if w == nil {
		return // gone again meanwhile
	}
	upTo := w.LastSeq()
	cur, ok, err := readCursor(ctx, r.saver.kv, rowKey(id))
	if err != nil {
		r.log.Warn("events: resume a single subscription", "sub", rowKey(id), "err", err)
		return
	}
	if !ok || cur >= upTo {
		// Nothing to read back. A cursor past the stream's end (the
		// stream dropped and made again) starts over where it is now.
		fresh := !ok || cur > upTo
		r.post(routed{do: func() {
			r.noteTop(id, upTo)
			if fresh {
				r.singleSaved[id] = upTo
				r.putCursor(id, upTo)
			}
			r.knowCursor(id, cur)
		}})
		return
	}
	// At most a backlog's worth is kept while reading: older ones are
	// counted into a backlog_overflow marker, as Push would shed them.
	limit := r.durable.cfg.Backlog
	if limit <= 0 {
		limit = BacklogDefault
	}
	var entries []Resumed[pending]
	read, shed := uint64(0), 0
	var shedFrom, shedTo int64
	dropOldest := func() {
		if shed == 0 {
			shedFrom = entries[0].TS
		}
		shed++
		shedTo = entries[0].TS
		entries[0] = Resumed[pending]{}
		entries = entries[1:]
	}
	_, err = r.cfg.Client.Stream(a.Scope, a.Stream).Scan(ctx, persist.Range{Start: cur + 1, End: upTo}, func(m *persist.Message) error {
		read++
		subject := Subject{Scope: a.Scope, Stream: a.Stream, Key: m.Key}
		rest, in := a.Rest(subject)
		if !in || !rs.sub.Filter.Match(OpSet, rest) {
			return nil
		}
		ev := &Event{ID: Subject{Scope: a.Scope, Stream: a.Stream}.String() + "#" + strconv.FormatUint(m.Seq, 10), Subject: subject, Op: OpSet, Seq: m.Seq, Value: m.Value, TS: m.Time, Coalesced: 1}
		if len(entries) == limit {
			dropOldest()
		}
		entries = append(entries, Resumed[pending]{ID: ev.ID, Value: pending{ev: ev}, TS: m.Time})
		return nil
	})
	if err != nil {
		r.log.Warn("events: read back a single subscription's changes", "sub", rowKey(id), "from", cur+1, "to", upTo, "err", err)
		return
	}
	missing := upTo - cur - read
	if missing > 0 && len(entries) == limit {
		dropOldest() // room for the region_restart marker within the backlog
	}
	if missing > 0 {
		now := r.cfg.Clock.Now().UnixMilli()
		g := &Gap{Reason: ReasonRegionRestart, Sub: SubID(rs.clientID), Count: int(min(missing, 1<<31-1)), From: now, To: now}
		// Its low holds the cursor below the range until it is acked:
		// a restart before then reads the range again and marks what is
		// gone again.
		gapEntry := Resumed[pending]{ID: "gap-restart-" + strconv.FormatUint(cur+1, 10) + "-" + strconv.FormatUint(upTo, 10), Value: pending{gap: g, low: cur + 1}, TS: now, Marker: g}
		entries = append([]Resumed[pending]{gapEntry}, entries...)
		r.gapMu.Lock()
		r.gaps[ReasonRegionRestart]++
		r.gapMu.Unlock()
	}
	if shed > 0 {
		// A backlog marker (counted when delivered, as Push's are) first.
		g := &Gap{Reason: ReasonBacklogOverflow, Sub: SubID(rs.clientID), Count: shed, From: shedFrom, To: shedTo}
		entries = append([]Resumed[pending]{{ID: "gap-resumed-" + strconv.FormatUint(cur+1, 10), TS: shedTo, Marker: g}}, entries...)
	}
	r.post(routed{do: func() {
		r.single.Resume(id, entries)
		r.noteTop(id, upTo)
		r.knowCursor(id, cur)
		r.dispatch(id)
	}})
}

// knowCursor makes cur, the cursor resume read, the one the loop knows
// as saved for id, unless it saved one since, so that a change at or
// below it moves it back (noteWindow), the changes taken before this
// included. It runs on the loop.
func (r *Router) knowCursor(id SubID, cur uint64) {
	if _, known := r.singleSaved[id]; !known {
		r.singleSaved[id] = cur
	}
	r.saveCursor(id)
}
