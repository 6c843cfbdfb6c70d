package nntp

import (
	"context"
	"testing"

	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// TestPoolCountsCommandsAndBytes: the pool's connections count each
// command and the bytes they read, and a lone connection counts nothing.
func TestPoolCountsCommandsAndBytes(t *testing.T) {
	t.Parallel()
	s := startServer(t, nntptest.Config{}, 1000)
	p := newPool(t, PoolConfig{Conn: Config{Addr: s.Addr()}, Size: 1})
	before := p.Stats()
	lines := 0
	err := p.Do(context.Background(), func(c *Conn) error {
		if _, err := c.Group(context.Background(), testGroup); err != nil {
			return err
		}
		return c.Over(context.Background(), 1, 100, func(Overview) error { lines++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if got := st.Commands - before.Commands; got < 2 {
		t.Errorf("%d commands counted, want at least GROUP and OVER", got)
	}
	// Every overview line is more than 10 bytes on the wire.
	if got := st.BytesRead - before.BytesRead; got < int64(10*lines) || lines == 0 {
		t.Errorf("%d bytes read for %d overview lines", got, lines)
	}
}
