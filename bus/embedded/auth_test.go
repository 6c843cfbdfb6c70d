package embedded_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, false); err != nil {
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
