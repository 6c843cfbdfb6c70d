package persist_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
)

// fanoutEnv is watchEnv for benchmarks: one persist server, the balancer,
// and a client on its own connection.
func fanoutEnv(b *testing.B) *persist.Client {
	b.Helper()
	c, err := persist.NewClient(persist.ClientConfig{Conn: testpersist.Start(b, 1).Conn(), Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkWatchFanout: one client with 100 watchers of one stream, one
// writer doing keyed sets; an op is one set delivered to every watcher.
// Run with -cpuprofile to see where the fan-out spends its time.
func BenchmarkWatchFanout(b *testing.B) {
	const watchers = 100
	ctx := context.Background()
	c := fanoutEnv(b)
	s := c.Stream("bench-w", "fanout")
	var got atomic.Int64
	caught := make(chan struct{}, watchers)
	done := make(chan struct{}, 1)
	var want atomic.Int64
	want.Store(-1)
	for range watchers {
		w, err := s.Watch(ctx, persist.WatchOptions{}, func(ev persist.Event) {
			switch ev.Kind {
			case persist.EventSet:
				if got.Add(1) == want.Load() {
					done <- struct{}{}
				}
			case persist.EventCaughtUp:
				caught <- struct{}{}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = w.Stop(context.Background()) })
	}
	for range watchers {
		<-caught
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "k" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	value := make([]byte, 128)
	b.ResetTimer()
	want.Store(int64(b.N) * watchers)
	for i := 0; i < b.N; i++ {
		if _, err := s.Set(ctx, value, persist.SetOptions{Key: keys[i%len(keys)]}); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}
