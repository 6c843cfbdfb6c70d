package web

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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

// TestAccountsWithoutLoginsSaySo: when no account has a password or key
// (an auth directory of NKey users), every request is refused 401 with a
// message that says no one can log in and what to do, not one asking for
// Basic auth or an API key that nobody holds.
func TestAccountsWithoutLoginsSaySo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, true); err != nil {
		t.Fatal(err)
	}
	accts, err := AuthDirAccounts(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	authz := Accounts(accts)
	for name, set := range map[string]func(*http.Request){
		"none":   func(*http.Request) {},
		"basic":  func(r *http.Request) { r.SetBasicAuth("client", "pw") },
		"header": func(r *http.Request) { r.Header.Set(APIKeyHeader, "k") },
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		set(r)
		rec := httptest.NewRecorder()
		if _, ok := Authorize(rec, r, authz); ok {
			t.Fatalf("%s: admitted", name)
		}
		body := rec.Body.String()
		if rec.Code != http.StatusUnauthorized || !strings.Contains(body, "no user can log in") || !strings.Contains(body, "without --nkey") {
			t.Errorf("%s: %d %q, want 401 saying no user can log in and naming --nkey", name, rec.Code, body)
		}
	}
}
