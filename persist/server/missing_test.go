package server

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testdisk"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// Every read command on a missing stream answers as an empty stream would
// and leaves nothing in the data directory; the archive and expiry jobs the
// server queues on the handle do not create it either.
func TestReadsOfMissingStreamAnswerEmpty(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Archive = t.TempDir() })
	for _, eph := range []map[string]string{nil, {persist.HdrEphemeral: "true"}} {
		with := func(kv ...string) map[string]string {
			m := map[string]string{}
			for k, v := range eph {
				m[k] = v
			}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		wantCode(t, h.req(persist.CmdGet, "nothing", with(persist.HdrSeq, "1"), nil), persist.CodeNotFound)
		wantCode(t, h.req(persist.CmdGet, "nothing", with(persist.HdrKey, "k"), nil), persist.CodeNotFound)
		if msgs, next, chunks := h.getAll("nothing", with()); len(msgs) != 0 || next != 0 || chunks != 1 {
			t.Fatalf("getAll of a missing stream: %d messages, next %d, %d chunks", len(msgs), next, chunks)
		}
		var keys []string
		mustJSON(t, h.ok(persist.CmdKeys, "nothing", with(), nil).Data, &keys)
		if keys == nil || len(keys) != 0 {
			t.Fatalf("keys of a missing stream: %#v, want []", keys)
		}
		var inv persist.Inventory
		mustJSON(t, h.ok(persist.CmdInventory, "nothing", with(), nil).Data, &inv)
		if inv.Count != 0 || inv.Bytes != 0 || inv.Seq != 0 {
			t.Fatalf("inventory of a missing stream: %+v", inv)
		}
		var c persist.Config
		mustJSON(t, h.ok(persist.CmdConfig, "nothing", with(), nil).Data, &c)
		want := persist.DefaultConfig()
		if eph != nil {
			want = store.ClampEphemeral(want)
		}
		if c != want {
			t.Fatalf("config of a missing stream: %+v, want %+v", c, want)
		}
	}
	// The timer's backup and expiry jobs can find a missing stream's handle
	// (queued while a read waits); they must not open the stream either.
	k := handleKey{scope: h.scope, name: "nothing"}
	h.srv.mu.Lock()
	hd := h.srv.handles[k]
	if hd == nil {
		hd = &handle{key: k}
		h.srv.handles[k] = hd
	}
	hd.archivePending, hd.expirePending = true, true
	hd.queue = append(hd.queue, &job{archive: true}, &job{expire: true})
	h.srv.scheduleLocked(hd)
	h.srv.mu.Unlock()
	testwait.For(t, "the jobs to run", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return !hd.archivePending && !hd.expirePending && !hd.scheduled
	})
	if files := testdisk.Files(t, h.dir); len(files) != 0 {
		t.Fatalf("reads of a missing stream left %v", files)
	}
	if files := testdisk.Files(t, h.cfg.Archive); len(files) != 0 {
		t.Fatalf("reads of a missing stream left %v in the archive", files)
	}
	// The first write creates the stream; reads then see it.
	res := h.set("nothing", "first", nil)
	if res.Seq != 1 {
		t.Fatalf("first write got seq %d", res.Seq)
	}
	if got := h.inventory("nothing"); got.Count != 1 {
		t.Fatalf("inventory after the first write: %+v", got)
	}
	p, err := store.StreamPath(h.dir, h.scope, "nothing")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range testdisk.Files(t, h.dir) {
		// The disk-space reserve (persist/store/reserve.go) is made with
		// the first stream file.
		if f != filepath.Dir(p) && f != p && f != p+"-wal" && f != p+"-shm" && filepath.Base(f) != ".reserve" {
			t.Fatalf("after one write the data directory holds %s", f)
		}
	}
}

// Reads of missing streams leave no handle in the server's cache either, so
// they cannot push open streams out of it.
func TestReadsOfMissingStreamsKeepNoHandles(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("open", "x", nil)
	for i := range 200 {
		h.ok(persist.CmdInventory, fmt.Sprintf("missing-%d", i), nil, nil)
	}
	// The last read's handle is let go just after its answer: wait for it.
	testwait.Until(t, "only the written stream's handle", func() (bool, string) {
		h.srv.mu.Lock()
		n := len(h.srv.handles)
		_, open := h.srv.handles[handleKey{scope: h.scope, name: "open"}]
		h.srv.mu.Unlock()
		return n == 1 && open, fmt.Sprintf("after reads of missing streams the server holds %d handles (the written stream's among them: %v), want just that one", n, open)
	})
}

// A read that found the stream missing does not hide it once it exists: a
// second server sharing the data directory (the misroute case) creates the
// file, and the next read of the first server sees its message.
func TestMissingStreamNotCached(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if inv := h.inventory("later"); inv.Count != 0 {
		t.Fatalf("inventory of a missing stream: %+v", inv)
	}
	other, err := store.NewSQLite(store.SQLiteConfig{Dir: h.dir}).Open(h.scope, "later", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Write([]store.WriteOp{{Value: []byte("elsewhere")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if inv := h.inventory("later"); inv.Count != 1 || inv.Seq != 1 {
		t.Fatalf("inventory after another server wrote the stream: %+v", inv)
	}
	if r := h.ok(persist.CmdGet, "later", map[string]string{persist.HdrSeq: "1"}, nil); string(r.Data) != "elsewhere" {
		t.Fatalf("get after another server wrote the stream: %q", r.Data)
	}
	// The server continues the stream's seqs rather than restarting them.
	if res := h.set("later", "here", nil); res.Seq != 2 {
		t.Fatalf("write after another server's got seq %d, want 2", res.Seq)
	}
}

// Deletes and config updates are writes: they create the stream, as before.
// A config update that changes nothing is a read.
func TestWritesOfMissingStreamCreateIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.ok(persist.CmdConfig, "same", nil, []byte(" "))
	if files := testdisk.Files(t, h.dir); len(files) != 0 {
		t.Fatalf("an empty config update left %v", files)
	}
	for _, tc := range []struct {
		name, stream string
		hdr          map[string]string
		body         []byte
		cmd          string
	}{
		{"delete", "del", map[string]string{persist.HdrAll: "true"}, nil, persist.CmdDelete},
		{"config update", "cfg", nil, []byte(`{"max_msgs": 5}`), persist.CmdConfig},
		{"setMany", "many", nil, nil, persist.CmdSetMany},
	} {
		h.ok(tc.cmd, tc.stream, tc.hdr, tc.body)
		p, err := store.StreamPath(h.dir, h.scope, tc.stream)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range testdisk.Files(t, h.dir) {
			found = found || f == p
		}
		if !found {
			t.Fatalf("%s of a missing stream did not create it", tc.name)
		}
	}
}

// TestMissingReadEvictsNothing: a read of a stream that does not exist,
// with every slot taken, is answered as missing without closing an open
// stream. It took a slot first, closing the least recently used idle
// stream for it, and only then found nothing.
func TestMissingReadEvictsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxOpenStreams = 2 })
	// The start's walk (of an empty directory) is done: it holds no slot.
	testwait.For(t, "the start's walk", func() bool { return h.srv.Stats().Streams >= 0 })
	h.set("s0", "0", nil)
	h.set("s1", "1", nil)
	if got := cached(h); !slices.Equal(got, []string{"s0", "s1"}) {
		t.Fatalf("cache holds %v, want [s0 s1]", got)
	}
	wantCode(t, h.req(persist.CmdGet, "ghost", map[string]string{persist.HdrSeq: "1"}, nil), persist.CodeNotFound)
	testwait.Until(t, "the missing stream's handle to go", func() (bool, string) {
		got := cached(h)
		return !slices.Contains(got, "ghost"), fmt.Sprintf("cache holds %v", got)
	})
	if got := cached(h); !slices.Equal(got, []string{"s0", "s1"}) {
		t.Fatalf("after a read of a missing stream the cache holds %v, want [s0 s1] (OpenWaitCloses %d)", got, h.srv.Stats().OpenWaitCloses)
	}
}

// (Was: with every slot taken, a read of an ephemeral stream that was not
// open closed the least recently used idle stream to take a slot, and only
// then found nothing: an inventory of a made-up ephemeral name wiped another
// ephemeral stream's messages.)
func TestMissingEphemeralReadEvictsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxOpenStreams = 2 })
	testwait.For(t, "the start's walk", func() bool { return h.srv.Stats().Streams >= 0 })
	eph := map[string]string{persist.HdrEphemeral: "true"}
	h.ok(persist.CmdSet, "e0", eph, []byte("kept"))
	h.ok(persist.CmdSet, "e1", eph, []byte("kept"))
	for _, cmd := range []string{persist.CmdInventory, persist.CmdKeys, persist.CmdGetAll} {
		if cmd == persist.CmdGetAll {
			if msgs, _, _ := h.getAll("ghost", eph); len(msgs) != 0 {
				t.Fatalf("getAll of a missing ephemeral stream: %d messages", len(msgs))
			}
			continue
		}
		h.ok(cmd, "ghost", eph, nil)
	}
	wantCode(t, h.req(persist.CmdGet, "ghost", map[string]string{persist.HdrEphemeral: "true", persist.HdrSeq: "1"}, nil), persist.CodeNotFound)
	for _, s := range []string{"e0", "e1"} {
		r := h.req(persist.CmdGet, s, map[string]string{persist.HdrEphemeral: "true", persist.HdrSeq: "1"}, nil)
		if r.Header.Get(persist.HdrError) != "" || string(r.Data) != "kept" {
			t.Fatalf("ephemeral stream %s after reads of a missing one: %q %q, want its message", s, r.Header.Get(persist.HdrError), r.Data)
		}
	}
}

// (Was: with an archive configured, a read of a made-up persistent name with
// every slot taken was not known to miss (the archive might have held a
// copy), so it closed the least recently used idle stream, an ephemeral one
// with its messages, to look.)
func TestMissingReadWithArchiveEvictsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxOpenStreams = 2; c.Archive = t.TempDir() })
	testwait.For(t, "the start's walk", func() bool { return h.srv.Stats().Streams >= 0 })
	eph := map[string]string{persist.HdrEphemeral: "true"}
	h.ok(persist.CmdSet, "e0", eph, []byte("kept"))
	h.ok(persist.CmdSet, "e1", eph, []byte("kept"))
	if inv := h.inventory("ghost"); inv.Count != 0 {
		t.Fatalf("inventory of a missing stream: %+v", inv)
	}
	wantCode(t, h.req(persist.CmdGet, "ghost", map[string]string{persist.HdrKey: "k"}, nil), persist.CodeNotFound)
	for _, s := range []string{"e0", "e1"} {
		r := h.req(persist.CmdGet, s, map[string]string{persist.HdrEphemeral: "true", persist.HdrSeq: "1"}, nil)
		if r.Header.Get(persist.HdrError) != "" || string(r.Data) != "kept" {
			t.Fatalf("ephemeral stream %s after reads of a missing persistent one: %q %q, want its message (OpenWaitCloses %d)", s, r.Header.Get(persist.HdrError), r.Data, h.srv.Stats().OpenWaitCloses)
		}
	}
	if files := testdisk.Files(t, h.dir); len(files) != 0 {
		t.Fatalf("reads of a missing stream left %v", files)
	}
	// A stream whose only copy is the archive's exists: its read, with
	// every slot still taken, restores and answers it.
	a, err := store.NewSQLite(store.SQLiteConfig{Dir: h.cfg.Archive}).Open(h.scope, "archived", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Write([]store.WriteOp{{Value: []byte("restored")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if inv := h.inventory("archived"); inv.Count != 1 {
		t.Fatalf("inventory of a stream kept only in the archive: %+v, want its message", inv)
	}
}

// (Was: eviction counted every handle in the cache, those of queued reads of
// streams that do not exist too: 200 pipelined inventories of made-up names
// closed the 60 idle ephemeral streams of a 64-stream cache, and their
// messages were lost.)
func TestQueuedMissingReadsEvictNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hdr  map[string]string // of the reads of made-up names
	}{
		{"persistent names", nil},
		{"ephemeral names", map[string]string{persist.HdrEphemeral: "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const kept, reads = 60, 200
			// One worker, held by the commit of a set on a new stream, so
			// that every read is queued, each on a handle of its own, before
			// any is served and before the next eviction looks.
			var armed, held atomic.Bool
			release := make(chan struct{})
			h := newHarnessHook(t, func(c *Config) { c.MaxOpenStreams = 64; c.Workers = 1 }, func(s *Server) {
				s.beforeWrite = func(int) {
					if armed.Load() && held.CompareAndSwap(false, true) {
						<-release
					}
				}
			})
			t.Cleanup(func() {
				if armed.CompareAndSwap(true, false) {
					close(release)
				}
			})
			testwait.For(t, "the start's walk", func() bool { return h.srv.Stats().Streams >= 0 })
			eph := map[string]string{persist.HdrEphemeral: "true"}
			for i := range kept {
				h.ok(persist.CmdSet, fmt.Sprint("e", i), eph, []byte("kept"))
			}
			armed.Store(true)
			p := h.pending()
			p.set(0, "w", "held")
			testwait.For(t, "the write to hold the worker", held.Load)
			for i := 1; i <= reads; i++ {
				p.publish(i, h.msg(persist.CmdInventory, fmt.Sprint("ghost-", i), tc.hdr, nil))
			}
			testwait.Until(t, "every read to be queued", func() (bool, string) {
				h.srv.mu.Lock()
				n := len(h.srv.handles)
				h.srv.mu.Unlock()
				return n == kept+1+reads, fmt.Sprintf("%d handles", n)
			})
			armed.Store(false)
			close(release)
			for i, r := range p.answers(reads + 1) {
				if c := r.Header.Get(persist.HdrError); c != "" {
					t.Fatalf("request %d: %s %s", i, c, r.Data)
				}
			}
			testwait.Until(t, "the reads' handles to go", func() (bool, string) {
				h.srv.mu.Lock()
				defer h.srv.mu.Unlock()
				return len(h.srv.handles) == kept+1 && h.srv.sized == kept+1, fmt.Sprintf("%d handles, %d sized", len(h.srv.handles), h.srv.sized)
			})
			lost := 0
			for i := range kept {
				r := h.req(persist.CmdGet, fmt.Sprint("e", i), map[string]string{persist.HdrEphemeral: "true", persist.HdrSeq: "1"}, nil)
				if r.Header.Get(persist.HdrError) != "" || string(r.Data) != "kept" {
					lost++
				}
			}
			if lost > 0 {
				t.Fatalf("%d of %d idle ephemeral streams lost their message to %d queued reads of made-up names", lost, kept, reads)
			}
		})
	}
}
