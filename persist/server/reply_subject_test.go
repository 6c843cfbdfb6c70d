package server

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
)

// The requester chooses the reply subject and NATS lets a server
// (allow_responses) publish there whatever its own permissions. A reply
// subject inside the service's namespace would make the server publish, as
// itself, on another scope's feed or API subject: a tenant could forge a
// change on another tenant's feed. The server must not answer there.
func TestReplySubjectInServiceNamespaceIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.set("s", "forged", nil)
	sub, err := h.nc.SubscribeSync(bus.DefaultService + ".>")
	if err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{
		bus.ScopeSubject(bus.DefaultService, "victim", "feed", "s"),
		bus.APISubject(bus.DefaultService, "victim", "0"),
		bus.IDSubject(bus.DefaultService, "victim"),
	} {
		m := h.msg(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil)
		m.Reply = reply
		if err := h.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// A normal request after them: the server has handled the others.
	h.ok(persist.CmdGet, "s", map[string]string{persist.HdrSeq: "1"}, nil)
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err == nats.ErrTimeout {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if bus.SubjectToken(m.Subject, 2) == "api" && bus.SubjectToken(m.Subject, 1) == h.scope {
			continue // our own requests
		}
		t.Fatalf("server published on %s (a reply subject in its namespace): %q", m.Subject, m.Data)
	}
}
