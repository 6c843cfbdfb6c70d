package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// The counters of closed streams are kept for the last keepClosed closes
// only, and a counter a close pushed out is forgotten; one written again
// since its close is not, and a stream whose counter was forgotten numbers
// again from 1 under a new epoch.
// (Was: every stream written since the start kept its counter, 133 bytes
// each: 133 MiB after a million streams, whatever was open.)
func TestFeedCountersFollowOpenStreams(t *testing.T) {
	t.Parallel()
	f := newFeedPublisher(nil, bus.DefaultService, "0", nil)
	f.keepClosed = 2
	k := func(name string) handleKey { return handleKey{scope: "hub", name: name} }
	for _, name := range []string{"a", "b", "c", "d"} {
		f.next(k(name))
	}
	f.closed(k("a"))
	f.closed(k("b"))
	f.next(k("b"))   // b written again since its close: in service
	f.closed(k("c")) // a's close is pushed out: a is forgotten
	f.closed(k("d")) // b's first close is pushed out, but b was written since
	if _, ok := f.counters[k("a")]; ok {
		t.Fatal("a, closed and pushed out, is still counted")
	}
	if len(f.counters) != 3 {
		t.Fatalf("%d counters, want 3 (b in service, c and d closed)", len(f.counters))
	}
	if gen, n := f.next(k("b")); gen != 0 || n != 3 {
		t.Fatalf("b numbers %d under gen %d, want 3 under 0", n, gen)
	}
	if gen, n := f.next(k("a")); gen != 1 || n != 1 || f.epochOf(gen) == f.epochOf(0) {
		t.Fatalf("a, forgotten, numbers %d under gen %d (%q), want 1 under a new epoch", n, gen, f.epochOf(gen))
	}
	f.closed(k("c")) // closed twice: the first entry no longer stands for it
	f.closed(k("b"))
	if _, ok := f.counters[k("c")]; !ok {
		t.Fatal("c was forgotten by its older close's entry")
	}
}

// A watcher of a stream whose feed counter was forgotten while it was
// closed sees every write: the next message's new epoch makes it re-read,
// and nothing is counted forged or lost.
func TestWatcherFollowsForgottenFeedCounter(t *testing.T) {
	t.Parallel()
	h := newHarnessHook(t, func(c *Config) { c.MaxOpenStreams = 2 }, func(s *Server) { s.feed.keepClosed = 0 })
	owner, err := h.nc.Subscribe(bus.IDSubject(bus.DefaultService, "*"), func(m *nats.Msg) { _ = m.Respond([]byte("0")) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Unsubscribe() })
	pc, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.e), IDs: []string{"0"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	feed, err := h.nc.SubscribeSync(persist.FeedSubject(bus.DefaultService, h.scope, "a", false))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	events := make(chan persist.Event, 16)
	w, err := pc.Stream(h.scope, "a").Watch(ctx, persist.WatchOptions{}, func(e persist.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	wantSet := func(seq uint64) {
		t.Helper()
		for {
			select {
			case e := <-events:
				if e.Kind == persist.EventSet {
					if e.Msg.Seq != seq {
						t.Fatalf("set %d, want %d", e.Msg.Seq, seq)
					}
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no set %d within 10s", seq)
			}
		}
	}
	epochN := func() (string, string) {
		t.Helper()
		m, err := feed.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return m.Header.Get(persist.HdrFeedEpoch), m.Header.Get(persist.HdrFeedN)
	}

	h.set("a", "1", nil)
	wantSet(1)
	e1, n1 := epochN()
	// Other streams fill the cache of 2 until a is closed (the watcher's
	// reads keep it in use a while), and with no closed counter kept,
	// forgotten.
	forgotten := func() bool {
		h.srv.feed.mu.Lock()
		defer h.srv.feed.mu.Unlock()
		_, ok := h.srv.feed.counters[handleKey{scope: h.scope, name: "a"}]
		return !ok
	}
	for i := 0; !forgotten(); i++ {
		if i == 100 {
			t.Fatalf("a still counted after 100 writes to other streams (open: %v)", cached(h))
		}
		h.set(fmt.Sprintf("other-%d", i), "1", nil)
	}
	h.set("a", "2", nil)
	wantSet(2)
	e2, n2 := epochN()
	if n1 != "1" || n2 != "1" || e2 == e1 {
		t.Fatalf("feed messages %s #%s then %s #%s: want #1 under a new epoch after the counter was forgotten", e1, n1, e2, n2)
	}
	if st := w.Stats(); st.Forged != 0 || st.Skipped != 0 {
		t.Fatalf("watcher stats %+v: nothing forged or skipped", st)
	}
}
