package placement

import (
	"context"
	"strings"
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

// TestBalancerRefusesInboxService: a balancer whose service is named like
// an inbox is refused at NewBalancer. (Was: it started, and a question
// "_INBOX.a.id" with reply subject "_INBOX.b.feed.log" (an inbox by
// bus.IsInbox) was answered there: the balancer's answer published on
// another scope's feed.)
func TestBalancerRefusesInboxService(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	for _, service := range []string{"_INBOX", "_INBOX_bob"} {
		if _, err := NewBalancer(BalancerConfig{Conn: nc, IDs: []string{"0"}, Service: service}); err == nil {
			t.Errorf("service %q: accepted", service)
		}
	}
	if _, err := NewBalancer(BalancerConfig{Conn: nc, IDs: []string{"0"}, Service: "_INBOXES"}); err != nil {
		t.Errorf("service _INBOXES (no inbox): %v", err)
	}
}

// TestBalancerSurvivesOddQuestions: questions an outside prober can send,
// wildcard and oversized scopes, bytes outside ASCII, a body of megabytes
// and headers it does not read, are each answered (bad-request where the
// scope is no scope) and the balancer goes on answering.
func TestBalancerSurvivesOddQuestions(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	b := startBalancer(t, nc, BalancerConfig{})
	big := nats.NewMsg("persist.hub.id")
	big.Data = make([]byte, 4<<20)
	for i := 0; i < 100; i++ {
		big.Header.Add("X-Junk", strings.Repeat("j", 100))
	}
	for _, tc := range []struct {
		msg *nats.Msg
		bad bool
	}{
		{nats.NewMsg("persist.*.id"), true},
		{nats.NewMsg("persist.>.id"), true},
		{nats.NewMsg("persist." + strings.Repeat("a", 128) + ".id"), false},
		{nats.NewMsg("persist." + strings.Repeat("a", 129) + ".id"), true},
		{nats.NewMsg("persist." + strings.Repeat("a", 3000) + ".id"), true},
		{nats.NewMsg("persist.h\u00fcb.id"), true},
		{nats.NewMsg("persist.\xff\xfe.id"), true},
		{nats.NewMsg("persist.a\"b\\c.id"), true},
		{big, false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		reply, err := bus.Request(ctx, nc, tc.msg)
		cancel()
		if err != nil {
			t.Fatalf("%.60q: %v", tc.msg.Subject, err)
		}
		if bad := reply.Header.Get(bus.HdrError) == bus.CodeBadRequest; bad != tc.bad {
			t.Fatalf("%.60q answered %.80q (error %q), want bad-request %v", tc.msg.Subject, reply.Data, reply.Header.Get(bus.HdrError), tc.bad)
		}
	}
	if got, err := ask(t, nc, "persist.hub.id"); err != nil || got != b.Owner("hub") {
		t.Fatalf("a question after the odd ones: %q, %v", got, err)
	}
}

// TestBalancerRefusalIsShort: the bad-request of a long scope (a token of
// thousands of bytes, the most a NATS subject can carry) stays within an
// error message's 1,024 bytes (docs/wire.md), non-UTF-8 bytes escaped.
// (Was: the whole token quoted, up to four times its length.)
func TestBalancerRefusalIsShort(t *testing.T) {
	t.Parallel()
	_, nc := testnats.Start(t)
	startBalancer(t, nc, BalancerConfig{})
	for _, scope := range []string{strings.Repeat("a", 129), strings.Repeat("A", 3000), strings.Repeat("\xff", 1000)} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		reply, err := bus.Request(ctx, nc, nats.NewMsg("persist."+scope+".id"))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if reply.Header.Get(bus.HdrError) != bus.CodeBadRequest || len(reply.Data) > 1024 {
			t.Fatalf("a %d-byte scope answered %d bytes (error %q): %.100q", len(scope), len(reply.Data), reply.Header.Get(bus.HdrError), reply.Data)
		}
	}
}
