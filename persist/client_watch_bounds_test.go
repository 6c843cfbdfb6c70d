package persist_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// The watcher's honesty and bounds: permanent errors end it visibly,
// transient ones are retried and counted, its memories stay bounded without
// forgetting, a resync reads what was missed and says what it cannot
// deliver.

// waitEnded waits for w to end and checks that it ended with code, said so
// with one EventEnded, and never caught up.
func waitEnded(t *testing.T, w *persist.Watcher, col *collector, code persist.Code) {
	t.Helper()
	select {
	case <-w.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("watcher still running; stats %+v", w.Stats())
	}
	err := w.Err()
	var we *persist.WatchError
	if !errors.As(err, &we) || persist.CodeOf(err) != code {
		t.Fatalf("Err() = %v, want a *WatchError with code %s", err, code)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, e := range col.errs {
		t.Error(e)
	}
	if len(col.ended) != 1 || col.ended[0] != err {
		t.Errorf("ended events %v, want one carrying %v", col.ended, err)
	}
	if col.caughtUp != 0 {
		t.Errorf("caught up %d times before failing", col.caughtUp)
	}
	if n := w.Stats().Retries; n != 0 {
		t.Errorf("%d retries of a permanent error", n)
	}
}

// TestWatchInvalidScopeEnds: a scope that can never be valid ends the
// watcher at once instead of retrying for ever.
func TestWatchInvalidScopeEnds(t *testing.T) {
	c, _ := watchEnv(t)
	col := newCollector()
	w := watch(t, c.Stream("Not-A-Scope", "log"), persist.WatchOptions{IdleCheck: -1}, col)
	waitEnded(t, w, col, persist.CodeBadRequest)
}

// TestWatchNoDataDirEnds: a persistent stream on a server without a data
// directory can never exist; the watcher ends, while an ephemeral stream of
// the same server is watched as usual.
func TestWatchNoDataDirEnds(t *testing.T) {
	_, c := newClientHarness(t, func(cfg *server.Config) { cfg.DataDir = "" }, nil, 0)
	col := newCollector()
	w := watch(t, c.Stream("hub", "log"), persist.WatchOptions{IdleCheck: -1}, col)
	waitEnded(t, w, col, persist.CodeBadRequest)
	if !strings.Contains(w.Err().Error(), "data directory") {
		t.Errorf("Err() = %v: does not say why", w.Err())
	}

	eph := c.Stream("hub", "log", persist.Ephemeral())
	if _, err := eph.Set(context.Background(), []byte("x"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	ecol := newCollector()
	ew := watch(t, eph, persist.WatchOptions{IdleCheck: -1}, ecol)
	ecol.waitFor(t, "ephemeral history", func(c *collector) bool { return c.caughtUp == 1 })
	ecol.check(t, seqs(1, 1))
	if ew.Err() != nil {
		t.Errorf("ephemeral watcher: Err() = %v", ew.Err())
	}
}

// TestWatchTransientRetries: with the server away the watcher's reads fail;
// it retries, counts the failures, and delivers everything once the server
// is back.
func TestWatchTransientRetries(t *testing.T) {
	h := newHarness(t, nil)
	s := h.stream("log")
	for i := 0; i < 3; i++ {
		h.set("log", "v"+strconv.Itoa(i), nil)
	}
	h.stop()
	col := newCollector()
	w := watch(t, s, persist.WatchOptions{IdleCheck: -1}, col)
	testwait.For(t, "two retries", func() bool { return w.Stats().Retries >= 2 })
	st := w.Stats()
	if st.LastRetryErr == nil || !errors.Is(st.LastRetryErr, bus.ErrNoResponders) && persist.CodeOf(st.LastRetryErr) != persist.CodeUnavailable {
		t.Errorf("LastRetryErr = %v, want no responders or unavailable", st.LastRetryErr)
	}
	h.start()
	col.waitFor(t, "history after restart", func(c *collector) bool { return c.caughtUp == 1 })
	h.set("log", "live", nil)
	col.waitFor(t, "live set", func(c *collector) bool { return len(c.sets) == 4 })
	col.check(t, seqs(1, 4))
	if err := w.Err(); err != nil {
		t.Errorf("Err() = %v while running", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.ended) != 0 {
		t.Errorf("ended on a transient error: %v", col.ended)
	}
}

// TestWatchPreDeleteOverflow: more deletes of not-yet-seen seqs than the
// watcher remembers force a resync; nothing is forgotten, and the final
// state is the stream's. The deletes are injected on the feed subject as a
// publisher would send them, because a real server sends them only in a
// race between two servers.
func TestWatchPreDeleteOverflow(t *testing.T) {
	t.Cleanup(persist.SetWatchMaxPreDeleted(4))
	c, nc := watchEnv(t)
	ctx := context.Background()
	const scope, name = "project-w", "early"
	s := c.Stream(scope, name)
	feed, err := nc.SubscribeSync(persist.FeedSubject("", scope, name, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, []byte("first"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	fm, err := feed.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = feed.Unsubscribe()
	epoch := fm.Header.Get(persist.HdrFeedEpoch)
	n, err := strconv.ParseUint(fm.Header.Get(persist.HdrFeedN), 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	col := newCollector()
	w := watch(t, s, persist.WatchOptions{IdleCheck: -1}, col)
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })

	// Deletes of seqs 2..10, more than the bound of 4, in the
	// publisher's next feed message.
	body, err := persist.AppendFrame(nil, &persist.Frame{Op: persist.FeedOpDelete, Seqs: seqs(2, 10)})
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(persist.FeedSubject("", scope, name, false))
	m.Header.Set(persist.HdrFeedEpoch, epoch)
	m.Header.Set(persist.HdrFeedN, strconv.FormatUint(n+1, 10))
	m.Header.Set(persist.HdrServer, "0")
	m.Data = body
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	col.waitFor(t, "resync", func(c *collector) bool { return c.caughtUp == 2 })
	col.mu.Lock()
	reasons := slices.Clone(col.reasons)
	col.mu.Unlock()
	if len(reasons) != 1 || !strings.Contains(reasons[0], "deletes of seqs not yet seen") {
		t.Fatalf("resync reasons %q, want one for the full pre-delete memory", reasons)
	}

	// The seqs those deletes named now get written for real: the resync
	// learned from the stream that they were never deleted, so every one
	// is delivered.
	for i := 2; i <= 10; i++ {
		if _, err := s.Set(ctx, []byte("v"+strconv.Itoa(i)), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col.waitFor(t, "10 sets", func(c *collector) bool { return len(c.sets) == 10 })
	col.check(t, seqs(1, 10))
	checkLiveIsStream(t, s, col)
	if st := w.Stats(); st.Skipped != 0 {
		t.Errorf("%d seqs reported skipped", st.Skipped)
	}
}

// checkLiveIsStream fails unless the seqs the application holds are the
// stream's.
func checkLiveIsStream(t *testing.T, s *persist.Stream, col *collector) {
	t.Helper()
	msgs, _, err := s.GetAll(context.Background(), persist.Range{})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, m := range msgs {
		want = append(want, m.Seq)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	var got []uint64
	for q := range col.live {
		got = append(got, q)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("application holds %v, stream has %v", got, want)
	}
}

// blockAt returns a Watch callback that feeds col and, on the set of seq
// at, signals blocked and waits for release: while it waits the watcher
// cannot read its feed, as if it were away.
func blockAt(col *collector, at uint64) (fn func(persist.Event), blocked, release chan struct{}) {
	blocked, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	fn = func(ev persist.Event) {
		if ev.Kind == persist.EventSet && ev.Msg.Seq == at {
			once.Do(func() {
				close(blocked)
				<-release
			})
		}
		col.fn(ev)
	}
	return fn, blocked, release
}

// TestWatchResyncSkipsReplacedKeys: a keyed stream rewritten while the
// watcher is away (its buffer overflowed) yields the replaced rows it held
// as deletes, the surviving new rows as sets, an EventSkipped with exactly
// the rows that came and went, and a re-read of only the rows it missed.
func TestWatchResyncSkipsReplacedKeys(t *testing.T) {
	c, _ := watchEnv(t)
	ctx := context.Background()
	s := c.Stream("project-w", "kv")
	const keys, rewritten = 100, 10
	for i := 0; i < keys; i++ { // seqs 1..100
		if _, err := s.Set(ctx, []byte("v0"), persist.SetOptions{Key: fmt.Sprintf("k%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	col := newCollector()
	fn, blocked, release := blockAt(col, keys+1)
	w, err := s.Watch(ctx, persist.WatchOptions{Buffer: 1, IdleCheck: -1}, fn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
	if got := w.Stats().Read; got != keys {
		t.Fatalf("history read %d messages, want %d", got, keys)
	}
	for _, v := range []string{"filler", "filler 2"} { // 101 blocks the callback, 102 fills the buffer
		if _, err := s.Set(ctx, []byte(v), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
		if v == "filler" {
			<-blocked
		}
	}
	// Each of the first keys twice: 103..112 replace seqs 1..10, then
	// 113..122 replace 103..112, which the watcher never sees.
	for round := 1; round <= 2; round++ {
		for i := 0; i < rewritten; i++ {
			if _, err := s.Set(ctx, []byte("v"+strconv.Itoa(round)), persist.SetOptions{Key: fmt.Sprintf("k%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(release)
	col.waitFor(t, "resync", func(c *collector) bool { return c.caughtUp == 2 })

	col.mu.Lock()
	if col.resynced != 1 {
		t.Errorf("%d resyncs, want 1", col.resynced)
	}
	if len(col.skipped) != 1 {
		t.Fatalf("skipped events %+v, want one", col.skipped)
	}
	if sk := col.skipped[0]; sk.Count != rewritten || sk.First != keys+3 || sk.Last != keys+2+rewritten {
		t.Errorf("skipped %d seqs %d..%d, want %d seqs %d..%d", sk.Count, sk.First, sk.Last, rewritten, keys+3, keys+2+rewritten)
	}
	if !slices.Equal(col.deleted, seqs(1, rewritten)) {
		t.Errorf("deleted %v, want the replaced rows 1..%d", col.deleted, rewritten)
	}
	setsAfter := col.setsSinceResync
	col.mu.Unlock()
	// Every seq after the history is delivered or counted skipped.
	want := append(seqs(1, keys+2), seqs(keys+3+rewritten, keys+2+2*rewritten)...)
	col.check(t, want)
	checkLiveIsStream(t, s, col)

	// The resync read what it delivered, nothing held before: not the
	// 100 rows of the history, not the 10 rows that were gone. One more
	// read is seq 101: the first feed message after a read is read from
	// the server rather than taken on the feed's word.
	st := w.Stats()
	if read := st.Read - keys - 1; read != uint64(setsAfter) || setsAfter > rewritten+1 {
		t.Errorf("resync read %d messages and delivered %d sets; want them equal and at most %d", read, setsAfter, rewritten+1)
	}
	if st.Skipped != rewritten {
		t.Errorf("Stats().Skipped = %d, want %d", st.Skipped, rewritten)
	}
}

// TestWatchResyncReadsOnlyMissed: a resync of a long plain stream reads the
// messages written while the watcher was away, not the stream again. When a
// delivered message was deleted meanwhile, the message count gives it away
// and the watcher re-lists the range it holds (the documented cost of that
// case): it reads the stream's messages once, and reports the delete.
func TestWatchResyncReadsOnlyMissed(t *testing.T) {
	c, _ := watchEnv(t)
	ctx := context.Background()
	const history, away = 1000, 20
	for _, tc := range []struct {
		name      string
		deleteSeq uint64 // a delivered seq deleted while away, 0 for none
	}{
		{name: "sets only"},
		{name: "a delete too", deleteSeq: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := c.Stream("project-w", "long-"+strings.ReplaceAll(tc.name, " ", "-"))
			batch := make([]persist.Entry, history)
			for i := range batch {
				batch[i].Value = []byte("h")
			}
			if _, err := s.SetMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
			col := newCollector()
			fn, blocked, release := blockAt(col, history+1)
			w, err := s.Watch(ctx, persist.WatchOptions{Buffer: 1, IdleCheck: -1}, fn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Stop(context.Background()) })
			col.waitFor(t, "history", func(c *collector) bool { return c.caughtUp == 1 })
			before := w.Stats().Read
			for i := 0; i < away; i++ {
				if _, err := s.Set(ctx, []byte("a"), persist.SetOptions{}); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					<-blocked
				}
			}
			if tc.deleteSeq != 0 {
				if _, err := s.Delete(ctx, persist.Delete{Seqs: []uint64{tc.deleteSeq}}); err != nil {
					t.Fatal(err)
				}
			}
			close(release)
			col.waitFor(t, "resync", func(c *collector) bool { return c.caughtUp == 2 })
			col.check(t, seqs(1, history+away))
			checkLiveIsStream(t, s, col)
			col.mu.Lock()
			setsAfter := uint64(col.setsSinceResync)
			deleted := slices.Clone(col.deleted)
			col.mu.Unlock()
			// Less seq 1001: the first feed message after the history is
			// read from the server rather than taken on the feed's word.
			read := w.Stats().Read - before - 1
			if setsAfter == 0 || setsAfter > away {
				t.Fatalf("%d sets after the resync, want 1..%d", setsAfter, away)
			}
			if tc.deleteSeq == 0 {
				if read != setsAfter {
					t.Errorf("resync read %d messages for %d missed sets", read, setsAfter)
				}
				return
			}
			if !slices.Equal(deleted, []uint64{tc.deleteSeq}) {
				t.Errorf("deleted %v, want [%d]", deleted, tc.deleteSeq)
			}
			// The missed sets, then every message held before the resync.
			inv, err := s.Inventory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if read != uint64(inv.Count) {
				t.Errorf("resync read %d messages, want the %d missed sets plus a re-list of the %d held: %d", read, setsAfter, uint64(inv.Count)-setsAfter, inv.Count)
			}
		})
	}
}
