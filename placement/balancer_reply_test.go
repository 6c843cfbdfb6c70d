package placement

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
)

// A requester picks the reply subject and allow_responses lets the balancer
// publish there: it must not answer on a subject in the service namespace
// (another scope's feed or API), where it would publish as a trusted role.
func TestBalancerIgnoresReplyInServiceNamespace(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	startBalancer(t, nc, BalancerConfig{Placement: Modulo})
	sub, err := nc.SubscribeSync("persist.victim.feed.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("persist.hub.id", "persist.victim.feed.s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(t, nc, "persist.hub.id"); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(200 * time.Millisecond); err != nats.ErrTimeout {
		t.Fatalf("balancer answered on %v: err %v", m, err)
	}
}
