package fleet

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/web/releases"
)

// apiKey is f's Newznab API key.
func apiKey(f *Fleet) string {
	k, _ := f.APIKey()
	return k
}

// TestLateRouteAnswersNotYet: a route held for a role that mounts after
// the server listens answers 503 (retry) until the role mounts it, then
// the role's handler.
func TestLateRouteAnswersNotYet(t *testing.T) {
	h := &httpSide{late: map[string]*lateRoute{"GET /ws/watch": {}}}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.late["GET /ws/watch"].ServeHTTP(rec, httptest.NewRequest("GET", "/ws/watch", nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b)
	}
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("before the role mounts: %d, want 503", code)
	}
	h.Handle("GET /ws/watch", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "gateway") }))
	if code, body := get(); code != http.StatusOK || body != "gateway" {
		t.Fatalf("after: %d %q", code, body)
	}
}

// webConfig is up's HTTP side, small: a bus, one persist server and the
// balancer, the Newznab API, the dashboard and the watch gateway; no work.
func webConfig(t *testing.T) Config {
	dir := t.TempDir()
	return Config{
		NATS:     NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist:  PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: dir},
		Balancer: true,
		API:      APIConfig{Dir: filepath.Join(dir, "_usenet-api")},
		HTTP:     HTTPConfig{Addr: "127.0.0.1:0", Dashboard: true, Watch: true},
	}
}

// startWeb starts cfg; it stops when the test ends.
func startWeb(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	f, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f
}

// webRequest is one request to the HTTP side: a GET of path under the
// given Host (none: the server's address), with header; an upgrade asks
// for a WebSocket.
type webRequest struct {
	path, host string
	header     http.Header
	upgrade    bool
}

// do sends r to base and returns the status and the start of the body. A
// WebSocket that is accepted (101) is closed at once.
func (r webRequest) do(t *testing.T, base string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.host != "" {
		req.Host = r.host
	}
	if r.upgrade {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", r.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(b)
}

// anyButRefused, as a wanted status, is any answer but 401 and 421 (for
// /readyz, which may not say ready yet).
const anyButRefused = -1

// rebindPaths are the routes a DNS-rebinding page would read.
var rebindPaths = []struct {
	path    string
	upgrade bool
	ok      int // the status when allowed
}{
	{"/ws/watch?scope=hub&stream=log", true, http.StatusSwitchingProtocols},
	{"/ws/dashboard", true, http.StatusSwitchingProtocols},
	{"/", false, http.StatusOK},
	{"/api?t=caps", false, http.StatusOK},
	{"/metrics", false, http.StatusOK},
	{"/watch?scope=hub&stream=log", false, http.StatusOK},
	{"/releases", false, http.StatusOK},
}

// TestHTTPRebinding sends the requests of a DNS-rebinding page (Host:
// evil.example, Origin: http://evil.example) to every route of up's HTTP
// side and sees each refused with 421; the loopback names and a
// configured host are served; a WebSocket from another origin under a
// loopback Host is 403; /healthz and /readyz answer any Host.
func TestHTTPRebinding(t *testing.T) {
	t.Parallel()
	cfg := webConfig(t)
	cfg.HTTP.Hosts = []string{"box.lan"}
	f := startWeb(t, cfg)
	base := f.HTTPURL()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	evil := http.Header{"Origin": {"http://evil.example"}}
	for _, p := range rebindPaths {
		for _, c := range []struct {
			host   string
			header http.Header
			want   int
		}{
			{"evil.example", evil, http.StatusMisdirectedRequest},
			{"evil.example:" + port, evil, http.StatusMisdirectedRequest},
			{"evil.example", nil, http.StatusMisdirectedRequest},
			{"", nil, p.ok},
			{"localhost:" + port, nil, p.ok},
			{"127.0.0.1:" + port, http.Header{"Origin": {"http://127.0.0.1:" + port}}, p.ok},
			{"[::1]:" + port, nil, p.ok},
			{"box.lan", http.Header{"Origin": {"https://box.lan"}}, p.ok},
		} {
			code, body := webRequest{path: p.path, host: c.host, header: c.header, upgrade: p.upgrade}.do(t, base)
			if code != c.want {
				t.Errorf("GET %s, Host %q, Origin %q: %d %.200q, want %d", p.path, c.host, c.header.Get("Origin"), code, body, c.want)
			}
		}
		if p.upgrade {
			code, body := webRequest{path: p.path, header: evil, upgrade: true}.do(t, base)
			if code != http.StatusForbidden {
				t.Errorf("GET %s, own Host, Origin http://evil.example: %d %.200q, want 403", p.path, code, body)
			}
		}
	}
	// Whether /readyz says ready yet does not matter here: it answers.
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := (webRequest{path: path, host: "10.1.2.3:" + port}).do(t, base); code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Errorf("GET %s under a probe's Host: %d %q, want an answer", path, code, body)
		}
	}
}

// TestHTTPAuth: with the bus's users (NATS.AuthDir) the dashboard, its
// WebSocket and /metrics need a bus user, by Basic auth or API key, as
// the watch gateway does (401 with a Basic challenge without); /healthz,
// /readyz and the dashboard's assets stay open; MetricsOpen opens
// /metrics alone.
func TestHTTPAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, false); err != nil {
		t.Fatal(err)
	}
	creds, err := auth.LoadCreds(auth.CredsFile(dir, auth.RoleClient))
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := auth.LoadCreds(auth.CredsFile(dir, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := webConfig(t)
	cfg.NATS.AuthDir = dir
	f := startWeb(t, cfg)
	openCfg := webConfig(t)
	openCfg.NATS.AuthDir = dir
	openCfg.HTTP.MetricsOpen = true
	fOpen := startWeb(t, openCfg)

	basic := func(user, pass string) http.Header {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pass)
		return r.Header
	}
	key := http.Header{"X-Api-Key": {creds.Password}}
	for _, c := range []struct {
		name    string
		base    string
		path    string
		upgrade bool
		header  http.Header
		want    int
	}{
		{"page, no credentials", f.HTTPURL(), "/", false, nil, http.StatusUnauthorized},
		{"page, wrong password", f.HTTPURL(), "/", false, basic("client", "nope"), http.StatusUnauthorized},
		{"page, bus user", f.HTTPURL(), "/", false, basic("client", creds.Password), http.StatusOK},
		{"page, API key", f.HTTPURL(), "/", false, key, http.StatusOK},
		{"socket, no credentials", f.HTTPURL(), "/ws/dashboard", true, nil, http.StatusUnauthorized},
		{"socket, bus user", f.HTTPURL(), "/ws/dashboard", true, basic("client", creds.Password), http.StatusSwitchingProtocols},
		{"socket, key parameter", f.HTTPURL(), "/ws/dashboard?apikey=" + creds.Password, true, nil, http.StatusSwitchingProtocols},
		{"watch, no credentials", f.HTTPURL(), "/ws/watch?scope=hub&stream=log", true, nil, http.StatusUnauthorized},
		{"watch, bus user", f.HTTPURL(), "/ws/watch?scope=hub&stream=log", true, basic("client", creds.Password), http.StatusSwitchingProtocols},
		{"metrics, no credentials", f.HTTPURL(), "/metrics", false, nil, http.StatusUnauthorized},
		{"metrics, bus user", f.HTTPURL(), "/metrics", false, basic("client", creds.Password), http.StatusOK},
		{"metrics, API key", f.HTTPURL(), "/metrics", false, key, http.StatusOK},
		{"assets", f.HTTPURL(), "/dashboard/dashboard.js", false, nil, http.StatusOK},
		{"healthz", f.HTTPURL(), "/healthz", false, nil, http.StatusOK},
		{"readyz", f.HTTPURL(), "/readyz", false, nil, anyButRefused},
		{"releases page", f.HTTPURL(), "/releases", false, nil, http.StatusOK},
		{"releases data, no credentials", f.HTTPURL(), "/releases/api/search", false, nil, http.StatusUnauthorized},
		{"releases data, bus user", f.HTTPURL(), "/releases/api/search", false, basic("client", creds.Password), http.StatusOK},
		{"releases data, bus key as the page's key", f.HTTPURL(), "/releases/api/search", false, http.Header{"Cookie": {releases.CookieName + "=" + creds.Password}}, http.StatusOK},
		{"releases data, tenant", f.HTTPURL(), "/releases/api/search", false, basic("acme", tenant.Password), http.StatusForbidden},
		{"watch, the indexer's key reads usenet", f.HTTPURL(), "/ws/watch?scope=usenet&stream=releases", true, http.Header{"Cookie": {releases.CookieName + "=" + apiKey(f)}}, http.StatusSwitchingProtocols},
		{"watch, the indexer's key reads only usenet", f.HTTPURL(), "/ws/watch?scope=hub&stream=log", true, http.Header{"Cookie": {releases.CookieName + "=" + apiKey(f)}}, http.StatusForbidden},
		{"metrics open", fOpen.HTTPURL(), "/metrics", false, nil, http.StatusOK},
		{"metrics open, page still closed", fOpen.HTTPURL(), "/", false, nil, http.StatusUnauthorized},
		{"metrics open, socket still closed", fOpen.HTTPURL(), "/ws/dashboard", true, nil, http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := webRequest{path: c.path, header: c.header, upgrade: c.upgrade}.do(t, c.base)
			if c.want == anyButRefused && code != http.StatusUnauthorized && code != http.StatusMisdirectedRequest {
				return
			}
			if code != c.want {
				t.Fatalf("GET %s: %d %.200q, want %d", c.path, code, body, c.want)
			}
		})
	}
	req, _ := http.NewRequest("GET", f.HTTPURL()+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
		t.Errorf("/ without credentials: WWW-Authenticate %q, want a Basic challenge (a browser prompts)", got)
	}
}

// TestHTTPAuthNkey: an auth directory of NKey users (auth init --nkey) has
// no password to check over HTTP: the fleet starts with its HTTP side, and
// the guarded pages refuse every request while /healthz answers.
func TestHTTPAuthNkey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}}, true); err != nil {
		t.Fatal(err)
	}
	cfg := webConfig(t)
	cfg.NATS.AuthDir = dir
	f := startWeb(t, cfg)
	for path, want := range map[string]int{"/": http.StatusUnauthorized, "/metrics": http.StatusUnauthorized, "/healthz": http.StatusOK} {
		if code, body := (webRequest{path: path}).do(t, f.HTTPURL()); code != want {
			t.Errorf("GET %s: %d %.200q, want %d", path, code, body, want)
		}
	}
}

// TestHTTPConfigHosts: a host that is not a name or an IP is refused
// before anything starts.
func TestHTTPConfigHosts(t *testing.T) {
	t.Parallel()
	cfg := webConfig(t)
	cfg.HTTP.Hosts = []string{"box.lan:8080"}
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "box.lan:8080") {
		t.Fatalf("Start with Hosts %q: %v", cfg.HTTP.Hosts, err)
	}
}
