package watch

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/web"
)

// TestWatchAuth: wrong or missing credentials are 401, a tenant outside its
// scopes 403, inside it (Basic auth, header or query API key) a watch.
func TestWatchAuth(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	accts := []web.Account{
		{Principal: web.Principal{Name: "acme", Scopes: []string{"account-a"}}, Password: "acme-pw", APIKeys: []string{"acme-key"}},
		{Principal: web.Principal{Name: "client", AllScopes: true}, Password: "client-pw"},
	}
	_, ts := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) { cfg.Authorizer = web.Accounts(accts) })
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
		{"tenant key in the header", "account-a", http.Header{web.APIKeyHeader: {"acme-key"}}, "", http.StatusSwitchingProtocols},
		{"client anywhere", "account-b", basic("client", "client-pw"), "", http.StatusSwitchingProtocols},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := params(c.scope, "log", 1)
			if c.key != "" {
				q.Set(web.APIKeyParam, c.key)
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

// TestWatchOrigin: a page whose Origin is not one of the server's hosts is
// refused before any credentials are asked for, even when its Origin
// names the Host it sent (DNS rebinding); a loopback or configured host's
// page, a pattern's, and a client without Origin are served.
func TestWatchOrigin(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	hosts, err := web.NewHosts("127.0.0.1:0", "box.lan")
	if err != nil {
		t.Fatal(err)
	}
	_, ts := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) {
		cfg.Hosts = hosts
		cfg.OriginPatterns = []string{"*.example.org"}
	})
	for _, c := range []struct {
		name, origin string
		want         int
	}{
		{"no origin", "", http.StatusSwitchingProtocols},
		{"loopback page", "http://localhost:8080", http.StatusSwitchingProtocols},
		{"configured host's page", "https://box.lan", http.StatusSwitchingProtocols},
		{"pattern", "https://app.example.org", http.StatusSwitchingProtocols},
		{"rebinding page", "http://evil.example", http.StatusForbidden},
		{"null origin", "null", http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h http.Header
			if c.origin != "" {
				h = http.Header{"Origin": {c.origin}}
			}
			ws, resp, err := websocket.Dial(t.Context(), watchURL(ts, params("hub", "log", 1)), &websocket.DialOptions{HTTPHeader: h})
			if ws != nil {
				defer ws.CloseNow()
			}
			if resp == nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode != c.want {
				t.Fatalf("status %d (%v), want %d", resp.StatusCode, err, c.want)
			}
		})
	}
}

// TestWatchTenantConnections: a principal with TenantConnections open is
// refused the next one (429, the body naming the bound), whether it signs
// in with its password or a key; another principal is not; a connection
// that ends, closed or dropped, gives its place back; the anonymous
// principal of an open gateway is not bounded.
// (Was: one tenant could open any number of sockets.)
func TestWatchTenantConnections(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	const bound = 3
	accts := []web.Account{
		{Principal: web.Principal{Name: "acme", Scopes: []string{"account-a"}}, Password: "acme-pw", APIKeys: []string{"acme-key"}},
		{Principal: web.Principal{Name: "beta", Scopes: []string{"account-b"}}, Password: "beta-pw"},
	}
	g, ts := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) {
		cfg.Authorizer = web.Accounts(accts)
		cfg.TenantConnections = bound
	})
	basic := func(user, pass string) *websocket.DialOptions {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pass)
		return &websocket.DialOptions{HTTPHeader: r.Header}
	}
	acme := func(i int) *websocket.DialOptions {
		if i%2 == 0 {
			return basic("acme", "acme-pw")
		}
		return &websocket.DialOptions{HTTPHeader: http.Header{web.APIKeyHeader: {"acme-key"}}}
	}
	ready := func(ws *websocket.Conn) {
		t.Helper()
		if m := mustRead(t, ws); m.Type != TypeReady {
			t.Fatalf("first message %+v, want ready", m)
		}
	}
	refused := func(opts *websocket.DialOptions) {
		t.Helper()
		ws, resp, err := websocket.Dial(t.Context(), watchURL(ts, params("account-a", "log", 1)), opts)
		if ws != nil {
			_ = ws.CloseNow()
			t.Fatalf("connection %d of a tenant bounded to %d was upgraded", bound+1, bound)
		}
		if resp == nil {
			t.Fatalf("no response: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.HasPrefix(string(body), CodeTooManyConnections+": acme has 3 ") {
			t.Fatalf("connection %d: HTTP %d %q, want 429 starting with %q", bound+1, resp.StatusCode, body, CodeTooManyConnections+": acme has 3 ")
		}
	}
	placeBack := func(want int) {
		t.Helper()
		testwait.For(t, "acme's connection to give its place back", func() bool {
			return g.limit.Open("acme") == want
		})
	}

	var conns []*websocket.Conn
	for i := range bound {
		ws := dial(t, ts, params("account-a", "log", 1), acme(i))
		ready(ws)
		conns = append(conns, ws)
	}
	refused(acme(0))
	refused(acme(1))
	if got := g.Stats().TenantRefusals; got != 2 {
		t.Errorf("TenantRefusals %d, want 2", got)
	}
	ready(dial(t, ts, params("account-b", "log", 1), basic("beta", "beta-pw")))

	// Closed with a handshake, then dropped: each gives its place back.
	if err := conns[0].Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	placeBack(bound - 1)
	ready(dial(t, ts, params("account-a", "log", 1), acme(0)))
	refused(acme(0))
	_ = conns[1].CloseNow()
	placeBack(bound - 1)
	ready(dial(t, ts, params("account-a", "log", 1), acme(1)))

	// On an open gateway everyone is web.Open's one anonymous principal:
	// no bound (it would be the whole gateway's).
	_, open := gateway(t, env.Client(), func(cfg *Config, _ *httptest.Server) { cfg.TenantConnections = 1 })
	for range 3 {
		ready(dial(t, open, params("hub", "log", 1), nil))
	}
}
