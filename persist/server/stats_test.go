package server

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// recorder is an Observer that keeps what it hears.
type recorder struct {
	mu       sync.Mutex
	answered map[[2]string]int // {cmd, code} -> answers
	served   map[string]int
	commits  []int
}

func newRecorder() *recorder {
	return &recorder{answered: map[[2]string]int{}, served: map[string]int{}}
}

func (r *recorder) Answered(cmd string, code persist.Code) {
	r.mu.Lock()
	r.answered[[2]string{cmd, string(code)}]++
	r.mu.Unlock()
}

func (r *recorder) Served(cmd string, d time.Duration) {
	if d < 0 {
		panic("negative latency")
	}
	r.mu.Lock()
	r.served[cmd]++
	r.mu.Unlock()
}

func (r *recorder) Committed(ops int, _ time.Duration) {
	r.mu.Lock()
	r.commits = append(r.commits, ops)
	r.mu.Unlock()
}

func (r *recorder) count(cmd string, code persist.Code) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answered[[2]string{cmd, string(code)}]
}

// TestStatsAndObserver: answers are reported by command and code, commits
// with their size, and Stats counts dedup hits, expiries, feed messages,
// open streams and their bytes.
func TestStatsAndObserver(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	h := newHarness(t, func(c *Config) {
		c.Observer = rec
		c.ExpireEvery = 10 * time.Millisecond
	})
	if err := h.srv.Ready(); err != nil {
		t.Fatalf("Ready after Start: %v", err)
	}
	h.set("s", "one", map[string]string{persist.HdrMsgID: "m1"})
	h.set("s", "one", map[string]string{persist.HdrMsgID: "m1"}) // a retry: dedup
	h.config("s", `{"allow_msg_ttl":true}`)
	h.set("s", "gone soon", map[string]string{persist.HdrTTL: "1"})
	wantCode(t, h.req(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "99"}, nil), persist.CodeNotFound)
	h.getAll("s", nil)

	if got := rec.count(persist.CmdSet, ""); got != 3 {
		t.Errorf("set answered ok %d times, want 3", got)
	}
	if got := rec.count(persist.CmdGet, persist.CodeNotFound); got != 1 {
		t.Errorf("get answered not-found %d times, want 1", got)
	}
	// getAll's observation comes after its last chunk is sent, so the
	// client can have every chunk before it is recorded.
	testwait.For(t, "getAll to be observed", func() bool { return rec.count(persist.CmdGetAll, "") >= 1 })
	if got := rec.count(persist.CmdGetAll, ""); got != 1 {
		t.Errorf("getAll answered %d times, want 1", got)
	}
	testwait.For(t, "the TTL message to expire", func() bool { return h.srv.Stats().Expired >= 1 })
	st := h.srv.Stats()
	if st.Dedup != 1 {
		t.Errorf("Dedup %d, want 1", st.Dedup)
	}
	if st.Commits < 2 || st.CommitFailures != 0 {
		t.Errorf("Commits %d, CommitFailures %d: want at least 2 and 0", st.Commits, st.CommitFailures)
	}
	if st.FeedPublished < 2 {
		t.Errorf("FeedPublished %d, want at least 2", st.FeedPublished)
	}
	if st.OpenStreams != 1 || st.OpenBytes <= 0 {
		t.Errorf("OpenStreams %d, OpenBytes %d: want 1 and > 0", st.OpenStreams, st.OpenBytes)
	}
	rec.mu.Lock()
	commits, served := len(rec.commits), rec.served[persist.CmdSet]
	rec.mu.Unlock()
	if commits < 2 || served != 3 {
		t.Errorf("observer saw %d commits and %d sets served; want at least 2 and 3", commits, served)
	}
}

// failingStorage wraps the SQLite storage with streams whose writes fail
// while fail is set.
type failingStorage struct {
	store.Storage
	fail *atomic.Bool
}

func (f failingStorage) Open(scope, name string, now time.Time) (store.Stream, error) {
	st, err := f.Storage.Open(scope, name, now)
	if err != nil {
		return nil, err
	}
	return failingStream{st, f.fail}, nil
}

type failingStream struct {
	store.Stream
	fail *atomic.Bool
}

func (f failingStream) Write(ops []store.WriteOp, now time.Time) ([]store.WriteResult, []store.Change, error) {
	if f.fail.Load() {
		return nil, nil, errors.New("injected write failure")
	}
	return f.Stream.Write(ops, now)
}

// TestReadyFollowsCommits: a failed commit makes the server unready until a
// commit succeeds again; a stopped server is not ready.
func TestReadyFollowsCommits(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	h := newHarness(t, func(c *Config) {
		c.Storage = failingStorage{store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir}), &fail}
	})
	h.set("s", "ok", nil)
	if err := h.srv.Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	fail.Store(true)
	if r := h.req(persist.CmdSet, "s", nil, []byte("refused")); r.Header.Get(persist.HdrError) == "" {
		t.Fatal("the injected failure was not reported to the writer")
	}
	if err := h.srv.Ready(); err == nil {
		t.Fatal("Ready is nil after a failed commit")
	}
	if st := h.srv.Stats(); st.CommitFailures != 1 {
		t.Fatalf("CommitFailures %d, want 1", st.CommitFailures)
	}
	fail.Store(false)
	h.set("s", "ok again", nil)
	if err := h.srv.Ready(); err != nil {
		t.Fatalf("Ready after a good commit: %v", err)
	}
	if err := h.srv.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Ready(); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Ready after Stop: %v, want ErrNotServing", err)
	}
}

// TestOpenDescriptors: Stats.OpenDescriptors counts the descriptors of the
// open persistent streams only (an ephemeral one lives in memory), three
// each, or two with ExclusiveFiles (no -shm); a closed stream holds none.
func TestOpenDescriptors(t *testing.T) {
	t.Parallel()
	for _, exclusive := range []bool{false, true} {
		h := newHarness(t, func(c *Config) { c.ExclusiveFiles = exclusive })
		h.set("a", "v", nil)
		h.set("b", "v", nil)
		h.set("mem", "v", map[string]string{persist.HdrEphemeral: "true"})
		per := int64(store.FilesPerOpenStream)
		if exclusive {
			per = store.FilesPerExclusiveStream
		}
		// The start's walk of the data directory reads the name of a
		// stream file it finds with a WAL in a slot of its own, so a
		// fourth slot can be held for a moment: the figures are read from
		// a moment with only the three streams open.
		var st Stats
		testwait.For(t, "only the three streams open", func() bool { st = h.srv.Stats(); return st.OpenStorage == 3 })
		if st.OpenDescriptors != 2*per {
			t.Fatalf("exclusive %v: %d open, %d descriptors; want 3 open, %d descriptors", exclusive, st.OpenStorage, st.OpenDescriptors, 2*per)
		}
		h.node.Stop()
		if st := h.srv.Stats(); st.OpenDescriptors != 0 {
			t.Fatalf("exclusive %v: %d descriptors after Stop", exclusive, st.OpenDescriptors)
		}
	}
}
