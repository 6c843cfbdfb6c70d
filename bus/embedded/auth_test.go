package embedded_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testtls"
	"github.com/switchyard-dev/switchyard/placement"
)

// startAuth runs a server enforcing the users of a fresh auth directory.
func startAuth(t *testing.T, tlsFiles *testtls.Files) (*embedded.Server, string) {
	t.Helper()
	return startAuthPlan(t, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, tlsFiles)
}

// startAuthPlan runs a server enforcing the users of plan, written by Init.
func startAuthPlan(t *testing.T, plan auth.Plan, tlsFiles *testtls.Files) (*embedded.Server, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := auth.Init(dir, plan, false); err != nil {
		t.Fatal(err)
	}
	cfg := embedded.Config{Port: embedded.RandomPort, AuthConf: filepath.Join(dir, auth.ConfFile)}
	if tlsFiles != nil {
		cfg.TLS = testtls.ServerConfig(t, *tlsFiles)
	}
	e, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e, dir
}

func connectAs(t *testing.T, url, credsFile, ca string) (*nats.Conn, error) {
	t.Helper()
	opts, err := auth.ClientOptions(credsFile, ca)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := bus.Connect(url, bus.ConnectConfig{Options: append(opts, nats.NoReconnect())})
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// TestRefusedRequestIsForbidden: a request the server's permissions refuse
// fails at once as forbidden, not as a timeout, while an allowed request
// with nobody listening is still "no responders".
func TestRefusedRequestIsForbidden(t *testing.T) {
	t.Parallel()
	e, dir := startAuth(t, nil)
	nc, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, "acme"), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = bus.Request(context.Background(), nc, nats.NewMsg("persist.account-b.id"))
	var pe *bus.PermissionError
	if !errors.Is(err, bus.ErrForbidden) || !errors.As(err, &pe) || pe.Subject != "persist.account-b.id" {
		t.Fatalf("request to another tenant's scope: %v, want forbidden", err)
	}
	if _, err := bus.Request(context.Background(), nc, nats.NewMsg("persist.account-a.id")); !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("request to own scope: %v, want no responders", err)
	}
}

// TestRefusedRequestOnQuotedSubjectIsForbidden: a refused request fails
// at once as forbidden also when its subject holds a '"' or a '\' (valid
// subject bytes). (Was: the NATS server names the subject with Go's %q,
// which bus read as `"([^"]+)"`: the subject came back cut or still
// escaped, matched no waiting request, and the request waited out its
// whole deadline as a timeout.)
func TestRefusedRequestOnQuotedSubjectIsForbidden(t *testing.T) {
	t.Parallel()
	e, dir := startAuth(t, nil)
	nc, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, "acme"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{`persist.account-"b".id`, `persist.account-b\.id`} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		_, err := bus.Request(ctx, nc, nats.NewMsg(subject))
		cancel()
		var pe *bus.PermissionError
		if !errors.Is(err, bus.ErrForbidden) || !errors.As(err, &pe) || pe.Subject != subject {
			t.Errorf("request on %q (not in acme's permissions): %v after %s, want forbidden at once", subject, err, time.Since(start).Round(time.Millisecond))
		}
	}
}

// (Was: a creds file whose inbox line was missing or another user's made every request time out, the refusal of its reply subscription unsaid.)
func TestRequestWhoseRepliesAreRefusedIsForbidden(t *testing.T) {
	t.Parallel()
	e, dir := startAuth(t, nil)
	// The balancer's user answers every question, so a request that
	// fails did not fail for want of a responder.
	answerIDs(t, e.ClientURL(), dir)
	acme, err := auth.LoadCreds(auth.CredsFile(dir, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	for _, inbox := range []string{acme.Inbox, "", auth.InboxPrefix("bob"), "persist"} {
		c := acme
		c.Inbox = inbox
		path := filepath.Join(t.TempDir(), "acme.creds")
		if err := writeFile(path, c.Marshal("acme, inbox edited")); err != nil {
			t.Fatal(err)
		}
		nc, err := connectAs(t, e.ClientURL(), path, "")
		if err != nil {
			t.Fatal(err)
		}
		// Twice: the refusal comes once, at the first request, and holds
		// for every later one on the connection.
		for try := 1; try <= 2; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			reply, err := bus.Request(ctx, nc, nats.NewMsg(bus.IDSubject(bus.DefaultService, "account-a")))
			cancel()
			if inbox == acme.Inbox {
				if err != nil || string(reply.Data) != "0" {
					t.Fatalf("request with acme's own creds: %v", err)
				}
				continue
			}
			var pe *bus.PermissionError
			if !errors.Is(err, bus.ErrForbidden) || !errors.As(err, &pe) || pe.Op != "subscribe" {
				t.Errorf("inbox %q, request %d: %v, want forbidden: the reply subscription refused", inbox, try, err)
			}
		}
	}
}

// (Was: with the refusal of a reply subscription kept for good, a connection's requests stayed forbidden after it reconnected to a server that takes it.)
func TestRepliesRefusalEndsWithReconnect(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, false); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, auth.ConfFile))
	if err != nil {
		t.Fatal(err)
	}
	// The second server lets acme read nats.go's default inbox too.
	lax := filepath.Join(t.TempDir(), "lax.conf")
	if err := writeFile(lax, []byte(strings.Replace(string(conf), `"_INBOX_acme.>"`, `"_INBOX_acme.>", "_INBOX.>"`, 1))); err != nil {
		t.Fatal(err)
	}
	start := func(conf string, port int) *embedded.Server {
		e, err := embedded.Start(embedded.Config{Port: port, AuthConf: conf})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := start(filepath.Join(dir, auth.ConfFile), embedded.RandomPort)
	t.Cleanup(e.Shutdown) // Shutdown may run twice
	port := e.Port()
	answerIDs(t, e.ClientURL(), dir)
	acme, err := auth.LoadCreds(auth.CredsFile(dir, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	acme.Inbox = ""
	opts, err := acme.Options()
	if err != nil {
		t.Fatal(err)
	}
	reconnected := make(chan struct{}, 1)
	opts = append(opts, nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	nc, err := bus.Connect(e.ClientURL(), bus.ConnectConfig{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ask := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := bus.Request(ctx, nc, nats.NewMsg(bus.IDSubject(bus.DefaultService, "account-a")))
		return err
	}
	if err := ask(); !errors.Is(err, bus.ErrForbidden) {
		t.Fatalf("request with replies on _INBOX.: %v, want forbidden", err)
	}
	e.Shutdown()
	e = start(lax, port)
	t.Cleanup(e.Shutdown)
	answerIDs(t, e.ClientURL(), dir)
	select {
	case <-reconnected:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconnect")
	}
	if err := ask(); err != nil {
		t.Fatalf("request after reconnecting to a server that lets acme read _INBOX.>: %v", err)
	}
}

// TestBalancerStartFailsWhenSubscriptionRefused: a balancer whose
// subscription the NATS server refuses (started with the client's creds
// instead of the balancer's) fails to Start, forbidden, rather than
// report itself serving. (Was: the refusal comes asynchronously, Start's
// Flush did not look at it, and bus.Connect's refusal routing ignored
// subscriptions: Start returned nil, and no lookup was ever answered.)
func TestBalancerStartFailsWhenSubscriptionRefused(t *testing.T) {
	t.Parallel()
	e, dir := startAuth(t, nil)
	bc, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, auth.RoleClient), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: bc, IDs: []string{"0"}})
	if err != nil {
		t.Fatal(err)
	}
	startErr := b.Start(context.Background())
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	if startErr != nil {
		if !errors.Is(startErr, bus.ErrForbidden) {
			t.Fatalf("Start of a balancer NATS refuses: %v, want forbidden", startErr)
		}
		return // refused at Start: what a caller can act on
	}
	client, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, auth.RoleClient), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = bus.Request(ctx, client, nats.NewMsg("persist.hub.id"))
	if err != nil {
		t.Fatalf("Balancer.Start returned nil, yet NATS refused its subscription (%v); a lookup gets: %v (no responders: %v)",
			bc.LastError(), err, errors.Is(err, bus.ErrNoResponders))
	}
}

func TestWrongPasswordIsRefused(t *testing.T) {
	t.Parallel()
	e, _ := startAuth(t, nil)
	bad := filepath.Join(t.TempDir(), "bad.creds")
	if err := writeFile(bad, auth.Creds{User: "client", Password: "guess"}.Marshal("bad")); err != nil {
		t.Fatal(err)
	}
	_, err := connectAs(t, e.ClientURL(), bad, "")
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := connectAs(t, e.ClientURL(), "", ""); err == nil {
		t.Fatal("connected without credentials")
	}
}

// (Was: an NKey creds file given to a bus whose users have passwords failed with nats.go's bare "nkeys not supported by the server", no word of the credentials.)
func TestNkeyCredsOnPasswordBusNamesTheCreds(t *testing.T) {
	t.Parallel()
	e, _ := startAuth(t, nil)
	seed, _, err := auth.NewNkey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nkey.creds")
	if err := writeFile(path, auth.Creds{Seed: seed, Inbox: auth.InboxPrefix("acme")}.Marshal("an NKey user of another bus")); err != nil {
		t.Fatal(err)
	}
	_, err = connectAs(t, e.ClientURL(), path, "")
	if !errors.Is(err, nats.ErrNkeysNotSupported) || !strings.Contains(err.Error(), "--creds") {
		t.Fatalf("NKey creds on a password bus: %v, want a refusal naming --creds", err)
	}
}

// TestTLS: without the CA the client fails with a certificate error that
// says what to do; with it, it connects and talks.
func TestTLS(t *testing.T) {
	t.Parallel()
	f := testtls.New(t)
	e, dir := startAuth(t, &f)
	creds := auth.CredsFile(dir, "client")
	_, err := connectAs(t, e.ClientURL(), creds, "")
	if err == nil || !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "--tls-ca") {
		t.Fatalf("without the CA: %v, want a certificate error naming --tls-ca", err)
	}
	nc, err := connectAs(t, e.ClientURL(), creds, f.CA)
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if !nc.TLSRequired() {
		t.Fatal("connection is not TLS")
	}
	if _, err := bus.Request(context.Background(), nc, nats.NewMsg("persist.x.id")); !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("request over TLS: %v", err)
	}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

// TestInterestCountsInTheConnectionsAccount: Interest counts the
// subscriptions of the account the given connection logged in to (the
// users of auth init's file are in auth.Account, not the global one), and
// refuses a connection to another server.
func TestInterestCountsInTheConnectionsAccount(t *testing.T) {
	t.Parallel()
	e, dir := startAuth(t, nil)
	srvConn, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, auth.RoleServer+"-0"), "")
	if err != nil {
		t.Fatal(err)
	}
	interest, err := e.Interest(srvConn)
	if err != nil {
		t.Fatal(err)
	}
	subject := bus.ScopeSubject(bus.DefaultService, "account-a", "feed", "notes")
	if n := interest(subject); n != 0 {
		t.Fatalf("interest before any subscriber: %d", n)
	}
	for i, user := range []string{auth.RoleClient, "acme"} {
		nc, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, user), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if n := interest(subject); n != i+1 {
			t.Fatalf("interest after %s subscribed: %d, want %d", user, n, i+1)
		}
	}
	other, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Shutdown)
	if _, err := other.Interest(srvConn); err == nil {
		t.Fatal("Interest took a connection to another server")
	}
}

// TestTLSHasNoPlaintextPath: with TLS configured, a TCP client that speaks
// plain NATS after the server's INFO is refused before any PONG, a TLS
// handshake below 1.2 fails, and a client given a CA (--tls-ca) refuses a
// server that offers no TLS instead of sending its password in the clear.
func TestTLSHasNoPlaintextPath(t *testing.T) {
	t.Parallel()
	f := testtls.New(t)
	e, dir := startAuth(t, &f)
	client, err := auth.LoadCreds(auth.CredsFile(dir, auth.RoleClient))
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(e.Port()))

	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		info, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info, "INFO ") || !strings.Contains(info, `"tls_required":true`) {
			t.Fatalf("server's INFO does not require TLS: %s", info)
		}
		return c, r
	}

	t.Run("plain CONNECT", func(t *testing.T) {
		c, r := dial(t)
		connect := fmt.Sprintf("CONNECT {\"verbose\":false,\"user\":%q,\"pass\":%q}\r\nPING\r\n", client.User, client.Password)
		if _, err := io.WriteString(c, connect); err != nil {
			t.Fatal(err)
		}
		// The server reads the CONNECT as a broken TLS handshake and
		// closes the connection; whatever it writes first, never a PONG
		// or an +OK.
		rest, err := io.ReadAll(r)
		if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("reading after a plaintext CONNECT: %v (got %q)", err, rest)
		}
		if strings.Contains(string(rest), "PONG") || strings.Contains(string(rest), "+OK") {
			t.Fatalf("a plaintext client was answered: %q", rest)
		}
	})

	pool := x509.NewCertPool()
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	for _, tc := range []struct {
		name   string
		max    uint16
		refuse bool
	}{{"TLS 1.0", tls.VersionTLS10, true}, {"TLS 1.1", tls.VersionTLS11, true}, {"TLS 1.2", tls.VersionTLS12, false}, {"TLS 1.3", tls.VersionTLS13, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := dial(t)
			tc2 := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS10, MaxVersion: tc.max})
			err := tc2.Handshake()
			if tc.refuse && err == nil {
				t.Fatalf("handshake at %s accepted (version %#x)", tc.name, tc2.ConnectionState().Version)
			}
			if !tc.refuse && err != nil {
				t.Fatalf("handshake at %s: %v", tc.name, err)
			}
		})
	}

	t.Run("client with a CA, server without TLS", func(t *testing.T) {
		plain, dir := startAuth(t, nil)
		nc, err := connectAs(t, plain.ClientURL(), auth.CredsFile(dir, auth.RoleClient), f.CA)
		if err == nil {
			t.Fatalf("connected in the clear (TLS %v) though given a CA", nc.TLSRequired())
		}
		if !errors.Is(err, nats.ErrSecureConnWanted) {
			t.Fatalf("got %v, want %v", err, nats.ErrSecureConnWanted)
		}
	})
}

// TestPermissionMatrix probes every role from outside: what each user may
// not subscribe to or publish on is refused by the NATS server, wildcards,
// '>' tricks, other inboxes and odd tokens included; and the publishes the
// permissions let through with a wildcard token ("persist.account-a.api.*",
// which NATS matches as a literal token) reach no server or balancer.
func TestPermissionMatrix(t *testing.T) {
	t.Parallel()
	e, dir := startAuthPlan(t, auth.Plan{IDs: []string{"0", "1"}, Tenants: map[string][]string{"acme": {"account-a"}, "bob": {"account-b"}}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conns := map[string]*nats.Conn{}
	for _, user := range []string{"acme", "bob", auth.RoleClient, auth.RoleBalancer, "server-0"} {
		nc, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, user), "")
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		conns[user] = nc
	}

	subRefused := map[string][]string{
		"acme": {">", "*", "*.>", "_INBOX.>", "_INBOX.*", "_INBOX_bob.>", "_INBOX_bob.*.*", "_INBOX_client.>", "_INBOX_*.>",
			"_INBOX_acme", "_INBOX_acmex.>", "persist.>", "persist.*.feed.>", "persist.account-b.feed.>", "persist.account-b.feed.log",
			"persist.*.api.*", "persist.account-a.api.*", "persist.account-a.api.0", "persist.account-a.id", "persist.*.id",
			"$SYS.>", "$JS.API.>", "persist.account-a.>", "persist.account-a.*.>"},
		auth.RoleClient:   {">", "_INBOX.>", "_INBOX_acme.>", "persist.*.api.*", "persist.*.id", "persist.>", "$SYS.>"},
		auth.RoleBalancer: {">", "_INBOX.>", "persist.*.feed.>", "persist.*.api.*", "persist.>"},
		"server-0":        {">", "_INBOX.>", "persist.*.api.1", "persist.*.api.*", "persist.*.id", "persist.*.feed.>"},
	}
	for user, subjects := range subRefused {
		nc := conns[user]
		for _, s := range subjects {
			g := bus.GuardSubscription(ctx, nc, s, "")
			sub, err := nc.SubscribeSync(s)
			if err != nil {
				t.Fatalf("%s subscribe %q: %v", user, s, err)
			}
			if err := g.Confirm(ctx); !errors.Is(err, bus.ErrForbidden) {
				t.Errorf("%s may subscribe to %q (%v)", user, s, err)
			}
			_ = sub.Unsubscribe()
			g.Release()
		}
	}

	pubRefused := map[string][]string{
		"acme": {"persist.account-b.id", "persist.account-b.api.0", "persist.*.id", "persist.*.api.0", "persist.>", "persist.account-a.feed.log",
			"persist.account-b.feed.log", "persist.account-a.api.0.x", "persist.account-a.id.x", "persist._server.api.0", "_INBOX_bob.x.1",
			"_INBOX.x", "_INBOX_acme.x", "_INBOX_client.x.1", "$JS.API.STREAM.CREATE.x", "$SYS.REQ.SERVER.PING", "news.today"},
		auth.RoleClient:   {"persist.account-a.feed.log", "_INBOX_acme.x", "_INBOX.x", "$JS.API.STREAM.CREATE.x"},
		auth.RoleBalancer: {"persist.account-a.feed.log", "persist.account-a.api.0", "persist.account-a.id", "_INBOX_acme.x", "news.today"},
		"server-0":        {"persist.account-a.api.1", "persist.account-a.id", "_INBOX_acme.x", "news.today"},
	}
	for user, subjects := range pubRefused {
		nc := conns[user]
		for _, s := range subjects {
			gctx, gcancel := bus.Guard(ctx, nc, s)
			if err := nc.Publish(s, []byte("probe")); err != nil {
				t.Fatalf("%s publish %q: %v", user, s, err)
			}
			wctx, wcancel := context.WithTimeout(gctx, 5*time.Second)
			<-wctx.Done()
			if bus.Refused(wctx) == nil {
				t.Errorf("%s may publish on %q", user, s)
			}
			wcancel()
			gcancel()
		}
	}

	// The permissions take a wildcard token of a published subject as a
	// literal token (NATS does not refuse the publish); such a message
	// must reach no responder. The server's and the balancer's users
	// subscribe as they do in service; acme then publishes each probe and
	// a real question after it, which arrives after any probe delivered.
	srvSub, err := conns["server-0"].SubscribeSync(bus.APISubject(bus.DefaultService, "*", "0"))
	if err != nil {
		t.Fatal(err)
	}
	balSub, err := conns[auth.RoleBalancer].SubscribeSync(bus.IDSubject(bus.DefaultService, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{conns["server-0"], conns[auth.RoleBalancer]} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	acme := conns["acme"]
	for _, probe := range []string{"persist.account-a.api.*", "persist.account-a.api.>"} {
		if err := acme.Publish(probe, []byte("probe")); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"persist.account-a.api.0", "persist.account-a.id"} {
			if err := acme.Publish(s, []byte("real")); err != nil {
				t.Fatal(err)
			}
		}
		for _, sub := range []*nats.Subscription{srvSub, balSub} {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Data) != "real" {
				t.Fatalf("acme's publish on %q reached %s", probe, m.Subject)
			}
		}
	}
}

// TestUserWithoutPermissionsMayDoNothing: a user entry added to `auth
// init`'s file without a permissions block (a password user and an NKey
// user, as an operator adding a user by hand would write them) may neither
// subscribe nor publish anywhere, while a generated user keeps its own.
// (Was: nats-server's default for such a user is everything: it could read
// every feed and inbox and call every server's API.)
func TestUserWithoutPermissionsMayDoNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, false); err != nil {
		t.Fatal(err)
	}
	pass, err := auth.NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	seed, pub, err := auth.NewNkey()
	if err != nil {
		t.Fatal(err)
	}
	bare := map[string]auth.Creds{"mallory": {User: "mallory", Password: pass}, "mallory-nkey": {Seed: seed}}
	for name, c := range bare {
		if err := writeFile(auth.CredsFile(dir, name), c.Marshal("a user without permissions")); err != nil {
			t.Fatal(err)
		}
	}
	confPath := filepath.Join(dir, auth.ConfFile)
	conf, err := os.ReadFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	end := strings.LastIndex(string(conf), "    ]\n")
	if end < 0 {
		t.Fatalf("no end of the users list in %s:\n%s", auth.ConfFile, conf)
	}
	entries := fmt.Sprintf("      { user: %q, password: %q }\n      { nkey: %q }\n", "mallory", pass, pub)
	if err := writeFile(confPath, []byte(string(conf[:end])+entries+string(conf[end:]))); err != nil {
		t.Fatal(err)
	}
	e, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, AuthConf: confPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)

	subRefused := []string{">", "*", "_INBOX.>", "_INBOX_mallory.>", "_INBOX_acme.>", "persist.>", "persist.account-a.feed.>",
		"persist.*.api.0", "persist.account-a.id", "$SYS.>", "$JS.API.>"}
	pubRefused := []string{"persist.account-a.id", "persist.account-a.api.0", "persist.account-a.feed.log", "_INBOX.x",
		"_INBOX_acme.x", "$SYS.REQ.SERVER.PING", "$JS.API.STREAM.CREATE.x", "news.today"}
	for _, name := range []string{"mallory", "mallory-nkey"} {
		t.Run(name, func(t *testing.T) {
			refusedUser(t, e.ClientURL(), auth.CredsFile(dir, name), subRefused, pubRefused)
		})
	}

	// The account's defaults are only for users without a block: the
	// generated ones keep exactly theirs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acme, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, "acme"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"persist.account-a.feed.>", "_INBOX_acme.>"} {
		g := bus.GuardSubscription(ctx, acme, s, "")
		if _, err := acme.SubscribeSync(s); err != nil {
			t.Fatal(err)
		}
		if err := g.Confirm(ctx); err != nil {
			t.Errorf("acme subscribe %q: %v", s, err)
		}
		g.Release()
	}
	srv, err := connectAs(t, e.ClientURL(), auth.CredsFile(dir, "server-0"), "")
	if err != nil {
		t.Fatal(err)
	}
	api, err := srv.SubscribeSync(bus.APISubject(bus.DefaultService, "*", "0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := acme.Publish("persist.account-a.api.0", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if m, err := api.NextMsgWithContext(ctx); err != nil || string(m.Data) != "hello" {
		t.Fatalf("acme's request did not reach server-0: %v", err)
	}
}

// refusedUser connects with credsFile and checks that the server refuses
// each of its subscriptions to subRefused and publishes on pubRefused.
func refusedUser(t *testing.T, url, credsFile string, subRefused, pubRefused []string) {
	t.Helper()
	name := filepath.Base(credsFile)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	nc, err := connectAs(t, url, credsFile, "")
	if err != nil {
		t.Fatalf("connect as %s: %v", name, err)
	}
	for _, s := range subRefused {
		g := bus.GuardSubscription(ctx, nc, s, "")
		sub, err := nc.SubscribeSync(s)
		if err != nil {
			t.Fatalf("%s subscribe %q: %v", name, s, err)
		}
		if err := g.Confirm(ctx); !errors.Is(err, bus.ErrForbidden) {
			t.Errorf("%s, a user without permissions, may subscribe to %q (%v)", name, s, err)
		}
		_ = sub.Unsubscribe()
		g.Release()
	}
	// Every publish goes out first; each refusal is then awaited under
	// the one deadline.
	guards := make([]context.Context, len(pubRefused))
	for i, s := range pubRefused {
		gctx, gcancel := bus.Guard(ctx, nc, s)
		defer gcancel()
		guards[i] = gctx
		if err := nc.Publish(s, []byte("probe")); err != nil {
			t.Fatalf("%s publish %q: %v", name, s, err)
		}
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	for i, gctx := range guards {
		<-gctx.Done()
		if bus.Refused(gctx) == nil {
			t.Errorf("%s, a user without permissions, may publish on %q", name, pubRefused[i])
		}
	}
}

// answerIDs has the balancer's user of the auth directory dir answer every
// placement question on the bus at url with "0", as a balancer would.
func answerIDs(t *testing.T, url, dir string) {
	t.Helper()
	bc, err := connectAs(t, url, auth.CredsFile(dir, auth.RoleBalancer), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bc.Subscribe(bus.IDSubject(bus.DefaultService, "*"), func(m *nats.Msg) { _ = m.Respond([]byte("0")) }); err != nil {
		t.Fatal(err)
	}
	if err := bc.Flush(); err != nil {
		t.Fatal(err)
	}
}
