package persist_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

func openLiveKV(t *testing.T, c *persist.Client, name string, opts persist.LiveKVOptions) *persist.LiveKV {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lk, err := c.LiveKV(ctx, "hub", name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close() })
	return lk
}

// serverKV is the stream's live keys and values as the server has them
// (tombstones left out).
func serverKV(t *testing.T, c *persist.Client, name string) map[string]string {
	t.Helper()
	msgs, _, err := c.Stream("hub", name).GetAll(context.Background(), persist.Range{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range msgs {
		if m.Key != "" && m.Headers[persist.HdrTombstone] == "" {
			out[m.Key] = string(m.Value)
		}
	}
	return out
}

// localKV is what lk shows.
func localKV(lk *persist.LiveKV) map[string]string {
	out := map[string]string{}
	for _, k := range lk.Keys() {
		if e, ok := lk.Get(k); ok {
			out[k] = string(e.Value)
		}
	}
	return out
}

func equalKV(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestLiveKVConverges(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	ctx := context.Background()
	a := openLiveKV(t, c, "shared", persist.LiveKVOptions{})
	b := openLiveKV(t, c, "shared", persist.LiveKVOptions{})
	if _, err := a.Set(ctx, "x", []byte("1"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	// A local write shows at once, before the feed confirms it.
	if e, ok := b.Get("x"); ok && string(e.Value) != "1" {
		t.Fatalf("b sees x=%q", e.Value)
	}
	if _, err := b.Set(ctx, "y", []byte("2"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Set(ctx, "x", []byte("3"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete(ctx, "y", persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Get("y"); ok {
		t.Fatal("a still shows y right after deleting it")
	}
	want := map[string]string{"x": "3"}
	testwait.For(t, "both copies equal the server", func() bool {
		s := serverKV(t, c, "shared")
		return equalKV(s, want) && equalKV(localKV(a), want) && equalKV(localKV(b), want)
	})
	// The stream was switched to allow tombstone TTLs.
	cfg, err := c.Stream("hub", "shared").Config(ctx)
	if err != nil || !cfg.AllowMsgTTL {
		t.Fatalf("config %+v, %v: allow_msg_ttl should be on", cfg, err)
	}
	// A handle opened now starts from the same state.
	if got := localKV(openLiveKV(t, c, "shared", persist.LiveKVOptions{})); !equalKV(got, want) {
		t.Fatalf("new handle shows %v, want %v", got, want)
	}
}

func TestLiveKVCompareAndSet(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	ctx := context.Background()
	a := openLiveKV(t, c, "cas", persist.LiveKVOptions{})
	zero := uint64(0)
	r1, err := a.Set(ctx, "k", []byte("v1"), persist.KVSetOptions{PrevSeq: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set(ctx, "k", []byte("again"), persist.KVSetOptions{PrevSeq: &zero}); !errors.Is(err, persist.ErrWrongLastSequence) {
		t.Fatalf("create over an existing key: %v", err)
	}
	if _, err := a.Set(ctx, "k", []byte("v2"), persist.KVSetOptions{PrevSeq: &r1.Seq}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set(ctx, "k", []byte("stale"), persist.KVSetOptions{PrevSeq: &r1.Seq}); !errors.Is(err, persist.ErrWrongLastSequence) {
		t.Fatalf("stale CAS: %v", err)
	}
	testwait.For(t, "k=v2 locally, not pending", func() bool {
		e, ok := a.Get("k")
		return ok && string(e.Value) == "v2" && !e.Pending
	})
	// A deleted key counts as absent for "must not exist".
	e, _ := a.Get("k")
	if _, err := a.Delete(ctx, "k", persist.KVSetOptions{PrevSeq: &e.Seq}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "tombstone on the feed", func() bool { e, ok := a.Get("k"); return !ok && !e.Pending && e.Seq > 0 })
	if _, err := a.Set(ctx, "k", []byte("reborn"), persist.KVSetOptions{PrevSeq: &zero}); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

// TestLiveKVMerge: a remote write lands between the moment a local write
// took its base and the moment it reaches the server; Merge gets both
// values and its result is what the stream ends with. Without Merge the
// last writer wins.
func TestLiveKVMerge(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	ctx := context.Background()
	type call struct{ key, local, remote string }
	var mu sync.Mutex
	var calls []call
	merge := func(key string, local, remote []byte) []byte {
		mu.Lock()
		calls = append(calls, call{key, string(local), string(remote)})
		mu.Unlock()
		return append(append(append([]byte{}, remote...), '+'), local...)
	}
	a := openLiveKV(t, c, "doc", persist.LiveKVOptions{Merge: merge})
	other := c.KV("hub", "doc")
	if _, err := a.Set(ctx, "title", []byte("base"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "base on the feed", func() bool { e, ok := a.Get("title"); return ok && !e.Pending })
	var once sync.Once
	a.SetBeforeSave(func() {
		once.Do(func() {
			if _, err := other.Set(ctx, "title", []byte("remote"), persist.SetOptions{}); err != nil {
				t.Error(err)
			}
		})
	})
	if _, err := a.Set(ctx, "title", []byte("local"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	if len(got) != 1 || got[0] != (call{"title", "local", "remote"}) {
		t.Fatalf("merge calls %+v, want one with local and remote", got)
	}
	want := map[string]string{"title": "remote+local"}
	testwait.For(t, "merged value everywhere", func() bool {
		return equalKV(serverKV(t, c, "doc"), want) && equalKV(localKV(a), want)
	})

	// Last writer wins without Merge: the racing remote write is overwritten.
	lww := openLiveKV(t, c, "doc2", persist.LiveKVOptions{})
	var once2 sync.Once
	lww.SetBeforeSave(func() {
		once2.Do(func() {
			if _, err := c.KV("hub", "doc2").Set(ctx, "title", []byte("remote"), persist.SetOptions{}); err != nil {
				t.Error(err)
			}
		})
	})
	if _, err := lww.Set(ctx, "title", []byte("local"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"title": "local"}
	testwait.For(t, "last writer everywhere", func() bool {
		return equalKV(serverKV(t, c, "doc2"), want) && equalKV(localKV(lww), want)
	})
}

// TestLiveKVTombstoneExpires: a delete is a tombstone with a TTL; when the
// server expires it, the stream and the copy both forget the key.
func TestLiveKVTombstoneExpires(t *testing.T) {
	// Not parallel: the tombstone must still be on the server when it is
	// read back, which a 200ms TTL allows only on an unloaded machine.
	_, c := newClientHarness(t, func(cfg *server.Config) { cfg.ExpireEvery = 10 * time.Millisecond }, nil, 2*time.Second)
	ctx := context.Background()
	a := openLiveKV(t, c, "tomb", persist.LiveKVOptions{TombstoneTTL: 200 * time.Millisecond})
	if _, err := a.Set(ctx, "gone", []byte("v"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete(ctx, "gone", persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := c.KV("hub", "tomb").Get(ctx, "gone")
	if err != nil || m.Headers[persist.HdrTombstone] == "" || len(m.Value) != 0 || m.TTL != 200*time.Millisecond {
		t.Fatalf("tombstone on the server: %+v, %v", m, err)
	}
	if _, ok := a.Get("gone"); ok {
		t.Fatal("deleted key still shown")
	}
	testwait.For(t, "tombstone expired on the server and in the copy", func() bool {
		keys, err := c.KV("hub", "tomb").Keys(ctx)
		if err != nil || len(keys) != 0 {
			return false
		}
		return a.Empty()
	})
}

// TestLiveKVResync: the copy's callback is held while another client
// changes and deletes keys, so the watcher's buffer overflows and it has to
// resync; afterwards the copy equals the server, with no stale key.
func TestLiveKVResync(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 2*time.Second)
	ctx := context.Background()
	a := openLiveKV(t, c, "rs", persist.LiveKVOptions{WatchBuffer: 1})
	kv := c.KV("hub", "rs")
	for _, k := range []string{"a", "b", "c", "d"} {
		if _, err := kv.Set(ctx, k, []byte(k), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "four keys", func() bool { return len(a.Keys()) == 4 })
	a.Lock() // the next feed event blocks the watcher's callback
	held := true
	defer func() {
		if held {
			a.Unlock()
		}
	}()
	for _, k := range []string{"a", "b"} {
		if _, err := kv.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"c", "e", "f"} {
		if _, err := kv.Set(ctx, k, []byte(k+"2"), persist.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "watcher buffer overflow", func() bool { return a.Overflowed() })
	held = false
	a.Unlock()
	want := map[string]string{"c": "c2", "d": "d", "e": "e2", "f": "f2"}
	testwait.For(t, "copy equals the server after the resync", func() bool {
		return a.Resyncs() > 0 && equalKV(serverKV(t, c, "rs"), want) && equalKV(localKV(a), want)
	})
}
