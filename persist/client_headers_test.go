package persist_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
)

// The server tells user headers from protocol ones ignoring case, so the
// client must refuse "sy-..." and "nats-..." too: a set would otherwise
// succeed with the header silently dropped. NATS's status headers are
// reserved too: a message stored with "Status: 503" came back from get as
// a reply that read "no responders", so it could never be read.
func TestClientReservedHeaderAnyCase(t *testing.T) {
	t.Parallel()
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	s := c.Stream(h.scope, "s")
	for _, k := range []string{"sy-note", "SY-NOTE", "nats-note", "Status", "status", "Description"} {
		_, err := s.Set(ctx, []byte("v"), persist.SetOptions{Headers: map[string]string{k: "x"}})
		if !errors.Is(err, persist.ErrBadRequest) {
			t.Errorf("set with header %q: %v, want bad-request", k, err)
		}
	}
	ev := &events{}
	l := openLocal(t, c, "s", ev)
	if _, err := l.Publish([]byte("v"), persist.LocalPublishOptions{Headers: map[string]string{"sy-note": "x"}}); !errors.Is(err, persist.ErrBadRequest) {
		t.Errorf("publish with header sy-note: %v, want bad-request", err)
	}
}
