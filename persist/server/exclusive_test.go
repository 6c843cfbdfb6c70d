package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// TestExclusiveFilesUnderEviction: a server alone on its directory
// (ExclusiveFiles) with a cache far smaller than the streams written by
// several clients at once, so that streams are evicted, wanted again while
// their close runs, quickly closed and compacted: every write is answered,
// every value reads back, no stream file ever gets a -shm, and a restart
// on the same directory (WAL files left by quick closes, found and
// compacted) reads them all again.
func TestExclusiveFilesUnderEviction(t *testing.T) {
	t.Parallel()
	const maxOpen, streams, clients, rounds = 16, 48, 6, 2
	h := newHarness(t, func(c *Config) {
		c.MaxOpenStreams = maxOpen
		c.ExclusiveFiles = true
	})
	request := func(cmd, stream string, hdr map[string]string, body []byte) (*nats.Msg, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := bus.Request(ctx, h.nc, h.msg(cmd, stream, hdr, body))
		if err != nil {
			return nil, err
		}
		if c := r.Header.Get(persist.HdrError); c != "" {
			return nil, fmt.Errorf("%s: %s", c, r.Data)
		}
		return r, nil
	}
	// Each client writes its own key of every stream, round after round,
	// in an order of its own (a stride prime to the number of streams
	// visits each once a round): the streams each wants are the ones
	// another just evicted.
	coprime := [clients]int{1, 5, 7, 11, 13, 17}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for r := range rounds {
				for i := range streams {
					s := fmt.Sprintf("s%d", (i*coprime[c]+c)%streams)
					if _, err := request(persist.CmdSet, s, map[string]string{persist.HdrKey: fmt.Sprint("k", c)}, []byte(fmt.Sprint(r))); err != nil {
						errs <- fmt.Errorf("client %d set %s: %w", c, s, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	readAll := func(when string) {
		t.Helper()
		for i := range streams {
			for c := range clients {
				r, err := request(persist.CmdGet, fmt.Sprintf("s%d", i), map[string]string{persist.HdrKey: fmt.Sprint("k", c)}, nil)
				if err != nil {
					t.Fatalf("%s: get s%d k%d: %v", when, i, c, err)
				}
				if string(r.Data) != fmt.Sprint(rounds-1) {
					t.Fatalf("%s: s%d k%d holds %q, want %d", when, i, c, r.Data, rounds-1)
				}
			}
		}
	}
	readAll("after the writes")
	st := h.srv.Stats()
	if st.OpenStoragePeak > maxOpen {
		t.Fatalf("open streams peaked at %d, the cap is %d", st.OpenStoragePeak, maxOpen)
	}
	if st.OpenWaitCloses < streams {
		t.Fatalf("%d streams closed to make room for %d: the cache was not cycled, the test proves nothing", st.OpenWaitCloses, streams)
	}
	for _, f := range streamFiles(t, h.dir) {
		if strings.HasSuffix(f, "-shm") {
			t.Fatalf("%s: an exclusive stream file has shared memory", f)
		}
	}
	h.node.Stop()
	// The next server has room for every stream and more: with free
	// slots its closer can compact (a full cache of 16 has none).
	h.cfg.MaxOpenStreams = 4 * streams
	h.start()
	readAll("after a restart")
	// The restart found the WAL files quick closes left, read their
	// streams' names (skipping those in service) and compacted them; with
	// every stream closed fully by a stop, nothing but the databases is
	// left.
	waitCounted(t, h) // the walk is done: every leftover WAL is listed
	testwait.For(t, "the leftover WAL files to be compacted", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.toClose.n == 0 && len(h.srv.toCompact) == 0 && len(h.srv.closing) == 0 && len(h.srv.foundWAL) == 0
	})
	h.node.Stop()
	for _, f := range streamFiles(t, h.dir) {
		if strings.HasSuffix(f, "-shm") || strings.HasSuffix(f, "-wal") {
			t.Fatalf("%s left after a stop", f)
		}
	}
	t.Logf("%d closed to make room, %d rescued, %d compacted, peak %d open", st.OpenWaitCloses, st.StreamsRescued, st.StreamsCompacted, st.OpenStoragePeak)
}

// TestExclusiveReopenWaitsForClose: with ExclusiveFiles a stream wanted
// again while its earlier handle still closes is opened once that close
// is done, not alongside it (its file is locked until then, and the open
// would spin in busy_timeout, or fail after it).
func TestExclusiveReopenWaitsForClose(t *testing.T) {
	t.Parallel()
	slow := &slowCloseStorage{closing: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, func(c *Config) {
		c.IdleClose = 20 * time.Millisecond
		c.ExpireEvery = 5 * time.Millisecond
		c.ExclusiveFiles = true
		slow.Storage = store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir, Exclusive: true})
		c.Storage = slow
	})
	r := requestDuringIdleClose(t, h, slow, h.msg(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil))
	if c := r.Header.Get(persist.HdrError); c != "" || string(r.Data) != "x" {
		t.Fatalf("get: %s %q, want \"x\"", c, r.Data)
	}
	if slow.openedDuring.Load() {
		t.Fatal("the stream was opened again while its earlier handle was still closing")
	}
}
