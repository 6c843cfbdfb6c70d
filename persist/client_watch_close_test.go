package persist_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// TestWatchConcurrentClose: Watch racing Client.Close either counts the
// watcher before Close waits or refuses it with ErrClosed; run with -race,
// which flagged the WaitGroup's Add racing its Wait.
func TestWatchConcurrentClose(t *testing.T) {
	t.Parallel()
	_, nc := watchEnv(t)
	for i := 0; i < 50; i++ {
		c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream("project-w", "closerace")
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = s.Watch(context.Background(), persist.WatchOptions{}, func(persist.Event) {})
		}()
		go func() { defer wg.Done(); _ = c.Close() }()
		wg.Wait()
	}
}

// TestWatchStopDeadline: Stop gives up waiting for a blocked callback when
// its context ends, saying so; the watcher still ends once the callback
// returns, and a second Stop is a no-op.
func TestWatchStopDeadline(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	s := c.Stream("project-w", "stopdeadline")
	if _, err := s.Set(context.Background(), []byte("v"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w, err := s.Watch(context.Background(), persist.WatchOptions{}, func(ev persist.Event) {
		if ev.Kind == persist.EventSet {
			once.Do(func() { close(entered) })
			<-release
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended context while the callback blocks: %v, want context.Canceled", err)
	}
	select {
	case <-w.Done():
		t.Fatal("the watcher ended while its callback still ran")
	default:
	}
	close(release)
	<-w.Done()
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("Err after Stop: %v", err)
	}
}
