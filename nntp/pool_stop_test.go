package nntp

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

// TestPoolStartAfterStop: a stopped pool stays stopped. Start must neither
// start a health loop nobody will stop nor report success.
func TestPoolStartAfterStop(t *testing.T) {
	t.Parallel()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p, err := NewPool(PoolConfig{Conn: Config{Addr: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Stop: %v, want ErrClosed", err)
	}
}
