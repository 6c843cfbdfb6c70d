package persist_test

import (
	"context"
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
