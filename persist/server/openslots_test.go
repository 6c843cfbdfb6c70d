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
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// TestManyStreamsSmallCache writes manyStreams streams (320 through a
// cache of 32; 20,000 through 256 with -tags manystreams) through one
// server, from 8 clients at once, and
// reads every one back: each holds what was written, the streams open
// at once never exceeded the cap (so neither did their descriptors,
// store.FilesPerOpenStream each), and Stats.Streams counts them all, again
// after a restart (the walk of the data directory).
//
// With packs (Config.Packs) the same holds of streams that share files:
// every stream is read back through the cap, counted, and counted again
// by the walk after a restart.
func TestManyStreamsSmallCache(t *testing.T) {
	t.Parallel()
	for _, packs := range []int{0, 4} {
		t.Run(fmt.Sprintf("packs=%d", packs), func(t *testing.T) {
			t.Parallel()
			testManyStreamsSmallCache(t, packs)
		})
	}
}

func testManyStreamsSmallCache(t *testing.T, packs int) {
	n := manyStreams
	const maxOpen, clients = manyStreamsCache, 8
	h := newHarness(t, func(c *Config) { c.MaxOpenStreams, c.Packs = maxOpen, packs })
	each := func(what string, fn func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for c := range clients {
			wg.Go(func() {
				for i := c; i < n; i += clients {
					if err := fn(i); err != nil {
						errs <- fmt.Errorf("%s s%d: %w", what, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	request := func(cmd string, i int, hdr map[string]string, body []byte) (*nats.Msg, error) {
		m := h.msg(cmd, fmt.Sprintf("s%d", i), hdr, body)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := bus.Request(ctx, h.nc, m)
		if err != nil {
			return nil, err
		}
		if c := r.Header.Get(persist.HdrError); c != "" {
			return nil, fmt.Errorf("%s: %s", c, r.Data)
		}
		return r, nil
	}
	each("set", func(i int) error {
		_, err := request(persist.CmdSet, i, map[string]string{persist.HdrKey: "k"}, []byte(fmt.Sprint(i)))
		return err
	})
	each("get", func(i int) error {
		r, err := request(persist.CmdGet, i, map[string]string{persist.HdrKey: "k"}, nil)
		if err != nil {
			return err
		}
		if string(r.Data) != fmt.Sprint(i) {
			return fmt.Errorf("holds %q", r.Data)
		}
		return nil
	})
	st := h.srv.Stats()
	if st.OpenStoragePeak > maxOpen || st.OpenStorage > maxOpen {
		t.Fatalf("open streams reached %d (now %d), the cap is %d", st.OpenStoragePeak, st.OpenStorage, maxOpen)
	}
	if st.MaxOpenStreams != maxOpen {
		t.Fatalf("Stats.MaxOpenStreams = %d, want %d", st.MaxOpenStreams, maxOpen)
	}
	if st.OpenStoragePeak < maxOpen/2 {
		t.Fatalf("open streams peaked at %d: the cache was not filled, the test proves nothing", st.OpenStoragePeak)
	}
	// A stream of a pack holds no descriptor of its own.
	if packs > 0 && (st.OpenStorage == 0 || st.OpenDescriptors != 0) {
		t.Fatalf("with packs: %d streams open holding %d descriptors, want some holding none", st.OpenStorage, st.OpenDescriptors)
	}
	// The server counts every stream it wrote, and a new one on the same
	// directory counts them again from the disk.
	if got := waitCounted(t, h); got != int64(n) {
		t.Fatalf("Stats.Streams = %d, want the %d written", got, n)
	}
	st = h.srv.Stats()
	t.Logf("%d streams, cap %d: open %d, peak %d, rescued %d, open-wait closes %d, compacted %d", st.Streams, st.MaxOpenStreams, st.OpenStorage, st.OpenStoragePeak, st.StreamsRescued, st.OpenWaitCloses, st.StreamsCompacted)
	h.restart()
	began := time.Now()
	if got := waitCounted(t, h); got != int64(n) {
		t.Fatalf("after a restart Stats.Streams = %d, want %d", got, n)
	}
	st = h.srv.Stats()
	t.Logf("after the restart: counted within %s; compacted %d", time.Since(began).Round(time.Millisecond), st.StreamsCompacted)
	if st := h.srv.Stats(); st.OpenStorage > maxOpen || st.OpenStoragePeak > maxOpen {
		t.Fatalf("after a restart open streams reached %d, the cap is %d", st.OpenStoragePeak, maxOpen)
	}
}

// TestAllOpenStreamsBusy: when every open stream is in service (a write of
// each held in its commit) and the cap allows no other, a request for
// another stream is answered unavailable, saying why, rather than opening
// one more file; once they are done, the same request opens its stream.
func TestAllOpenStreamsBusy(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 8), make(chan struct{})
	var once sync.Once
	h := newHarnessHook(t, func(c *Config) { c.MaxOpenStreams = 2 }, func(s *Server) {
		s.beforeWrite = func(int) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	held := make(chan error, 2)
	for _, stream := range []string{"a", "b"} {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r, err := h.nc.RequestMsgWithContext(ctx, h.msg(persist.CmdSet, stream, nil, []byte("v")))
			if err == nil && r.Header.Get(persist.HdrError) != "" {
				err = fmt.Errorf("%s: %s", r.Header.Get(persist.HdrError), r.Data)
			}
			held <- err
		}()
	}
	<-entered
	<-entered
	r := h.req(persist.CmdSet, "c", nil, []byte("v"))
	if code := r.Header.Get(persist.HdrError); code != string(persist.CodeUnavailable) || !strings.Contains(string(r.Data), "all 2 open streams are busy") {
		t.Fatalf("a third stream with both open ones in service: %s %q, want unavailable, all 2 open streams are busy", code, r.Data)
	}
	once.Do(func() { close(release) })
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("a held write: %v", err)
		}
	}
	h.ok(persist.CmdSet, "c", nil, []byte("v"))
}

// TestPacksRefuseAnArchive: a server with an archive does not look in
// packs (their streams have no file to copy), so one started on a data
// directory that has packs is refused at start, saying why, instead of
// serving the streams of the packs as missing; and a config asking for
// both is refused by New.
func TestPacksRefuseAnArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := store.NewSQLite(store.SQLiteConfig{Dir: dir, Packs: 2})
	if _, err := st.PackCount(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	e := testnats.Server(t, testnats.Options{})
	srv, err := New(Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: dir, Archive: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start(context.Background())
	if err == nil {
		srv.Stop(context.Background())
		t.Fatal("a server with an archive started on a directory with packs")
	}
	if !strings.Contains(err.Error(), "packs") {
		t.Fatalf("start: %v, want it to name the packs", err)
	}
	srv.Stop(context.Background())
	if _, err := New(Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: t.TempDir(), Archive: t.TempDir(), Packs: 2}); err == nil {
		t.Fatal("New took packs with an archive")
	}
}
