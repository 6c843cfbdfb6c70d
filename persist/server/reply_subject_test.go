package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
)

// The requester chooses the reply subject and NATS lets a server
// (allow_responses) publish there whatever its own permissions. Anywhere but
// an inbox the answer would be a publish the requester aimed: a JetStream
// API call ($JS.API.STREAM.CREATE with a body the tenant stored), another
// scope's feed or API, a subject a tenant reads. The server answers only
// inboxes; a request without a reply subject, read or write, is dropped.
// Each refusal is counted, and none publishes anything or writes.
func TestReplySubjectMustBeAnInbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "first", nil)
	sub, err := h.nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	replies := []string{
		"$JS.API.STREAM.CREATE.steal",
		bus.ScopeSubject(bus.DefaultService, "victim", "feed", "s"),
		bus.APISubject(bus.DefaultService, "victim", "0"),
		bus.IDSubject(bus.DefaultService, "victim"),
		"news.today",
		"_INBOX_bob",
		"_INBOXX.x",
		"_INBOX..x",
		"", // no reply subject at all
	}
	sent := 0
	for _, reply := range replies {
		for _, m := range []*nats.Msg{
			h.msg(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil),
			h.msg(persist.CmdSet, "s", nil, []byte("unanswerable")),
		} {
			m.Reply = reply
			if err := h.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			sent++
		}
	}
	// A last request answered on an inbox: the server handles requests in
	// order on arrival and publishes its answers in order, so once its
	// answer is read on the subscription, anything it answered before is.
	last := h.msg(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil)
	last.Reply = h.nc.NewInbox()
	if err := h.nc.PublishMsg(last); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("the answer to the last request did not come: %v", err)
		}
		if m.Subject == last.Reply {
			if string(m.Data) != "first" {
				t.Fatalf("last get answered %q, want the only value written", m.Data)
			}
			break
		}
		if strings.HasPrefix(m.Subject, bus.APISubject(bus.DefaultService, h.scope, "")) {
			continue // the test's own requests
		}
		t.Fatalf("server published on %s (a reply subject that is not an inbox): %q", m.Subject, m.Data)
	}
	if got := h.srv.Stats().ReplyRefused; got != uint64(sent) {
		t.Fatalf("Stats().ReplyRefused = %d, want %d", got, sent)
	}
	if inv := h.inventory("s"); inv.Count != 1 || inv.Seq != 1 {
		t.Fatalf("stream holds %d messages (last seq %d), want 1: a write nobody could be told of was committed", inv.Count, inv.Seq)
	}
}
