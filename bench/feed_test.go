package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// firstWriteCheck is a feed side that, at its first write (the warm-up,
// before the ones measureFeedRun times), records whether the stream or bucket it writes
// to existed already, and that records the ids of its writes and of what
// its watchers got.
type firstWriteCheck struct {
	feedSide
	exists  func(context.Context) (bool, error)
	checked bool
	existed bool
	err     error

	mu      sync.Mutex
	written map[uint64]bool
	got     map[uint64]bool
}

func (f *firstWriteCheck) write(ctx context.Context, value []byte) (uint64, error) {
	if !f.checked {
		f.checked = true
		f.existed, f.err = f.exists(ctx)
	}
	id, err := f.feedSide.write(ctx, value)
	f.mu.Lock()
	f.written[id] = true
	f.mu.Unlock()
	return id, err
}

func (f *firstWriteCheck) watch(ctx context.Context, n int, got func(int, uint64, time.Time)) (func(), error) {
	return f.feedSide.watch(ctx, n, func(w int, id uint64, at time.Time) {
		f.mu.Lock()
		f.got[id] = true
		f.mu.Unlock()
		got(w, id, at)
	})
}

// TestFeedTimesNoCreation: bench feed creates each side's stream (persist)
// or bucket (JetStream) before it times anything, so the first timed write
// of either side finds it there, and the watchers get the timed writes
// only (the write that made the stream is none of them). (Was: JetStream's
// bucket was made beforehand but persist's stream by the first timed set,
// its file's creation in persist's figures alone.)
func TestFeedTimesNoCreation(t *testing.T) {
	env, err := StartPersistEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	ctx := t.Context()
	c, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := env.Conn()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newOursSide(ctx, env, "feed-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	anchor, err := newJSSide(ctx, env, "feed-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	sides := []*firstWriteCheck{
		{feedSide: ours, exists: func(ctx context.Context) (bool, error) {
			inv, err := c.Stream(ours.scope, ours.name).Inventory(ctx)
			return inv.Seq > 0, err // a stream that does not exist reads as empty
		}},
		{feedSide: anchor, exists: func(ctx context.Context) (bool, error) {
			_, err := js.KeyValue(ctx, "feed-1")
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				return false, nil
			}
			return err == nil, err
		}},
	}
	for _, side := range sides {
		side.written, side.got = map[uint64]bool{}, map[uint64]bool{}
		run, err := measureFeedRun(ctx, nopMeter{}, side, 3, 0, 50*time.Millisecond, testValue(128))
		if err != nil {
			t.Fatalf("%T: %v", side.feedSide, err)
		}
		if side.err != nil || !side.existed {
			t.Errorf("%T: at the first timed write the stream existed %v (%v); want it made before", side.feedSide, side.existed, side.err)
		}
		if run.rate <= 0 {
			t.Errorf("%T: rate %v", side.feedSide, run.rate)
		}
		side.mu.Lock()
		for id := range side.got {
			if !side.written[id] {
				t.Errorf("%T: a watcher got write %d, which is none of the %d writes measureFeedRun made", side.feedSide, id, len(side.written))
			}
		}
		side.mu.Unlock()
	}
}

// readsAtWrite is ours' feed side recording, at each write, how many
// messages its watchers had read from the server so far.
type readsAtWrite struct {
	*oursSide
	at []uint64
}

func (r *readsAtWrite) write(ctx context.Context, value []byte) (uint64, error) {
	r.at = append(r.at, r.oursSide.reads())
	return r.oursSide.write(ctx, value)
}

// TestFeedTimesNoWatcherStartRead: persist's watchers confirm the first
// change after their start with a read of the stream; bench feed has them
// do so on a warm-up write before its clock starts, so every timed write
// reaches them through the feed alone, with no read. (Was: the first
// timed write was each watcher's first change, and its n reads of the
// stream were in persist's figures.)
func TestFeedTimesNoWatcherStartRead(t *testing.T) {
	env, err := StartPersistEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	ctx := t.Context()
	ours, err := newOursSide(ctx, env, "feed-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	side := &readsAtWrite{oursSide: ours}
	const watchers = 3
	run, err := measureFeedRun(ctx, nopMeter{}, side, watchers, 200, 100*time.Millisecond, testValue(128))
	if err != nil {
		t.Fatal(err)
	}
	if run.writes < 1 || run.writes > len(side.at) {
		t.Fatalf("%d timed writes of %d made", run.writes, len(side.at))
	}
	// The timed writes are the last run.writes: the clock started just
	// before the first of them.
	first := len(side.at) - run.writes
	before, total := side.at[first], ours.reads()
	if total != before {
		t.Errorf("the watchers read %d messages from the server after the clock started (%d before it, timed writes %d..%d of %d): their start-up read was timed",
			total-before, before, first+1, len(side.at), len(side.at))
	}
	if before < watchers {
		t.Errorf("%d messages read before the clock started: want each of the %d watchers' confirming read there", before, watchers)
	}
}
