package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestColdHandleClosesItsStream: every request through a Cold handle tells
// the server to close the stream once idle; a handle without it leaves
// the stream open.
func TestColdHandleClosesItsStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	c := h.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.KV("hub", "warm").Set(ctx, "k", []byte("w"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	cold := c.KV("hub", "rows", persist.Cold())
	if _, err := cold.Set(ctx, "k", []byte("v"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := h.Server("0")
	testwait.For(t, "the cold stream to close", func() bool {
		st := srv.Stats()
		return st.ColdCloses == 1 && st.OpenStorage == 1
	})
	e, err := cold.Get(ctx, "k")
	if err != nil || string(e.Value) != "v" {
		t.Fatalf("get through the cold handle: %v, %v", e, err)
	}
	testwait.For(t, "the cold stream to close again", func() bool {
		st := srv.Stats()
		return st.ColdCloses == 2 && st.OpenStorage == 1
	})
}
