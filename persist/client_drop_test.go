package persist_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// TestStreamDrop: Drop removes every message and the stream's file; reads
// afterwards (a watcher's too) answer as for a missing stream and create no
// file, and the next write starts the stream over at seq 1. A drop of a
// stream that does not exist answers no seqs and creates nothing.
func TestStreamDrop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	s := h.stream("spool-1")
	if _, err := s.SetMany(ctx, []persist.Entry{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}, {Value: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	p, err := store.StreamPath(h.Dir, h.scope, "spool-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("stream file before the drop: %v", err)
	}
	seqs, err := s.Drop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3}) {
		t.Fatalf("Drop removed %v, want [1 2 3]", seqs)
	}
	gone := func(label string) {
		t.Helper()
		for _, f := range []string{p, p + "-wal", p + "-shm"} {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				t.Fatalf("%s: %s: %v, want it gone", label, f, err)
			}
		}
	}
	gone("after the drop")
	for i := range 8 {
		if err := readMissing(ctx, s, i); err != nil {
			t.Fatalf("read %d after the drop: %v", i, err)
		}
	}
	gone("after reads of the dropped stream")
	res, err := s.Set(ctx, []byte("again"), persist.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 1 {
		t.Fatalf("write after the drop got seq %d, want 1", res.Seq)
	}

	missing := h.stream("never-written")
	seqs, err = missing.Drop(ctx)
	if err != nil || len(seqs) != 0 {
		t.Fatalf("Drop of a missing stream: %v, %v; want no seqs", seqs, err)
	}
	mp, err := store.StreamPath(h.Dir, h.scope, "never-written")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Fatalf("Drop of a missing stream: %s: %v, want no file", mp, err)
	}
}

// TestDropRetryAfterLostAnswer: the answer to a drop is lost after the
// server dropped the stream; the client's retry (same request id) finds no
// stream and answers no seqs, without an error. That is the documented
// cost of the delete id going with the stream.
func TestDropRetryAfterLostAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	relay := startLossyRelay(t, h)
	h.set("log", "x", nil)
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.NATS), Service: "relay", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	relay.dropNext()
	seqs, err := c.Stream(h.scope, "log").Drop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 0 {
		t.Fatalf("retried Drop answered %v, want none (the first attempt removed them)", seqs)
	}
	if n := relay.dropped.Load(); n != 1 {
		t.Fatalf("the relay lost %d answers, want 1", n)
	}
	if inv, err := h.stream("log").Inventory(context.Background()); err != nil || inv.Seq != 0 {
		t.Fatalf("inventory after the drop: %+v, %v", inv, err)
	}
}
