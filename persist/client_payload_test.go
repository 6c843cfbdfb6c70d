package persist_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/persist"
)

// A value over the NATS server's max payload (8 MiB on the embedded server)
// is too-large, as a value over the stream's limits is, and not
// nats.ErrMaxPayload; nothing is sent, so nothing is written.
func TestClientRefusesOverMaxPayload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limit := h.Conn().MaxPayload()
	big := make([]byte, 9<<20)
	if int64(len(big)) <= limit {
		t.Fatalf("a %d-byte value is not over the max payload of %d", len(big), limit)
	}
	s := h.stream("big")
	wantTooLarge := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, persist.ErrTooLarge) || errors.Is(err, nats.ErrMaxPayload) {
			t.Errorf("%s: %v, want too-large", what, err)
		}
	}
	_, err := s.Set(ctx, big, persist.SetOptions{Key: "k"})
	wantTooLarge("set", err)
	_, err = s.SetMany(ctx, []persist.Entry{{Value: []byte("small")}, {Value: big}})
	wantTooLarge("setMany", err)
	_, err = h.Client().KV(h.scope, "big").Set(ctx, "k", big, persist.SetOptions{})
	wantTooLarge("kv set", err)
	// Just under the limit still goes through.
	if _, err := s.Set(ctx, make([]byte, limit-4096), persist.SetOptions{}); err != nil {
		t.Fatalf("a value under the max payload: %v", err)
	}
	inv, err := s.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Count != 1 {
		t.Fatalf("%d messages, want only the one under the limit", inv.Count)
	}
}

// The client refuses a desc the server would refuse, and one encoding/json
// would send converted; the stream keeps its config.
func TestClientRefusesBadDesc(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := h.stream("d")
	old := "old"
	if _, err := s.UpdateConfig(ctx, persist.ConfigUpdate{Desc: &old}); err != nil {
		t.Fatal(err)
	}
	long, bad := strings.Repeat("d", persist.MaxDescBytes+1), "d\xff"
	if _, err := s.UpdateConfig(ctx, persist.ConfigUpdate{Desc: &long}); !errors.Is(err, persist.ErrTooLarge) {
		t.Errorf("a desc over %d bytes: %v, want too-large", persist.MaxDescBytes, err)
	}
	if _, err := s.UpdateConfig(ctx, persist.ConfigUpdate{Desc: &bad}); !errors.Is(err, persist.ErrBadRequest) {
		t.Errorf("a desc that is not UTF-8: %v, want bad-request", err)
	}
	c, err := s.Config(ctx)
	if err != nil || c.Desc != old {
		t.Fatalf("config after refused updates: desc %q, %v", c.Desc, err)
	}
}
