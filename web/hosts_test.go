package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHostsAllowed: loopback names always, the listen host unless it is a
// wildcard, the configured names; case, port and a trailing dot do not
// matter; any other name is refused.
func TestHostsAllowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		listen string
		names  []string
		host   string
		want   bool
	}{
		{"localhost", "127.0.0.1:8080", nil, "localhost:8080", true},
		{"localhost without port", "127.0.0.1:8080", nil, "localhost", true},
		{"localhost upper case, trailing dot", "127.0.0.1:8080", nil, "LocalHost.:8080", true},
		{"127.0.0.1", "127.0.0.1:8080", nil, "127.0.0.1:8080", true},
		{"another loopback IP", "127.0.0.1:8080", nil, "127.1.2.3", true},
		{"::1", "127.0.0.1:8080", nil, "[::1]:8080", true},
		{"::1 without port", "127.0.0.1:8080", nil, "[::1]", true},
		{"rebinding name", "127.0.0.1:8080", nil, "evil.example:8080", false},
		{"rebinding name without port", "127.0.0.1:8080", nil, "evil.example", false},
		{"a name under localhost", "127.0.0.1:8080", nil, "evil.localhost", false},
		{"empty", "127.0.0.1:8080", nil, "", false},
		{"listen host", "192.0.2.7:8080", nil, "192.0.2.7:8080", true},
		{"listen name", "box.lan:8080", nil, "BOX.lan:8080", true},
		{"wildcard names nothing", "0.0.0.0:8080", nil, "0.0.0.0:8080", false},
		{"wildcard v6 names nothing", "[::]:8080", nil, "[::]:8080", false},
		{"wildcard, loopback still", "0.0.0.0:8080", nil, "localhost:8080", true},
		{"wildcard, another address", "0.0.0.0:8080", nil, "192.0.2.7:8080", false},
		{"configured name", "0.0.0.0:8080", []string{"indexer.example.org"}, "indexer.example.org", true},
		{"configured IP", "0.0.0.0:8080", []string{"192.0.2.7"}, "192.0.2.7:8080", true},
		{"configured v6", "0.0.0.0:8080", []string{"2001:db8::1"}, "[2001:db8::1]:8080", true},
		{"configured, other name", "0.0.0.0:8080", []string{"indexer.example.org"}, "evil.example", false},
		{"configured, its subdomain", "0.0.0.0:8080", []string{"example.org"}, "evil.example.org", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := NewHosts(c.listen, c.names...)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Allowed(c.host); got != c.want {
				t.Errorf("Allowed(%q) = %v, want %v (hosts %q)", c.host, got, c.want, h.Names())
			}
		})
	}
	var none *Hosts
	if !none.Allowed("localhost:1") || none.Allowed("evil.example") {
		t.Error("a nil Hosts must allow the loopback names only")
	}
}

// TestValidHostName: names and IPs pass, ports, paths, patterns and empty
// names do not.
func TestValidHostName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"localhost", "indexer.example.org", "box-1.lan.", "192.0.2.7", "2001:db8::1", "[2001:db8::1]"} {
		if err := ValidHostName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "box.lan:8080", "http://box.lan", "*.example.org", "a..b", "-a.b", "box lan", "box/lan"} {
		if err := ValidHostName(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if _, err := NewHosts("127.0.0.1:0", "box.lan:8080"); err == nil {
		t.Error("NewHosts took a name with a port")
	}
}

// TestCheckOrigin: no Origin (not a browser) passes; a page's Origin
// passes when its host is allowed or matches a pattern; the rebinding
// page, whose Origin names the Host it also sent, is refused.
func TestCheckOrigin(t *testing.T) {
	t.Parallel()
	h, err := NewHosts("127.0.0.1:8080", "box.lan")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, host, origin string
		patterns           []string
		ok                 bool
	}{
		{"no origin", "evil.example", "", nil, true},
		{"loopback page", "127.0.0.1:8080", "http://127.0.0.1:8080", nil, true},
		{"localhost page", "localhost:8080", "http://localhost:8080", nil, true},
		{"configured name over https", "box.lan", "https://box.lan", nil, true},
		{"behind a proxy that sets Host", "127.0.0.1:8080", "https://box.lan", nil, true},
		{"rebinding: origin matches host", "evil.example:8080", "http://evil.example:8080", nil, false},
		{"other site", "127.0.0.1:8080", "http://evil.example", nil, false},
		{"null origin", "127.0.0.1:8080", "null", nil, false},
		{"pattern", "127.0.0.1:8080", "https://app.example.org", []string{"*.example.org"}, true},
		{"pattern with scheme", "127.0.0.1:8080", "http://app.example.org", []string{"https://*.example.org"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/ws/watch", nil)
			r.Host = c.host
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if err := h.CheckOrigin(r, c.patterns); (err == nil) != c.ok {
				t.Errorf("CheckOrigin = %v, want ok %v", err, c.ok)
			}
		})
	}
}

// TestServerChecksHost: a started Server answers a route under an allowed
// Host, refuses it (421, a body naming the Host and --http-host) under any
// other, and serves the routes mounted with HandleAnyHost for every Host.
func TestServerChecksHost(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1:0")
	hosts, err := NewHosts("127.0.0.1:0", "box.lan")
	if err != nil {
		t.Fatal(err)
	}
	s.Hosts = hosts
	s.Handle("GET /data", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") }))
	var h Health
	h.Mount(s)
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })
	do := func(path, host string) (int, string) {
		req, err := http.NewRequest("GET", s.URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, host string
		want       int
	}{
		{"/data", "", 200}, // the client's own: 127.0.0.1:port
		{"/data", "localhost", 200},
		{"/data", "box.lan:80", 200},
		{"/data", "evil.example", http.StatusMisdirectedRequest},
		{"/nowhere", "evil.example", http.StatusMisdirectedRequest},
		{"/healthz", "evil.example", 200},
		{"/readyz", "10.1.2.3:8080", 200},
	} {
		code, body := do(c.path, c.host)
		if code != c.want {
			t.Errorf("GET %s Host %q: %d %q, want %d", c.path, c.host, code, body, c.want)
		}
		if code == http.StatusMisdirectedRequest && (!strings.Contains(body, `"evil.example"`) || !strings.Contains(body, "--http-host")) {
			t.Errorf("GET %s Host %q: body %q does not say what to do", c.path, c.host, body)
		}
		if code == 200 && c.path == "/data" && body != "secret" {
			t.Errorf("GET /data: %q", body)
		}
	}
	// (Was: a wildcard Host, a listen address copied into a URL, was told
	// to give --http-host ::, which names no host either.)
	for _, host := range []string{"0.0.0.0:8080", "[::]:8080"} {
		code, body := do("/data", host)
		if code != http.StatusMisdirectedRequest || strings.Contains(body, "--http-host") || !strings.Contains(body, "listen address") {
			t.Errorf("GET /data Host %q: %d %q, want 421 saying it is a listen address", host, code, body)
		}
	}
}

// TestServerDefaultHosts: without Hosts, a server allows the loopback
// names and refuses others.
func TestServerDefaultHosts(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1:0")
	s.Handle("GET /data", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") }))
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })
	if code, _ := get(t, s.URL()+"/data"); code != 200 {
		t.Fatalf("own address: %d", code)
	}
	req, _ := http.NewRequest("GET", s.URL()+"/data", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("evil.example: %d", resp.StatusCode)
	}
}

// TestRequireAuth: without credentials 401 with a Basic challenge (a
// browser prompts), with wrong ones 401, with a user's password or key the
// handler; a nil Authorizer is open.
func TestRequireAuth(t *testing.T) {
	t.Parallel()
	authz := Accounts([]Account{{Principal: Principal{Name: "client", AllScopes: true}, Password: "pw", APIKeys: []string{"key"}}})
	h := RequireAuth(authz, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "page") }))
	for _, c := range []struct {
		name string
		set  func(*http.Request)
		want int
	}{
		{"none", func(*http.Request) {}, 401},
		{"wrong password", func(r *http.Request) { r.SetBasicAuth("client", "nope") }, 401},
		{"password", func(r *http.Request) { r.SetBasicAuth("client", "pw") }, 200},
		{"key header", func(r *http.Request) { r.Header.Set(APIKeyHeader, "key") }, 200},
		{"key parameter", func(r *http.Request) { r.URL.RawQuery = APIKeyParam + "=key" }, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			c.set(r)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != c.want {
				t.Fatalf("%d %q, want %d", rec.Code, rec.Body.String(), c.want)
			}
			if c.want == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("401 without a Basic challenge: %q", rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
	rec := httptest.NewRecorder()
	RequireAuth(nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 {
		t.Errorf("nil Authorizer: %d", rec.Code)
	}
}
