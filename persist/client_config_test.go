package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
)

// A negative MaxAge is refused and changes nothing. The client sent it
// as max_age 0, "no limit", which silently lifted the stream's limit.
func TestUpdateConfigNegativeMaxAge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	s := h.stream("neg-age")
	ctx := context.Background()
	day := 24 * time.Hour
	if _, err := s.UpdateConfig(ctx, persist.ConfigUpdate{MaxAge: &day}); err != nil {
		t.Fatal(err)
	}
	neg := -time.Hour
	cfg, err := s.UpdateConfig(ctx, persist.ConfigUpdate{MaxAge: &neg})
	if err == nil {
		got, _ := s.Config(ctx)
		t.Fatalf("UpdateConfig(MaxAge: -1h) succeeded: answered max_age %v, stream now has max_age %v (was 24h); want bad-request and no change", cfg.MaxAge, got.MaxAge)
	}
	if persist.CodeOf(err) != persist.CodeBadRequest {
		t.Fatalf("err %v, want bad-request", err)
	}
}

// A client refuses a service named like a reply inbox: servers answer on
// any inbox, and every subject of such a service would pass for one.
// (Was: accepted.)
func TestClientRefusesInboxService(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, svc := range []string{"_INBOX", "_INBOX_acme"} {
		if c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.NATS), Service: svc}); err == nil {
			_ = c.Close()
			t.Errorf("service %q accepted", svc)
		}
	}
}
