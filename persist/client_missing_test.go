package persist_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// readMissing runs one read command (chosen by i) on a stream that does not
// exist and checks that the answer is an empty stream's.
func readMissing(ctx context.Context, s *persist.Stream, i int) error {
	switch i % 8 {
	case 0:
		if _, err := s.Get(ctx, 1); !errors.Is(err, persist.ErrNotFound) {
			return fmt.Errorf("get: %v, want not-found", err)
		}
	case 1:
		if _, err := s.GetKey(ctx, "k"); !errors.Is(err, persist.ErrNotFound) {
			return fmt.Errorf("get key: %v, want not-found", err)
		}
	case 2:
		msgs, next, err := s.GetAll(ctx, persist.Range{Limit: 10})
		if err != nil || len(msgs) != 0 || next != 0 {
			return fmt.Errorf("getAll: %d messages, next %d, %v", len(msgs), next, err)
		}
	case 3:
		keys, err := s.Keys(ctx)
		if err != nil || len(keys) != 0 {
			return fmt.Errorf("keys: %v, %v", keys, err)
		}
	case 4:
		inv, err := s.Inventory(ctx)
		if err != nil || inv.Count != 0 || inv.Seq != 0 {
			return fmt.Errorf("inventory: %+v, %v", inv, err)
		}
	case 5:
		c, err := s.Config(ctx)
		if err != nil || c != persist.DefaultConfig() {
			return fmt.Errorf("config: %+v, %v", c, err)
		}
	case 6:
		// An update that changes nothing is a read.
		if _, err := s.UpdateConfig(ctx, persist.ConfigUpdate{}); err != nil {
			return fmt.Errorf("empty config update: %v", err)
		}
	case 7:
		caught := make(chan struct{})
		var once sync.Once
		w, err := s.Watch(ctx, persist.WatchOptions{}, func(e persist.Event) {
			if e.Kind == persist.EventCaughtUp {
				once.Do(func() { close(caught) })
			}
		})
		if err != nil {
			return fmt.Errorf("watch: %v", err)
		}
		select {
		case <-caught:
		case <-w.Done():
			return fmt.Errorf("watch ended: %v", w.Err())
		case <-ctx.Done():
			_ = w.Stop(context.Background())
			return fmt.Errorf("watch never caught up: %v", ctx.Err())
		}
		if err := w.Stop(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// Reads of 1,000 missing streams create no files: every read command, and
// watchers that read the (empty) history and wait, leave the data directory
// empty. A write after that creates exactly its own stream's file.
func TestReadsOfMissingStreamsCreateNoFiles(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.stream("") // starts the balancer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const streams, workers = 1000, 8
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < streams; i += workers {
				if err := readMissing(ctx, h.stream(fmt.Sprintf("missing-%d", i)), i); err != nil {
					errs <- fmt.Errorf("stream missing-%d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if files := testdisk.Files(t, h.Dir); len(files) != 0 {
		t.Fatalf("reads of %d missing streams left %d entries, the first %s", streams, len(files), files[0])
	}

	h.set("missing-17", "now it exists", nil)
	p, err := store.StreamPath(h.Dir, h.scope, "missing-17")
	if err != nil {
		t.Fatal(err)
	}
	sawDB := false
	for _, f := range testdisk.Files(t, h.Dir) {
		switch f {
		case p:
			sawDB = true
		case filepath.Dir(p), p + "-wal", p + "-shm":
		case filepath.Join(h.Dir, ".reserve"): // the disk-space reserve, made with the first stream file
		default:
			t.Fatalf("after one write the data directory holds %s", f)
		}
	}
	if !sawDB {
		t.Fatalf("the write did not create %s", p)
	}
}

// A watcher of a missing stream reads its empty history and waits, with no
// file behind it, until the first write: that creates the stream and
// reaches the watcher.
func TestWatchMissingStreamWaitsWithoutFile(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	events := make(chan persist.Event, 16)
	w, err := h.stream("later").Watch(context.Background(), persist.WatchOptions{}, func(e persist.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	timeout := time.After(30 * time.Second)
	next := func() persist.Event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-timeout:
			t.Fatal("no event")
		}
		return persist.Event{}
	}
	if e := next(); e.Kind != persist.EventCaughtUp {
		t.Fatalf("first event %+v, want caught up", e)
	}
	if files := testdisk.Files(t, h.Dir); len(files) != 0 {
		t.Fatalf("a watcher of a missing stream left %v", files)
	}
	h.set("later", "first", nil)
	if e := next(); e.Kind != persist.EventSet || string(e.Msg.Value) != "first" || e.Msg.Seq != 1 {
		t.Fatalf("event after the first write: %+v", e)
	}
}
