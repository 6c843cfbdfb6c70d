package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// pending sends requests without waiting and collects their answers, each
// tagged with the index of the request it answers. Requests published from
// the one connection reach the server in publish order, so a test knows the
// order they were queued in.
type pending struct {
	h    *harness
	base string
	sub  *nats.Subscription
}

func (h *harness) pending() *pending {
	h.t.Helper()
	base := nats.NewInbox()
	sub, err := h.nc.SubscribeSync(base + ".*")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &pending{h: h, base: base, sub: sub}
}

// publish sends m as request i; its answer comes from next.
func (p *pending) publish(i int, m *nats.Msg) {
	p.h.t.Helper()
	m.Reply = p.base + "." + strconv.Itoa(i)
	if err := p.h.nc.PublishMsg(m); err != nil {
		p.h.t.Fatal(err)
	}
	if err := p.h.nc.Flush(); err != nil {
		p.h.t.Fatal(err)
	}
}

// set publishes a set of value as request i.
func (p *pending) set(i int, stream, value string) {
	p.h.t.Helper()
	p.publish(i, p.h.msg(persist.CmdSet, stream, nil, []byte(value)))
}

// next waits for the next answer and returns it with its request's index.
func (p *pending) next() (int, *nats.Msg) {
	p.h.t.Helper()
	r, err := p.sub.NextMsg(10 * time.Second)
	if err != nil {
		p.h.t.Fatalf("waiting for an answer: %v", err)
	}
	i, err := strconv.Atoi(strings.TrimPrefix(r.Subject, p.base+"."))
	if err != nil {
		p.h.t.Fatalf("answer on %q: %v", r.Subject, err)
	}
	return i, r
}

// answers waits for n answers and returns them by request index. The
// answers to requests of one stream need not arrive in order: a worker
// hands the stream back before it sends its last commit's answers, so
// another may answer the requests queued behind that commit (a refusal, a
// read) first.
func (p *pending) answers(n int) map[int]*nats.Msg {
	p.h.t.Helper()
	got := make(map[int]*nats.Msg, n)
	for range n {
		i, r := p.next()
		if _, dup := got[i]; dup {
			p.h.t.Fatalf("request %d answered twice", i)
		}
		got[i] = r
	}
	return got
}

// wantSeq fails unless r is a successful set answer with seq want.
func wantSeq(t *testing.T, i int, r *nats.Msg, want uint64) {
	t.Helper()
	if c := r.Header.Get(persist.HdrError); c != "" {
		t.Fatalf("request %d: %s %s", i, c, r.Data)
	}
	var res persist.SetResult
	mustJSON(t, r.Data, &res)
	if res.Seq != want {
		t.Fatalf("request %d got seq %d, want %d", i, res.Seq, want)
	}
}

// TestMaxQueue: while a commit holds the stream's worker, the stream queues
// MaxQueue requests and answers the ones after them unavailable at once; the
// queued ones are then committed in arrival order, and the stream takes
// writes again once its queue has drained.
func TestMaxQueue(t *testing.T) {
	t.Parallel()
	const limit, over = 3, 5
	g := newGate()
	h := newHarnessHook(t, func(c *Config) { c.MaxQueue = limit }, g.hook)
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "q", "v0")
	testwait.For(t, "the first write to hold the worker", g.held.Load)
	for i := 1; i <= limit+over; i++ {
		p.set(i, "q", fmt.Sprint("v", i))
	}
	// Nothing can be committed while the gate is shut, so the first answers
	// are the refusals, and they must be of the requests past the limit.
	for range over {
		i, r := p.next()
		wantCode(t, r, persist.CodeUnavailable)
		if i <= limit {
			t.Fatalf("request %d was refused although only %d were queued before it", i, i-1)
		}
	}
	if q := h.queued("q"); q != limit {
		t.Fatalf("%d requests queued, want %d", q, limit)
	}
	g.open()
	for range limit + 1 {
		i, r := p.next()
		if i > limit {
			t.Fatalf("refused request %d answered twice", i)
		}
		wantSeq(t, i, r, uint64(i+1))
	}
	if res := h.set("q", "after", nil); res.Seq != limit+2 {
		t.Fatalf("write after the queue drained got seq %d, want %d", res.Seq, limit+2)
	}
	if inv := h.inventory("q"); inv.Count != limit+2 {
		t.Fatalf("%d messages stored, want %d: a refused write was stored", inv.Count, limit+2)
	}
}

// (Was: queued requests were bounded by count per stream only (MaxQueue):
// with the worker held, 400 sets of 900 KiB over a few streams queued 350
// MiB of bodies, none refused, and every stream could hold 10,000 requests
// of the max payload.)
func TestMaxQueueBytes(t *testing.T) {
	t.Parallel()
	const budget, value, sent, streams = 1 << 20, 100 << 10, 40, 4
	g := newGate()
	h := newHarnessHook(t, func(c *Config) { c.MaxQueueBytes = budget; c.Workers = 1 }, g.hook)
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "held", "v")
	testwait.For(t, "the first write to hold the worker", g.held.Load)
	big := strings.Repeat("x", value)
	// Spread over new streams, so each request is queued (none served on
	// arrival): the bound is the server's, not a stream's.
	for i := 1; i <= sent; i++ {
		p.set(i, fmt.Sprint("s", i%streams), big)
	}
	// Nothing is committed while the gate is shut: every answer until it
	// opens is a refusal.
	queued, refused := 0, 0
	testwait.Until(t, "every set to be queued or refused", func() (bool, string) {
		for {
			if n, _, err := p.sub.Pending(); err != nil || n == 0 {
				break
			}
			i, r := p.next()
			wantCode(t, r, persist.CodeUnavailable)
			if !strings.Contains(string(r.Data), "MaxQueueBytes") {
				t.Fatalf("request %d refused with %q, which does not name the bound", i, r.Data)
			}
			refused++
		}
		if held := h.srv.queuedBytes.Load(); held > budget {
			t.Fatalf("requests held %d bytes, over MaxQueueBytes %d", held, budget)
		}
		queued = 0
		h.srv.mu.Lock()
		for _, hd := range h.srv.handles {
			queued += len(hd.queue)
		}
		h.srv.mu.Unlock()
		return queued+refused == sent, fmt.Sprintf("%d queued, %d refused", queued, refused)
	})
	if queued == sent {
		t.Fatalf("all %d sets of %d bytes were queued under MaxQueueBytes %d; none refused", sent, value, budget)
	}
	if queued == 0 || int64(queued)*value > budget {
		t.Fatalf("%d sets of %d bytes queued under MaxQueueBytes %d", queued, value, budget)
	}
	// What is held and what was refused show in Stats (and so /metrics).
	if st := h.srv.Stats(); st.QueueRefused != uint64(refused) || st.QueuedBytes < int64(queued)*value || st.QueuedBytes > budget {
		t.Fatalf("Stats: %d refused, %d bytes queued; want %d refused, %d sets of %d bytes queued", st.QueueRefused, st.QueuedBytes, refused, queued, value)
	}
	g.open()
	for i, r := range p.answers(queued + 1) {
		if c := r.Header.Get(persist.HdrError); c != "" {
			t.Fatalf("request %d: %s %s", i, c, r.Data)
		}
	}
	// Answered, they hold nothing.
	testwait.Until(t, "the answered requests' bytes to be let go", func() (bool, string) {
		n := h.srv.queuedBytes.Load()
		return n == 0, fmt.Sprintf("%d bytes held", n)
	})
	h.set("after", big, nil)
}

// TestMaxCommitOpsSplits: writes queued behind a held commit are committed
// in several transactions of at most MaxCommitOps messages each, without
// splitting a request, in queue order, and every caller is answered.
func TestMaxCommitOpsSplits(t *testing.T) {
	t.Parallel()
	const maxOps = 4
	g := newGate()
	h := newHarnessHook(t, func(c *Config) { c.MaxCommitOps = maxOps }, g.hook)
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "c", "held")
	testwait.For(t, "the first write to hold the worker", g.held.Load)
	// Messages per queued request: the setMany of 3 does not fit beside the
	// first three sets, so that commit closes at 3 rather than splitting it.
	sizes := []int{1, 1, 1, 3, 1, 1}
	for i, n := range sizes {
		if n == 1 {
			p.set(i+1, "c", fmt.Sprint("v", i+1))
			continue
		}
		var body []byte
		for k := range n {
			var err error
			if body, err = persist.AppendFrame(body, &persist.Frame{Value: fmt.Appendf(nil, "v%d.%d", i+1, k)}); err != nil {
				t.Fatal(err)
			}
		}
		p.publish(i+1, h.msg(persist.CmdSetMany, "c", nil, body))
	}
	testwait.For(t, "every write to queue behind the held commit", func() bool { return h.queued("c") == len(sizes) })
	g.open()

	// Request i's first message gets the seq after every message queued
	// before it (the held write is seq 1).
	first := map[int]uint64{0: 1}
	next := uint64(2)
	for i, n := range sizes {
		first[i+1] = next
		next += uint64(n)
	}
	for range len(sizes) + 1 {
		i, r := p.next()
		if i == 0 || sizes[i-1] == 1 {
			wantSeq(t, i, r, first[i])
			continue
		}
		if c := r.Header.Get(persist.HdrError); c != "" {
			t.Fatalf("request %d: %s %s", i, c, r.Data)
		}
		var res []persist.SetManyResult
		mustJSON(t, r.Data, &res)
		if len(res) != sizes[i-1] {
			t.Fatalf("request %d: %d results for %d messages", i, len(res), sizes[i-1])
		}
		for k, m := range res {
			if m.Err != nil || m.Seq != first[i]+uint64(k) {
				t.Fatalf("request %d message %d: %+v, want seq %d", i, k, m, first[i]+uint64(k))
			}
		}
	}
	got := g.commitSizes()
	for _, n := range got {
		if n > maxOps {
			t.Fatalf("a commit held %d messages, over MaxCommitOps %d (commits %v)", n, maxOps, got)
		}
	}
	if want := []int{1, 3, 4, 1}; !slices.Equal(got, want) {
		t.Fatalf("commit sizes %v, want %v", got, want)
	}
	if c := h.srv.commits.Load(); c != 4 {
		t.Fatalf("%d commits, want 4", c)
	}
	if inv := h.inventory("c"); inv.Count != int64(next-1) || inv.Seq != next-1 {
		t.Fatalf("inventory %+v, want %d messages", inv, next-1)
	}
}

// TestStopDeadlineFailsQueued: when Stop's context ends while a commit holds
// the worker, the requests queued behind it are answered unavailable, the
// held commit still finishes and is answered, and Stop reports that it gave
// up with an error wrapping the context's.
func TestStopDeadlineFailsQueued(t *testing.T) {
	t.Parallel()
	const n = 5
	g := newGate()
	h := newHarnessHook(t, nil, g.hook)
	t.Cleanup(g.open)
	p := h.pending()
	p.set(0, "s", "held")
	testwait.For(t, "the first write to hold the worker", g.held.Load)
	for i := 1; i <= n; i++ {
		p.set(i, "s", fmt.Sprint("v", i))
	}
	testwait.For(t, "the writes to queue", func() bool { return h.queued("s") == n })

	// A deadline already past: Stop gives up on the queue at once instead of
	// waiting for the held commit.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- h.srv.Stop(ctx) }()
	for range n {
		i, r := p.next()
		if i == 0 {
			t.Fatal("the held write was answered before its commit finished")
		}
		wantCode(t, r, persist.CodeUnavailable)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a commit was still running", err)
	default:
	}
	g.open()
	if err := <-stopped; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop after failing queued requests returned %v, want an error wrapping %v", err, context.DeadlineExceeded)
	}
	i, r := p.next()
	if i != 0 {
		t.Fatalf("request %d answered twice", i)
	}
	wantSeq(t, i, r, 1)
	// Only the held write was stored.
	h.start()
	if inv := h.inventory("s"); inv.Count != 1 || inv.Seq != 1 {
		t.Fatalf("inventory after restart %+v, want the one committed write", inv)
	}
}

// (Was: when Stop's context ended while a write served on the subscription's
// goroutine held it, the requests waiting in the subscription behind that
// write were dropped with it, unanswered: received, never applied, and their
// callers timed out not knowing it.)
func TestStopDeadlineAnswersBufferedRequests(t *testing.T) {
	t.Parallel()
	const n = 5
	var hold, held atomic.Bool
	release := make(chan struct{})
	h := newHarnessHook(t, nil, func(s *Server) {
		s.beforeWrite = func(int) {
			if hold.Load() && held.CompareAndSwap(false, true) {
				<-release
			}
		}
	})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	h.set("s", "open", nil) // an open, idle stream: the next lone write is served inline
	hold.Store(true)
	p := h.pending()
	p.set(0, "s", "held")
	testwait.For(t, "the write to hold the subscription", held.Load)
	if h.srv.inlined.Load() != 1 {
		t.Fatalf("%d requests served inline, want the held one", h.srv.inlined.Load())
	}
	for i := 1; i <= n; i++ {
		p.set(i, "s", fmt.Sprint("v", i))
	}
	// The message being handled counts as pending until its handler returns.
	testwait.For(t, "the writes to wait in the subscription", func() bool {
		got, _, err := h.srv.sub.Pending()
		return err == nil && got == n+1
	})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- h.srv.Stop(ctx) }()
	testwait.For(t, "stop to begin", h.srv.base.Stopped)
	open()
	got := p.answers(n + 1)
	wantSeq(t, 0, got[0], 2)
	for i := 1; i <= n; i++ {
		wantCode(t, got[i], persist.CodeUnavailable)
	}
	if err := <-stopped; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop returned %v, want an error wrapping %v", err, context.DeadlineExceeded)
	}
	h.start()
	if inv := h.inventory("s"); inv.Count != 2 || inv.Seq != 2 {
		t.Fatalf("inventory after restart %+v, want the two committed writes", inv)
	}
}
