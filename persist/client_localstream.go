package persist

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/switchyard-dev/switchyard/bus"
)

// LocalStream defaults.
// localRetry spaces the save retries of a LocalStream: 50ms growing by half
// each time up to 5s, ±25%, so that many clients of a restarted server do not
// come back in step; a successful save starts it over.
var localRetry = bus.Retry{Min: 50 * time.Millisecond, Max: 5 * time.Second, Factor: 1.5}

const (
	// LocalKeepDefault is how many messages seen on the feed a LocalStream
	// keeps for Messages.
	LocalKeepDefault = 1000
	// LocalMaxPendingDefault bounds the messages published but not yet saved.
	LocalMaxPendingDefault = 10000
	// localBatchMax and localBatchBytes bound one background save (one
	// setMany request, one transaction on the server).
	localBatchMax   = 256
	localBatchBytes = 256 << 10
)

// HdrLocalID is the user header a LocalStream stores with each message: the
// message's msgID, which lets the handle recognise its own messages on the
// feed even when the reply to the save was lost.
const HdrLocalID = "Local-Msg-Id"

// ErrTooManyPending is returned by Publish when MaxPending messages are
// waiting to be saved.
var ErrTooManyPending = errors.New("persist: too many messages waiting to be saved")

// LocalState is where a LocalMessage is on its way to the stream.
type LocalState int

// Local message states.
const (
	// LocalPending: published here, not yet saved (Err holds the last
	// failed attempt, if any; it is being retried).
	LocalPending LocalState = iota + 1
	// LocalSaved: the server committed it (Seq and Time are set).
	LocalSaved
	// LocalConfirmed: seen on the stream's change feed. Messages other
	// clients wrote are in this state too.
	LocalConfirmed
	// LocalRejected: the server refused it for good (Err says why: reject,
	// too-large, wrong-last-sequence, bad-request, forbidden). It is never
	// retried.
	LocalRejected
)

func (s LocalState) String() string {
	switch s {
	case LocalPending:
		return "pending"
	case LocalSaved:
		return "saved"
	case LocalConfirmed:
		return "confirmed"
	case LocalRejected:
		return "rejected"
	}
	return fmt.Sprintf("LocalState(%d)", int(s))
}

// LocalMessage is one message of a LocalStream.
type LocalMessage struct {
	// ID is the msgID the message is saved with; empty for messages other
	// clients wrote.
	ID      string
	State   LocalState
	Seq     uint64 // from LocalSaved on
	Time    int64  // unix milliseconds, from LocalSaved on
	Key     string
	Headers map[string]string
	Value   []byte
	Err     error // LocalRejected: why; LocalPending: the last failed attempt

	ttl     time.Duration // for the save
	prevSeq *uint64
}

// LocalStreamOptions configure a LocalStream.
type LocalStreamOptions struct {
	// OnChange, if set, receives every message whose state changed (and
	// every message first seen on the feed), in the order the changes
	// happened, from one goroutine. It may call Messages.
	OnChange func(LocalMessage)
	// History is how many of the stream's latest messages to show from the
	// start. Zero means none: only messages written from now on.
	History int
	// Keep bounds the feed messages kept for Messages (the oldest go
	// first). Zero means LocalKeepDefault.
	Keep int
	// MaxPending bounds the messages published and not yet saved. Zero
	// means LocalMaxPendingDefault.
	MaxPending int
	// Ephemeral keeps the stream in the server's memory only.
	Ephemeral bool
}

// LocalPublishOptions are the optional parts of a Publish.
type LocalPublishOptions struct {
	// Key makes the message keyed (it replaces the key's older message).
	Key string
	// Headers are user headers stored with the message.
	Headers map[string]string
	// TTL expires the message after this long (the stream must allow_msg_ttl).
	TTL time.Duration
	// PrevSeq, when set, is a compare-and-set on Key (see SetOptions); a
	// conflict rejects the message with ErrWrongLastSequence.
	PrevSeq *uint64
}

// LocalStream publishes without waiting: Publish returns at once and the
// message is saved in the background, in publish order, with a msgID so
// that retries (with backoff, until saved or refused) never store it
// twice — within the server's DedupWindow, which retries rarely outlast.
// Messages shows the stream as this client sees it: messages confirmed on
// the change feed, by seq, then its own messages not yet confirmed, in
// publish order. A message the server refuses is kept as LocalRejected and
// reported to OnChange; none is dropped silently. It is safe for
// concurrent use.
type LocalStream struct {
	s    *Stream
	opts LocalStreamOptions
	w    *Watcher

	mu        sync.Mutex
	feed      []LocalMessage  // seen on the feed, by seq, at most Keep
	local     []*LocalMessage // own messages not yet confirmed, publish order
	byID      map[string]*LocalMessage
	unsaved   int             // LocalPending messages in local
	events    []LocalMessage  // OnChange queue
	closing   bool            // no more Publish
	gone      error           // why no save can ever succeed (Client or NATS connection closed); the sender stopped
	wake      chan struct{}   // capacity 1: the sender has work
	cbWake    chan struct{}   // capacity 1: events queued
	flushed   chan struct{}   // closed when the sender has nothing left after closing
	saveCtx   context.Context // the sender's attempts; cancelled by Close's deadline
	saveStop  context.CancelFunc
	wg        sync.WaitGroup // sender and callback goroutines
	cbStop    chan struct{}
	closeOnce sync.Once
}

// LocalStream opens a publishing handle on the stream name in scope.
func (c *Client) LocalStream(ctx context.Context, scope, name string, opts LocalStreamOptions) (*LocalStream, error) {
	if opts.History < 0 || opts.Keep < 0 || opts.MaxPending < 0 {
		return nil, errors.New("local stream: negative option")
	}
	if opts.Keep == 0 {
		opts.Keep = LocalKeepDefault
	}
	if opts.MaxPending == 0 {
		opts.MaxPending = LocalMaxPendingDefault
	}
	var so []StreamOption
	if opts.Ephemeral {
		so = append(so, Ephemeral())
	}
	l := &LocalStream{
		s: c.Stream(scope, name, so...), opts: opts,
		byID: map[string]*LocalMessage{},
		wake: make(chan struct{}, 1), cbWake: make(chan struct{}, 1),
		flushed: make(chan struct{}), cbStop: make(chan struct{}),
	}
	inv, err := l.s.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("local stream: %w", err)
	}
	from := inv.Seq + 1
	if uint64(opts.History) < from {
		from -= uint64(opts.History)
	} else {
		from = 1
	}
	l.saveCtx, l.saveStop = context.WithCancel(context.WithoutCancel(ctx))
	w, err := l.s.Watch(context.WithoutCancel(ctx), WatchOptions{From: from}, l.apply)
	if err != nil {
		l.saveStop()
		return nil, fmt.Errorf("local stream: %w", err)
	}
	l.w = w
	l.wg.Add(2)
	go l.sender()
	go l.callbacks()
	return l, nil
}

// Publish queues value for saving and returns the message as it stands
// (LocalPending) at once. It fails only when the handle is closed (or its
// Client, or saving stopped for a closed NATS connection), too many messages
// wait, or the headers are invalid.
func (l *LocalStream) Publish(value []byte, opts LocalPublishOptions) (LocalMessage, error) {
	for k, v := range opts.Headers {
		if k == HdrLocalID {
			return LocalMessage{}, Errorf(CodeBadRequest, "user header %q is reserved", k)
		}
		if err := CheckHeader(k, v); err != nil {
			return LocalMessage{}, err
		}
	}
	// Refused here, not when the batch holding it is sent: there it would
	// fail the other messages of the batch.
	if err := ValidKey(opts.Key); err != nil {
		return LocalMessage{}, err
	}
	if value == nil {
		value = []byte{}
	}
	hdr := make(map[string]string, len(opts.Headers)+1)
	for k, v := range opts.Headers {
		hdr[k] = v
	}
	id := newMsgID()
	hdr[HdrLocalID] = id
	m := &LocalMessage{ID: id, State: LocalPending, Key: opts.Key, Headers: hdr, Value: value, ttl: opts.TTL, prevSeq: opts.PrevSeq}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing || l.s.c.ctx.Err() != nil {
		return LocalMessage{}, ErrClosed
	}
	if l.gone != nil {
		return LocalMessage{}, fmt.Errorf("local stream: cannot save: %w", l.gone)
	}
	if l.unsaved >= l.opts.MaxPending {
		return LocalMessage{}, ErrTooManyPending
	}
	l.local = append(l.local, m)
	l.byID[id] = m
	l.unsaved++
	l.emitLocked(*m)
	l.poke(l.wake)
	return *m, nil
}

func (l *LocalStream) poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// emitLocked queues m for OnChange.
func (l *LocalStream) emitLocked(m LocalMessage) {
	if l.opts.OnChange == nil {
		return
	}
	l.events = append(l.events, m)
	l.poke(l.cbWake)
}

// Messages returns the feed's messages by seq, then this handle's messages
// not yet confirmed, in publish order. A saved message removed from the
// stream (by a limit, a TTL or a delete) before the feed showed it leaves
// the list once the feed moves past its seq.
func (l *LocalStream) Messages() []LocalMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LocalMessage, 0, len(l.feed)+len(l.local))
	out = append(out, l.feed...)
	for _, m := range l.local {
		out = append(out, *m)
	}
	return out
}

// Pending counts the messages not yet saved.
func (l *LocalStream) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unsaved
}

// apply is the watcher's callback.
func (l *LocalStream) apply(ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev.Kind {
	case EventSkipped:
		// Every seq up to Last was delivered or is skipped: a saved
		// message the feed never showed up to there was removed first.
		l.dropVanishedLocked(ev.Last + 1)
	case EventSet:
		m := ev.Msg
		lm := LocalMessage{State: LocalConfirmed, Seq: m.Seq, Time: m.Time, Key: m.Key, Headers: m.Headers, Value: m.Value}
		if id := m.Headers[HdrLocalID]; id != "" {
			if own := l.byID[id]; own != nil {
				lm.ID = id
				if own.State == LocalPending {
					// The save's reply is still on its way (or was lost).
					l.unsaved--
				}
				own.State = LocalConfirmed // the sender's paths skip it from now on
				delete(l.byID, id)
				l.local = slicesDelete(l.local, own)
			}
		}
		l.dropVanishedLocked(m.Seq)
		l.feed = append(l.feed, lm)
		if n := len(l.feed) - l.opts.Keep; n > 0 {
			l.feed = append(l.feed[:0], l.feed[n:]...)
		}
		l.emitLocked(lm)
	case EventDelete:
		for _, seq := range ev.Seqs {
			if i, ok := findSeq(l.feed, seq); ok {
				l.feed = append(l.feed[:i], l.feed[i+1:]...)
			}
		}
	}
}

// dropVanishedLocked forgets own saved messages below seq that the feed
// never showed: sets come in seq order, so they were removed (a limit, a
// TTL, a delete) before the watcher could deliver them.
func (l *LocalStream) dropVanishedLocked(seq uint64) {
	kept := l.local[:0]
	for _, m := range l.local {
		if m.State == LocalSaved && m.Seq < seq {
			delete(l.byID, m.ID)
			continue
		}
		kept = append(kept, m)
	}
	clear(l.local[len(kept):])
	l.local = kept
}

func slicesDelete(s []*LocalMessage, m *LocalMessage) []*LocalMessage {
	for i, x := range s {
		if x == m {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// findSeq finds seq in feed (sorted by seq).
func findSeq(feed []LocalMessage, seq uint64) (int, bool) {
	lo, hi := 0, len(feed)
	for lo < hi {
		mid := (lo + hi) / 2
		if feed[mid].Seq < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(feed) && feed[lo].Seq == seq
}

// batch takes the next messages to save, in publish order.
func (l *LocalStream) batch() ([]*LocalMessage, []Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var own []*LocalMessage
	var msgs []Entry
	bytes := 0
	for _, m := range l.local {
		if m.State != LocalPending {
			continue
		}
		if len(own) == localBatchMax || (len(own) > 0 && bytes+len(m.Value) > localBatchBytes) {
			break
		}
		bytes += len(m.Value)
		msg := Entry{Key: m.Key, Headers: m.Headers, Value: m.Value, MsgID: m.ID, TTL: m.ttl, PrevSeq: m.prevSeq}
		own = append(own, m)
		msgs = append(msgs, msg)
	}
	return own, msgs
}

// sender saves pending messages in the background until Close.
func (l *LocalStream) sender() {
	defer l.wg.Done()
	defer close(l.flushed)
	retry := localRetry.Start()
	single := false // after a request-level refusal, save one at a time
	for {
		own, msgs := l.batch()
		if len(own) == 0 {
			l.mu.Lock()
			closing := l.closing && l.unsaved == 0
			l.mu.Unlock()
			if closing {
				return
			}
			select {
			case <-l.wake:
				continue
			case <-l.saveCtx.Done():
				return
			}
		}
		if single {
			own, msgs = own[:1], msgs[:1]
		}
		res, err := l.s.SetMany(l.saveCtx, msgs)
		if err == nil {
			retry.Reset()
			single = false
			l.saved(own, res)
			continue
		}
		if l.saveCtx.Err() != nil {
			return
		}
		if unsavable(err) {
			// Retrying would go on for ever, and Close would wait for
			// it as long as its ctx lets it (for good without a deadline).
			l.giveUp(err)
			return
		}
		if refused(err) {
			if len(own) > 1 {
				single = true // find the one message the server refuses
				continue
			}
			l.reject(own[0], err)
			single = false
			continue
		}
		l.retrying(own, err)
		if retry.Wait(l.saveCtx) != nil {
			return
		}
	}
}

// refused says whether err is the server's final answer to a request, as
// opposed to a failure to get one (worth retrying).
func refused(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeUnavailable, CodeWrongOwner, CodeInternal:
		return false
	}
	return true
}

// unsavable says whether err means that no save through this handle can
// ever succeed: its Client was closed, or its NATS connection.
func unsavable(err error) bool {
	return errors.Is(err, ErrClosed) || errors.Is(err, nats.ErrConnectionClosed)
}

// giveUp stops saving for good: every message still pending keeps err as
// its Err (it was not saved and will not be), later Publishes fail with it,
// and Close returns without waiting.
func (l *LocalStream) giveUp(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone = err
	for _, m := range l.local {
		if m.State == LocalPending {
			m.Err = err
			l.emitLocked(*m)
		}
	}
}

// saved records the results of one setMany.
func (l *LocalStream) saved(own []*LocalMessage, res []SetManyResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range own {
		r := res[i]
		if r.Err != nil {
			l.rejectLocked(m, r.Err)
			continue
		}
		if m.State != LocalPending {
			continue
		}
		m.State, m.Seq, m.Time, m.Err = LocalSaved, r.Seq, r.Time, nil
		l.unsaved--
		l.emitLocked(*m)
	}
}

func (l *LocalStream) reject(m *LocalMessage, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rejectLocked(m, err)
}

func (l *LocalStream) rejectLocked(m *LocalMessage, err error) {
	if m.State != LocalPending {
		return
	}
	m.State, m.Err = LocalRejected, err
	l.unsaved--
	l.emitLocked(*m)
}

// Dismiss removes a rejected message from Messages (rejected messages stay
// there until dismissed). It reports whether id was a rejected message.
func (l *LocalStream) Dismiss(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.byID[id]
	if m == nil || m.State != LocalRejected {
		return false
	}
	delete(l.byID, id)
	l.local = slicesDelete(l.local, m)
	return true
}

// retrying records a failed attempt on the messages that will be retried.
func (l *LocalStream) retrying(own []*LocalMessage, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range own {
		if m.State == LocalPending {
			m.Err = err
			l.emitLocked(*m)
		}
	}
}

// callbacks delivers queued events to OnChange, in order.
func (l *LocalStream) callbacks() {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		evs := l.events
		l.events = nil
		l.mu.Unlock()
		for _, ev := range evs {
			l.opts.OnChange(ev)
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-l.cbWake:
		case <-l.cbStop:
			return
		}
	}
}

// Watcher is the watcher that follows the stream for the handle: its Done
// and Err tell when it ended for good (a permanent error, EventEnded), after
// which Messages no longer changes from the feed.
func (l *LocalStream) Watcher() *Watcher { return l.w }

// Close stops taking messages and waits until every pending message is
// saved or refused, or ctx ends, or saving became impossible (the Client
// or the NATS connection was closed first); then it stops following the
// feed. It returns an error when messages were left unsaved, wrapping
// ctx's error or ErrClosed (nats.ErrConnectionClosed) for the reason.
func (l *LocalStream) Close(ctx context.Context) error {
	var err error
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
		l.poke(l.wake)
		select {
		case <-l.flushed:
		case <-ctx.Done():
		}
		l.saveStop()
		<-l.flushed
		_ = l.w.Stop(context.WithoutCancel(ctx))
		close(l.cbStop)
		l.wg.Wait()
		if l.opts.OnChange != nil {
			// Whatever the callback goroutine had not taken yet.
			l.mu.Lock()
			evs := l.events
			l.events = nil
			l.mu.Unlock()
			for _, ev := range evs {
				l.opts.OnChange(ev)
			}
		}
		l.mu.Lock()
		n, why := l.unsaved, l.gone
		l.mu.Unlock()
		if why == nil {
			why = ctx.Err()
		}
		if n > 0 {
			err = fmt.Errorf("local stream: %d messages not saved: %w", n, why)
		}
	})
	return err
}
