package bus_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/testnats"
)

func TestIsInbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		subject string
		want    bool
	}{
		{"default inbox", "_INBOX.abc", true},
		{"default response inbox", "_INBOX.abc.def", true},
		{"user inbox", "_INBOX_bob.abc", true},
		{"user response inbox", "_INBOX_bob.abc.1", true},
		{"auth init prefix", auth.InboxPrefix("acme") + ".x", true},
		{"JetStream API", "$JS.API.STREAM.CREATE.x", false},
		{"JetStream API under an inbox-looking name", "$JS.API._INBOX.x", false},
		{"persist API", "persist.x.api.0", false},
		{"persist feed", "persist.x.feed.s", false},
		{"system account", "$SYS.REQ.SERVER.PING", false},
		{"user prefix without a dot", "_INBOX_bob", false},
		{"default prefix without a dot", "_INBOX", false},
		{"nothing after the prefix", "_INBOX.", false},
		{"nothing after the user prefix", "_INBOX_bob.", false},
		{"empty user name", "_INBOX_.x", false},
		{"longer root", "_INBOXX.x", false},
		{"root inside a token", "x_INBOX.x", false},
		{"empty token inside", "_INBOX..x", false},
		{"empty last token", "_INBOX.x.", false},
		{"empty", "", false},
		{"wildcard", "_INBOX.*", false},
		{"full wildcard", "_INBOX.>", false},
		{"wildcard in the name", "_INBOX_*.x", false},
		{"space", "_INBOX.a b", false},
		{"control character", "_INBOX.a\x1b", false},
		{"plain subject", "news.today", false},
	} {
		if got := bus.IsInbox(tc.subject); got != tc.want {
			t.Errorf("%s: IsInbox(%q) = %v, want %v", tc.name, tc.subject, got, tc.want)
		}
	}
}

// TestInboxesOfClientsAreInboxes: the reply subjects nats.go makes, with the
// default prefix (the nats CLI's) and with a user's prefix (bus.Connect with
// a creds file), are all accepted.
func TestInboxesOfClientsAreInboxes(t *testing.T) {
	t.Parallel()
	srv, _ := testnats.Start(t)
	for _, prefix := range []string{"", auth.InboxPrefix("acme")} {
		var opts []nats.Option
		if prefix != "" {
			opts = append(opts, nats.CustomInboxPrefix(prefix))
		}
		nc, err := bus.Connect(srv.ClientURL(), bus.ConnectConfig{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		for _, inbox := range []string{nc.NewInbox(), nc.NewRespInbox()} {
			if !bus.IsInbox(inbox) {
				t.Errorf("IsInbox(%q) = false for an inbox nats.go made (prefix %q)", inbox, prefix)
			}
		}
		nc.Close()
	}
}

// TestValidService: a service whose subjects would pass IsInbox is no
// service. (Was: any token, "_INBOX" included, under which responders
// took every service subject for a reply inbox.)
func TestValidService(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"persist", "_INBOXES", "_inbox", "INBOX", "svc$"} {
		if err := bus.ValidService(s); err != nil {
			t.Errorf("ValidService(%q) = %v", s, err)
		}
	}
	// (Was: "$SYS", "$JS" and the like were taken: NATS's own subject
	// spaces.)
	for _, s := range []string{"", "a.b", "*", ">", "a b", "_INBOX", "_INBOX_acme", "_INBOX_client", "$svc", "$SYS", "$JS"} {
		if err := bus.ValidService(s); err == nil {
			t.Errorf("ValidService(%q) accepted", s)
		}
	}
}
