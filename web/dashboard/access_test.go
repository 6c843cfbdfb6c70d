package dashboard

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/web"
)

// TestDashboardIsTheOperators: the dashboard shows the whole process
// (the usenet scope's newest releases, the work, the fleet), so only a
// principal that reads every scope gets it; a tenant confined to its own
// scopes is 403 on the page and its WebSocket. It was admitted as any bus
// user, and read the releases it is refused everywhere else.
func TestDashboardIsTheOperators(t *testing.T) {
	t.Parallel()
	authz := web.Accounts([]web.Account{
		{Principal: web.Principal{Name: "client", AllScopes: true}, Password: "client-pw"},
		{Principal: web.Principal{Name: "acme", Scopes: []string{"account-a"}}, Password: "acme-pw"},
	})
	src := Funcs{ReleasesFunc: func(context.Context, int) (*Releases, error) {
		return &Releases{Total: 1, Items: []Release{{ID: "r1", Name: "Usenet.Scope.Only.2026"}}}, nil
	}}
	_, base := startHub(t, Config{Source: src, Every: 5 * time.Millisecond, Authorizer: authz})
	for _, who := range []struct {
		user, pass string
		want       int
	}{{"acme", "acme-pw", http.StatusForbidden}, {"client", "client-pw", http.StatusOK}} {
		req, err := http.NewRequest("GET", base+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(who.user, who.pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != who.want {
			t.Errorf("GET / as %s: %d, want %d", who.user, resp.StatusCode, who.want)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		c, wsResp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/dashboard",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {req.Header.Get("Authorization")}}})
		cancel()
		switch {
		case who.want == http.StatusOK && err != nil:
			t.Errorf("/ws/dashboard as %s: %v", who.user, err)
		case who.want != http.StatusOK && (wsResp == nil || wsResp.StatusCode != who.want):
			t.Errorf("/ws/dashboard as %s: %v, want %d", who.user, err, who.want)
		}
		if c != nil {
			c.CloseNow()
		}
	}
}

// TestDashboardForeignOriginBeforeCredentials: a foreign page is refused
// 403 on /ws/dashboard before credentials are asked for, as on /ws/watch.
// It was answered 401 with a Basic challenge, the Origin checked only
// after the credentials.
func TestDashboardForeignOriginBeforeCredentials(t *testing.T) {
	t.Parallel()
	authz := web.Accounts([]web.Account{{Principal: web.Principal{Name: "client", AllScopes: true}, Password: "pw"}})
	_, base := startHub(t, Config{Source: Funcs{}, Authorizer: authz})
	ws, resp, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(base, "http")+"/ws/dashboard",
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if ws != nil {
		ws.CloseNow()
	}
	if resp == nil {
		t.Fatalf("no response: %v", err)
	}
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("WWW-Authenticate") != "" {
		t.Fatalf("foreign Origin without credentials: %d, WWW-Authenticate %q; want 403 without a challenge",
			resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// (Was: /dashboard/%2e/ served the page, without the credentials GET / asks for and without its PagePolicy.)
func TestDashboardPageOnlyAtItsRoute(t *testing.T) {
	t.Parallel()
	authz := web.Accounts([]web.Account{{Principal: web.Principal{Name: "client", AllScopes: true}, Password: "pw"}})
	_, base := startHub(t, Config{Source: Funcs{}, Authorizer: authz})
	get := func(p string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/"); code != http.StatusUnauthorized {
		t.Fatalf("GET / without credentials: %d, want 401", code)
	}
	for _, p := range []string{
		"/dashboard/", "/dashboard/index.html", "/dashboard/%2e/", "/dashboard/%2e",
		"/dashboard/%2findex.html", "/dashboard/index.html/", "/dashboard/.%2findex.html",
	} {
		if code, body := get(p); strings.Contains(body, `id="conn"`) {
			t.Errorf("GET %s without credentials: %d, the page", p, code)
		}
	}
	// The assets still are served.
	if code, body := get("/dashboard/dashboard.js"); code != http.StatusOK || !strings.Contains(body, "/ws/dashboard") {
		t.Errorf("GET /dashboard/dashboard.js: %d", code)
	}
}
