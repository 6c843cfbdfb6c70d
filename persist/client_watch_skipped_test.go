package persist_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// TestLiveKVSkippedWriteLeaves: a LiveKV write whose seq the
// watcher skips (the message was deleted before the watcher could read it,
// here during a resync after a buffer overflow) stays pending for ever when
// no later set arrives: LiveKV.apply ignores EventSkipped, and write only
// drops the pending entry when lk.seen (highest *delivered* set) reached its
// seq. The copy then shows a key the stream does not hold, after caught-up
// (docs/persist.md: "the copy equals the stream at the next caught-up
// point: no stale keys"). Expected: once the watcher accounted for the seq
// (skipped), the pending entry goes and Get reports the key absent.
func TestLiveKVSkippedWriteLeaves(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	lk := openLiveKV(t, c, "kvskip", persist.LiveKVOptions{WatchBuffer: 1})
	other := c.Stream("hub", "kvskip")
	w := lk.Watcher()
	before := true
	lk.SetBeforeSave(func() {
		if !before {
			return
		}
		before = false
		// Hold the copy's lock: the watcher blocks in its callback for the
		// next set, with seq 2's feed message filling its buffer of 1.
		lk.Lock()
		if _, err := other.Set(ctx, []byte("a"), persist.SetOptions{Key: "a"}); err != nil {
			t.Error(err)
		}
		testwait.For(t, "the watcher blocked on seq 1", func() bool { return w.LastSeq() == 1 })
		if _, err := other.Set(ctx, []byte("b"), persist.SetOptions{Key: "b"}); err != nil {
			t.Error(err)
		}
	})
	after := true
	lk.SetAfterSave(func(seq uint64) {
		if !after {
			return
		}
		after = false
		// The LiveKV's own write (seq 3) overflowed the buffer; delete it
		// before the watcher can read it back.
		if _, err := other.Delete(ctx, persist.Delete{Seqs: []uint64{seq}}); err != nil {
			t.Error(err)
		}
		testwait.For(t, "overflow", lk.Overflowed)
		lk.Unlock()
	})
	res, err := lk.Set(ctx, "k", []byte("v"), persist.KVSetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the watcher accounted for the write", func() bool { return w.LastSeq() >= res.Seq })
	// LastSeq moves before the EventSkipped that covers seq 3 reaches the
	// copy: wait for the copy, which without the skip never drops k.
	testwait.Until(t, "k gone from the copy", func() (bool, string) {
		e, ok := lk.Get("k")
		keys := lk.Keys()
		return !ok && !e.Pending && len(keys) == 2, fmt.Sprintf("k %q (present %v, pending %v), keys %v; the server deleted it and the watcher skipped seq %d", e.Value, ok, e.Pending, keys, res.Seq)
	})
	if got := serverKV(t, c, "kvskip"); len(got) != 2 {
		t.Errorf("server has %v", got)
	}
}

// TestWatchDeleteSeqsAscending: Event.Seqs of an EventDelete is
// documented ascending (client_watch.go, Event.Seqs "EventDelete,
// ascending"), but apply (client_watch_trust.go, the "out" list built from
// "named" at the end of apply) emits the older rows of the keys one feed
// message set in frame order: a setMany rewriting key x (older row 2) then
// key y (older row 1) yields EventDelete{Seqs: [2 1]}. Expected: [1 2].
func TestWatchDeleteSeqsAscending(t *testing.T) {
	t.Parallel()
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "ascending")
	for _, k := range []string{"y", "x"} { // y at seq 1, x at seq 2
		if _, err := s.Set(ctx, []byte(k+"0"), persist.SetOptions{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var deletes [][]uint64
	col := newCollector()
	w, err := s.Watch(ctx, persist.WatchOptions{}, func(ev persist.Event) {
		if ev.Kind == persist.EventDelete {
			mu.Lock()
			deletes = append(deletes, slices.Clone(ev.Seqs))
			mu.Unlock()
		}
		col.fn(ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	// A plain set makes the watcher follow the publisher: the next message
	// is taken on the feed's word (the path under test).
	if _, err := s.Set(ctx, []byte("p"), persist.SetOptions{}); err != nil { // 3
		t.Fatal(err)
	}
	col.waitFor(t, "seq 3", func(c *collector) bool { return len(c.sets) == 3 })
	if _, err := s.SetMany(ctx, []persist.Entry{{Key: "x", Value: []byte("x1")}, {Key: "y", Value: []byte("y1")}}); err != nil { // 4 (deletes 2), 5 (deletes 1)
		t.Fatal(err)
	}
	col.waitFor(t, "seqs 4, 5 and the deletes of 1, 2", func(c *collector) bool { return len(c.sets) == 5 && len(c.deleted) == 2 })
	col.check(t, seqs(1, 5))
	mu.Lock()
	defer mu.Unlock()
	for _, d := range deletes {
		if !slices.IsSorted(d) {
			t.Errorf("EventDelete seqs %v, want ascending", d)
		}
	}
}

// deleteAfterCommit is a server tune that, right after the first commit
// of stream that stores a set, sends a delete of that set's seq on the
// server's own connection, behind the commit's feed message: the watcher's
// read of the first feed message after its history (which the watcher
// checks against the server, docs/wire.md) is then served after the
// delete, so the seq is deterministically skipped (written and removed
// before the watcher could read it).
func deleteAfterCommit(t *testing.T, stream string) func(*server.Config) {
	var once sync.Once
	return func(cfg *server.Config) {
		nc := cfg.Conn
		cfg.OnChange = func(scope, name string, _ bool, changes []store.Change) {
			if name != stream {
				return
			}
			for _, c := range changes {
				if c.Op != store.ChangeSet {
					continue
				}
				seq := c.Msg.Seq
				once.Do(func() {
					m := nats.NewMsg(bus.APISubject(bus.DefaultService, scope, cfg.ID))
					m.Reply = nats.NewInbox()
					m.Header.Set(persist.HdrCmd, persist.CmdDelete)
					m.Header.Set(persist.HdrStream, name)
					m.Header.Set(persist.HdrSeq, strconv.FormatUint(seq, 10))
					if err := nc.PublishMsg(m); err != nil {
						t.Error(err)
					}
				})
				return
			}
		}
	}
}

// TestLocalStreamSkippedMessageLeaves: a LocalStream message saved
// at seq N and removed before the watcher could read it is skipped by the
// watcher (EventSkipped, LastSeq past N), but LocalStream.apply ignores
// EventSkipped and dropVanishedLocked runs only on a later EventSet, so
// with no later set the message stays in Messages() as LocalSaved for
// ever, though the stream no longer holds it (docs/persist.md: a saved
// message removed before the feed showed it "leaves the list once the
// feed moves past its seq"). Expected: once the watcher accounted for N,
// Messages() no longer lists it.
func TestLocalStreamSkippedMessageLeaves(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, deleteAfterCommit(t, "lsskip"), nil, 5*time.Second)
	// The watcher's history read must be over before the write: its
	// inventory (the second one of the stream: LocalStream asks one itself
	// first) reaches the server before the write does.
	snoop := h.Conn()
	var inventories atomic.Int32
	if _, err := snoop.Subscribe(bus.APISubject(bus.DefaultService, "hub", "*"), func(m *nats.Msg) {
		if m.Header.Get(persist.HdrCmd) == persist.CmdInventory && m.Header.Get(persist.HdrStream) == "lsskip" {
			inventories.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := snoop.Flush(); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	l := openLocal(t, c, "lsskip", ev)
	testwait.For(t, "the watcher's inventory", func() bool { return inventories.Load() >= 2 })
	m, err := l.Publish([]byte("x"), persist.LocalPublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "saved and accounted for", func() (bool, string) {
		st := l.Watcher().Stats()
		ev.mu.Lock()
		desc := fmt.Sprintf("pending %d last %d stats %+v msgs %+v events %+v", l.Pending(), l.Watcher().LastSeq(), st, l.Messages(), ev.all)
		ev.mu.Unlock()
		return l.Pending() == 0 && l.Watcher().LastSeq() >= 1 && st.Skipped == 1, desc
	})
	if msgs, _, err := c.Stream("hub", "lsskip").GetAll(context.Background(), persist.Range{}); err != nil || len(msgs) != 0 {
		t.Fatalf("the stream holds %d messages (%v), want 0", len(msgs), err)
	}
	// The watcher counts the skip before its EventSkipped reaches the
	// handle: wait for the list, which without the skip keeps the message.
	testwait.Until(t, "the skipped message gone from the list", func() (bool, string) {
		for _, got := range l.Messages() {
			if got.ID == m.ID {
				return false, fmt.Sprintf("message %s (seq %d) listed as %s though the stream removed it and the watcher skipped it", got.ID, got.Seq, got.State)
			}
		}
		return true, ""
	})
}
