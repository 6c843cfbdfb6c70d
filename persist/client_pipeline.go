package persist

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
)

// Pipeline defaults.
const (
	// PipelineMaxPendingDefault bounds the sets a Pipeline holds, queued or
	// sent, when PipelineConfig.MaxPending is zero (JetStream's async
	// publish allows 4,000).
	PipelineMaxPendingDefault = 4096
	// PipelineMaxBatchDefault bounds the sets of one request.
	PipelineMaxBatchDefault = 1000
	// PipelineMaxRequestsDefault bounds the requests in flight: two keep
	// the server busy with one while the answer of the other travels.
	PipelineMaxRequestsDefault = 2
)

// PipelineConfig configures a Pipeline.
type PipelineConfig struct {
	// MaxPending bounds the sets held, queued or sent: Set blocks while
	// that many wait for their results. Zero means
	// PipelineMaxPendingDefault.
	MaxPending int
	// MaxBatch bounds the sets sent in one request (at most MaxBatch of
	// the wire). Zero means PipelineMaxBatchDefault.
	MaxBatch int
	// MaxRequests bounds the requests in flight. Zero means
	// PipelineMaxRequestsDefault.
	MaxRequests int
}

func (c PipelineConfig) withDefaults() PipelineConfig {
	if c.MaxPending <= 0 {
		c.MaxPending = PipelineMaxPendingDefault
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = PipelineMaxBatchDefault
	}
	c.MaxBatch = min(c.MaxBatch, MaxBatch)
	if c.MaxRequests <= 0 {
		c.MaxRequests = PipelineMaxRequestsDefault
	}
	return c
}

// Pipeline keeps many sets of one stream in flight from one caller, the way
// JetStream's PublishAsync does: Set returns at once with a SetFuture, and
// each set gets its own result. While MaxRequests requests are out, new
// sets queue, and the next request carries every set queued (up to
// MaxBatch) as one setMany: a single caller so fills the server's group
// commits and pays the bus once per batch instead of once per set. An idle
// pipeline sends a set at once, alone.
//
// Order: sets sent from one goroutine are committed in the order Set was
// called, so their seqs grow in that order. A request that must be tried
// again (the owner moved, or it timed out and every set in it carries a
// MsgID) is retried on its own and may land after sets sent later.
//
// Retries follow Stream.SetMany's rules: a request the server did not apply
// (wrong owner, no responders, unavailable) is always retried; one that
// timed out is retried only when all its sets carry a MsgID, whose
// de-duplication makes the retry safe; any other failure of the request is
// the result of each of its sets. A set's own failure (a compare-and-set
// that lost, a limit) is its result only.
//
// A Pipeline is safe for concurrent use. The value given to Set must not
// change until the set is Done. Close waits for every set held.
type Pipeline struct {
	s      *Stream
	cfg    PipelineConfig
	sub    *nats.Subscription
	prefix string        // reply subjects are prefix + a sequence number
	slots  chan struct{} // one token per set held

	mu        sync.Mutex
	queue     []*SetFuture      // not sent yet, in Set order
	inflight  int               // requests sent and not answered
	pending   map[string]*batch // sent requests by reply subject
	next      uint64            // the last reply subject's number
	resolving bool              // a goroutine asks the balancer for the owner
	closed    bool
	retries   sync.WaitGroup // requests retried through Stream.SetMany
	// drain lets one Flush or Close at a time take every slot: two of
	// them taking slots together each held part of them, waiting for the
	// rest, for good.
	drain chan struct{}
}

// batch is one setMany request of a pipeline.
type batch struct {
	fs         []*SetFuture
	id         string // the owner it went to
	idempotent bool
	timer      *time.Timer
}

// SetFuture is the result of one pipelined set, once Done is closed.
type SetFuture struct {
	done  chan struct{}
	res   SetResult
	err   error
	p     *Pipeline
	ctx   context.Context
	entry Entry
}

// Done is closed when the set has its result.
func (f *SetFuture) Done() <-chan struct{} { return f.done }

// Result waits for the set's result: where it landed, or why it failed.
func (f *SetFuture) Result() (SetResult, error) {
	<-f.done
	return f.res, f.err
}

// Pipeline returns a pipeline of sets to the stream. Close it when done.
func (s *Stream) Pipeline(cfg PipelineConfig) (*Pipeline, error) {
	if err := ValidStreamName(s.name); err != nil {
		return nil, err
	}
	if !bus.ValidScope(s.scope) {
		return nil, Errorf(CodeBadRequest, "invalid scope %q: want [a-z0-9][a-z0-9_-]{0,127}", s.scope)
	}
	if s.c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	cfg = cfg.withDefaults()
	p := &Pipeline{
		s:       s,
		cfg:     cfg,
		prefix:  s.c.cfg.Conn.NewInbox() + ".",
		slots:   make(chan struct{}, cfg.MaxPending),
		drain:   make(chan struct{}, 1),
		pending: map[string]*batch{},
	}
	sub, err := s.c.cfg.Conn.Subscribe(p.prefix+"*", p.onReply)
	if err != nil {
		return nil, fmt.Errorf("pipeline %q/%q: subscribe to replies: %w", s.scope, s.name, err)
	}
	// The slots already bound the answers that can be waiting.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("pipeline %q/%q: %w", s.scope, s.name, err)
	}
	p.sub = sub
	return p, nil
}

// Pipeline returns a pipeline of sets to the KV's stream; give each set's
// key as SetOptions.Key.
func (kv *KV) Pipeline(cfg PipelineConfig) (*Pipeline, error) { return kv.s.Pipeline(cfg) }

// Set queues a set of value under opts and returns its future. It blocks
// only while MaxPending sets are held, or until ctx ends. A set whose ctx
// ends before it is sent is not sent, and fails with ctx's error; once
// sent, it runs to its result (wait on Done with a select to stop waiting
// earlier).
func (p *Pipeline) Set(ctx context.Context, value []byte, opts SetOptions) *SetFuture {
	f := &SetFuture{done: make(chan struct{}), p: p, ctx: ctx, entry: Entry{
		Key: opts.Key, Headers: opts.Headers, Value: value, TTL: opts.TTL, MsgID: opts.MsgID, PrevSeq: opts.PrevSeq,
	}}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		f.finish(SetResult{}, p.wrap(ctx.Err()), false)
		return f
	}
	if err := p.s.checkEntry(0, &f.entry); err != nil {
		f.finish(SetResult{}, p.wrap(err), true)
		return f
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// After Client.Close as after the pipeline's own: a set the client
	// would refuse alone (and does refuse on a retry) is not sent.
	if p.closed || p.s.c.ctx.Err() != nil {
		f.finish(SetResult{}, ErrClosed, true)
		return f
	}
	p.queue = append(p.queue, f)
	p.sendLocked()
	return f
}

// sendLocked sends the queue's next batches while requests may go out.
// Requests go out in Set order, under p.mu, so the server sees them so.
func (p *Pipeline) sendLocked() {
	for len(p.queue) > 0 && p.inflight < p.cfg.MaxRequests && !p.resolving {
		id, ok := p.s.c.cachedOwner(p.s.scope)
		if !ok {
			// Asking the balancer takes a round trip: nothing goes out
			// meanwhile, so nothing overtakes what waits for the answer.
			p.resolving = true
			p.retries.Add(1)
			go p.resolve()
			return
		}
		b := p.takeBatchLocked()
		if len(b.fs) == 0 {
			continue // every set of it was cancelled
		}
		b.id = id
		p.publishLocked(b)
	}
}

// takeBatchLocked takes the next request's sets off the queue: up to
// MaxBatch, within the connection's max payload, skipping those whose
// context ended (they fail here, unsent).
func (p *Pipeline) takeBatchLocked() *batch {
	// Room for the request's headers, the stream's name among them (up
	// to MaxStreamNameBytes).
	limit := int(p.s.c.cfg.Conn.MaxPayload()) - 1024 - len(p.s.name)
	b := &batch{idempotent: true}
	size, n := 0, 0
	for ; n < len(p.queue) && len(b.fs) < p.cfg.MaxBatch; n++ {
		f := p.queue[n]
		if err := f.ctx.Err(); err != nil {
			f.finish(SetResult{}, p.wrap(err), true)
			continue
		}
		sz := entrySize(&f.entry)
		if len(b.fs) > 0 && size+sz > limit {
			break
		}
		size += sz
		b.fs = append(b.fs, f)
		if f.entry.MsgID == "" {
			b.idempotent = false
		}
	}
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	return b
}

// entrySize is an upper bound of e's bytes in a setMany body. Its strings
// are JSON there, escapes included: counted at their length, a batch of
// keys or headers full of '&' went over the max payload, and every set of
// it failed too-large.
func entrySize(e *Entry) int {
	n := 96 + jsonLen(e.Key) + jsonLen(e.MsgID) + len(e.Value)
	for k, v := range e.Headers {
		n += jsonLen(k) + jsonLen(v) + 8
	}
	return n
}

// jsonLen is an upper bound of s's bytes as the contents of a JSON string
// written by encoding/json: '<', '>', '&', control characters, U+2028,
// U+2029 and bytes that are not UTF-8 take up to 6 bytes each.
func jsonLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1, r < 0x20, r == '<', r == '>', r == '&', r == '\u2028', r == '\u2029':
			n += 6
		case r == '"', r == '\\':
			n += 2
		default:
			n += w
		}
		i += w
	}
	return n
}

// publishLocked sends b as one setMany request to its owner.
func (p *Pipeline) publishLocked(b *batch) {
	entries := make([]Entry, len(b.fs))
	for i, f := range b.fs {
		entries[i] = f.entry
	}
	m, _, err := p.s.setManyMsg(entries)
	if err != nil {
		p.finishBatch(b, nil, err)
		return
	}
	d := time.Now().Add(p.s.c.cfg.Timeout)
	setDeadline(m, d)
	if err := p.s.c.checkPayload(m); err != nil {
		p.finishBatch(b, nil, err)
		return
	}
	m.Subject = bus.APISubject(p.s.c.cfg.Service, p.s.scope, b.id)
	p.next++
	m.Reply = p.prefix + strconv.FormatUint(p.next, 10)
	reply := m.Reply
	p.pending[reply] = b
	p.inflight++
	b.timer = time.AfterFunc(p.s.c.cfg.Timeout, func() { p.expire(reply) })
	if err := p.s.c.cfg.Conn.PublishMsg(m); err != nil {
		delete(p.pending, reply)
		p.inflight--
		b.timer.Stop()
		p.finishBatch(b, nil, bus.MapError(err))
	}
}

// resolve asks the balancer for the owner, then sends what queued meanwhile.
func (p *Pipeline) resolve() {
	defer p.retries.Done()
	ctx, cancel := context.WithTimeout(context.Background(), p.s.c.cfg.Timeout*time.Duration(p.s.c.cfg.Attempts))
	defer cancel()
	// Client.Close ends the waits between questions, as it ends a call's.
	wait, stop := p.s.c.untilClosed(ctx)
	defer stop()
	var err error
	b := p.s.c.cfg.Retry.Start()
	for n := 0; n < p.s.c.cfg.Attempts; n++ {
		if n > 0 {
			if b.Wait(wait) != nil {
				if ctx.Err() == nil {
					err = ErrClosed
				}
				break
			}
		}
		if _, err = p.s.c.Owner(ctx, p.s.scope); err == nil || !(errors.Is(err, bus.ErrNoResponders) || errors.Is(err, bus.ErrTimeout)) {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resolving = false
	if err != nil {
		// Everything queued fails as a Set would that could not find the
		// owner; later sets ask again.
		for _, f := range p.queue {
			f.finish(SetResult{}, p.wrap(err), true)
		}
		clear(p.queue)
		p.queue = p.queue[:0]
		return
	}
	p.sendLocked()
}

// take removes the request waiting on reply subject r, or returns nil when
// it has its answer already.
func (p *Pipeline) take(r string) *batch {
	p.mu.Lock()
	b := p.pending[r]
	if b != nil {
		delete(p.pending, r)
		p.inflight--
	}
	p.mu.Unlock()
	return b
}

// onReply hands a server's answer to the sets of its request, then sends
// what queued meanwhile.
func (p *Pipeline) onReply(m *nats.Msg) {
	b := p.take(m.Subject)
	if b == nil {
		return // late: the request timed out
	}
	b.timer.Stop()
	err := replyError(m)
	switch {
	case err == nil:
		res, err := p.s.setManyResults(m, len(b.fs))
		p.finishBatch(b, res, err)
	case errors.Is(err, bus.ErrNoResponders) || errors.Is(err, ErrWrongOwner) || errors.Is(err, ErrUnavailable):
		// Not applied: ask the balancer again and retry.
		p.s.c.forget(p.s.scope, b.id)
		p.retry(b)
	default:
		p.finishBatch(b, nil, err)
	}
	p.mu.Lock()
	p.sendLocked()
	p.mu.Unlock()
}

// expire ends the wait of the request on reply subject r at its deadline.
func (p *Pipeline) expire(r string) {
	b := p.take(r)
	if b == nil {
		return
	}
	if b.idempotent {
		p.retry(b) // safe: a second copy is de-duplicated
	} else {
		p.finishBatch(b, nil, bus.ErrTimeout)
	}
	p.mu.Lock()
	p.sendLocked()
	p.mu.Unlock()
}

// retry runs b again through Stream.SetMany, which owns the retry policy
// (its attempts start afresh).
func (p *Pipeline) retry(b *batch) {
	entries := make([]Entry, len(b.fs))
	for i, f := range b.fs {
		entries[i] = f.entry
	}
	p.retries.Add(1)
	go func() {
		defer p.retries.Done()
		res, err := p.s.SetMany(context.Background(), entries)
		if err != nil {
			// SetMany's error names the request already.
			for _, f := range b.fs {
				f.finish(SetResult{}, err, true)
			}
			return
		}
		p.finishBatch(b, res, nil)
	}()
}

// finishBatch gives each set of b its result: res[i], or err for all.
func (p *Pipeline) finishBatch(b *batch, res []SetManyResult, err error) {
	for i, f := range b.fs {
		switch {
		case err != nil:
			f.finish(SetResult{}, p.wrap(err), true)
		case res[i].Err != nil:
			f.finish(SetResult{}, p.wrap(res[i].Err), true)
		default:
			f.finish(SetResult{Seq: res[i].Seq, Time: res[i].Time}, nil, true)
		}
	}
}

// wrap gives err the context Stream.Set gives its errors.
func (p *Pipeline) wrap(err error) error {
	return fmt.Errorf("set %q/%q: %w", p.s.scope, p.s.name, err)
}

// finish sets f's result, gives back its slot when it held one, and wakes
// its waiters.
func (f *SetFuture) finish(res SetResult, err error, slot bool) {
	f.res, f.err = res, err
	f.entry = Entry{} // the caller may reuse the value now
	if slot {
		<-f.p.slots
	}
	close(f.done)
}

// Flush waits until every set queued before it has its result, or ctx ends.
func (p *Pipeline) Flush(ctx context.Context) error {
	select {
	case p.drain <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.drain }()
	n := cap(p.slots)
	for i := 0; i < n; i++ {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			for ; i > 0; i-- {
				<-p.slots
			}
			return ctx.Err()
		}
	}
	for i := 0; i < n; i++ {
		<-p.slots
	}
	return nil
}

// Close refuses new sets, waits for every set held to have its result and
// stops listening for answers. It is idempotent: a call while another
// is under way waits for every set held as well.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	again := p.closed
	p.closed = true
	p.mu.Unlock()
	// Every set held ends: answered, failed, or at its request's deadline.
	// A second Close waits for that too, whichever takes its turn first.
	p.drain <- struct{}{}
	defer func() { <-p.drain }()
	for i := 0; i < cap(p.slots); i++ {
		p.slots <- struct{}{}
	}
	p.retries.Wait()
	var err error
	if !again {
		err = p.sub.Unsubscribe()
	}
	for i := 0; i < cap(p.slots); i++ {
		<-p.slots
	}
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("pipeline %q/%q: %w", p.s.scope, p.s.name, err)
	}
	return nil
}
