package watch

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
)

// TestWatchAuth: wrong or missing credentials are 401, a tenant outside its
// scopes 403, inside it (Basic auth, header or query API key) a watch.
func TestWatchAuth(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	accts := []Account{
		{Principal: Principal{Name: "acme", Scopes: []string{"account-a"}}, Password: "acme-pw", APIKeys: []string{"acme-key"}},
		{Principal: Principal{Name: "client", AllScopes: true}, Password: "client-pw"},
	}
	_, ts := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) { cfg.Authorizer = Accounts(accts) })
	basic := func(user, pass string) http.Header {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pass)
		return r.Header
	}
	for _, c := range []struct {
		name   string
		scope  string
		header http.Header
		key    string
		want   int
	}{
		{"no credentials", "account-a", nil, "", http.StatusUnauthorized},
		{"wrong password", "account-a", basic("acme", "nope"), "", http.StatusUnauthorized},
		{"unknown user", "account-a", basic("mallory", "acme-pw"), "", http.StatusUnauthorized},
		{"unknown key", "account-a", nil, "nope", http.StatusUnauthorized},
		{"tenant outside its scope", "account-b", basic("acme", "acme-pw"), "", http.StatusForbidden},
		{"tenant key outside its scope", "account-b", nil, "acme-key", http.StatusForbidden},
		{"tenant inside its scope", "account-a", basic("acme", "acme-pw"), "", http.StatusSwitchingProtocols},
		{"tenant key in the query", "account-a", nil, "acme-key", http.StatusSwitchingProtocols},
		{"tenant key in the header", "account-a", http.Header{APIKeyHeader: {"acme-key"}}, "", http.StatusSwitchingProtocols},
		{"client anywhere", "account-b", basic("client", "client-pw"), "", http.StatusSwitchingProtocols},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := params(c.scope, "log", 1)
			if c.key != "" {
				q.Set(APIKeyParam, c.key)
			}
			ctx := t.Context()
			ws, resp, err := websocket.Dial(ctx, watchURL(ts, q), &websocket.DialOptions{HTTPHeader: c.header})
			if ws != nil {
				defer ws.CloseNow()
			}
			if resp == nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode != c.want {
				t.Fatalf("status %d (%v), want %d", resp.StatusCode, err, c.want)
			}
			if c.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if ws != nil {
				if m := mustRead(t, ws); m.Type != TypeReady {
					t.Errorf("first message %+v, want ready", m)
				}
			}
		})
	}
}

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
