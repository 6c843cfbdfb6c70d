package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// A TTL under a millisecond is still a TTL: the client rounds it up to the
// wire's whole milliseconds instead of sending 0 (which the server refuses)
// or, in a LocalStream, dropping it (which stores the message for ever).
func TestClientSubMillisecondTTL(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	h.config("s", `{"allow_msg_ttl":true}`)
	ctx := context.Background()
	s := c.Stream(h.scope, "s")

	res, err := s.Set(ctx, []byte("v"), persist.SetOptions{TTL: 500 * time.Microsecond})
	if err != nil {
		t.Fatalf("set with a 500µs TTL: %v", err)
	}
	m, err := s.Get(ctx, res.Seq)
	if err == nil && m.TTL != time.Millisecond {
		t.Fatalf("stored ttl %s, want 1ms", m.TTL)
	}

	ev := &events{}
	l := openLocal(t, c, "s", ev)
	pub, err := l.Publish([]byte("w"), persist.LocalPublishOptions{TTL: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	testwait.For(t, "the local message saved", func() bool {
		for _, m := range l.Messages() {
			if m.ID == pub.ID && m.Seq != 0 {
				seq = m.Seq
				return true
			}
		}
		return false
	})
	// The message may already be gone (1 ms TTL); if it is still there it
	// must carry its TTL.
	if m, err := s.Get(ctx, seq); err == nil && m.TTL != time.Millisecond {
		t.Fatalf("local stream stored ttl %s, want 1ms", m.TTL)
	}
}
