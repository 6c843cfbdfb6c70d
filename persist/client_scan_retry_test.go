package persist_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// GetAll retries a balancer that did not answer, like every other request
// (ClientConfig.Attempts), instead of failing on the first try.
func TestScanRetriesOwnerLookup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "a", nil)
	// A balancer that ignores its first question.
	var asked atomic.Int32
	bal := testnats.Conn(t, h.NATS)
	sub, err := bal.Subscribe(bus.IDSubject(bus.DefaultService, h.scope), func(m *nats.Msg) {
		if asked.Add(1) > 1 {
			_ = m.Respond([]byte("0"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := bal.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.NATS), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, err := c.Stream(h.scope, "s").GetAll(context.Background(), persist.Range{})
	if err != nil {
		t.Fatalf("getAll after one unanswered balancer request: %v", err)
	}
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
}
