package persist_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// forger publishes on a stream's feed subject as anyone on a bus without
// auth can: it reads the publisher's epoch and number off the real feed and
// sends the next number with frames of its choosing.
type forger struct {
	t     *testing.T
	nc    *nats.Conn
	subj  string
	feed  *nats.Subscription
	epoch string
	n     uint64
}

func newForger(t *testing.T, nc *nats.Conn, scope, name string) *forger {
	t.Helper()
	subj := persist.FeedSubject("", scope, name, false)
	feed, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = feed.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &forger{t: t, nc: nc, subj: subj, feed: feed}
}

// observe reads the real feed message of one write made after newForger.
func (f *forger) observe() {
	f.t.Helper()
	m, err := f.feed.NextMsg(10 * time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	if m.Header.Get(persist.HdrServer) == "forger" {
		f.observe()
		return
	}
	f.epoch = m.Header.Get(persist.HdrFeedEpoch)
	if f.n, err = strconv.ParseUint(m.Header.Get(persist.HdrFeedN), 10, 64); err != nil {
		f.t.Fatal(err)
	}
}

// forge publishes frames as the publisher's next feed message.
func (f *forger) forge(frames ...persist.Frame) {
	f.t.Helper()
	var body []byte
	for i := range frames {
		var err error
		if body, err = persist.AppendFrame(body, &frames[i]); err != nil {
			f.t.Fatal(err)
		}
	}
	m := nats.NewMsg(f.subj)
	m.Header.Set(persist.HdrFeedEpoch, f.epoch)
	m.Header.Set(persist.HdrFeedN, strconv.FormatUint(f.n+1, 10))
	m.Header.Set(persist.HdrServer, "forger")
	m.Data = body
	if err := f.nc.PublishMsg(m); err != nil {
		f.t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
}

// forgeEnv is a stream with seqs 1..3, a watcher that has delivered them
// (with a short idle check), and a forger that knows the feed's numbers.
func forgeEnv(t *testing.T, name string) (*persist.Stream, *persist.Watcher, *collector, *forger) {
	t.Helper()
	c, nc := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-f", name)
	f := newForger(t, nc, "project-f", name)
	col := newCollector()
	w := watch(t, s, persist.WatchOptions{IdleCheck: 20 * time.Millisecond}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	for i := 1; i <= 3; i++ {
		if _, err := s.Set(ctx, []byte("real"+strconv.Itoa(i)), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
		f.observe()
	}
	col.waitFor(t, "3 sets", func(c *collector) bool { return len(c.sets) == 3 })
	return s, w, col, f
}

// settled waits until the watcher made three idle checks after its last
// resync and fails if it resynced meanwhile: a forgery must not leave it
// re-reading for ever.
func settled(t *testing.T, w *persist.Watcher) {
	t.Helper()
	var resyncs, idles uint64
	testwait.For(t, "three idle checks without a resync", func() bool {
		st := w.Stats()
		if st.Resyncs != resyncs {
			resyncs, idles = st.Resyncs, st.IdleChecks
		}
		return st.IdleChecks >= idles+3
	})
	if st := w.Stats(); st.Resyncs > 2 {
		t.Errorf("%d resyncs after one forgery, want at most 2", st.Resyncs)
	}
}

// TestWatchForgedJump: a set far ahead of the stream on the feed is not
// delivered, and the real writes after it still are.
func TestWatchForgedJump(t *testing.T) {
	t.Parallel()
	s, w, col, f := forgeEnv(t, "jump")
	f.forge(persist.Frame{Seq: 3 + 1_000_000, Time: 1, Value: []byte("forged")})
	testwait.For(t, "the jump counted forged", func() bool { return w.Stats().Forged >= 1 })
	for i := 4; i <= 6; i++ {
		if _, err := s.Set(context.Background(), []byte("real"+strconv.Itoa(i)), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "6 sets", func(c *collector) bool { return len(c.sets) == 6 })
	settled(t, w)
	col.check(t, seqs(1, 6))
	checkLiveIsStream(t, s, col)
	if w.LastSeq() != 6 {
		t.Errorf("LastSeq %d, want 6", w.LastSeq())
	}
}

// TestWatchForgedDelete: a delete of a seq the server still holds is not
// delivered, and no idle check resyncs over it afterwards.
func TestWatchForgedDelete(t *testing.T) {
	t.Parallel()
	s, w, col, f := forgeEnv(t, "delete")
	f.forge(persist.Frame{Op: persist.FeedOpDelete, Seqs: []uint64{2}})
	testwait.For(t, "the delete counted forged", func() bool { return w.Stats().Forged >= 1 })
	settled(t, w)
	col.mu.Lock()
	deleted := len(col.deleted)
	col.mu.Unlock()
	if deleted != 0 {
		t.Errorf("%d deletes delivered, want none", deleted)
	}
	// A real write after it (its number is the forged one's) is delivered.
	if _, err := s.Set(context.Background(), []byte("real4"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "4 sets", func(c *collector) bool { return len(c.sets) == 4 })
	settled(t, w)
	col.check(t, seqs(1, 4))
	checkLiveIsStream(t, s, col)
}

// TestWatchForgedSet: a set forged at exactly the next seq with the next
// number is delivered (nothing cheap tells it apart), but once the server's
// message at that seq (or the idle check) shows it false, the application
// gets the delete of the forged set and the server's message instead.
func TestWatchForgedSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write bool // a real write follows; else only the idle check tells
	}{
		{name: "real write follows", write: true},
		{name: "idle check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, w, col, f := forgeEnv(t, "set-"+strconv.FormatBool(tc.write))
			f.forge(persist.Frame{Seq: 4, Time: 1, Value: []byte("forged")})
			col.waitFor(t, "the forged set", func(c *collector) bool { return c.live[4] == "forged" })
			if tc.write {
				if _, err := s.Set(context.Background(), []byte("real4"), persist.SetOptions{}); err != nil {
					t.Fatal(err)
				}
			} else {
				col.waitFor(t, "the forged set taken back", func(c *collector) bool {
					_, ok := c.live[4]
					return !ok && c.caughtUp == 2
				})
				if _, err := s.Set(context.Background(), []byte("real4"), persist.SetOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			col.waitFor(t, "the server's seq 4", func(c *collector) bool { return c.live[4] == "real4" })
			settled(t, w)
			checkLiveIsStream(t, s, col)
			if w.Stats().Forged == 0 {
				t.Error("nothing counted forged")
			}
			col.mu.Lock()
			defer col.mu.Unlock()
			for q, v := range map[uint64]string{1: "real1", 2: "real2", 3: "real3", 4: "real4"} {
				if col.live[q] != v {
					t.Errorf("application holds %q at seq %d, want %q", col.live[q], q, v)
				}
			}
		})
	}
}
