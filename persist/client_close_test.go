package persist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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
