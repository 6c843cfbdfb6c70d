package nntp

import (
	"context"
	"testing"

	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// TestCancelAfterCommandDoesNotBreakNext: a context cancelled while a
// command is still running, but after its whole answer is buffered, lets the
// command finish; its cancellation must not reach the next command, which
// runs under a live context of its own.
func TestCancelAfterCommandDoesNotBreakNext(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 5)
	c := dial(t, Config{Addr: s.Addr()})
	if _, err := c.Group(context.Background(), testGroup); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		err := c.OverLines(ctx, 1, 5, func([]byte) error {
			cancel()
			return nil
		})
		cancel()
		if err != nil || c.Err() != nil {
			// The cancellation won the race to the socket: that command
			// failed, which is its right. Start over on a new connection.
			c = dial(t, Config{Addr: s.Addr()})
			if _, err := c.Group(context.Background(), testGroup); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := c.Date(context.Background()); err != nil {
			t.Fatalf("round %d: command after a finished, then cancelled one: %v", i, err)
		}
	}
}
