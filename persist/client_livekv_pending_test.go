package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// The feed is published before a write is answered, so a LiveKV may see its
// own write on the feed, and then its deletion by another client, before
// the reply reaches it. The local write must not stay pending for ever: the
// copy shows the key deleted, like the server.
func TestLiveKVWriteDeletedBeforeReply(t *testing.T) {
	t.Parallel()
	_, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	lk := openLiveKV(t, c, "kv", persist.LiveKVOptions{})
	other := c.Stream("hub", "kv")
	hooked := false
	lk.SetAfterSave(func(seq uint64) {
		if hooked {
			return
		}
		hooked = true
		// Another client deletes the message, then writes another key: once
		// the copy holds that key, it has applied the set and the delete.
		if _, err := other.Delete(ctx, persist.Delete{Seqs: []uint64{seq}}); err != nil {
			t.Error(err)
			return
		}
		if _, err := other.Set(ctx, []byte("o"), persist.SetOptions{Key: "other"}); err != nil {
			t.Error(err)
			return
		}
		testwait.For(t, "the copy applied the delete", func() bool { return lk.Holds("other") })
	})
	if _, err := lk.Set(ctx, "k", []byte("v"), persist.KVSetOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, ok := lk.Get("k"); ok {
		t.Fatalf("k shows %q (pending %v) though the server deleted it", e.Value, e.Pending)
	}
	if keys := lk.Keys(); len(keys) != 1 || keys[0] != "other" {
		t.Fatalf("keys %v, want [other]", keys)
	}
}
