package persist_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// events records what OnChange saw.
type events struct {
	mu  sync.Mutex
	all []persist.LocalMessage
}

func (e *events) add(m persist.LocalMessage) {
	e.mu.Lock()
	e.all = append(e.all, m)
	e.mu.Unlock()
}

func (e *events) any(pred func(persist.LocalMessage) bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.all {
		if pred(m) {
			return true
		}
	}
	return false
}

func openLocal(t *testing.T, c *persist.Client, name string, ev *events) *persist.LocalStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.LocalStream(ctx, "hub", name, persist.LocalStreamOptions{OnChange: ev.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Close(ctx)
	})
	return l
}

func allConfirmed(l *persist.LocalStream, n int) bool {
	ms := l.Messages()
	if len(ms) != n {
		return false
	}
	for _, m := range ms {
		if m.State != persist.LocalConfirmed {
			return false
		}
	}
	return true
}

// checkStream asserts the stream holds exactly values, in order.
func checkStream(t *testing.T, c *persist.Client, name string, values []string) {
	t.Helper()
	msgs, _, err := c.Stream("hub", name).GetAll(context.Background(), persist.Range{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(values) {
		t.Fatalf("stream holds %d messages, want %d (a duplicate or a loss)", len(msgs), len(values))
	}
	for i, m := range msgs {
		if string(m.Value) != values[i] {
			t.Fatalf("message %d is %q, want %q", i, m.Value, values[i])
		}
	}
}

// TestLocalStreamSurvivesRestart: messages published while the server is
// down wait, are retried with backoff and saved once it is back, each once,
// in publish order.
func TestLocalStreamSurvivesRestart(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 500*time.Millisecond)
	var ev events
	l := openLocal(t, c, "chat", &ev)
	var want []string
	publish := func(i int) {
		v := fmt.Sprintf("m%d", i)
		want = append(want, v)
		m, err := l.Publish([]byte(v), persist.LocalPublishOptions{})
		if err != nil || m.State != persist.LocalPending || m.ID == "" {
			t.Fatalf("publish: %+v, %v", m, err)
		}
	}
	for i := range 3 {
		publish(i)
	}
	testwait.For(t, "first three confirmed", func() bool { return allConfirmed(l, 3) })
	h.stop()
	for i := 3; i < 8; i++ {
		publish(i)
	}
	testwait.For(t, "a failed attempt reported", func() bool {
		return ev.any(func(m persist.LocalMessage) bool { return m.State == persist.LocalPending && m.Err != nil })
	})
	if n := l.Pending(); n != 5 {
		t.Fatalf("%d pending while the server is down, want 5", n)
	}
	h.start()
	testwait.For(t, "all eight confirmed", func() bool { return allConfirmed(l, 8) })
	checkStream(t, c, "chat", want)
	for i, m := range l.Messages() {
		if string(m.Value) != want[i] || m.ID == "" || m.Seq != uint64(i+1) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
}

// TestLocalStreamRetryNoDuplicate: the server commits a save but the reply
// comes too late, so the client sends it again; the msgID makes the second
// copy a no-op.
func TestLocalStreamRetryNoDuplicate(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once, releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	_, c := newClientHarness(t, func(cfg *server.Config) {
		cfg.Storage = gatedStorage{store.NewSQLite(store.SQLiteConfig{Dir: cfg.DataDir}), func() { once.Do(func() { <-release }) }}
	}, nil, 200*time.Millisecond)
	var ev events
	l := openLocal(t, c, "dup", &ev)
	if _, err := l.Publish([]byte("once"), persist.LocalPublishOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a timed-out attempt", func() bool {
		return ev.any(func(m persist.LocalMessage) bool { return m.State == persist.LocalPending && m.Err != nil })
	})
	free()
	testwait.For(t, "confirmed", func() bool { return allConfirmed(l, 1) })
	checkStream(t, c, "dup", []string{"once"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish([]byte("late"), persist.LocalPublishOptions{}); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
}

// TestLocalStreamRejection: a message the server refuses is reported and
// kept as rejected; the messages around it are saved.
func TestLocalStreamRejection(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	ctx := context.Background()
	if _, err := c.Stream("hub", "strict").UpdateConfig(ctx, persist.ConfigUpdate{MaxMsgSize: ptr(int64(64))}); err != nil {
		t.Fatal(err)
	}
	var ev events
	l := openLocal(t, c, "strict", &ev)
	zero := uint64(0)
	var ids []string
	for _, p := range []struct {
		v    string
		opts persist.LocalPublishOptions
	}{
		{"ok1", persist.LocalPublishOptions{Key: "k"}},
		{string(make([]byte, 200)), persist.LocalPublishOptions{}},
		{"exists", persist.LocalPublishOptions{Key: "k", PrevSeq: &zero}},
		{"ok2", persist.LocalPublishOptions{}},
	} {
		m, err := l.Publish([]byte(p.v), p.opts)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	testwait.For(t, "everything settled", func() bool {
		ms := l.Messages()
		return l.Pending() == 0 && len(ms) == 4 && ms[0].State == persist.LocalConfirmed && ms[1].State == persist.LocalConfirmed
	})
	ms := l.Messages()
	if ms[0].ID != ids[0] || ms[1].ID != ids[3] {
		t.Fatalf("confirmed %q, %q; want %q, %q", ms[0].ID, ms[1].ID, ids[0], ids[3])
	}
	if ms[2].ID != ids[1] || ms[2].State != persist.LocalRejected || !errors.Is(ms[2].Err, persist.ErrTooLarge) {
		t.Fatalf("too large: %+v", ms[2])
	}
	if ms[3].ID != ids[2] || ms[3].State != persist.LocalRejected || !errors.Is(ms[3].Err, persist.ErrWrongLastSequence) {
		t.Fatalf("CAS: %+v", ms[3])
	}
	for _, id := range ids[1:3] {
		testwait.For(t, "rejection reported to OnChange", func() bool {
			return ev.any(func(m persist.LocalMessage) bool {
				return m.ID == id && m.State == persist.LocalRejected && m.Err != nil
			})
		})
	}
	checkStream(t, c, "strict", []string{"ok1", "ok2"})
	if !l.Dismiss(ids[1]) || len(l.Messages()) != 3 {
		t.Fatal("dismiss")
	}
}

// TestLocalStreamCloseFlushes: Close waits for pending saves.
func TestLocalStreamCloseFlushes(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	var ev events
	l := openLocal(t, c, "flush", &ev)
	var want []string
	for i := range 50 {
		v := fmt.Sprint(i)
		want = append(want, v)
		if _, err := l.Publish([]byte(v), persist.LocalPublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkStream(t, c, "flush", want)
}

// gatedStorage runs gate before every write transaction of its streams.
type gatedStorage struct {
	store.Storage
	gate func()
}

func (g gatedStorage) Open(scope, name string, now time.Time) (store.Stream, error) {
	st, err := g.Storage.Open(scope, name, now)
	if err != nil {
		return nil, err
	}
	return gatedStream{st, g.gate}, nil
}

func (g gatedStorage) OpenExisting(scope, name string, now time.Time) (store.Stream, error) {
	st, err := g.Storage.OpenExisting(scope, name, now)
	if err != nil {
		return nil, err
	}
	return gatedStream{st, g.gate}, nil
}

type gatedStream struct {
	store.Stream
	gate func()
}

func (g gatedStream) Write(ops []store.WriteOp, now time.Time) ([]store.WriteResult, []store.Change, error) {
	g.gate()
	return g.Stream.Write(ops, now)
}

// A LocalStream tells when it stops following the stream: on a stream the
// server can never hold, opening it fails at once; once open, its
// Watcher().Done closes when the watcher ends (here: the client closes).
func TestLocalStreamWatcherEnds(t *testing.T) {
	t.Parallel()
	_, none := newClientHarness(t, func(cfg *server.Config) { cfg.DataDir = "" }, nil, 2*time.Second)
	if _, err := none.LocalStream(context.Background(), "hub", "nowhere", persist.LocalStreamOptions{}); !errors.Is(err, persist.ErrBadRequest) {
		t.Fatalf("local stream on a server without a data directory: %v, want bad-request", err)
	}
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	l, err := c.LocalStream(context.Background(), "hub", "s", persist.LocalStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	select {
	case <-l.Watcher().Done():
		t.Fatal("watcher ended while the client is open")
	default:
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Watcher().Done():
	default:
		t.Fatal("watcher still running after Client.Close returned")
	}
}

// (Was: a LocalStream whose Client or NATS connection was closed retried its
// pending saves for ever, so Close waited until its ctx ended, for good
// without a deadline, and Publish kept queueing messages no one would save.)
func TestLocalStreamCloseAfterClientClose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(c *persist.Client, nc *nats.Conn)
		want error
	}{
		{"client", func(c *persist.Client, _ *nats.Conn) { _ = c.Close() }, persist.ErrClosed},
		{"connection", func(_ *persist.Client, nc *nats.Conn) { nc.Close() }, nats.ErrConnectionClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			nc := h.Conn()
			c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			ev := &events{}
			l := openLocal(t, c, "gone", ev)
			h.stop() // the message stays pending
			m, err := l.Publish([]byte("x"), persist.LocalPublishOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.end(c, nc)
			// Long enough that a Close that waits for its ctx is told
			// apart by its error, not by how long it took.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = l.Close(ctx)
			if !errors.Is(err, tc.want) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Close: %v, want an error wrapping %v", err, tc.want)
			}
			if !ev.any(func(e persist.LocalMessage) bool { return e.ID == m.ID && errors.Is(e.Err, tc.want) }) {
				t.Errorf("the pending message was not told why it is not saved")
			}
			if _, err := l.Publish([]byte("y"), persist.LocalPublishOptions{}); err == nil {
				t.Error("Publish after the handle gave up succeeded")
			}
		})
	}
}
