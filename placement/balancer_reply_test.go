package placement

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testnats"
)

// A requester picks the reply subject and allow_responses lets the balancer
// publish there: it answers only an inbox, never $JS.API.…, a feed, an API
// subject or any other subject a tenant might aim it at, and counts what it
// leaves unanswered (a question without a reply subject too).
func TestBalancerAnswersOnlyInboxes(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	b := startBalancer(t, nc, BalancerConfig{Placement: Modulo})
	sub, err := nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	replies := []string{"$JS.API.STREAM.CREATE.steal", "persist.victim.feed.s", "persist.victim.api.0", "news.today", "_INBOX_bob", "_INBOXX.x", ""}
	for _, reply := range replies {
		if err := nc.PublishMsg(&nats.Msg{Subject: "persist.hub.id", Reply: reply}); err != nil {
			t.Fatal(err)
		}
	}
	// The balancer serves questions in order: once the answer to a last
	// one on an inbox is read, any answer to those before it would be too.
	last := nc.NewInbox()
	if err := nc.PublishRequest("persist.hub.id", last, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("no answer to the last question: %v", err)
		}
		if m.Subject == last {
			break
		}
		if m.Subject == "persist.hub.id" {
			continue // the test's own questions
		}
		t.Fatalf("balancer published on %s: %q", m.Subject, m.Data)
	}
	if got := b.ReplyRefused(); got != uint64(len(replies)) {
		t.Fatalf("ReplyRefused() = %d, want %d", got, len(replies))
	}
	if answers, _ := b.Stats(); answers != 1 {
		t.Fatalf("answers = %d, want 1", answers)
	}
}

// An invalid scope gets bad-request in the persist wire's error form (an
// Sy-Error header with the code, the message as body), not an owner id.
func TestBalancerRefusesInvalidScope(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	startBalancer(t, nc, BalancerConfig{})
	for _, scope := range []string{"SEC", "-x", "a\x1bb"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		reply, err := bus.Request(ctx, nc, nats.NewMsg("persist."+scope+".id"))
		cancel()
		if err != nil {
			t.Fatalf("%q: %v", scope, err)
		}
		if got := reply.Header.Get(bus.HdrError); got != bus.CodeBadRequest {
			t.Fatalf("scope %q answered %q (error %q), want bad-request", scope, reply.Data, got)
		}
	}
	if got, err := ask(t, nc, "persist.hub.id"); err != nil || got != Rendezvous([]string{"0", "1", "2", "3"}, "hub") {
		t.Fatalf("valid scope after: %q, %v", got, err)
	}
}
