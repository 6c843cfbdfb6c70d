package main

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testtls"
	"github.com/switchyard-dev/switchyard/persist"
)

// authBus runs `switchyard up --auth` (over TLS) as its own process with
// users made by `switchyard auth init`, and returns its URL, the auth
// directory and the CA file.
func authBus(t *testing.T) (url, dir, ca string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "auth")
	if _, stderr, code := testproc.Run(t, cli(t, "auth", "init", dir, "--tenant", "acme=account-a", "--tenant", "bob=account-b,project-b")); code != 0 {
		t.Fatalf("auth init: exit %d: %s", code, stderr)
	}
	f := testtls.New(t)
	port := testproc.FreePort(t)
	up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", t.TempDir(), "--auth", dir, "--tls-cert", f.Cert, "--tls-key", f.Key)
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })
	return "nats://127.0.0.1:" + strconv.Itoa(port), dir, f.CA
}

// dialAs connects as user (a creds file of dir), recording the permission
// violations NATS reports so a test can observe refused publishes.
func dialAs(t *testing.T, url, dir, user, ca string) (*nats.Conn, *violations) {
	t.Helper()
	opts, err := auth.ClientOptions(auth.CredsFile(dir, user), ca)
	if err != nil {
		t.Fatal(err)
	}
	v := &violations{}
	opts = append(opts, nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { v.add(err) }))
	nc, err := bus.Connect(url, bus.ConnectConfig{Name: "attack-" + user, Options: opts})
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc, v
}

type violations struct {
	mu      sync.Mutex
	errs    []string
	changed chan struct{} // closed and replaced on every add
}

func (v *violations) add(err error) {
	v.mu.Lock()
	v.errs = append(v.errs, err.Error())
	if v.changed != nil {
		close(v.changed)
		v.changed = nil
	}
	v.mu.Unlock()
}

// wait waits until NATS has refused op on subject; NATS reports refusals
// asynchronously, on the client's callback goroutine.
func (v *violations) wait(ctx context.Context, op, subject string) bool {
	for {
		v.mu.Lock()
		if v.changed == nil {
			v.changed = make(chan struct{})
		}
		ch := v.changed
		v.mu.Unlock()
		if v.has(op, subject) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (v *violations) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return strings.Join(v.errs, "; ")
}

// has reports whether NATS refused op ("Publish" or "Subscription") on subject.
func (v *violations) has(op, subject string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		if strings.Contains(strings.ToLower(e), strings.ToLower(op+" to \""+subject+"\"")) {
			return true
		}
	}
	return false
}

// TestAuthAttacks runs the attack table against `up --auth`: tenant acme
// and the trusted client try to read, write and watch tenant bob's scope,
// eavesdrop on wildcards and inboxes, answer requests as a rogue server and
// forge feed messages. Every attempt must be refused, and bob's watcher must
// see exactly bob's real writes.
func TestAuthAttacks(t *testing.T) {
	t.Parallel()
	url, dir, ca := authBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	bobConn, _ := dialAs(t, url, dir, "bob", ca)
	bob, err := persist.NewClient(persist.ClientConfig{Conn: bobConn})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	victim := bob.Stream("account-b", "log")
	if _, err := victim.Set(ctx, []byte("real-1"), persist.SetOptions{}); err != nil {
		t.Fatalf("bob writes his own scope: %v", err)
	}
	var mu sync.Mutex
	var seen []string
	last := make(chan struct{})
	w, err := victim.Watch(ctx, persist.WatchOptions{}, func(e persist.Event) {
		if e.Kind != persist.EventSet {
			return
		}
		mu.Lock()
		seen = append(seen, string(e.Msg.Value))
		mu.Unlock()
		if string(e.Msg.Value) == "real-last" {
			close(last)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())

	// A copy of a real feed message, for the forgers to replay.
	clientConn, clientV := dialAs(t, url, dir, auth.RoleClient, ca)
	feedSub, err := clientConn.SubscribeSync("persist.account-b.feed.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := clientConn.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Set(ctx, []byte("real-2"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	real, err := feedSub.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("the client role reads feeds: %v", err)
	}
	_ = feedSub.Unsubscribe()
	forged := nats.NewMsg(real.Subject)
	forged.Header = real.Header
	forged.Data = append([]byte(nil), real.Data...)

	acmeConn, acmeV := dialAs(t, url, dir, "acme", ca)
	acme, err := persist.NewClient(persist.ClientConfig{Conn: acmeConn})
	if err != nil {
		t.Fatal(err)
	}
	defer acme.Close()
	other := acme.Stream("account-b", "log")

	forbidden := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, persist.ErrForbidden) {
			t.Fatalf("got %v, want forbidden", err)
		}
	}
	subRefused := func(t *testing.T, nc *nats.Conn, v *violations, subject string) {
		t.Helper()
		sub, err := nc.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if !v.wait(ctx, "Subscription", subject) {
			t.Fatalf("subscription to %s was not refused (violations: %s)", subject, v)
		}
	}
	pubRefused := func(t *testing.T, nc *nats.Conn, v *violations, m *nats.Msg) {
		t.Helper()
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if !v.wait(ctx, "Publish", m.Subject) {
			t.Fatalf("publish on %s was not refused (violations: %s)", m.Subject, v)
		}
	}

	for _, tc := range []struct {
		name   string
		attack func(t *testing.T)
	}{
		{"tenant reads another tenant's scope", func(t *testing.T) {
			_, err := other.Get(ctx, 1)
			forbidden(t, err)
		}},
		{"tenant reads another tenant's scope with getAll", func(t *testing.T) {
			_, _, err := other.GetAll(ctx, persist.Range{})
			forbidden(t, err)
		}},
		{"tenant writes another tenant's scope", func(t *testing.T) {
			_, err := other.Set(ctx, []byte("evil"), persist.SetOptions{})
			forbidden(t, err)
		}},
		{"tenant watches another tenant's scope", func(t *testing.T) {
			ended := make(chan error, 1)
			w, err := other.Watch(ctx, persist.WatchOptions{}, func(e persist.Event) {
				if e.Kind == persist.EventEnded {
					ended <- e.Err
				}
			})
			if err != nil {
				forbidden(t, err)
				return
			}
			defer w.Stop(context.Background())
			select {
			case err := <-ended:
				forbidden(t, err)
			case <-ctx.Done():
				t.Fatal("watcher of another tenant's scope did not end")
			}
		}},
		{"tenant subscribes to another tenant's feed", func(t *testing.T) { subRefused(t, acmeConn, acmeV, "persist.account-b.feed.>") }},
		{"tenant subscribes to >", func(t *testing.T) { subRefused(t, acmeConn, acmeV, ">") }},
		{"tenant subscribes to _INBOX.>", func(t *testing.T) { subRefused(t, acmeConn, acmeV, "_INBOX.>") }},
		{"tenant subscribes to bob's inbox", func(t *testing.T) { subRefused(t, acmeConn, acmeV, "_INBOX_bob.>") }},
		{"tenant subscribes to persist.*.api.*", func(t *testing.T) { subRefused(t, acmeConn, acmeV, "persist.*.api.*") }},
		{"client subscribes to >", func(t *testing.T) { subRefused(t, clientConn, clientV, ">") }},
		{"client subscribes to tenant inboxes", func(t *testing.T) { subRefused(t, clientConn, clientV, "_INBOX_bob.>") }},
		{"client answers requests as a rogue server", func(t *testing.T) { subRefused(t, clientConn, clientV, "persist.*.api.*") }},
		{"client answers the balancer's questions", func(t *testing.T) { subRefused(t, clientConn, clientV, "persist.*.id") }},
		{"tenant answers bob's requests on his inbox", func(t *testing.T) {
			pubRefused(t, acmeConn, acmeV, nats.NewMsg("_INBOX_bob.fake.1"))
		}},
		{"tenant forges a feed message", func(t *testing.T) { pubRefused(t, acmeConn, acmeV, forged) }},
		{"client forges a feed message", func(t *testing.T) { pubRefused(t, clientConn, clientV, forged) }},
	} {
		t.Run(tc.name, tc.attack)
	}

	// The CLI says forbidden in one line, exit 1, at once.
	_, stderr, code := testproc.Run(t, cli(t, "kv", "get", "account-b", "log", "k", "--nats", url, "--creds", auth.CredsFile(dir, "acme"), "--tls-ca", ca))
	if code != exitRuntime || !strings.Contains(stderr, "forbidden") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("kv get of another tenant's scope: exit %d, stderr %q", code, stderr)
	}

	if _, err := victim.Set(ctx, []byte("real-last"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-last:
	case <-ctx.Done():
		t.Fatal("bob's watcher did not see his last write")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"real-1", "real-2", "real-last"}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("bob's watcher saw %q, want only the real writes %q", seen, want)
	}
}

// TestAuthTLSNeedsCA: a client without the CA fails with a certificate
// error naming --tls-ca; with it, the same command works.
func TestAuthTLSNeedsCA(t *testing.T) {
	t.Parallel()
	url, dir, ca := authBus(t)
	creds := auth.CredsFile(dir, auth.RoleClient)
	_, stderr, code := testproc.Run(t, cli(t, "kv", "set", "hub", "demo", "k", "v", "--nats", url, "--creds", creds))
	if code != exitRuntime || !strings.Contains(stderr, "certificate") || !strings.Contains(stderr, "--tls-ca") {
		t.Fatalf("without the CA: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "hub", "demo", "k", "v", "--nats", url, "--creds", creds, "--tls-ca", ca)); code != 0 {
		t.Fatalf("with the CA: exit %d: %s", code, stderr)
	}
	out, stderr, code := testproc.Run(t, cli(t, "kv", "get", "hub", "demo", "k", "--nats", url, "--tls-ca", ca, "--creds", creds))
	if code != 0 || out != "v\n" {
		t.Fatalf("kv get over TLS: exit %d, %q %s", code, out, stderr)
	}
	// Without credentials the bus admits nobody.
	if _, stderr, code := testproc.Run(t, cli(t, "kv", "get", "hub", "demo", "k", "--nats", url, "--tls-ca", ca)); code != exitRuntime || !strings.Contains(stderr, "credentials") {
		t.Fatalf("without creds: exit %d, stderr %q", code, stderr)
	}
}

// TestUpRefusesOpenNetworkBus: up on a non-loopback address needs --auth
// or an explicit --insecure.
func TestUpRefusesOpenNetworkBus(t *testing.T) {
	t.Parallel()
	_, stderr, code := execute(t, "up", "--host", "0.0.0.0", "--nats-port", strconv.Itoa(testproc.FreePort(t)), "--data", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "--auth") || !strings.Contains(stderr, "--insecure") {
		t.Fatalf("up --host 0.0.0.0: exit %d, stderr %q", code, stderr)
	}
}
