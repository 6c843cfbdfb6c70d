package persist

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The server tells user headers from protocol ones ignoring case, so the
// client must refuse "sy-..." and "nats-..." too: a set would otherwise
// succeed with the header silently dropped.
func TestClientReservedHeaderAnyCase(t *testing.T) {
	h, c := newClientHarness(t, nil, nil, 5*time.Second)
	ctx := context.Background()
	s := c.Stream(h.scope, "s")
	for _, k := range []string{"sy-note", "SY-NOTE", "nats-note"} {
		_, err := s.Set(ctx, []byte("v"), SetOptions{Headers: map[string]string{k: "x"}})
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("set with header %q: %v, want bad-request", k, err)
		}
	}
	ev := &events{}
	l := openLocal(t, c, "s", ev)
	if _, err := l.Publish([]byte("v"), LocalPublishOptions{Headers: map[string]string{"sy-note": "x"}}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("publish with header sy-note: %v, want bad-request", err)
	}
}
