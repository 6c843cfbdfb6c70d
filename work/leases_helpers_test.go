package work_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/persist/store"
	"github.com/switchyard-dev/switchyard/work"
)

// ltEnv is one test's persist and a store of source "src" on it.
type ltEnv struct {
	env *testpersist.Env
	st  *work.Store
	ctx context.Context
}

func ltStart(t *testing.T) *ltEnv {
	t.Helper()
	env := testpersist.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	st := ltStoreOn(t, ctx, env.Client())
	return &ltEnv{env: env, st: st, ctx: ctx}
}

// ltStoreOn is a store of "src" on client c, as another process has it.
func ltStoreOn(t *testing.T, ctx context.Context, c *persist.Client) *work.Store {
	t.Helper()
	st, err := work.NewStore(c, "src")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// ltLine is a generated overview line of article a.
func ltLine(group string, a int64) []byte {
	return fmt.Appendf(nil, "%d\tpart %d of %s\tposter <p@example.invalid>\t\t<%d@%s>\t\t1000\t10", a, a, group, a, group)
}

// ltSpooled writes a spooled range of group covering first..last, with
// every article for which keep is true (nil: all) in chunks of 100, and
// returns it with the articles it spooled.
func (e *ltEnv) ltSpooled(t *testing.T, group, kind string, first, last int64, keep func(int64) bool) (work.Range, []int64) {
	t.Helper()
	id, err := e.st.AllocIDs(e.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := work.Range{ID: id, Group: group, First: first, Last: last, Kind: kind, State: work.StateSpooled}
	var arts []int64
	for c := first; c <= last; c += 100 {
		cl := min(c+99, last)
		var lines [][]byte
		for a := c; a <= cl; a++ {
			if keep == nil || keep(a) {
				lines = append(lines, ltLine(group, a))
				arts = append(arts, a)
			}
		}
		if err := e.st.WriteChunk(e.ctx, id, c, cl, lines); err != nil {
			t.Fatal(err)
		}
		r.Chunks++
	}
	r.Articles = int64(len(arts))
	if _, err := e.st.PutRange(e.ctx, r, 0); err != nil {
		t.Fatal(err)
	}
	return r, arts
}

func (e *ltEnv) ltRange(t *testing.T, id uint64) work.Versioned[work.Range] {
	t.Helper()
	r, err := e.st.Range(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *ltEnv) ltRanges(t *testing.T) []work.Range {
	t.Helper()
	vs, err := e.st.Ranges(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]work.Range, len(vs))
	for i, v := range vs {
		out[i] = v.Val
	}
	return out
}

// ltSpoolLen counts the lines left in range id's spool.
func (e *ltEnv) ltSpoolLen(t *testing.T, id uint64) int64 {
	t.Helper()
	n, err := e.st.ReadSpool(e.ctx, id, func(int64, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ltSpoolFile reports whether range id's spool stream has a file in the
// data directory: a dropped spool must not leave one.
func (e *ltEnv) ltSpoolFile(t *testing.T, id uint64) bool {
	t.Helper()
	s := e.st.Spool(id)
	p, err := store.StreamPath(e.env.Dir, s.Scope(), s.Name())
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// ltCover checks that the ranges of group cover first..last exactly once,
// in pieces of at most size articles, and returns them by First.
func ltCover(t *testing.T, ranges []work.Range, group string, first, last, size int64) []work.Range {
	t.Helper()
	var rs []work.Range
	for _, r := range ranges {
		if r.Group == group {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b work.Range) int { return int(a.First - b.First) })
	next := first
	for _, r := range rs {
		if r.First != next {
			t.Fatalf("%s: range %d starts at %d, want %d (gap or overlap); ranges %v", group, r.ID, r.First, next, ltSpans(rs))
		}
		if r.Last < r.First || r.Size() > size {
			t.Fatalf("%s: range %d is %d-%d, want 1..%d articles", group, r.ID, r.First, r.Last, size)
		}
		next = r.Last + 1
	}
	if next != last+1 {
		t.Fatalf("%s: ranges end at %d, want %d; ranges %v", group, next-1, last, ltSpans(rs))
	}
	return rs
}

func ltSpans(rs []work.Range) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%d:%d-%d", r.ID, r.First, r.Last))
	}
	return out
}

// ltLate is a persist whose server commits one armed write and then holds
// its answer until the writer has given up waiting on it (its next request
// of the scope is on the bus): a write that times out but lands. slow is
// the store of a client that gives up after 1 s.
type ltLate struct {
	*ltEnv
	slow *work.Store

	stream   string // the armed write's stream and prev seq, set before watching
	prev     string
	watching atomic.Bool // the bus watch looks for the armed write's request
	armed    atomic.Bool // the server holds the stream's next change
	free     func()
}

func ltStartLate(t *testing.T) *ltLate {
	t.Helper()
	scope := work.Scope("src")
	x := &ltLate{}
	release := make(chan struct{})
	var releaseOnce sync.Once
	x.free = func() { releaseOnce.Do(func() { close(release) }) }
	env := testpersist.Start(t, 1, testpersist.Tune(func(cfg *server.Config) {
		cfg.OnChange = func(sc, stream string, _ bool, _ []store.Change) {
			if sc == scope && x.armed.Load() && stream == x.stream && x.armed.CompareAndSwap(true, false) {
				<-release
			}
		}
	}))
	t.Cleanup(x.free) // before the servers stop: a failed test must not hold one
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	x.ltEnv = &ltEnv{env: env, st: ltStoreOn(t, ctx, env.Client()), ctx: ctx}

	// The bus shows when the writer gave up on the armed write: the first
	// request of the scope after that write's, which is told from earlier
	// ones still on their way to this watch by its stream and prev seq.
	nc := env.Conn()
	saw := false // only the subscription's goroutine uses it
	sub, err := nc.Subscribe(bus.APISubject(bus.DefaultService, scope, "*"), func(m *nats.Msg) {
		switch {
		case !x.watching.Load():
		case saw:
			x.free()
		default:
			saw = m.Header.Get(persist.HdrCmd) == persist.CmdSet && m.Header.Get(persist.HdrStream) == x.stream &&
				m.Header.Get(persist.HdrPrevSeq) == x.prev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	slow, err := persist.NewClient(persist.ClientConfig{Conn: env.Conn(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Close() })
	x.slow = ltStoreOn(t, ctx, slow)
	return x
}

// arm makes the server hold the answer of the next write of stream, a
// compare-and-set on prev (once per ltLate).
func (x *ltLate) arm(stream string, prev uint64) {
	x.stream, x.prev = stream, strconv.FormatUint(prev, 10)
	x.watching.Store(true)
	x.armed.Store(true)
}
