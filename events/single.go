package events

import (
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Defaults of SingleConfig, the seed system's.
const (
	// LeaseDefault is how long a `single` delivery may go unacked before it
	// is delivered again: twice a 30 s handler timeout.
	LeaseDefault = 60 * time.Second
	// BacklogDefault bounds a `single` subscription's undelivered entries.
	BacklogDefault = 10_000
)

// ErrUnknownEntry is returned by Single.Ack for an entry that is not the
// subscription's delivery in flight: never delivered, already settled
// long ago, or held by another region.
var ErrUnknownEntry = errors.New("events: no such delivery in flight")

// SingleConfig configures a Single.
type SingleConfig struct {
	// Lease is how long a delivery may go unacked before Next hands it
	// out again. Zero means LeaseDefault.
	Lease time.Duration
	// Backlog bounds the entries waiting behind the one in flight; past it
	// the oldest are shed into one gap marker at the backlog's front (not
	// counted in the bound). Zero means BacklogDefault.
	Backlog int
}

// Entry is one `single` delivery: an event, or a gap marker standing for
// events shed from the backlog.
type Entry[T any] struct {
	ID    string
	Value T
	// Gap is set on a marker (Value is then the zero T, or what PushMarker
	// or Resume was given with it).
	Gap *Gap
	// Attempt counts the times Next handed this entry out: 1 on the first
	// delivery, more on redeliveries after a lease ran out.
	Attempt int
}

// Single is the lease table of `single` subscriptions: per subscription at
// most one delivery in flight, the next only after its ack; an unacked
// delivery is handed out again once its lease ends (at least once); a
// bounded backlog behind it. It does no I/O and starts no goroutine: its
// owner pushes entries, calls Next to learn what to deliver (after a push,
// an ack, and at NextExpiry), and acks. Not safe for concurrent use.
type Single[T any] struct {
	cfg    SingleConfig
	subs   map[SubID]*singleQ[T]
	leases leaseHeap

	shed uint64
	// waiting and inflight are the sums over subs (see Totals), kept up by
	// every method that changes a queue (tally).
	waiting, inflight int
}

type singleQ[T any] struct {
	queue      []*Entry[T] // waiting; queue[0] may be the backlog's marker
	head       int
	inflight   *Entry[T]
	leaseUntil time.Time
	lastAcked  string // a second ack of it is a no-op, not an error
	gen        uint64 // of the current lease, to skip stale heap items
	// resumed holds the ids Resume queued, so that the same entries
	// pushed again (a change both read back and still on its way) queue
	// once; Push forgets an id when it comes.
	resumed map[string]struct{}
}

// NewSingle returns an empty lease table.
func NewSingle[T any](cfg SingleConfig) *Single[T] {
	if cfg.Lease <= 0 {
		cfg.Lease = LeaseDefault
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = BacklogDefault
	}
	return &Single[T]{cfg: cfg, subs: make(map[SubID]*singleQ[T])}
}

// Totals is the entries waiting behind the deliveries in flight (markers
// included) and the deliveries in flight (leased, not acked), over every
// subscription: the backlog and the leases an operator watches.
func (s *Single[T]) Totals() (waiting, inflight int) { return s.waiting, s.inflight }

// counts is q's waiting entries and deliveries in flight.
func (q *singleQ[T]) counts() (waiting, inflight int) {
	if q == nil {
		return 0, 0
	}
	if q.inflight != nil {
		inflight = 1
	}
	return len(q.queue) - q.head, inflight
}

// tally adds to the totals what changed in q since it had w0 waiting and
// f0 in flight (from counts); a dropped q is nil.
func (s *Single[T]) tally(q *singleQ[T], w0, f0 int) {
	w, f := q.counts()
	s.waiting += w - w0
	s.inflight += f - f0
}

func (s *Single[T]) q(sub SubID) *singleQ[T] {
	q := s.subs[sub]
	if q == nil {
		q = &singleQ[T]{}
		s.subs[sub] = q
	}
	return q
}

// Push queues an event for sub at ts (unix milliseconds). When the
// backlog is full, the oldest waiting entry is shed into the marker at the
// backlog's front (made on the first shed, reason backlog_overflow; its
// From and To span the times of the entries shed): the marker is
// delivered in the shed entries' place, and an ack settles it like any
// entry. An id Resume queued is not queued again, once: that change was
// both read back and still on its way. Entries that cannot be such a
// change go through PushNew.
func (s *Single[T]) Push(sub SubID, id string, v T, ts int64) {
	q := s.q(sub)
	if _, dup := q.resumed[id]; dup {
		delete(q.resumed, id) // a change comes once on its way
		return
	}
	s.PushNew(sub, id, v, ts)
}

// PushNew is Push for an entry that is none of those Resume read back,
// whatever its id: a delete, whose id is the seq of the row it removed
// and so the id of that row's set, which Resume may have read back (it
// reads back sets only). Through Push, a delete of a row read back at a
// restart was taken for that set again and lost, with no gap.
func (s *Single[T]) PushNew(sub SubID, id string, v T, ts int64) {
	q := s.q(sub)
	w0, f0 := q.counts()
	defer s.tally(q, w0, f0)
	q.queue = append(q.queue, &Entry[T]{ID: id, Value: v})
	s.shedOver(sub, q, ts)
}

// PushMarker queues the gap marker g for sub at ts, v being what its
// owner keeps with it. A marker is shed like any entry, but its Count and
// span add to the backlog marker's, and a region_restart one is never
// shed (see shedOver).
func (s *Single[T]) PushMarker(sub SubID, id string, g *Gap, v T, ts int64) {
	q := s.q(sub)
	w0, f0 := q.counts()
	defer s.tally(q, w0, f0)
	q.queue = append(q.queue, &Entry[T]{ID: id, Value: v, Gap: g})
	s.shedOver(sub, q, ts)
}

// Resumed is an entry for Resume: an event read back, with its time.
type Resumed[T any] struct {
	ID    string
	Value T
	TS    int64 // unix milliseconds
	// Marker, if set, makes the entry a gap marker, as PushMarker's: a
	// backlog_overflow one standing for entries shed before they reached
	// Resume, or a region_restart one.
	Marker *Gap
}

// Resume queues entries (oldest first) ahead of sub's waiting ones, behind
// a backlog marker at the front if there is one: what a subscription had
// not settled when its region stopped, read back when it starts again,
// goes out before what came since. An entry whose id is in flight or
// waiting already is skipped, and a later Push of one of these ids queues
// nothing. Past the backlog's bound the oldest are shed as by Push.
func (s *Single[T]) Resume(sub SubID, entries []Resumed[T]) {
	q := s.q(sub)
	w0, f0 := q.counts()
	defer s.tally(q, w0, f0)
	have := make(map[string]struct{}, len(q.queue)-q.head+1)
	if q.inflight != nil {
		have[q.inflight.ID] = struct{}{}
	}
	for _, e := range q.queue[q.head:] {
		have[e.ID] = struct{}{}
	}
	if q.resumed == nil {
		q.resumed = make(map[string]struct{}, len(entries))
	}
	var front []*Entry[T]
	waiting := q.queue[q.head:]
	if len(waiting) > 0 && waiting[0].Gap != nil && waiting[0].Gap.Reason == ReasonBacklogOverflow {
		front, waiting = waiting[:1], waiting[1:]
	}
	queue := make([]*Entry[T], 0, len(front)+len(entries)+len(waiting))
	queue = append(queue, front...)
	var last int64
	for _, e := range entries {
		if _, dup := have[e.ID]; dup {
			continue
		}
		have[e.ID] = struct{}{}
		q.resumed[e.ID] = struct{}{}
		queue = append(queue, &Entry[T]{ID: e.ID, Value: e.Value, Gap: e.Marker})
		last = max(last, e.TS)
	}
	q.queue, q.head = append(queue, waiting...), 0
	for len(q.queue)-q.head > 0 && s.shedOver(sub, q, last) {
	}
}

// shedOver sheds q's oldest waiting entry into the backlog marker at its
// front when the backlog is over its bound, and reports whether it did.
// A marker shed adds its Count and span to the backlog marker's: counted
// as one entry, the changes it stood for vanished from what the client
// gets. A region_restart marker is not shed (it still counts in the
// bound): it says the changes it stands for cannot be read back, which a
// backlog_overflow one does not; the oldest entry behind it goes instead.
func (s *Single[T]) shedOver(sub SubID, q *singleQ[T], ts int64) bool {
	front := q.queue[q.head]
	marker := front.Gap != nil && front.Gap.Reason == ReasonBacklogOverflow
	waiting := len(q.queue) - q.head
	first := q.head // the oldest entry to shed
	if marker {
		waiting-- // the marker is not counted
		first++
	}
	if waiting <= s.cfg.Backlog {
		return false
	}
	for first < len(q.queue) && q.queue[first].Gap != nil && q.queue[first].Gap.Reason == ReasonRegionRestart {
		first++
	}
	if first == len(q.queue) {
		return false
	}
	s.shed++
	shed := q.queue[first]
	count, from, to := 1, ts, ts
	if g := shed.Gap; g != nil {
		count, from, to = g.Count, g.From, g.To
	}
	// The entries kept ahead of it move back one, into its place, and the
	// backlog marker goes to the front.
	copy(q.queue[q.head+1:first+1], q.queue[q.head:first])
	if marker {
		q.queue[q.head] = nil
		q.head++
		front.Gap.Count += count
		front.Gap.From = min(front.Gap.From, from)
		front.Gap.To = max(front.Gap.To, to)
		q.compact()
		return true
	}
	q.queue[q.head] = &Entry[T]{
		ID:  "gap-" + shed.ID,
		Gap: &Gap{Reason: ReasonBacklogOverflow, Sub: sub, Count: count, From: from, To: to},
	}
	return true
}

// Unsettled yields sub's delivery in flight, then its waiting entries,
// markers included: every entry not acked yet.
func (s *Single[T]) Unsettled(sub SubID) iter.Seq[*Entry[T]] {
	return func(yield func(*Entry[T]) bool) {
		q := s.subs[sub]
		if q == nil {
			return
		}
		if q.inflight != nil && !yield(q.inflight) {
			return
		}
		for _, e := range q.queue[q.head:] {
			if !yield(e) {
				return
			}
		}
	}
}

// Pending is the ids of Unsettled, in its order.
func (s *Single[T]) Pending(sub SubID) []string {
	var ids []string
	for e := range s.Unsettled(sub) {
		ids = append(ids, e.ID)
	}
	return ids
}

// Next is the entry to deliver for sub at now, if any: the waiting front
// when nothing is in flight, or the delivery in flight again once its
// lease ran out (Attempt counts up). The entry's lease starts now.
func (s *Single[T]) Next(now time.Time, sub SubID) (*Entry[T], bool) {
	q := s.subs[sub]
	if q == nil {
		return nil, false
	}
	w0, f0 := q.counts()
	defer s.tally(q, w0, f0)
	switch {
	case q.inflight != nil && now.Before(q.leaseUntil):
		return nil, false
	case q.inflight == nil:
		if q.head == len(q.queue) {
			return nil, false
		}
		q.inflight = q.queue[q.head]
		q.queue[q.head] = nil
		q.head++
		q.compact()
	}
	q.inflight.Attempt++
	q.leaseUntil = now.Add(s.cfg.Lease)
	q.gen++
	heap.Push(&s.leases, leaseItem{until: q.leaseUntil, sub: sub, gen: q.gen})
	return q.inflight, true
}

// Ack settles sub's delivery in flight, entry. A second ack of the entry
// last settled is a no-op (dup true): a client resending its acks after a
// reconnect does no harm. Any other entry is ErrUnknownEntry.
func (s *Single[T]) Ack(sub SubID, entry string) (dup bool, err error) {
	q := s.subs[sub]
	switch {
	case q == nil:
		return false, fmt.Errorf("%w: subscription %q has none", ErrUnknownEntry, sub)
	case q.inflight != nil && q.inflight.ID == entry:
		q.inflight = nil
		s.inflight--
		q.lastAcked = entry
		q.gen++ // its lease item is stale now
		return false, nil
	case entry != "" && entry == q.lastAcked:
		return true, nil
	}
	return false, fmt.Errorf("%w: entry %q of subscription %q", ErrUnknownEntry, entry, sub)
}

// Release ends the lease of sub's delivery in flight at now, so the next
// Next hands it out again (and Expired reports it): the delivery is known
// not to have reached anyone (a region answered that the user has no
// socket there), so waiting out the lease would only delay it.
func (s *Single[T]) Release(now time.Time, sub SubID) {
	q := s.subs[sub]
	if q == nil || q.inflight == nil {
		return
	}
	q.leaseUntil = now
	q.gen++
	heap.Push(&s.leases, leaseItem{until: now, sub: sub, gen: q.gen})
}

// NextExpiry is when the earliest lease in flight ends; ok is false with
// none in flight.
func (s *Single[T]) NextExpiry() (time.Time, bool) {
	for len(s.leases) > 0 {
		top := s.leases[0]
		if q := s.subs[top.sub]; q != nil && q.inflight != nil && q.gen == top.gen {
			return top.until, true
		}
		heap.Pop(&s.leases)
	}
	return time.Time{}, false
}

// Expired appends to dst the subscriptions whose lease ended by now: each
// has its delivery to hand out again with Next.
func (s *Single[T]) Expired(now time.Time, dst []SubID) []SubID {
	for len(s.leases) > 0 {
		top := s.leases[0]
		q := s.subs[top.sub]
		if q == nil || q.inflight == nil || q.gen != top.gen {
			heap.Pop(&s.leases)
			continue
		}
		if top.until.After(now) {
			break
		}
		heap.Pop(&s.leases)
		dst = append(dst, top.sub)
	}
	return dst
}

// Waiting is the number of entries waiting for sub behind the one in
// flight, a marker included.
func (s *Single[T]) Waiting(sub SubID) int {
	if q := s.subs[sub]; q != nil {
		return len(q.queue) - q.head
	}
	return 0
}

// InFlight is sub's delivery in flight, if any.
func (s *Single[T]) InFlight(sub SubID) (*Entry[T], bool) {
	if q := s.subs[sub]; q != nil && q.inflight != nil {
		return q.inflight, true
	}
	return nil, false
}

// Drop forgets sub: its backlog and delivery in flight.
func (s *Single[T]) Drop(sub SubID) {
	w0, f0 := s.subs[sub].counts()
	s.tally(nil, w0, f0)
	delete(s.subs, sub)
}

// Shed is how many entries were shed into backlog markers.
func (s *Single[T]) Shed() uint64 { return s.shed }

func (q *singleQ[T]) compact() {
	if q.head > 0 && q.head*2 >= len(q.queue) {
		n := copy(q.queue, q.queue[q.head:])
		clear(q.queue[n:])
		q.queue = q.queue[:n]
		q.head = 0
	}
}

type leaseItem struct {
	until time.Time
	sub   SubID
	gen   uint64
}

type leaseHeap []leaseItem

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h leaseHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *leaseHeap) Push(x any)        { *h = append(*h, x.(leaseItem)) }
func (h *leaseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
