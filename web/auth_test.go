package web

import (
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/auth"
)

// TestAuthDirAccounts: the accounts of an auth directory grant what its
// nats-server configuration grants: the client every scope, a tenant its
// own, the other roles none; passwords are those of the creds files.
func TestAuthDirAccounts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a", "account-c"}}}, false); err != nil {
		t.Fatal(err)
	}
	accts, err := AuthDirAccounts(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Account{}
	for _, a := range accts {
		got[a.Name] = a
	}
	if a := got["client"]; !a.AllScopes {
		t.Errorf("client: %+v, want every scope", a.Principal)
	}
	if a := got["acme"]; a.AllScopes || !slices.Equal(a.Scopes, []string{"account-a", "account-c"}) {
		t.Errorf("acme: %+v, want account-a, account-c", a.Principal)
	}
	for _, n := range []string{"server-0", "balancer"} {
		if a := got[n]; a.AllScopes || len(a.Scopes) > 0 {
			t.Errorf("%s: %+v, want no scope", n, a.Principal)
		}
	}
	c, err := auth.LoadCreds(auth.CredsFile(dir, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if got["acme"].Password != c.Password {
		t.Error("acme's password is not its creds file's")
	}
	r := httptest.NewRequest("GET", "/ws/watch", nil)
	r.SetBasicAuth("acme", c.Password)
	if p, err := Accounts(accts)(r); err != nil || !p.CanRead("account-c") || p.CanRead("account-b") {
		t.Errorf("acme logs in as %+v, %v", p, err)
	}
}

// TestAuthDirAccountsNkey: a directory of NKey users has no password to
// check over HTTP, so it gives no accounts, and no error (up --auth of such
// a directory starts its HTTP side), and the Authorizer refuses everyone.
func TestAuthDirAccountsNkey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}}, true); err != nil {
		t.Fatal(err)
	}
	accts, err := AuthDirAccounts(dir, "")
	if err != nil || len(accts) != 0 {
		t.Fatalf("AuthDirAccounts = %d accounts, %v; want none, no error", len(accts), err)
	}
	r := httptest.NewRequest("GET", "/ws/watch", nil)
	r.SetBasicAuth("client", "")
	if p, err := Accounts(accts)(r); err == nil {
		t.Errorf("an empty password logs in as %+v", p)
	}
}
