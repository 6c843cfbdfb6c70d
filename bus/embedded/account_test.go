package embedded

import (
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
)

// TestAuthConfAccountHasNoJetStream: the users of `auth init`'s file log in
// to the account auth.Account, which has JetStream disabled even on a server
// that runs JetStream: a reply subject a tenant points at $JS.API reaches
// nothing that acts on it.
func TestAuthConfAccountHasNoJetStream(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	users, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Start(Config{Port: RandomPort, JetStream: true, StoreDir: t.TempDir(), AuthConf: filepath.Join(dir, auth.ConfFile)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	if !e.srv.JetStreamEnabled() {
		t.Fatal("JetStream is off on the server: the test proves nothing")
	}
	acc, err := e.srv.LookupAccount(auth.Account)
	if err != nil {
		t.Fatalf("account %s: %v", auth.Account, err)
	}
	if acc.JetStreamEnabled() {
		t.Fatalf("account %s has JetStream enabled", auth.Account)
	}
	for _, u := range users {
		opts, err := auth.ClientOptions(auth.CredsFile(dir, u.Name), "")
		if err != nil {
			t.Fatal(err)
		}
		nc, err := bus.Connect(e.ClientURL(), bus.ConnectConfig{Name: u.Name, Options: append(opts, nats.NoReconnect())})
		if err != nil {
			t.Fatalf("connect as %s: %v", u.Name, err)
		}
		t.Cleanup(nc.Close)
	}
	cz, err := e.srv.Connz(&server.ConnzOptions{Username: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(cz.Conns) != len(users) {
		t.Fatalf("%d connections, want %d", len(cz.Conns), len(users))
	}
	for _, c := range cz.Conns {
		if c.Account != auth.Account {
			t.Errorf("user %s logged in to account %q, want %s", c.AuthorizedUser, c.Account, auth.Account)
		}
	}
}
