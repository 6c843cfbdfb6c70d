package persist_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

func newPipeline(t *testing.T, s *persist.Stream, max int) *persist.Pipeline {
	t.Helper()
	p, err := s.Pipeline(persist.PipelineConfig{MaxPending: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Sets sent from one goroutine are committed in the order they were sent,
// even with many in flight: their seqs grow in that order and the stream
// holds the values in it.
func TestPipelineKeepsOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.stream("ordered")
	p := newPipeline(t, s, 64)
	const n = 500
	fs := make([]*persist.SetFuture, n)
	for i := range fs {
		fs[i] = p.Set(context.Background(), []byte(strconv.Itoa(i)), persist.SetOptions{})
	}
	var last uint64
	for i, f := range fs {
		res, err := f.Result()
		if err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
		if res.Seq <= last {
			t.Fatalf("set %d landed at seq %d, after seq %d of the set before it", i, res.Seq, last)
		}
		last = res.Seq
	}
	msgs, _, err := s.GetAll(context.Background(), persist.Range{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != n {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if string(m.Value) != strconv.Itoa(i) {
			t.Fatalf("message %d holds %q, want %q", i, m.Value, strconv.Itoa(i))
		}
	}
}

// Each set has its own result: a failed compare-and-set or a refused key
// fails that set only.
func TestPipelineErrorsPerSet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.stream("mixed")
	p := newPipeline(t, s, 16)
	ctx := context.Background()
	zero := uint64(0)
	first := p.Set(ctx, []byte("a"), persist.SetOptions{Key: "k", PrevSeq: &zero})
	again := p.Set(ctx, []byte("b"), persist.SetOptions{Key: "k", PrevSeq: &zero}) // k exists by then
	badKey := p.Set(ctx, []byte("c"), persist.SetOptions{Key: "bad\nkey"})
	other := p.Set(ctx, []byte("d"), persist.SetOptions{Key: "j"})

	if _, err := first.Result(); err != nil {
		t.Fatalf("first create: %v", err)
	}
	if _, err := again.Result(); !errors.Is(err, persist.ErrWrongLastSequence) {
		t.Fatalf("second create of k: err %v, want wrong last sequence", err)
	}
	if _, err := badKey.Result(); err == nil || !errors.Is(err, persist.ErrBadRequest) {
		t.Fatalf("bad key: err %v, want bad request", err)
	}
	if _, err := other.Result(); err != nil {
		t.Fatalf("set of j: %v", err)
	}
	m, err := h.client.KV(h.scope, "mixed").Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != "a" {
		t.Fatalf("k holds %q, want the first create's value", m.Value)
	}
}

// A set whose answer is lost is retried when it carries a MsgID, and the
// retry is de-duplicated: one message, and the first write's seq as the
// result. Without a MsgID the lost answer is a timeout, never a retry.
func TestPipelineRetryIsDeduplicated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	nc := h.Conn()
	// A stand-in service "pxy" whose balancer names "0" and whose server
	// forwards each request to the real persist server, dropping the first
	// answer of every set.
	var sets atomic.Int64
	for subject, fn := range map[string]nats.MsgHandler{
		"pxy.*.id": func(m *nats.Msg) { _ = m.Respond([]byte("0")) },
		"pxy.*.api.0": func(m *nats.Msg) {
			fwd := &nats.Msg{Subject: "persist." + strings.Split(m.Subject, ".")[1] + ".api.0", Header: m.Header, Data: m.Data}
			r, err := nc.RequestMsg(fwd, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			if sets.Add(1)%2 == 1 {
				return // the first answer of each set is lost
			}
			_ = m.RespondMsg(&nats.Msg{Header: r.Header, Data: r.Data})
		},
	} {
		sub, err := nc.Subscribe(subject, fn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Service: "pxy", Timeout: 300 * time.Millisecond, Retry: bus.Retry{Min: time.Millisecond, Max: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := newPipeline(t, c.Stream(h.scope, "retried"), 8)

	res, err := p.Set(context.Background(), []byte("once"), persist.SetOptions{MsgID: "m-1"}).Result()
	if err != nil {
		t.Fatalf("set with a MsgID whose first answer was lost: %v", err)
	}
	msgs, _, err := h.stream("retried").GetAll(context.Background(), persist.Range{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Seq != res.Seq {
		t.Fatalf("stream holds %d messages (first seq %v), want one at seq %d", len(msgs), msgs, res.Seq)
	}
	if got := sets.Load(); got != 2 {
		t.Fatalf("the server saw %d copies of the set, want 2 (the lost one and its retry)", got)
	}

	_, err = p.Set(context.Background(), []byte("no id"), persist.SetOptions{}).Result()
	if !errors.Is(err, bus.ErrTimeout) {
		t.Fatalf("set without a MsgID whose answer was lost: err %v, want a timeout", err)
	}
}

// Close waits for every set in flight, and refuses new ones.
func TestPipelineCloseWaits(t *testing.T) {
	t.Parallel()
	// A commit held in the server (its observer hears of it before the
	// answers go out) keeps sets in flight until the test lets it go.
	hold := &commitGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, func(c *server.Config) { c.Observer = hold })
	t.Cleanup(hold.open)
	s := h.stream("closing")
	p, err := s.Pipeline(persist.PipelineConfig{MaxPending: 32})
	if err != nil {
		t.Fatal(err)
	}
	hold.armed.Store(true)
	fs := make([]*persist.SetFuture, 20)
	for i := range fs {
		fs[i] = p.Set(context.Background(), []byte("v"), persist.SetOptions{})
	}
	<-hold.entered // a commit is held: its sets cannot be answered
	// How many sets were not done at the moment Close returned.
	unfinished := make(chan int, 1)
	go func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		n := 0
		for _, f := range fs {
			select {
			case <-f.Done():
			default:
				n++
			}
		}
		unfinished <- n
	}()
	hold.open()
	if n := <-unfinished; n != 0 {
		t.Fatalf("Close returned with %d sets still in flight", n)
	}
	for i, f := range fs {
		if _, err := f.Result(); err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
	}
	if _, err := p.Set(context.Background(), []byte("late"), persist.SetOptions{}).Result(); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("set after Close: err %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	inv, err := s.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inv.Count != int64(len(fs)) {
		t.Fatalf("stream holds %d messages, want %d", inv.Count, len(fs))
	}
}

// commitGate is a persist server Observer that, once armed, holds the
// first commit it hears of (the worker, before the commit's answers go
// out) until release is closed.
type commitGate struct {
	armed   atomic.Bool
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (*commitGate) Answered(string, persist.Code) {}
func (*commitGate) Served(string, time.Duration)  {}
func (g *commitGate) open()                       { g.once.Do(func() { close(g.release) }) }
func (g *commitGate) Committed(int, time.Duration) {
	if g.armed.Load() && g.held.CompareAndSwap(false, true) {
		g.entered <- struct{}{}
		<-g.release
	}
}

// A set whose context ends before its answer fails with the context's
// error, and Flush waits for what is in flight.
func TestPipelineContextAndFlush(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	p := newPipeline(t, h.stream("flushed"), 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Set(ctx, []byte("v"), persist.SetOptions{}).Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("set under an ended context: err %v, want context.Canceled", err)
	}
	fs := make([]*persist.SetFuture, 20)
	for i := range fs {
		fs[i] = p.Set(context.Background(), []byte("v"), persist.SetOptions{})
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		select {
		case <-f.Done():
		default:
			t.Fatalf("set %d in flight after Flush", i)
		}
	}
}

// BenchmarkPipelineSet is pipelined sets of 128 bytes through one client,
// with the server in process (bench persist compares it to JetStream).
func BenchmarkPipelineSet(b *testing.B) {
	env := testpersist.Start(b, 1)
	c, err := persist.NewClient(persist.ClientConfig{Conn: env.Conn()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p, err := c.Stream("hub", "bench").Pipeline(persist.PipelineConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	value := make([]byte, 128)
	b.ReportAllocs()
	for b.Loop() {
		p.Set(context.Background(), value, persist.SetOptions{})
	}
	if err := p.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// A set the server would refuse as a whole request (a previous seq with no
// key) fails alone: the pipeline checked keys and headers but not that,
// so the setMany of its batch was refused and every set of it failed.
// The first request's commit is held so that the others form one batch.
func TestPipelineBadSetFailsAlone(t *testing.T) {
	t.Parallel()
	hold := &commitGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, func(c *server.Config) { c.Observer = hold })
	t.Cleanup(hold.open)
	s := h.stream("poison")
	ctx := context.Background()
	// Owner cached, stream open.
	if _, err := s.Set(ctx, []byte("warm"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Pipeline(persist.PipelineConfig{MaxRequests: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	hold.armed.Store(true)
	first := p.Set(ctx, []byte("first"), persist.SetOptions{})
	<-hold.entered // the first request's commit is held: the others queue behind it
	zero := uint64(0)
	good1 := p.Set(ctx, []byte("good1"), persist.SetOptions{})
	bad := p.Set(ctx, []byte("bad"), persist.SetOptions{PrevSeq: &zero})
	good2 := p.Set(ctx, []byte("good2"), persist.SetOptions{})
	hold.open()
	if _, err := first.Result(); err != nil {
		t.Fatal(err)
	}
	_, badErr := bad.Result()
	if badErr == nil {
		t.Fatal("set with PrevSeq and no key succeeded")
	}
	for i, f := range []*persist.SetFuture{good1, good2} {
		if _, err := f.Result(); err != nil {
			t.Errorf("good set %d failed because of another set of its batch: %v", i+1, err)
		}
	}
}

// (Was: a pipeline kept sending sets after its Client was closed, while
// every other call of that client, the pipeline's own retries included,
// failed with ErrClosed.)
func TestPipelineSetAfterClientClose(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	s := c.Stream("hub", "closed-client")
	p := newPipeline(t, s, 0)
	if _, err := p.Set(context.Background(), []byte("before"), persist.SetOptions{}).Result(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Set(context.Background(), []byte("after"), persist.SetOptions{}).Result(); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("set after Client.Close: err %v, want ErrClosed", err)
	}
}

// Client.Close cuts short a pipeline asking a balancer nobody serves for its
// owner: the sets queued meanwhile fail with ErrClosed at once.
// (Was: the pipeline kept asking until Timeout×Attempts after Close, and its sets then failed with no responders.)
func TestPipelineClientCloseEndsOwnerRetry(t *testing.T) {
	t.Parallel()
	e, _ := testnats.Start(t) // no balancer, no server: every question meets no responders
	c, err := persist.NewClient(persist.ClientConfig{
		Conn:     testnats.Conn(t, e),
		Timeout:  time.Minute,
		Attempts: 2,
		// The wait before the second question outlasts the test's bound
		// below.
		Retry: bus.Retry{Min: time.Minute, Max: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := newPipeline(t, c.Stream("hub", "s"), 0)
	f := p.Set(context.Background(), []byte("v"), persist.SetOptions{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Done():
		if _, err := f.Result(); !errors.Is(err, persist.ErrClosed) {
			t.Fatalf("set queued before Client.Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("set still waiting for its owner 10s after Client.Close (the pipeline waits a minute to ask again)")
	}
}
