package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Defaults of [QueueConfig], the reference queue's values.
const (
	// FlushDefault is how long items wait for company. Deliveries are
	// debounced an order of magnitude longer upstream, so nothing perceives
	// it.
	FlushDefault = 25 * time.Millisecond
	// MaxBatchItemsDefault and MaxBatchBytesDefault close a batch, whichever
	// trips first.
	MaxBatchItemsDefault = 200
	MaxBatchBytesDefault = 256 << 10
	// MaxQueuedDefault is the most items held for one peer.
	MaxQueuedDefault = 5000
	// MaxQueuedBytesDefault is the most encoded bytes held for one peer. The
	// count bound alone leaves memory unbounded, since nothing caps an
	// item's own size.
	MaxQueuedBytesDefault = 32 << 20
	// MaxInFlightDefault is the most batches in flight per peer with the
	// default bounds: MaxQueuedDefault / MaxBatchItemsDefault.
	MaxInFlightDefault = (MaxQueuedDefault + MaxBatchItemsDefault - 1) / MaxBatchItemsDefault
	// SendTimeoutDefault bounds one send.
	SendTimeoutDefault = 10 * time.Second
	// BackoffMinDefault and BackoffMaxDefault bound how long a peer whose
	// sends fail waits before its next send: a peer that is down gets one
	// attempt per BackoffMaxDefault, not one per flush window.
	BackoffMinDefault = 100 * time.Millisecond
	BackoffMaxDefault = 5 * time.Second
)

// arenaChunk is the size of the blocks item encodings are packed into, so a
// push does not allocate on its own; encodings larger than arenaMax get
// their own allocation instead of wasting a block.
const (
	arenaChunk = 8 << 10
	arenaMax   = 1 << 10
)

// Outbound is one batch handed to [QueueConfig.Send].
type Outbound struct {
	// Peer is who the batch is for.
	Peer string
	// Seq numbers the peer's batches from 1 in the order they were taken.
	// The body carries it, so the receiver applies batches in this order
	// however their requests overtake each other.
	Seq uint64
	// Items are the batch's items in push order.
	Items []Item
	// Body is the encoded batch, {"from":...,"epoch":...,"seq":...,
	// "base":...,"items":[...]}, built by concatenating each item's
	// encoding made at push.
	Body []byte
}

// SendFunc ships one batch. An error means the batch is lost: the queue
// counts and logs it, never retries it, and hands its items to
// [QueueConfig.OnLost]. The Outbound and its slices are
// reused once SendFunc returns, so it must not keep them, nor leave them
// to anything that reads them later: an http.RoundTripper may read a
// request's body after it returned the answer ([Sender] releases it).
type SendFunc func(ctx context.Context, b *Outbound) error

// QueueConfig configures a [PeerQueue].
type QueueConfig struct {
	// From is the sending region, written into every batch body. Required.
	From string
	// Send ships one batch. Required. The queue calls it from a goroutine
	// per batch, with at most MaxInFlight batches in flight per peer.
	Send SendFunc
	// OnOverflow receives the items a bound shed, oldest first, and returns
	// what to queue in their place (gap markers). The replacements are
	// appended without being held to the bounds, so a shed cannot cascade.
	// It runs with the peer's lock held: it must not call the queue, and
	// must not keep dropped, which is reused. Nil only counts the loss.
	OnOverflow func(peer string, dropped []Item) []Item
	// OnTaken, if set, is told about every batch the moment it is taken off
	// the peer's backlog for sending, before Send is called. A gap policy
	// frees a marker's slot here: anything shed from now on is no longer
	// covered by that marker, which is already on its way. It runs with the
	// peer's lock held, under the same rules as OnOverflow; items is reused.
	OnTaken func(peer string, items []Item)
	// OnLost, if set, receives the items of every batch whose send failed
	// (an error, a non-2xx answer, a timeout) and returns what to queue in
	// their place for the next send: the same outcome as a shed, so a lost
	// batch is never silent. The replacements are not held to the bounds.
	// It runs with the peer's lock held, under the same rules as
	// OnOverflow; lost is reused. Nil only counts the loss.
	OnLost func(peer string, lost []Item, err error) []Item
	// OnShipped, if set, is told about every batch once its send returned,
	// with the send's error (nil on success). Items is reused afterwards.
	OnShipped func(peer string, items []Item, err error)
	// Flush is how long a first item waits for company. Zero means 25ms.
	Flush time.Duration
	// MaxBatchItems closes a batch at this many items. Zero means 200.
	MaxBatchItems int
	// MaxBatchBytes closes a batch once its items' encoded bytes reach it.
	// Zero means 256 KiB.
	MaxBatchBytes int64
	// MaxQueued is the most items held for one peer. Zero means 5,000.
	MaxQueued int
	// MaxQueuedBytes is the most encoded bytes held for one peer. Zero
	// means 32 MiB.
	MaxQueuedBytes int64
	// MaxItemBytes is the largest encoded item Push takes; a larger one is
	// refused, counted in Stats.Oversized and handed to OnOverflow alone,
	// as if shed. It bounds a body to BodyLimit, which is what a receiver
	// must accept. Zero means 128 KiB (MaxItemBytesDefault).
	MaxItemBytes int64
	// MaxInFlight is the most batches in flight per peer. Zero means
	// MaxQueued / MaxBatchItems rounded up (25 with the defaults): a slow
	// peer then takes, per round trip, as many items as it can hold, the
	// whole backlog the reference queue ships in one request, but in
	// bodies no larger than one batch.
	MaxInFlight int
	// SendTimeout bounds each call to Send. Zero means 10s.
	SendTimeout time.Duration
	// BackoffMin is how long a peer waits after a failed send before its
	// next one; each further failure doubles the wait, up to BackoffMax.
	// While it fails, a peer has one batch in flight at a time (a probe),
	// and the first batch delivered ends the backoff. Zero means 100ms.
	BackoffMin time.Duration
	// BackoffMax caps the wait. Zero means 5s.
	BackoffMax time.Duration
	// Clock drives the flush window. Nil means the wall clock.
	Clock Clock
	// Logger receives lost-batch warnings. Nil means slog.Default()
	// (through lifecycle.Logger, as role forward).
	Logger *slog.Logger
}

func (c QueueConfig) withDefaults() QueueConfig {
	if c.Flush == 0 {
		c.Flush = FlushDefault
	}
	if c.MaxBatchItems == 0 {
		c.MaxBatchItems = MaxBatchItemsDefault
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = MaxBatchBytesDefault
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = MaxQueuedDefault
	}
	if c.MaxQueuedBytes == 0 {
		c.MaxQueuedBytes = MaxQueuedBytesDefault
	}
	if c.MaxItemBytes == 0 {
		c.MaxItemBytes = MaxItemBytesDefault
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = SendTimeoutDefault
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = BackoffMinDefault
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = BackoffMaxDefault
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = (c.MaxQueued + c.MaxBatchItems - 1) / c.MaxBatchItems
	}
	if c.Clock == nil {
		c.Clock = WallClock
	}
	c.Logger = lifecycle.Logger(c.Logger, "forward")
	return c
}

func (c QueueConfig) validate() error {
	switch {
	case c.From == "":
		return errors.New("from is required")
	case c.Send == nil:
		return errors.New("send is required")
	case c.Flush < 0, c.MaxBatchItems < 0, c.MaxBatchBytes < 0, c.MaxQueued < 0, c.MaxQueuedBytes < 0, c.MaxItemBytes < 0, c.SendTimeout < 0, c.MaxInFlight < 0, c.BackoffMin < 0, c.BackoffMax < 0:
		return errors.New("bounds must not be negative")
	case len(appendString(nil, c.From)) > MaxFromBytes:
		// The receiver's body cap allows this much for it.
		return fmt.Errorf("from is longer than %d bytes encoded", MaxFromBytes)
	}
	return nil
}

// Stats are a queue's counters, summed over peers or for one peer.
type Stats struct {
	Pushed       uint64 // items accepted by Push
	Shed         uint64 // items dropped by a bound and handed to OnOverflow
	ShedBytes    uint64 // their encoded bytes
	Overflows    uint64 // pushes that shed something
	Replacements uint64 // items OnOverflow returned, queued in their place
	Batches      uint64 // batches taken and handed to Send
	SentItems    uint64 // items in those batches
	SentBytes    uint64 // body bytes of those whose send returned
	LostBatches  uint64 // batches whose send failed
	LostItems    uint64 // items in them
	// LostReplacements is the items OnLost returned, queued in their place.
	LostReplacements uint64
	// Discarded is the pushes before Start or after Stop began, and the
	// items Stop could not ship by its deadline.
	Discarded uint64
	HeldItems int   // items waiting now
	HeldBytes int64 // their encoded bytes
	InFlight  int   // items in sends that have not returned
	// InFlightBatches is how many sends have not returned.
	InFlightBatches int
	// Oversized is the items refused for encoding to more than
	// MaxItemBytes: pushed ones and OnOverflow/OnLost replacements.
	Oversized uint64
	// Invalid is the items refused because a receiver would refuse them
	// ([CheckItem]): pushed ones and OnOverflow/OnLost replacements.
	Invalid uint64
}

func (s *Stats) add(o Stats) {
	s.Pushed += o.Pushed
	s.Shed += o.Shed
	s.ShedBytes += o.ShedBytes
	s.Overflows += o.Overflows
	s.Replacements += o.Replacements
	s.Batches += o.Batches
	s.SentItems += o.SentItems
	s.SentBytes += o.SentBytes
	s.LostBatches += o.LostBatches
	s.LostItems += o.LostItems
	s.LostReplacements += o.LostReplacements
	s.Discarded += o.Discarded
	s.Oversized += o.Oversized
	s.Invalid += o.Invalid
	s.HeldItems += o.HeldItems
	s.HeldBytes += o.HeldBytes
	s.InFlight += o.InFlight
	s.InFlightBatches += o.InFlightBatches
}

// PeerQueue batches items per peer: one send per peer per flush window,
// early once a batch bound trips, at most MaxInFlight in flight per peer.
// Each peer's backlog is held to MaxQueued items and MaxQueuedBytes bytes,
// each bound tripping on its own; the oldest items go first, deliveries
// before gap markers, markers only once nothing else is left.
//
// All methods are safe for concurrent use. A queue takes pushes between
// Start and Stop (pushes outside are discarded and counted); Stop drains it
// under its deadline.
type PeerQueue struct {
	cfg    QueueConfig
	prefix []byte // {"from":...,"epoch":...
	base   lifecycle.Base

	mu      sync.RWMutex // protects peers and changed
	peers   map[string]*peer
	changed chan struct{} // closed and replaced when a send returns

	accepting atomic.Bool     // from Start until Stop begins: pushes are taken
	closed    atomic.Bool     // Stop's drain is over: nothing ships any more
	sendCtx   context.Context // parent of every send; set by Start, cancelled at the end of Stop
	cancel    context.CancelFunc
	inflight  sync.WaitGroup // send goroutines
	discarded atomic.Uint64  // pushes outside Start..Stop to peers never seen
}

// peer is one peer's backlog. Deliveries and other items wait in plain,
// gap markers in marks; seq keeps the two in push order, so shedding takes
// the head of plain in O(1) without scanning past markers and a batch
// merges both heads back into push order.
type peer struct {
	name string

	mu        sync.Mutex // protects everything below but the send fields
	plain     ring
	marks     ring
	seq       uint64
	bytes     int64
	timerOn   bool
	timerGen  uint64
	timer     Timer
	arena     []byte // current block of item encodings
	scratch   []byte // encoding buffer reused by every push
	dropped   []Item // shed items handed to OnOverflow, reused
	stats     Stats
	nextSeq   uint64    // the last batch number handed out
	inflight  []*flight // sends that have not returned, in take order
	inflightN int       // items in them
	spare     []*flight // flights whose send returned, kept for their buffers
	failures  int       // failed sends since the last delivered one, counted once per wait
	failSeq   uint64    // nextSeq when the last failure was counted
	retryAt   time.Time // while failing, no send starts before this
}

// flight is one batch taken for sending. Its send goroutine owns the
// buffers until the send returns; seq and base are fixed at take.
type flight struct {
	seq   uint64 // the batch's number on its peer
	base  uint64 // the lowest number of a send to the peer not yet returned
	taken []entry
	items []Item
	body  []byte
	out   Outbound
}

// NewPeerQueue returns a queue that takes pushes once started.
func NewPeerQueue(cfg QueueConfig) (*PeerQueue, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("forward queue: %w", err)
	}
	cfg = cfg.withDefaults()
	q := &PeerQueue{
		cfg:     cfg,
		peers:   make(map[string]*peer),
		changed: make(chan struct{}),
	}
	// The epoch tells a receiver that a new run of batch numbers starts:
	// a restarted sender's epoch is larger, as long as the clock did not
	// step back across the restart.
	q.prefix = appendString([]byte(`{"from":`), cfg.From)
	q.prefix = strconv.AppendInt(append(q.prefix, `,"epoch":`...), max(1, cfg.Clock.Now().UnixNano()), 10)
	return q, nil
}

// Start opens the queue to pushes. Start twice is lifecycle.ErrStarted;
// after Stop, lifecycle.ErrStopped.
func (q *PeerQueue) Start(ctx context.Context) error {
	return q.base.Start(ctx, "forward queue", func(ctx context.Context) error {
		// Sends outlive the run context, which Stop cancels before it
		// drains: their own context ends once the drain is over.
		q.sendCtx, q.cancel = context.WithCancel(context.WithoutCancel(ctx))
		q.accepting.Store(true)
		return nil
	})
}

func (q *PeerQueue) peerFor(name string) *peer {
	q.mu.RLock()
	p := q.peers[name]
	q.mu.RUnlock()
	if p != nil {
		return p
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if p = q.peers[name]; p == nil {
		p = &peer{name: name}
		q.peers[name] = p
	}
	return p
}

// Push queues one item for one peer, shipping early once a batch bound
// trips. Before Start and once Stop began, the item is discarded and
// counted. An item a receiver would refuse ([CheckItem]) is refused, logged
// with the reason and counted (Stats.Invalid), and handed to OnOverflow
// alone, as an item over MaxItemBytes is (Stats.Oversized): queued, it
// would fail its whole batch at the receiver. The queue keeps it
// (and its pre-encoded payload) until it ships or is shed, so the caller
// must not modify it.
func (q *PeerQueue) Push(peerName string, it Item) {
	if it == nil {
		return
	}
	if !q.accepting.Load() {
		q.discard(peerName)
		return
	}
	p := q.peerFor(peerName)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !q.accepting.Load() {
		p.stats.Discarded++
		return
	}
	if !q.appendLocked(p, it) {
		// Refused like a shed item, so its loss is told the same way (a
		// gap marker); a replacement as large, or as bad, is refused in
		// turn. A nil pointer has nothing to tell.
		if q.cfg.OnOverflow != nil && !isNilItem(it) {
			one := append(p.dropped[:0], it)
			for _, r := range q.cfg.OnOverflow(p.name, one) {
				if r != nil && q.appendReplacementLocked(p, r) {
					p.stats.Replacements++
				}
			}
			clear(one)
			p.dropped = one[:0]
		}
		q.kickLocked(p)
		return
	}
	p.stats.Pushed++

	// Independent bounds: either can trip with the other well under.
	dropped := p.dropped[:0]
	for p.count() > q.cfg.MaxQueued {
		dropped = append(dropped, q.shedOneLocked(p))
	}
	for p.bytes > q.cfg.MaxQueuedBytes && p.count() > 0 {
		dropped = append(dropped, q.shedOneLocked(p))
	}
	if len(dropped) > 0 {
		p.stats.Overflows++
		p.stats.Shed += uint64(len(dropped))
		if q.cfg.OnOverflow != nil {
			// Appended past the bound check: a replacement pushed through
			// the bound would shed the next item, and so on down the queue.
			for _, r := range q.cfg.OnOverflow(p.name, dropped) {
				if r != nil && q.appendReplacementLocked(p, r) {
					p.stats.Replacements++
				}
			}
		}
		clear(dropped)
	}
	p.dropped = dropped[:0]
	q.kickLocked(p)
}

// discard counts a push refused before Start or after Stop began. A peer
// the queue knows counts it, so its PeerStats show it; only a peer never
// seen falls to the queue-wide counter, since refused pushes do not create
// peers.
func (q *PeerQueue) discard(peerName string) {
	q.mu.RLock()
	p := q.peers[peerName]
	q.mu.RUnlock()
	if p == nil {
		q.discarded.Add(1)
		return
	}
	p.mu.Lock()
	p.stats.Discarded++
	p.mu.Unlock()
}

func (p *peer) count() int { return p.plain.len() + p.marks.len() }

// appendLocked encodes it once and queues it, or refuses and counts it if
// a receiver would refuse it or it encodes to more than MaxItemBytes: no
// batch may outgrow BodyLimit, nor be refused whole (a 400, a lost batch)
// for one bad item. A bad gap marker, once queued, would come back from
// OnLost into every batch after it, and no batch to the peer would get
// through.
func (q *PeerQueue) appendLocked(p *peer, it Item) bool {
	if err := CheckItem(it); err != nil {
		p.stats.Invalid++
		q.cfg.Logger.Warn("forward: item refused at push", "peer", p.name, "err", err)
		return false
	}
	enc, cut, raw := it.appendWire(p.scratch[:0])
	if cap(enc) <= 64<<10 {
		p.scratch = enc[:0]
	}
	n := len(enc)
	if int64(n+len(raw)) > q.cfg.MaxItemBytes {
		p.stats.Oversized++
		return false
	}
	var dst []byte
	if n > arenaMax {
		dst = make([]byte, n)
	} else {
		if cap(p.arena)-len(p.arena) < n {
			p.arena = make([]byte, 0, arenaChunk)
		}
		off := len(p.arena)
		p.arena = p.arena[:off+n]
		dst = p.arena[off : off+n : off+n]
	}
	copy(dst, enc)
	p.seq++
	e := entry{item: it, enc: dst, raw: raw, cut: int32(cut), seq: p.seq}
	p.bytes += e.size()
	if d, ok := it.(*Delivery); ok && isGapEvent(d.Event) {
		p.marks.push(e)
	} else {
		p.plain.push(e)
	}
	return true
}

// shedOneLocked drops the oldest item, a marker only if nothing else is held.
func (q *PeerQueue) shedOneLocked(p *peer) Item {
	var e entry
	if p.plain.len() > 0 {
		e = p.plain.pop()
	} else {
		e = p.marks.pop()
	}
	p.bytes -= e.size()
	p.stats.ShedBytes += uint64(e.size())
	return e.item
}

// kickLocked ships every full batch a free send slot can take, then arms
// the window for what is left if a slot is still free. With every slot
// busy, nothing waits on a timer: the next send to return kicks again.
func (q *PeerQueue) kickLocked(p *peer) {
	slots, ok := q.openSlotsLocked(p)
	if !ok {
		return
	}
	for p.count() > 0 && len(p.inflight) < slots &&
		(p.count() >= q.cfg.MaxBatchItems || p.bytes >= q.cfg.MaxBatchBytes) {
		q.startSendLocked(p)
	}
	if len(p.inflight) >= slots {
		return
	}
	q.armLocked(p, q.cfg.Flush)
}

// armLocked arms the peer's timer to ship what it holds in d, unless it is
// armed already: a window that closes before a backoff ends finds the
// backoff and arms again for the rest of it.
func (q *PeerQueue) armLocked(p *peer, d time.Duration) {
	if p.count() == 0 || p.timerOn {
		return
	}
	p.timerOn = true
	p.timerGen++
	gen := p.timerGen
	p.timer = q.cfg.Clock.AfterFunc(d, func() { q.onTimer(p, gen) })
}

func (q *PeerQueue) onTimer(p *peer, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A window that was cancelled (or replaced) while this call waited for
	// the lock must not ship early.
	if !p.timerOn || p.timerGen != gen {
		return
	}
	p.timerOn = false
	q.shipLocked(p)
}

// shipLocked ships what is held, as many batches as free slots take; a
// peer backing off gets its timer armed for the end of the wait instead.
func (q *PeerQueue) shipLocked(p *peer) {
	slots, ok := q.openSlotsLocked(p)
	if !ok {
		return
	}
	for p.count() > 0 && len(p.inflight) < slots {
		q.startSendLocked(p)
	}
}

// openSlotsLocked is slotsLocked for a caller about to send: false when
// the queue is closed, or when p backs off, whose timer it then arms for
// the end of the wait.
func (q *PeerQueue) openSlotsLocked(p *peer) (int, bool) {
	if q.closed.Load() {
		return 0, false
	}
	slots, wait := q.slotsLocked(p)
	if wait > 0 {
		q.armLocked(p, wait)
		return 0, false
	}
	return slots, true
}

// slotsLocked is how many sends p may have in flight now, or, while it
// backs off after failed sends, how long until it may send again. A peer
// that fails gets one batch at a time, a probe, until one is delivered:
// its whole backlog in MaxInFlight batches would fail together, each a
// request and a lost-batch warning. Stop's drain does not wait: its
// deadline is short, the peer may be back, and the replacements of what
// it loses are discarded, so a dead peer cannot keep it busy.
func (q *PeerQueue) slotsLocked(p *peer) (int, time.Duration) {
	if p.failures == 0 || !q.accepting.Load() {
		return q.cfg.MaxInFlight, 0
	}
	if wait := p.retryAt.Sub(q.cfg.Clock.Now()); wait > 0 {
		return 0, wait
	}
	return 1, 0
}

// failedLocked starts or lengthens the peer's backoff after a failed send:
// BackoffMin, doubled per failure up to BackoffMax. Without it the markers
// OnLost returns for a dead peer shipped again every flush window, a
// request and a warning 40 times a second for as long as it was down. A
// batch taken before the last failure was counted fails for the same
// outage, so it does not double the wait again: one outage that fails a
// whole round of sends in flight still starts at BackoffMin.
func (q *PeerQueue) failedLocked(p *peer, seq uint64) {
	if p.failures > 0 && seq <= p.failSeq {
		return
	}
	p.failures++
	p.failSeq = p.nextSeq
	wait := q.cfg.BackoffMin
	for i := 1; i < p.failures && wait < q.cfg.BackoffMax; i++ {
		wait *= 2
	}
	p.retryAt = q.cfg.Clock.Now().Add(min(wait, q.cfg.BackoffMax))
}

func (q *PeerQueue) stopTimerLocked(p *peer) {
	if p.timerOn {
		p.timer.Stop()
		p.timerOn = false
	}
}

// startSendLocked takes one batch off the head, in push order, numbers it
// and ships it from a goroutine of its own.
func (q *PeerQueue) startSendLocked(p *peer) {
	q.stopTimerLocked(p)
	var f *flight
	if n := len(p.spare); n > 0 {
		f, p.spare = p.spare[n-1], p.spare[:n-1]
	} else {
		f = &flight{}
	}
	p.nextSeq++
	f.seq, f.base = p.nextSeq, p.nextSeq
	for _, o := range p.inflight {
		f.base = min(f.base, o.seq)
	}
	var size int64
	for len(f.taken) < q.cfg.MaxBatchItems && size < q.cfg.MaxBatchBytes {
		var r *ring
		switch {
		case p.plain.len() == 0 && p.marks.len() == 0:
		case p.marks.len() == 0:
			r = &p.plain
		case p.plain.len() == 0:
			r = &p.marks
		case p.plain.front().seq < p.marks.front().seq:
			r = &p.plain
		default:
			r = &p.marks
		}
		if r == nil {
			break
		}
		e := r.pop()
		size += e.size()
		f.taken = append(f.taken, e)
		f.items = append(f.items, e.item)
	}
	p.bytes -= size
	if p.count() == 0 {
		p.plain.reset()
		p.marks.reset()
	}
	p.inflight = append(p.inflight, f)
	p.inflightN += len(f.taken)
	p.stats.Batches++
	p.stats.SentItems += uint64(len(f.items))
	if q.cfg.OnTaken != nil {
		q.cfg.OnTaken(p.name, f.items)
	}
	q.inflight.Add(1)
	go q.send(p, f)
}

func (q *PeerQueue) send(p *peer, f *flight) {
	defer q.inflight.Done()
	body := append(f.body[:0], q.prefix...)
	body = strconv.AppendUint(append(body, `,"seq":`...), f.seq, 10)
	body = strconv.AppendUint(append(body, `,"base":`...), f.base, 10)
	body = append(body, `,"items":[`...)
	for i := range f.taken {
		if i > 0 {
			body = append(body, ',')
		}
		body = f.taken[i].appendTo(body)
	}
	body = append(body, ']', '}')
	f.out = Outbound{Peer: p.name, Seq: f.seq, Items: f.items, Body: body}

	ctx, cancel := context.WithTimeout(q.sendCtx, q.cfg.SendTimeout)
	err := q.cfg.Send(ctx, &f.out)
	cancel()
	if q.cfg.OnShipped != nil {
		q.cfg.OnShipped(p.name, f.items, err)
	}

	p.mu.Lock()
	p.stats.SentBytes += uint64(len(body))
	// What the log says, read now: f goes back to p.spare below, and a
	// next send may take and rewrite it as soon as the lock is released.
	items, seq := len(f.items), f.seq
	var backoff time.Duration // until the peer's next send, for the log
	if err != nil {
		p.stats.LostBatches++
		p.stats.LostItems += uint64(items)
		q.lostLocked(p, f.items, err)
		q.failedLocked(p, f.seq)
		backoff = max(0, p.retryAt.Sub(q.cfg.Clock.Now()))
	} else {
		// The peer takes batches again: the backoff is over.
		p.failures, p.retryAt = 0, time.Time{}
	}
	for i, o := range p.inflight {
		if o == f {
			p.inflight = append(p.inflight[:i], p.inflight[i+1:]...)
			break
		}
	}
	p.inflightN -= len(f.taken)
	clear(f.taken)
	clear(f.items)
	f.taken, f.items, f.out = f.taken[:0], f.items[:0], Outbound{}
	// A body grown by one huge batch is not worth keeping.
	if cap(body) <= 4*int(q.cfg.MaxBatchBytes) {
		f.body = body[:0]
	} else {
		f.body = nil
	}
	p.spare = append(p.spare, f)
	if len(p.inflight) == 0 && len(p.spare) > 1 {
		// An idle peer keeps one set of buffers, as it needs for its next
		// batch, not one per batch it had in flight at its busiest.
		clear(p.spare[1:])
		p.spare = p.spare[:1]
	}
	// Whatever arrived meanwhile ships now if it fills a batch, else gets
	// the next window.
	q.kickLocked(p)
	p.mu.Unlock()
	if err != nil {
		q.cfg.Logger.Warn("forward: batch lost", "peer", p.name, "seq", seq, "items", items, "backoff", backoff, "err", err)
	}

	q.mu.Lock()
	close(q.changed)
	q.changed = make(chan struct{})
	q.mu.Unlock()
}

// lostLocked hands a failed batch's items to OnLost and queues what it
// returns for the next send, past the bounds as overflow replacements are:
// the loss of a batch is told like the loss of a shed item. Once Stop
// began they are discarded and counted: a drain to a peer that fails at
// once would otherwise ship replacement after replacement until its
// deadline.
func (q *PeerQueue) lostLocked(p *peer, items []Item, err error) {
	if q.cfg.OnLost == nil {
		return
	}
	for _, r := range q.cfg.OnLost(p.name, items, err) {
		if r == nil {
			continue
		}
		if !q.accepting.Load() {
			p.stats.Discarded++
			continue
		}
		if q.appendReplacementLocked(p, r) {
			p.stats.LostReplacements++
		}
	}
}

// appendReplacementLocked queues r, a replacement OnOverflow or OnLost
// returned, and reports whether it did. One too large to queue is handed
// to OnOverflow alone, as a refused push is: a policy that counted it as
// its pending marker (GapPolicy) then frees that slot, so the next loss
// gets a marker of its own instead of being counted under one never sent.
// What OnOverflow returns for it is queued if it fits, and no further.
func (q *PeerQueue) appendReplacementLocked(p *peer, r Item) bool {
	if q.appendLocked(p, r) {
		return true
	}
	if q.cfg.OnOverflow != nil && !isNilItem(r) {
		for _, rr := range q.cfg.OnOverflow(p.name, []Item{r}) {
			if rr != nil && q.appendLocked(p, rr) {
				p.stats.Replacements++
			}
		}
	}
	return false
}

// Flush ships what is held for one peer now, as far as free send slots
// allow (whatever is left ships as sends return). A peer backing off after
// failed sends ships when its wait ends.
func (q *PeerQueue) Flush(peerName string) {
	q.mu.RLock()
	p := q.peers[peerName]
	q.mu.RUnlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	q.shipLocked(p)
	p.mu.Unlock()
}

// FlushAll ships everything held for every peer and waits until every
// batch has been handed to Send and returned, or ctx ends. A peer backing
// off after failed sends is waited for, not sent to at once; while it
// stays down, what its failures queue (OnLost) keeps FlushAll waiting
// until ctx ends. Stop drains the same way, without waiting out backoffs:
// FlushAll is for a barrier while the queue keeps running.
func (q *PeerQueue) FlushAll(ctx context.Context) error {
	for {
		q.mu.RLock()
		changed := q.changed
		peers := make([]*peer, 0, len(q.peers))
		for _, p := range q.peers {
			peers = append(peers, p)
		}
		q.mu.RUnlock()
		busy := false
		for _, p := range peers {
			p.mu.Lock()
			q.shipLocked(p)
			// Held with no send in flight: the peer backs off, and its
			// timer ships it when the wait ends.
			busy = busy || len(p.inflight) > 0 || p.count() > 0
			p.mu.Unlock()
		}
		if !busy {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("forward flush: %w", ctx.Err())
		}
	}
}

// Stop ends the queue and drains it: pushes from now on are discarded and
// counted, what is held ships (as FlushAll) until every send returned or
// ctx ends; then what is still held is discarded and counted
// (Stats.Discarded) and sends still in flight are cancelled, their batches
// lost. An already ended ctx ships nothing more. Stop before Start and
// Stop twice are no-ops.
func (q *PeerQueue) Stop(ctx context.Context) error {
	return q.base.Stop(ctx, func(ctx context.Context) error {
		q.accepting.Store(false)
		err := ctx.Err()
		if err == nil {
			err = q.FlushAll(ctx)
		}
		q.closed.Store(true)
		q.mu.RLock()
		for _, p := range q.peers {
			p.mu.Lock()
			q.stopTimerLocked(p)
			p.stats.Discarded += uint64(p.count())
			p.plain.reset()
			p.marks.reset()
			p.bytes = 0
			p.mu.Unlock()
		}
		q.mu.RUnlock()
		q.cancel()
		q.inflight.Wait()
		if err != nil {
			return fmt.Errorf("forward stop: %w", err)
		}
		return nil
	})
}

// BodyLimit is the largest body this queue builds: a receiver's
// MaxBodyBytes must be at least this. With the default bounds it is
// MaxBodyBytesDefault, the receiver's default.
func (q *PeerQueue) BodyLimit() int64 {
	return BatchBodyLimit(q.cfg.MaxBatchBytes, q.cfg.MaxItemBytes, q.cfg.MaxBatchItems)
}

// Stats returns the counters summed over every peer.
func (q *PeerQueue) Stats() Stats {
	q.mu.RLock()
	defer q.mu.RUnlock()
	var s Stats
	for _, p := range q.peers {
		s.add(p.snapshot())
	}
	s.Discarded += q.discarded.Load()
	return s
}

// PeerStats returns one peer's counters (zero for a peer never pushed to).
func (q *PeerQueue) PeerStats(peerName string) Stats {
	q.mu.RLock()
	p := q.peers[peerName]
	q.mu.RUnlock()
	if p == nil {
		return Stats{}
	}
	return p.snapshot()
}

func (p *peer) snapshot() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.HeldItems = p.count()
	s.HeldBytes = p.bytes
	s.InFlight = p.inflightN
	s.InFlightBatches = len(p.inflight)
	return s
}
