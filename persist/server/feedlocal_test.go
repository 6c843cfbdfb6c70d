package server

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// localFeedHarness is a harness whose server has FeedInterest from its NATS
// server, as up sets it, with the balancer's answer for every scope and a
// persist client on a connection of its own (cnc).
func localFeedHarness(t *testing.T) (h *harness, pc *persist.Client, cnc *nats.Conn) {
	t.Helper()
	h = newHarness(t, nil)
	interest, err := h.e.Interest(h.cfg.Conn)
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.FeedInterest = interest
	h.restart()
	owner, err := h.nc.Subscribe(bus.IDSubject(bus.DefaultService, "*"), func(m *nats.Msg) { _ = m.Respond([]byte("0")) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Unsubscribe() })
	cnc = testnats.Conn(t, h.e)
	pc, err = persist.NewClient(persist.ClientConfig{Conn: cnc, IDs: []string{"0"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return h, pc, cnc
}

// TestFeedSkipsBusForLocalWatchers: with FeedInterest (a NATS server in the
// process, as in switchyard up), a feed message whose only listener is a
// watcher of this process reaches it without being published; once a
// subscriber elsewhere listens too, every message is published and both
// get it; with nobody listening, nothing is published. The watcher sees
// every set, in order, across the switches.
func TestFeedSkipsBusForLocalWatchers(t *testing.T) {
	h, pc, cnc := localFeedHarness(t)
	ctx := context.Background()
	st := pc.Stream(h.scope, "feed")
	events := make(chan persist.Event, 100)
	w, err := st.Watch(ctx, persist.WatchOptions{}, func(e persist.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	next := func() persist.Event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
			return persist.Event{}
		}
	}
	if e := next(); e.Kind != persist.EventCaughtUp {
		t.Fatalf("first event %v, want caught up", e.Kind)
	}
	var lastSeq uint64
	set := func(n int) {
		t.Helper()
		for i := range n {
			r, err := st.Set(ctx, []byte(fmt.Sprint(i)), persist.SetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e := next()
			if e.Kind != persist.EventSet || e.Msg.Seq != r.Seq || e.Msg.Seq <= lastSeq {
				t.Fatalf("event %v seq %d after %d, want the set of seq %d", e.Kind, e.Msg.Seq, lastSeq, r.Seq)
			}
			lastSeq = e.Msg.Seq
		}
	}
	stats := func(published, local, unheard uint64) {
		t.Helper()
		s := h.srv.Stats()
		if s.FeedPublished != published || s.FeedLocal != local || s.FeedUnheard != unheard {
			t.Fatalf("feed published %d, local %d, unheard %d; want %d, %d, %d", s.FeedPublished, s.FeedLocal, s.FeedUnheard, published, local, unheard)
		}
	}

	// Only the watcher of this process listens: one commit, one feed
	// message, none of them on the bus.
	set(20)
	stats(0, 20, 0)

	// Another process's subscriber: every message takes the bus, and the
	// watcher gets them from it.
	other, err := h.e.Interest(h.cfg.Conn) // still the same server's count
	if err != nil || other(persist.FeedSubject(bus.DefaultService, h.scope, "feed", false)) != 1 {
		t.Fatalf("interest before the other subscriber: %v", err)
	}
	onc := testnats.Conn(t, h.e)
	sub, err := onc.SubscribeSync(persist.FeedSubject(bus.DefaultService, h.scope, "feed", false))
	if err != nil {
		t.Fatal(err)
	}
	if err := onc.Flush(); err != nil {
		t.Fatal(err)
	}
	set(10)
	stats(10, 20, 0)
	for range 10 {
		if _, err := sub.NextMsg(10 * time.Second); err != nil {
			t.Fatalf("the other subscriber: %v", err)
		}
	}

	// It leaves: back to the watcher alone.
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := onc.Flush(); err != nil {
		t.Fatal(err)
	}
	set(5)
	stats(10, 25, 0)

	// Nobody listens: nothing is published.
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cnc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := st.Set(ctx, []byte(fmt.Sprint(i)), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stats(10, 25, 3)
}

// TestFeedLocalAndBusSwitching: while a writer appends, a subscriber in
// another connection comes and goes, so the feed switches between the bus
// and in-process delivery many times mid-stream (a message sent by the bus
// can arrive after a later one handed over directly). The watcher still
// delivers every seq once, in order, and skips none.
func TestFeedLocalAndBusSwitching(t *testing.T) {
	h, pc, _ := localFeedHarness(t)
	ctx := context.Background()
	st := pc.Stream(h.scope, "switching")
	const writes = 600
	events := make(chan persist.Event, writes+100)
	w, err := st.Watch(ctx, persist.WatchOptions{Buffer: writes}, func(e persist.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	if e := <-events; e.Kind != persist.EventCaughtUp {
		t.Fatalf("first event %v, want caught up", e.Kind)
	}
	done := make(chan struct{})
	toggled := make(chan int, 1)
	onc := testnats.Conn(t, h.e)
	go func() {
		n := 0
		defer func() { toggled <- n }()
		subject := persist.FeedSubject(bus.DefaultService, h.scope, "switching", false)
		for {
			select {
			case <-done:
				return
			default:
			}
			sub, err := onc.Subscribe(subject, func(*nats.Msg) {})
			if err != nil {
				t.Error(err)
				return
			}
			_ = onc.Flush()
			_ = sub.Unsubscribe()
			_ = onc.Flush()
			n++
		}
	}()
	var seqs []uint64
	for i := range writes {
		r, err := st.Set(ctx, []byte(fmt.Sprint(i)), persist.SetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, r.Seq)
	}
	close(done)
	t.Logf("the other subscriber came and went %d times", <-toggled)
	s := h.srv.Stats()
	if s.FeedLocal == 0 || s.FeedPublished == 0 {
		t.Fatalf("feed local %d, published %d: the test never switched", s.FeedLocal, s.FeedPublished)
	}
	for i := 0; i < len(seqs); {
		select {
		case e := <-events:
			switch e.Kind {
			case persist.EventSet:
				if e.Msg.Seq != seqs[i] {
					t.Fatalf("set of seq %d, want %d", e.Msg.Seq, seqs[i])
				}
				i++
			case persist.EventSkipped, persist.EventDelete, persist.EventEnded:
				t.Fatalf("unexpected %v event (%+v)", e.Kind, e)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d sets delivered", i, len(seqs))
		}
	}
	ws := w.Stats()
	t.Logf("feed local %d, published %d; watcher resyncs %d, gaps %d", s.FeedLocal, s.FeedPublished, ws.Resyncs, ws.Gaps)
}

// TestFeedSplitsDeleteFramesUnderSmallMaxPayload: wire.md promises that a
// commit whose frames pass 256 KiB "or the connection's max payload" is
// split over consecutive messages. A delete of 8,192 seqs is one frame of
// ~45 KB, over a 32 KiB max payload: every seq must still reach the feed.
// (Was: only whole frames were split over messages, and a delete frame held
// up to 8,192 seqs, up to ~172 KB, whatever the max payload: under a small
// one the frame failed to publish with ErrMaxPayload, a gap for every
// watcher. A delete frame now holds only the seqs one message's body does.)
func TestFeedSplitsDeleteFramesUnderSmallMaxPayload(t *testing.T) {
	e := testnats.Server(t, testnats.Options{MaxPayload: 32 << 10})
	nc := testnats.Conn(t, e)
	srv, err := New(Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	const scope, stream, n = "hub", "big", 8192
	req := func(cmd string, hdr map[string]string, body []byte) *nats.Msg {
		t.Helper()
		m := nats.NewMsg(bus.APISubject(bus.DefaultService, scope, "0"))
		m.Header.Set(persist.HdrCmd, cmd)
		m.Header.Set(persist.HdrStream, stream)
		for k, v := range hdr {
			m.Header.Set(k, v)
		}
		m.Data = body
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := bus.Request(ctx, nc, m)
		if err != nil {
			t.Fatal(err)
		}
		if c := r.Header.Get(persist.HdrError); c != "" {
			t.Fatalf("%s: %s: %s", cmd, c, r.Data)
		}
		return r
	}
	// Write n empty messages, in setMany batches that fit the payload.
	for written := 0; written < n; {
		var body []byte
		k := min(500, n-written)
		for range k {
			body, err = persist.AppendFrame(body, &persist.Frame{})
			if err != nil {
				t.Fatal(err)
			}
		}
		req(persist.CmdSetMany, nil, body)
		written += k
	}

	sub, err := nc.SubscribeSync(persist.FeedSubject(bus.DefaultService, scope, stream, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats().FeedFailed
	req(persist.CmdDelete, map[string]string{persist.HdrAll: "true"}, nil)

	// Every deleted seq must reach the feed.
	got := map[uint64]bool{}
	testwait.Until(t, "the delete's seqs on the feed", func() (bool, string) {
		for {
			m, err := sub.NextMsg(10 * time.Millisecond)
			if err != nil {
				break
			}
			_ = persist.DecodeFrames(m.Data, 0, func(f *persist.Frame) error {
				for _, q := range f.Seqs {
					got[q] = true
				}
				return nil
			})
		}
		if failed := srv.Stats().FeedFailed - before; failed > 0 {
			return true, ""
		}
		return len(got) == n, strconv.Itoa(len(got))
	})
	if failed := srv.Stats().FeedFailed - before; failed > 0 || len(got) != n {
		t.Fatalf("feed of a delete of %d seqs under a 32 KiB max payload: %d feed messages failed to publish, %d seqs arrived", n, failed, len(got))
	}
}
