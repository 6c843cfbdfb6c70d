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
// costs no write in its own path.
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
}

// cursorSaver writes cursors in the background: the newest value per key,
// or its removal.
type cursorSaver struct {
	kv  *persist.KV
	log *slog.Logger

	mu   sync.Mutex
	want map[string]*uint64 // nil: remove the key
	wake chan struct{}
}

func newCursorSaver(kv *persist.KV, log *slog.Logger) *cursorSaver {
	return &cursorSaver{kv: kv, log: log, want: make(map[string]*uint64), wake: make(chan struct{}, 1)}
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

func (c *cursorSaver) put(key string, seq uint64) { c.set(key, &seq) }
func (c *cursorSaver) del(key string)             { c.set(key, nil) }

func (c *cursorSaver) set(key string, seq *uint64) {
	c.mu.Lock()
	c.want[key] = seq
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run writes what is wanted until ctx ends, then once more under a short
// deadline of its own: the cursors of the last acks before a stop.
func (c *cursorSaver) run(ctx context.Context) {
	for {
		select {
		case <-c.wake:
			c.flush(ctx)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cursorFlushTimeout)
			c.flush(fctx)
			cancel()
			return
		}
	}
}

// cursorFlushTimeout bounds the last writes of a stopping router.
const cursorFlushTimeout = 2 * time.Second

func (c *cursorSaver) flush(ctx context.Context) {
	c.mu.Lock()
	want := c.want
	c.want = make(map[string]*uint64)
	c.mu.Unlock()
	for key, seq := range want {
		var err error
		if seq == nil {
			_, err = c.kv.Delete(ctx, key)
		} else {
			b, _ := json.Marshal(cursorRow{Seq: *seq})
			_, err = c.kv.Set(ctx, key, b, persist.SetOptions{})
		}
		if err != nil {
			// Wanted again, unless a newer cursor came meanwhile: the
			// next flush writes it, the stop's last one included (the
			// run's context ends while a flush is under way, failing its
			// writes). A restart before any write replays from the older
			// cursor (at least once).
			c.mu.Lock()
			if _, newer := c.want[key]; !newer {
				c.want[key] = seq
			}
			c.mu.Unlock()
			if ctx.Err() == nil {
				c.log.Warn("events: write a single subscription's cursor", "key", key, "err", err)
			}
		}
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
		r.saver.put(rowKey(id), ev.Seq-1)
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
	r.saver.put(rowKey(id), cur)
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
				r.saver.put(rowKey(id), upTo)
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
