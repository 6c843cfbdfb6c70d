package server

import (
	"log/slog"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// BenchmarkFeedPublishUnheard is the change feed's cost for a commit of
// one keyed set (128 bytes) on a stream nobody watches, in a process whose
// NATS server counts the listeners (up's persist servers): the common case
// of a fleet's many idle streams.
func BenchmarkFeedPublishUnheard(b *testing.B) {
	e := testnats.Server(b, testnats.Options{})
	f := newFeedPublisher(testnats.Conn(b, e), bus.DefaultService, "0", slog.New(slog.DiscardHandler))
	f.interest = func(string) int { return 0 }
	changes := []store.Change{{Op: store.ChangeSet, Msg: &persist.Frame{Seq: 1, Time: time.Now().UnixMilli(), Key: "k", Value: make([]byte, 128)}}}
	b.ReportAllocs()
	for b.Loop() {
		f.publish("hub", "s", false, changes)
	}
	if f.unheard.Load() == 0 || f.published.Load() != 0 {
		b.Fatalf("unheard %d, published %d: want every message unheard", f.unheard.Load(), f.published.Load())
	}
}
