package persist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist/internal/seqset"
)

// Watch defaults.
// watchRetry spaces a watcher's re-reads after failures (see sync): 50ms
// growing ×1.8 up to 5s, ±25%, so that many watchers of a restarted server do
// not return in step.
var watchRetry = bus.Retry{Min: 50 * time.Millisecond, Max: 5 * time.Second, Factor: 1.8}

const (
	// WatchBufferDefault is how many feed messages a watcher holds while its
	// callback is busy; one more and it resyncs.
	WatchBufferDefault = 4096
	// WatchIdleCheckDefault is how long a watcher waits without feed traffic
	// before it asks the server whether it missed the tail of the stream.
	WatchIdleCheckDefault = 15 * time.Second
	// watchPage is the page size of the watcher's getAll reads.
	watchPage = 1000
	// watchResyncSpread: a resync starts after a random wait below it, so
	// the watchers of one stream do not all re-read it at the same instant.
	watchResyncSpread = 200 * time.Millisecond
	// watchConcurrentResyncs bounds the watchers of one Client that re-read
	// their streams at the same time: after a server restart every watcher
	// must re-read, and letting them all at once would only make their
	// requests time out behind one another while the server still does the
	// work.
	watchConcurrentResyncs = 4
	// watchMaxEpochs bounds the publishers a watcher tracks at once.
	watchMaxEpochs = 16
	// watchSettleRounds bounds the inventory rounds of one read (see
	// readStream): while writers keep assigning seqs the count check cannot
	// be trusted, and the watcher re-lists what it holds instead.
	watchSettleRounds = 3
	// watchFeedWindow is how many applied feed messages a watcher
	// remembers per publisher (number, digest, what it delivered on the
	// message's word), to undo them when a second, different message with
	// one of those numbers shows that one of the two was forged.
	watchFeedWindow = 256
	// watchConfirmGap: deletes awaiting confirmation whose seqs lie this
	// close together are confirmed by one read of the range between them.
	watchConfirmGap = 64
	// watchConfirmBatch bounds the deletes that wait for confirmation
	// while feed messages keep coming.
	watchConfirmBatch = 1024
)

// Bounds on what a watcher remembers; variables so tests can make them small.
var (
	// watchMaxPreDeleted bounds the deletes remembered for seqs not yet
	// seen. One more forces a resync: the re-read learns from the stream
	// which of those seqs are gone, so nothing is forgotten.
	watchMaxPreDeleted = 4096
	// watchMaxKeys bounds the key -> seq index a watcher keeps to recognise,
	// during a re-read, which delivered rows a newer row of their key
	// replaced. Past it the index is dropped: it only saves reading, a
	// resync without it re-lists what the watcher holds.
	watchMaxKeys = 1 << 16
)

// EventKind says what an Event carries.
type EventKind int

// Event kinds.
const (
	// EventSet carries one stored message in Msg. Sets come in increasing
	// seq order and each seq comes once, except after a forged feed
	// message (Stats.Forged): the server's message at a seq the watcher
	// took back (EventDelete) or let go on a forged word comes again.
	EventSet EventKind = iota + 1
	// EventDelete carries seqs, each one delivered earlier as an EventSet,
	// that are gone (deleted, replaced by a newer message of their key, or
	// removed by a limit, TTL or age). Each seq is reported once.
	EventDelete
	// EventResynced says the watcher lost track of the feed (a lost feed
	// message, a slow callback, a NATS reconnect, a new server, a full
	// memory of early deletes) and re-reads the stream. The events up to
	// the next EventCaughtUp bring the application from its current state
	// to the stream's: the EventSets it missed (each preceded by an
	// EventDelete of the older row of its key when the watcher had
	// delivered that row), one EventDelete for the other delivered seqs
	// that vanished meanwhile, and an EventSkipped for the seqs that came
	// and went while it was away. Nothing delivered before is delivered
	// again.
	EventResynced
	// EventCaughtUp says every message that existed when the history (or
	// resync) read finished has been delivered; live changes follow.
	EventCaughtUp
	// EventSkipped says Count seqs, between First and Last, were assigned
	// to messages after the watcher started but can never be delivered:
	// they were removed (replaced by a newer message of their key, deleted,
	// or removed by a limit, TTL or age) before the watcher could read
	// them, so neither their set nor their delete reaches the application.
	// Their effect on the stream's current state is nil (each was added and
	// removed), so a key-value view stays right; a consumer that wanted
	// every change learns exactly how many it lost. Each seq is counted
	// once, and seqs between First and Last that are not counted were
	// delivered. Messages removed before the watcher started (history) are
	// not counted.
	EventSkipped
	// EventEnded is the last event: the watcher stopped for good because of
	// Err, a permanent error (the scope is invalid, access is forbidden,
	// the stream cannot exist on its server, an answer can never fit) or
	// the NATS connection being closed. Watcher.Err returns the same error.
	// A watcher ended by Stop, its context or Client.Close gets no
	// EventEnded: the application asked for that.
	EventEnded
)

func (k EventKind) String() string {
	switch k {
	case EventSet:
		return "set"
	case EventDelete:
		return "delete"
	case EventResynced:
		return "resynced"
	case EventCaughtUp:
		return "caught-up"
	case EventSkipped:
		return "skipped"
	case EventEnded:
		return "ended"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one change handed to a Watch callback.
type Event struct {
	Kind EventKind
	// Msg is the set message. It may be shared with the client's other
	// watchers of the stream: read it, never modify it.
	Msg    *Message // EventSet
	Seqs   []uint64 // EventDelete, ascending
	Reason string   // EventResynced: why the watcher re-read the stream
	// EventSkipped: how many seqs can never be delivered, and the lowest
	// and highest of them.
	Count       uint64
	First, Last uint64
	Err         error // EventEnded: why the watcher ended
}

// WatchStats counts what a watcher did, for monitoring; see Watcher.Stats.
type WatchStats struct {
	// Resyncs counts the times the watcher re-read the stream.
	Resyncs uint64
	// Retries counts read attempts that failed with a transient error
	// (no server answering, a timeout, unavailable, wrong-owner, internal,
	// a lost connection) and were tried again under the retry policy.
	Retries uint64
	// LastRetryErr is the error of the last retried attempt, nil if none.
	LastRetryErr error
	// Read counts the messages the watcher read with getAll: the history,
	// gap fills, re-reads after a resync.
	Read uint64
	// Skipped counts the seqs reported in EventSkipped.
	Skipped uint64
	// Forged counts what the feed claimed and the server contradicted:
	// deletes of seqs the server still holds (dropped), sets of seqs the
	// server never assigned (dropped), two different feed messages with
	// one number from one publisher, or a replay of one (the watcher undoes
	// what it delivered on their word and re-reads the stream), and
	// messages a resync found the watcher had wrongly let go (delivered
	// again). Servers never cause it; see the trust model in
	// docs/architecture.md.
	Forged uint64
	// IdleChecks counts the idle checks made (see WatchOptions.IdleCheck).
	IdleChecks uint64
	// Gaps counts feed messages whose seq jumped past the next one the
	// watcher expected; each gap was filled by reading the server.
	Gaps uint64
	// Lag is how many seqs the feed has announced beyond the highest the
	// watcher has accounted for (LastSeq): 0 when caught up.
	Lag uint64
}

// WatchOptions configure Watch.
type WatchOptions struct {
	// From delivers the messages with seq >= From. Zero means from the start.
	From uint64
	// Buffer is how many feed messages (each one commit's changes, or part of
	// a large commit) wait while the callback is busy; past it the watcher
	// drops them and resyncs once the callback returns. Zero means
	// WatchBufferDefault.
	Buffer int
	// IdleCheck is how long the watcher waits with no feed traffic before it
	// asks the server for the stream's inventory, to notice a lost last
	// message. Zero means WatchIdleCheckDefault; negative turns it off.
	IdleCheck time.Duration
}

// Watcher follows one stream; see Stream.Watch.
type Watcher struct {
	s    *Stream
	opts WatchOptions
	fn   func(Event)
	nc   *nats.Conn

	base   lifecycle.Base // Stop's rules; Watch starts it
	ctx    context.Context
	cancel context.CancelFunc
	hub    *feedHub // the feed subscription shared with the client's other watchers of the stream
	status chan nats.Status
	in     chan *feedBatch // bounded buffer between the hub and run
	kick   chan struct{}   // capacity 1: the buffer overflowed
	done   chan struct{}

	overflow atomic.Bool   // the buffer overflowed; drop until the next resync
	last     atomic.Uint64 // highest seq accounted for (delivered, known gone or skipped)
	resyncs  atomic.Uint64
	retries  atomic.Uint64
	readMsgs atomic.Uint64 // messages read with getAll
	skipped  atomic.Uint64
	forged   atomic.Uint64
	idles    atomic.Uint64
	gaps     atomic.Uint64
	// feedHigh is the highest seq a feed message announced (set or ref
	// frames); written by the run goroutine only, read by Stats for Lag.
	feedHigh atomic.Uint64
	stopped  atomic.Bool

	errMu    sync.Mutex // protects err and retryErr
	err      error
	retryErr error

	// Owned by the run goroutine.
	live       seqset.Set            // delivered seqs not yet reported deleted
	epochs     map[string]*feedEpoch // publisher epoch -> what the watcher applied of its feed
	preDeleted map[uint64]struct{}
	// pendingDel holds delivered seqs a feed delete named that wait for
	// the server to confirm they are gone (see confirmDeletes).
	pendingDel []uint64
	// restore holds seqs whose delete was delivered on the word of a feed
	// message later shown forged or conflicting: the next resync reads them
	// and delivers again those the server still holds.
	restore []uint64
	// quietTo: seqs up to it were accounted for before a rollback (see
	// rollback), so the re-read does not count them as skipped again.
	quietTo    uint64
	maxPre     int               // bound of preDeleted (watchMaxPreDeleted when the watcher was made)
	keySeq     map[string]uint64 // key -> seq of the last keyed set delivered (see watchMaxKeys)
	history    bool              // the first read is running: seqs it passes over are history, not skipped
	skip       skipRun           // seqs skipped and not yet reported
	reconnects uint64
}

// skipRun accumulates the seqs one EventSkipped will report.
type skipRun struct{ n, first, last uint64 }

// ErrWatchConnClosed ends a watcher whose NATS connection was closed.
var ErrWatchConnClosed = errors.New("watch: NATS connection closed")

// connClosed is ErrWatchConnClosed, with why the connection closed when
// NATS said (a user revoked or whose password changed: the server's
// authorization violation on reconnecting), so that the watcher's end
// names the cause rather than only the effect.
func (w *Watcher) connClosed() error {
	if err := w.nc.LastError(); err != nil {
		return fmt.Errorf("%w: %v", ErrWatchConnClosed, err)
	}
	return ErrWatchConnClosed
}

// Watch follows the stream: fn receives the messages with seq >= opts.From
// that exist now, EventCaughtUp, then every change as it is committed. fn is
// called from one goroutine, in seq order, each set seq at most once, and
// must not call Stop. The watcher survives NATS reconnects, persist server
// restarts and the scope moving to another server; whenever it cannot be
// sure it saw every change it re-reads the stream (EventResynced). Every seq
// assigned after the watcher started is either delivered (EventSet, then
// EventDelete when it goes) or, when it was removed before the watcher could
// read it, counted in an EventSkipped: nothing is skipped silently.
//
// Watch subscribes before it returns; history arrives in the background.
// Transient failures (no server, timeouts, unavailable, wrong-owner,
// internal) are retried for ever with backoff and counted in Stats; a
// permanent one (bad-request, forbidden, too-large) ends the watcher with
// EventEnded and Err set, as does the connection being closed. The watcher
// also ends when ctx ends or Stop is called.
func (s *Stream) Watch(ctx context.Context, opts WatchOptions, fn func(Event)) (*Watcher, error) {
	if fn == nil {
		return nil, errors.New("watch: nil callback")
	}
	if opts.Buffer < 0 {
		return nil, fmt.Errorf("watch: negative buffer %d", opts.Buffer)
	}
	if opts.Buffer == 0 {
		opts.Buffer = WatchBufferDefault
	}
	if opts.IdleCheck == 0 {
		opts.IdleCheck = WatchIdleCheckDefault
	}
	w := &Watcher{
		s: s, opts: opts, fn: fn, nc: s.c.cfg.Conn,
		in:         make(chan *feedBatch, opts.Buffer),
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		epochs:     map[string]*feedEpoch{},
		preDeleted: map[uint64]struct{}{},
		maxPre:     watchMaxPreDeleted,
		keySeq:     map[string]uint64{},
		history:    true,
	}
	if opts.From > 1 {
		w.last.Store(opts.From - 1)
	}
	s.c.closeMu.Lock()
	if s.c.ctx.Err() != nil {
		s.c.closeMu.Unlock()
		return nil, ErrClosed
	}
	s.c.watchers.Add(1) // before Close can Wait; see closeMu
	s.c.closeMu.Unlock()
	// The watcher's life is ctx's, not only until Stop as for other
	// services: Base gives it the Stop rules (twice, or after it ended by
	// itself, is safe).
	err := w.base.Start(ctx, w.name(), func(context.Context) error {
		w.ctx, w.cancel = context.WithCancel(ctx)
		stopOnClose := context.AfterFunc(s.c.ctx, w.cancel)
		w.status = w.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
		hub, err := joinFeedHub(w)
		if err != nil {
			stopOnClose()
			w.cancel()
			w.nc.RemoveStatusListener(w.status)
			return err
		}
		w.hub = hub
		w.reconnects = w.nc.Stats().Reconnects
		go func() {
			defer s.c.watchers.Done()
			defer stopOnClose()
			w.run()
		}()
		return nil
	})
	if err != nil {
		s.c.watchers.Done()
		return nil, err
	}
	return w, nil
}

func (w *Watcher) name() string { return fmt.Sprintf("watch %q/%q", w.s.scope, w.s.name) }

// Stop ends the watcher and returns once fn has returned for the last time,
// or when ctx ends first: then it returns an error wrapping ctx.Err(), and
// the watcher still ends as soon as fn returns (Done tells when). Stop
// twice, or after the watcher ended by itself, is safe and returns nil; a
// second Stop does not wait again. It must not be called from fn.
func (w *Watcher) Stop(ctx context.Context) error {
	return w.base.Stop(ctx, func(ctx context.Context) error {
		w.stopped.Store(true)
		w.cancel()
		select {
		case <-w.done: // ended already: a done ctx is no failure
			return nil
		default:
		}
		select {
		case <-w.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s: stop: waiting for the callback: %w", w.name(), ctx.Err())
		}
	})
}

// Done is closed when the watcher has ended.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// LastSeq is the highest seq the watcher has accounted for: delivered, or
// known to be gone before it could be.
func (w *Watcher) LastSeq() uint64 { return w.last.Load() }

// Resyncs counts the times the watcher re-read the stream.
func (w *Watcher) Resyncs() uint64 { return w.resyncs.Load() }

// Stats returns the watcher's counters. It is safe to call at any time.
func (w *Watcher) Stats() WatchStats {
	w.errMu.Lock()
	retryErr := w.retryErr
	w.errMu.Unlock()
	return WatchStats{
		Resyncs:      w.resyncs.Load(),
		Retries:      w.retries.Load(),
		LastRetryErr: retryErr,
		Read:         w.readMsgs.Load(),
		Skipped:      w.skipped.Load(),
		Forged:       w.forged.Load(),
		IdleChecks:   w.idles.Load(),
		Gaps:         w.gaps.Load(),
		Lag:          w.lag(),
	}
}

// lag is feedHigh less LastSeq, 0 when the watcher is ahead of the feed
// (history read past what the feed has said so far).
func (w *Watcher) lag() uint64 {
	hi, last := w.feedHigh.Load(), w.last.Load()
	if hi <= last {
		return 0
	}
	return hi - last
}

// noteFeedSeq raises feedHigh to seq (run goroutine only).
func (w *Watcher) noteFeedSeq(seq uint64) {
	if seq > w.feedHigh.Load() {
		w.feedHigh.Store(seq)
	}
}

// Err says why the watcher ended: nil while it runs or after Stop, the
// context's error when ctx ended, ErrWatchConnClosed when the connection was
// closed, and for a permanent error a *WatchError wrapping the server's (or
// client's) *Error, so CodeOf(w.Err()) is its code.
func (w *Watcher) Err() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// offer queues a feed message for run; it is called by the hub and never
// waits, so neither the connection nor the other watchers wait on this
// watcher's application.
func (w *Watcher) offer(b *feedBatch) {
	if w.overflow.Load() {
		return
	}
	select {
	case w.in <- b:
	default:
		w.overflow.Store(true)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

func (w *Watcher) run() {
	defer close(w.done)
	defer func() {
		w.hub.leave(w)
		w.nc.RemoveStatusListener(w.status)
		// A watcher that ended by itself (a permanent error, a closed
		// connection) releases its context too, not only at Stop.
		w.cancel()
	}()
	reason := ""
	for {
		err := w.sync(reason)
		if err == nil {
			reason, err = w.follow()
		}
		if err != nil {
			if !w.stopped.Load() {
				w.errMu.Lock()
				w.err = err
				w.errMu.Unlock()
			}
			if w.ctx.Err() == nil {
				// Nobody asked the watcher to end: the application must
				// hear it, not only find Done closed.
				w.flushSkipped()
				w.fn(Event{Kind: EventEnded, Err: err})
			}
			return
		}
	}
}

// WatchError is a permanent error that ended a watcher: retrying cannot help.
type WatchError struct {
	Scope, Stream string
	Err           error // the *Error (CodeOf gives its code)
}

func (e *WatchError) Error() string {
	return fmt.Sprintf("watch %q/%q: %s (permanent, not retried)", e.Scope, e.Stream, e.Err)
}

func (e *WatchError) Unwrap() error { return e.Err }

// permanentWatchErr reports whether a read failure will not go away by
// trying again. The codes a read can meet:
//
//	bad-request  permanent: an invalid scope or stream name, or a persistent
//	             stream on a server without a data directory
//	forbidden    permanent: access rules refuse the scope
//	too-large    permanent: an answer (a stored message) can never fit
//	unavailable, wrong-owner, internal, timeouts, no responders, a lost
//	connection: transient (a server stopping, the scope moving, a storage
//	hiccup, NATS reconnecting), retried for ever with backoff
func permanentWatchErr(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeBadRequest, CodeForbidden, CodeTooLarge:
		return true
	}
	return false
}

// follow applies feed messages until a resync is needed (its reason) or the
// watcher ends (an error).
func (w *Watcher) follow() (string, error) {
	var idle <-chan time.Time
	var timer *time.Timer
	if w.opts.IdleCheck > 0 {
		timer = time.NewTimer(w.opts.IdleCheck)
		defer timer.Stop()
		idle = timer.C
	}
	for {
		if n := w.nc.Stats().Reconnects; n != w.reconnects {
			return "NATS reconnected", nil
		}
		select {
		case <-w.ctx.Done():
			return "", w.ctx.Err()
		case st := <-w.status:
			if st == nats.CLOSED || w.nc.IsClosed() {
				return "", w.connClosed()
			}
			// CONNECTED after a reconnect: the loop head compares counts.
		case <-w.kick:
			if w.overflow.Load() {
				return fmt.Sprintf("slow consumer: %d feed messages waiting", w.opts.Buffer), nil
			}
		case m := <-w.in:
			r := w.apply(m)
			if r == "" && (len(w.in) == 0 || len(w.pendingDel) >= watchConfirmBatch) {
				// Confirm once the burst is applied: one read covers the
				// deletes of many feed messages.
				if err := w.confirmDeletes(); err != nil {
					r = "confirm deletes: " + err.Error()
				}
			}
			w.flushSkipped()
			if r != "" {
				return r, nil
			}
			if timer != nil {
				timer.Reset(w.opts.IdleCheck)
			}
		case <-idle:
			r := w.idleCheck()
			w.flushSkipped()
			if r != "" {
				return r, nil
			}
			timer.Reset(w.opts.IdleCheck)
		}
	}
}

// sync reads the stream after (re)subscribing: the initial history when
// reason is "", else a resync announced with EventResynced. It retries
// transient failures with backoff (counted in Stats) until it succeeds; a
// permanent failure ends the watcher with a *WatchError.
func (w *Watcher) sync(reason string) error {
	announced := false
	if reason != "" {
		if err := sleepCtx(w.ctx, rand.N(watchResyncSpread)); err != nil {
			return err
		}
	}
	retry := watchRetry.Start()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := retry.Wait(w.ctx); err != nil {
				return err
			}
		}
		if w.nc.IsClosed() {
			return w.connClosed()
		}
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if !w.s.c.watchGate.acquire(w.ctx) {
			return w.ctx.Err()
		}
		err := w.read(reason, &announced)
		w.s.c.watchGate.release()
		if err != nil {
			if cerr := w.ctx.Err(); cerr != nil {
				return cerr
			}
			if w.nc.IsClosed() {
				return w.connClosed()
			}
			if permanentWatchErr(err) {
				return &WatchError{Scope: w.s.scope, Stream: w.s.name, Err: err}
			}
			w.retries.Add(1)
			w.errMu.Lock()
			w.retryErr = err
			w.errMu.Unlock()
			continue
		}
		// The read was answered, so the NATS server holds the hub's
		// subscription, sent before it on the same connection.
		w.hub.confirm()
		for _, e := range w.epochs {
			e.n, e.win = 0, nil
		}
		w.history = false
		w.flushSkipped()
		w.fn(Event{Kind: EventCaughtUp})
		return nil
	}
}

// read is one attempt of sync; the caller holds a slot of the client's
// watch gate, taken before the buffer is emptied so that waiting for the
// slot cannot overflow it.
func (w *Watcher) read(reason string, announced *bool) error {
	// From here on every feed message is kept; those dropped or discarded
	// before were published before the read below starts, so it sees their
	// effects.
	w.overflow.Store(false)
	for len(w.in) > 0 {
		<-w.in
	}
	// The read below sees every delete the feed showed so far, so the
	// deletes remembered for seqs not yet seen are no longer needed: a seq
	// the read does not find stays undelivered, one it finds was not
	// deleted (in this stream's file) after all.
	clear(w.preDeleted)
	// Likewise for deletes awaiting confirmation: the read's count check
	// reports those that really happened.
	w.pendingDel = nil
	w.reconnects = w.nc.Stats().Reconnects
	// Make sure the subscription is live on the server before reading.
	fctx, cancel := w.s.c.attemptContext(w.ctx)
	err := w.nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return fmt.Errorf("flush before read: %w", err)
	}
	if reason != "" && !*announced {
		*announced = true
		w.resyncs.Add(1)
		w.fn(Event{Kind: EventResynced, Reason: reason})
	}
	return w.readStream()
}

// watchGate is a counting semaphore, made on first use so that a Client
// needs no setup for it.
type watchGate struct {
	once  sync.Once
	slots chan struct{}
}

func (g *watchGate) acquire(ctx context.Context) bool {
	g.once.Do(func() { g.slots = make(chan struct{}, watchConcurrentResyncs) })
	select {
	case g.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *watchGate) release() { <-g.slots }

// readStream brings the watcher level with the stream. Its cost is what
// was missed, not the stream's length:
//
//  1. Read the messages after LastSeq (the sets it missed) and deliver them.
//     A keyed one tells that the older row of its key, if the watcher
//     holds it, is gone (the server replaces it in the same commit), and
//     that delete is delivered without reading anything more.
//  2. Ask for the stream's inventory. Seqs up to its highest seq that the
//     read did not find were removed before the watcher could read them:
//     skipped (history on the first read). If seqs were assigned after the
//     read, read them and ask again (a few rounds at most).
//  3. Once no seq was assigned since the read, the stream's message count
//     equals what the watcher holds exactly when none of the delivered
//     messages vanished: every message at or below LastSeq was delivered or
//     is known gone, and messages only ever leave. Only when the counts
//     differ (deletes, limits or TTLs acted on delivered messages while the
//     watcher was away, or writers never paused, or From > 1 leaves part of
//     the stream untracked) does it re-list the seqs it holds (relist).
//
// Messages delivered by this read need no check: the feed messages
// published since it started are kept, and bring their deletes.
func (w *Watcher) readStream() error {
	if err := w.restoreDeleted(); err != nil {
		return err
	}
	held := w.live.Count() > 0
	before := w.last.Load()
	if err := w.readNew(0); err != nil {
		return err
	}
	for round := 1; ; round++ {
		inv, err := w.s.Inventory(w.ctx)
		if err != nil {
			return err
		}
		if inv.Seq > w.last.Load() {
			if err := w.readNew(inv.Seq); err != nil {
				return err
			}
			w.passTo(inv.Seq)
			if round < watchSettleRounds {
				continue
			}
		} else if !held || (w.opts.From <= 1 && uint64(inv.Count) == w.live.Count()) {
			return nil
		}
		return w.relist(before)
	}
}

// readNew delivers the messages after LastSeq up to end (0: to the end).
func (w *Watcher) readNew(end uint64) error {
	return w.scanPaged(w.last.Load()+1, end, func(m *Message) error {
		w.deliverSet(m, true)
		return nil
	})
}

// relist reads the seqs the watcher held up to upTo and reports those it no
// longer finds as one delete. It costs a read of the range from the oldest
// delivered seq still held to upTo.
func (w *Watcher) relist(upTo uint64) error {
	lo, ok := w.live.Min()
	if !ok || lo > upTo {
		return nil
	}
	var seen seqset.Set
	var back []*Message
	err := w.scanPaged(lo, upTo, func(m *Message) error {
		seen.Append(m.Seq)
		if !w.live.Has(m.Seq) && m.Seq <= w.last.Load() {
			// Seqs never come back once gone, so a message the server
			// holds that the watcher let go was let go on a forged word.
			back = append(back, m)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Seqs above upTo were delivered by this read; keep them out of the
	// comparison.
	w.live.CopyAbove(&seen, upTo)
	gone := w.live.Minus(&seen)
	w.live = w.live.Intersect(&seen)
	if len(gone) > 0 {
		w.fn(Event{Kind: EventDelete, Seqs: gone})
	}
	for _, m := range back {
		w.redeliver(m)
	}
	return nil
}

// fill delivers the messages after LastSeq up to to, read with getAll.
func (w *Watcher) fill(to uint64) error {
	if err := w.readNew(to); err != nil {
		return fmt.Errorf("fill gap up to seq %d: %w", to, err)
	}
	return nil
}

// scanPaged reads start..end (0 = to the end) one page at a time: each page
// is its own short request, so many watchers re-reading a long stream after
// a restart take turns with the writers instead of holding the stream's
// worker (and timing out behind one another).
func (w *Watcher) scanPaged(start, end uint64, fn func(*Message) error) error {
	count := func(m *Message) error {
		w.readMsgs.Add(1)
		return fn(m)
	}
	for {
		next, err := w.s.Scan(w.ctx, Range{Start: start, End: end, Limit: watchPage}, count)
		if err != nil || next == 0 {
			return err
		}
		start = next
	}
}

// deliverSet hands m to fn unless it was already accounted for; the seqs
// it passes over were removed before the watcher could see them. read says
// m comes from a getAll rather than the feed: the feed brings the delete of
// a row m's key replaced in the same commit, a read does not, so a read's
// set is followed here by that delete, in the feed's order (the set, then
// the replaced row's delete): an application sees a replace the same way
// whichever path brought it.
func (w *Watcher) deliverSet(m *Message, read bool) {
	last := w.last.Load()
	if m.Seq <= last {
		return
	}
	w.passTo(m.Seq - 1)
	w.last.Store(m.Seq)
	if _, gone := w.preDeleted[m.Seq]; gone {
		delete(w.preDeleted, m.Seq)
		if !read {
			// Its delete came first (a misrouted writer's set still on its
			// way): the application gets neither.
			w.skipSeqs(m.Seq, m.Seq)
			return
		}
		// The server holds it, so the delete was not of this message: a
		// forgery, or another server's row.
		w.forged.Add(1)
	}
	var replaced uint64 // the row of m's key m replaced, when read
	if m.Key != "" {
		if old, ok := w.keySeq[m.Key]; ok && read && w.live.Remove(old) {
			replaced = old
		}
		if _, ok := w.keySeq[m.Key]; !ok && len(w.keySeq) >= watchMaxKeys {
			clear(w.keySeq)
		}
		w.keySeq[m.Key] = m.Seq
	}
	w.live.Append(m.Seq)
	w.fn(Event{Kind: EventSet, Msg: m})
	if replaced != 0 {
		w.fn(Event{Kind: EventDelete, Seqs: []uint64{replaced}})
	}
}

// passTo accounts for the seqs after LastSeq up to q as removed before the
// watcher could read them: skipped, or history during the first read.
func (w *Watcher) passTo(q uint64) {
	last := w.last.Load()
	if q <= last {
		return
	}
	w.skipSeqs(last+1, q)
	w.last.Store(q)
	if len(w.preDeleted) > 0 {
		for s := range w.preDeleted {
			if s <= q {
				delete(w.preDeleted, s)
			}
		}
	}
}

// skipSeqs adds lo..hi to the next EventSkipped.
func (w *Watcher) skipSeqs(lo, hi uint64) {
	lo = max(lo, w.quietTo+1)
	if w.history || lo > hi {
		return
	}
	if w.skip.n == 0 {
		w.skip.first = lo
	}
	w.skip.n += hi - lo + 1
	w.skip.last = hi
}

// flushSkipped delivers the EventSkipped the last steps accumulated.
func (w *Watcher) flushSkipped() {
	if w.skip.n == 0 {
		return
	}
	r := w.skip
	w.skip = skipRun{}
	w.skipped.Add(r.n)
	w.fn(Event{Kind: EventSkipped, Count: r.n, First: r.first, Last: r.last})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
