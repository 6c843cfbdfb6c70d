package persist_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// seenRequest is what a stand-in server saw of one request.
type seenRequest struct {
	cmd      string
	deadline string // Sy-Deadline as sent
	at       time.Time
}

// standIn is a balancer naming server "0" for every scope and a server "0"
// that records each request and answers it as an empty stream would,
// except the requests its ignore hook picks, which time out.
type standIn struct {
	mu   sync.Mutex
	seen []seenRequest
}

func startStandIn(t *testing.T, ignore func(n int) bool) (*standIn, *nats.Conn) {
	t.Helper()
	_, nc := testnats.Start(t)
	s := &standIn{}
	for subject, fn := range map[string]nats.MsgHandler{
		"persist.*.id": func(m *nats.Msg) { _ = m.Respond([]byte("0")) },
		"persist.*.api.0": func(m *nats.Msg) {
			s.mu.Lock()
			n := len(s.seen)
			s.seen = append(s.seen, seenRequest{cmd: m.Header.Get(persist.HdrCmd), deadline: m.Header.Get(persist.HdrDeadline), at: time.Now()})
			s.mu.Unlock()
			if ignore != nil && ignore(n) {
				return
			}
			out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}}
			switch m.Header.Get(persist.HdrCmd) {
			case persist.CmdSet:
				out.Data = []byte(`{"seq":1,"time":1}`)
			case persist.CmdGet:
				out.Header.Set(persist.HdrSeq, "1")
				out.Data = []byte("v")
			case persist.CmdGetAll:
				out.Header.Set(persist.HdrChunk, "0")
				out.Header.Set(persist.HdrEOF, "true")
			case persist.CmdKeys:
				out.Data = []byte("[]")
			}
			_ = m.RespondMsg(out)
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
	return s, nc
}

func (s *standIn) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

// deadlineMs parses a Sy-Deadline the client sent.
func deadlineMs(t *testing.T, r seenRequest) int64 {
	t.Helper()
	ms, err := strconv.ParseInt(r.deadline, 10, 64)
	if err != nil {
		t.Fatalf("%s sent Sy-Deadline %q: %v", r.cmd, r.deadline, err)
	}
	return ms
}

// TestClientSendsDeadline: every request carries the end of its attempt as
// Sy-Deadline in unix milliseconds, truncated: the caller's deadline when
// it comes before the client's timeout.
func TestClientSendsDeadline(t *testing.T) {
	t.Parallel()
	srv, nc := startStandIn(t, nil)
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	end := time.Now().Add(30 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	s := c.Stream("hub", "s")
	if _, err := s.Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetAll(ctx, persist.Range{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Keys(ctx); err != nil {
		t.Fatal(err)
	}
	seen := srv.requests()
	if len(seen) != 4 {
		t.Fatalf("the server saw %d requests, want 4", len(seen))
	}
	for _, r := range seen {
		if got := deadlineMs(t, r); got != end.UnixMilli() {
			t.Errorf("%s: Sy-Deadline %d, want the caller's deadline %d", r.cmd, got, end.UnixMilli())
		}
	}
}

// TestClientDeadlinePerAttempt: each attempt of a request carries its own
// deadline, Timeout after its start: the retry of a set that timed out
// asks the server to apply it by a later time than the first attempt did.
func TestClientDeadlinePerAttempt(t *testing.T) {
	t.Parallel()
	srv, nc := startStandIn(t, func(n int) bool { return n == 0 })
	const timeout = 100 * time.Millisecond
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	// A msgID makes the set safe to repeat after a timeout.
	if _, err := c.Stream("hub", "s").Set(context.Background(), []byte("v"), persist.SetOptions{MsgID: "m1"}); err != nil {
		t.Fatal(err)
	}
	seen := srv.requests()
	if len(seen) != 2 {
		t.Fatalf("the server saw %d attempts, want 2", len(seen))
	}
	first, second := deadlineMs(t, seen[0]), deadlineMs(t, seen[1])
	// An attempt starts after the call does and before the server sees it.
	if lo, hi := start.Add(timeout).UnixMilli(), seen[0].at.Add(timeout).UnixMilli(); first < lo || first > hi {
		t.Errorf("first attempt's Sy-Deadline %d, want between %d and %d", first, lo, hi)
	}
	// The second starts once the first timed out, at first's deadline or later.
	if lo, hi := first+timeout.Milliseconds(), seen[1].at.Add(timeout).UnixMilli(); second < lo || second > hi {
		t.Errorf("second attempt's Sy-Deadline %d, want between %d and %d", second, lo, hi)
	}
}

// (Was: a call whose context's deadline passed during an attempt failed as
// bus.ErrTimeout, which errors.Is(err, context.DeadlineExceeded) did not
// match, while one whose deadline passed between attempts matched it but
// lost what the attempts had met: which of the two a caller got depended on
// timing.)
func TestClientErrorsMatchTheContext(t *testing.T) {
	t.Parallel()
	hold := &commitGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, func(c *server.Config) { c.Observer = hold })
	t.Cleanup(hold.open)
	h.set("ctx", "first", nil) // the stream is open and its owner known
	// During an attempt: the commit is held until the set gave up, so the
	// set ends by its deadline whenever that comes.
	hold.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := h.stream("ctx").Set(ctx, []byte("held"), persist.SetOptions{})
	hold.open()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, bus.ErrTimeout) {
		t.Errorf("deadline during an attempt: %v, want it to match context.DeadlineExceeded and bus.ErrTimeout", err)
	}
	// Between attempts: the next attempt would come only after an hour.
	c, err := persist.NewClient(persist.ClientConfig{Conn: h.Conn(), Attempts: 10, Retry: bus.Retry{Min: time.Hour, Max: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h.stop()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.Stream(h.scope, "ctx").Set(ctx, []byte("down"), persist.SetOptions{MsgID: "m1"})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, bus.ErrNoResponders) {
		t.Errorf("deadline between attempts: %v, want it to match context.DeadlineExceeded and bus.ErrNoResponders", err)
	}
}
