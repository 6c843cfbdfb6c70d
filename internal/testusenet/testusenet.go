// Package testusenet gives tests the usenet indexer's read side on a real
// persist server: the store of the default scope, its binaries, and a
// search index that follows the releases stream, all stopped when the test
// ends.
package testusenet

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/search"
)

// Env is one persist server with the usenet store and a following index.
type Env struct {
	Client   *persist.Client
	Store    *usenet.Store
	Binaries *persist.KV
	Index    *search.Index
}

// Start starts a persist server, the store of usenet.DefaultScope and an
// index (in a temporary directory) following its releases stream.
func Start(t *testing.T) *Env {
	t.Helper()
	p := testpersist.Start(t, 1)
	c := p.Client()
	st, err := usenet.NewStore(c, "")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := search.Open(filepath.Join(t.TempDir(), "search.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	f, err := ix.Follow(context.Background(), st.Releases())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &Env{Client: c, Store: st, Binaries: c.KV(st.Scope(), usenet.BinariesKV), Index: ix}
}

// WaitSeq waits, on the index's commit signal with a deadline, until it
// has applied seq of the releases stream.
func (e *Env) WaitSeq(t *testing.T, seq uint64) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		ch := e.Index.Changed()
		if e.Index.LastSeq() >= seq {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("index did not reach seq %d (at %d)", seq, e.Index.LastSeq())
		}
	}
}
