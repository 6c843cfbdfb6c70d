package persist_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// Close ends the client's watchers (their callbacks have returned when it
// does) and refuses later requests and watches with ErrClosed.
func TestClientClose(t *testing.T) {
	_, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	s := c.Stream("hub", "s")
	if _, err := s.Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan persist.Event, 16)
	w, err := s.Watch(ctx, persist.WatchOptions{}, func(e persist.Event) { got <- e })
	if err != nil {
		t.Fatal(err)
	}
	if e := <-got; e.Kind != persist.EventSet {
		t.Fatalf("first event %+v", e)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("watcher still running after Close returned")
	}
	if _, err := s.Set(ctx, []byte("w"), persist.SetOptions{}); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("set after close: %v", err)
	}
	if _, _, err := s.GetAll(ctx, persist.Range{}); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("getAll after close: %v", err)
	}
	if _, err := s.Watch(ctx, persist.WatchOptions{}, func(persist.Event) {}); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("watch after close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// The owner cache holds at most OwnerCache scopes, and a forgotten scope is
// asked again, not refused.
func TestClientOwnerCacheBounded(t *testing.T) {
	h, _ := newClientHarness(t, nil, nil, 5*time.Second)
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.NATS), OwnerCache: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i := range 20 {
		if _, err := c.Owner(ctx, fmt.Sprintf("scope-%d", i)); err != nil {
			t.Fatal(err)
		}
		if n := c.CachedOwners(); n > 4 {
			t.Fatalf("%d owners cached, bound 4", n)
		}
	}
	for i := range 20 {
		if _, err := c.Stream(fmt.Sprintf("scope-%d", i), "s").Set(ctx, []byte("v"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Close cuts short a call waiting to retry an owner nobody serves: the call
// returns ErrClosed at once, not at the end of its own deadline.
// (Was: the call kept waiting and retrying until its context's deadline after Close.)
func TestClientCloseEndsRetryingCall(t *testing.T) {
	t.Parallel()
	e, nc := testnats.Start(t)
	// A balancer naming server "0", which is not there: every attempt
	// meets no responders. Its first question says the call has started.
	asked := make(chan struct{}, 1)
	sub, err := nc.Subscribe("persist.*.id", func(m *nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
		_ = m.Respond([]byte("0"))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(persist.ClientConfig{
		Conn:     testnats.Conn(t, e),
		Attempts: 100,
		// Every wait between attempts outlasts the test's bound below.
		Retry: bus.Retry{Min: time.Minute, Max: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Stream("hub", "s").Get(ctx, 1)
		done <- err
	}()
	<-asked
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, persist.ErrClosed) {
			t.Fatalf("call after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("call still retrying 10s after Close (its own deadline is a minute)")
	}
}

// A call whose last attempt timed out says what the server answered the
// attempts before it.
// (Was: "request timed out" alone, so a write to a stream another server
// held locked read as a slow server, not a locked file.)
func TestCallEndingInTimeoutSaysTheServersAnswer(t *testing.T) {
	t.Parallel()
	e, nc := testnats.Start(t)
	owner, err := nc.Subscribe(bus.IDSubject(bus.DefaultService, "*"), func(m *nats.Msg) { _ = m.Respond([]byte("0")) })
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Unsubscribe()
	// A stand-in server: the first request is refused unavailable, the
	// others never answered. (The handler runs on nc's one goroutine.)
	first := true
	api, err := nc.Subscribe(bus.APISubject(bus.DefaultService, "hub", "0"), func(m *nats.Msg) {
		if !first {
			return
		}
		first = false
		r := nats.NewMsg(m.Reply)
		r.Header.Set(persist.HdrError, string(persist.CodeUnavailable))
		r.Data = []byte("stream file is locked by another connection; retry later")
		_ = m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, e), Timeout: 200 * time.Millisecond, Attempts: 3, Retry: bus.Retry{Min: time.Millisecond, Max: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Stream("hub", "s").Get(context.Background(), 1)
	if !errors.Is(err, bus.ErrTimeout) || !strings.Contains(err.Error(), "stream file is locked") {
		t.Fatalf("get: %v; want a timeout that says the server answered the file is locked", err)
	}
}
