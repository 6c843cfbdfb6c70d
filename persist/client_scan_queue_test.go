package persist_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// A read of a multi-chunk answer by a reader that does not read until every
// chunk has reached its connection still gets every message: the queue of
// waiting chunks holds what the pending limit allows (64 MiB), here 120
// chunks of a 32 KiB max payload.
func TestScanSlowReaderKeepsEveryChunk(t *testing.T) {
	t.Parallel()
	c, nc := smallPayloadFleet(t, 32<<10, 20*time.Second)
	ctx := context.Background()
	st := c.Stream("slow", "s")
	const n = 4000 // about 1 KiB each: about 120 chunks of 32 KiB
	value := make([]byte, 900)
	ops := make([]persist.Entry, 0, 20)
	for i := 0; i < n; i += 20 {
		ops = ops[:0]
		for j := range 20 {
			ops = append(ops, persist.Entry{Value: value, Key: fmt.Sprintf("k%d", i+j)})
		}
		if _, err := st.SetMany(ctx, ops); err != nil {
			t.Fatal(err)
		}
	}
	before := nc.Stats().InMsgs
	got := 0
	_, err := st.Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if got == 0 {
			// Hold the first message until the answer's last chunk has
			// reached the connection: everything else waits in the queue.
			testwait.For(t, "100 chunks of the answer on the connection", func() bool { return nc.Stats().InMsgs-before >= 100 })
		}
		got++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("read %d messages, want %d", got, n)
	}
}

// A small read allocates little: the reply queue is sized by the max
// payload, not nats.go's 65,536-slot channel of a SubscribeSync (512 KiB
// per read, which 1,000 WebSocket watchers' first reads turned into 500 MB).
// Not parallel: the process's allocations are counted.
func TestScanAllocatesLittle(t *testing.T) {
	h := newHarness(t, nil)
	h.set("small", "a", nil)
	st := h.stream("small")
	ctx := context.Background()
	if _, _, err := st.GetAll(ctx, persist.Range{}); err != nil {
		t.Fatal(err)
	}
	const reads = 20
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range reads {
		msgs, _, err := st.GetAll(ctx, persist.Range{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 {
			t.Fatalf("read %d messages, want 1", len(msgs))
		}
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / reads; per > 256<<10 {
		t.Fatalf("a read of one message allocated %d bytes in the process, want under 256 KiB", per)
	}
}
