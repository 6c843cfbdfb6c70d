package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/syncbuf"
	"github.com/switchyard-dev/switchyard/internal/testci"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testtls"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// attackTenants are the tenants of the attack tests' auth directory.
var attackTenants = map[string][]string{"acme": {"account-a"}, "bob": {"account-b", "project-b"}}

// authDir runs `switchyard auth init` with attackTenants and adds to its
// nats-server.conf a user "spy" of the same account that may publish and
// subscribe anywhere: the tests' witness of what the roles publish. It
// returns the directory; the spy's creds are auth.CredsFile(dir, "spy").
func authDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "auth")
	args := []string{"auth", "init", dir}
	for _, name := range slices.Sorted(maps.Keys(attackTenants)) {
		args = append(args, "--tenant", name+"="+strings.Join(attackTenants[name], ","))
	}
	if _, stderr, code := testproc.Run(t, cli(t, args...)); code != 0 {
		t.Fatalf("auth init: exit %d: %s", code, stderr)
	}
	servers, err := filepath.Glob(auth.CredsFile(dir, "server-*"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range servers {
		ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "server-"), ".creds"))
	}
	users, err := auth.Plan{IDs: ids, Tenants: attackTenants}.Users()
	if err != nil {
		t.Fatal(err)
	}
	var logins []auth.Login
	for _, u := range users {
		c, err := auth.LoadCreds(auth.CredsFile(dir, u.Name))
		if err != nil {
			t.Fatal(err)
		}
		logins = append(logins, auth.Login{User: u, Password: c.Password})
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	spy := auth.Login{User: auth.User{Name: "spy", Role: "spy", Perms: auth.Permissions{Publish: []string{">"}, Subscribe: []string{">"}}}, Password: hex.EncodeToString(secret)}
	if err := os.WriteFile(filepath.Join(dir, auth.ConfFile), auth.ServerConf(append(logins, spy)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auth.CredsFile(dir, "spy"), auth.Creds{User: spy.User.Name, Password: spy.Password}.Marshal("the attack tests' witness"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// authBus runs `switchyard up --auth` (over TLS) as its own process with
// the users of authDir, and returns its URL, the auth directory and the CA
// file.
func authBus(t *testing.T) (url, dir, ca string) {
	t.Helper()
	dir = authDir(t)
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

// TestAuthAttacks runs the attack table against `up --auth`.
func TestAuthAttacks(t *testing.T) {
	t.Parallel()
	url, dir, ca := authBus(t)
	runAuthAttacks(t, url, dir, ca)
}

// TestAuthAttacksExternalNATS runs the attack table against an external
// nats-server with JetStream on, loading the generated nats-server.conf,
// with the roles as their own processes connected to it as docs/security.md
// describes: the servers with their creds, the balancer with its own. CI
// installs nats-server (.ci/run); elsewhere the test skips when it is not
// on PATH, and fails under CI=true.
func TestAuthAttacksExternalNATS(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		testci.Missing(t, "nats-server is not on PATH (.ci/run installs it: go install github.com/nats-io/nats-server/v2@v2.15.2)")
	}
	dir := authDir(t)
	port, mport := testproc.FreePort(t), testproc.FreePort(t)
	ns := exec.Command(bin, "-c", filepath.Join(dir, auth.ConfFile), "-js", "-sd", t.TempDir(),
		"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-m", strconv.Itoa(mport))
	var nsLog syncbuf.Buffer
	ns.Stdout, ns.Stderr = &nsLog, &nsLog
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Process.Kill(); _ = ns.Wait() })
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	opts, err := auth.ClientOptions(auth.CredsFile(dir, auth.RoleClient), "")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "nats-server to accept the client user", func() (bool, string) {
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			return false, err.Error() + "; log: " + nsLog.String()
		}
		nc.Close()
		return true, ""
	})
	jsz := func() string {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(mport) + "/jsz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if js := jsz(); !strings.Contains(js, `"store_dir"`) || !strings.Contains(js, `"streams": 0`) {
		t.Fatalf("JetStream is not on, or has streams already: %s", js)
	}

	for _, id := range []string{"0", "1"} {
		srv := cli(t, "persist", "serve", "--id", id, "--ids", "0,1", "--data", t.TempDir(), "--nats", url, "--creds", auth.CredsFile(dir, "server-"+id))
		testproc.Start(t, srv, "ready on")
		t.Cleanup(func() { _ = srv.Process.Kill() })
	}
	bal := cli(t, "balancer", "--ids", "0,1", "--nats", url, "--creds", auth.CredsFile(dir, auth.RoleBalancer))
	if err := bal.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bal.Process.Kill(); _ = bal.Wait() })
	nc, err := bus.Connect(url, bus.ConnectConfig{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	testwait.Until(t, "the balancer to answer", func() (bool, string) {
		_, err := bus.Request(context.Background(), nc, nats.NewMsg(bus.IDSubject(bus.DefaultService, "hub")))
		return err == nil, fmt.Sprint(err)
	})

	runAuthAttacks(t, url, dir, "")
	if js := jsz(); !strings.Contains(js, `"streams": 0`) {
		t.Fatalf("the attacks made a JetStream stream: %s", js)
	}
}

// runAuthAttacks is the attack table: tenant acme and the trusted client
// try to read, write and watch tenant bob's scope, eavesdrop on wildcards
// and inboxes, answer requests as a rogue server, forge feed messages, and
// aim the servers' and the balancer's answers where a tenant may not
// publish (the JetStream API, bob's API, a plain subject). Every attempt
// must be refused, nothing may be published where the answers were aimed
// (the spy user of authDir watches), and bob's watcher must see exactly
// bob's real writes.
func runAuthAttacks(t *testing.T, url, dir, ca string) {
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

	// The spy sees every publish of the account; aimed answers would
	// reach it. acme's stream holds the bodies the attacks have served back.
	// (Not on >: the spy's own JetStream requests below need no other
	// subscriber than JetStream's to tell "no responders".)
	spyConn, _ := dialAs(t, url, dir, "spy", ca)
	spyCh := make(chan *nats.Msg, 1<<16)
	for _, subject := range []string{"$JS.API.STREAM.CREATE.>", bus.ScopeSubject(bus.DefaultService, "account-b", ">"), "news.today", auth.InboxPrefix("bob"), auth.InboxPrefix("acme") + ".sentinel.>"} {
		if _, err := spyConn.ChanSubscribe(subject, spyCh); err != nil {
			t.Fatal(err)
		}
	}
	if err := spyConn.Flush(); err != nil {
		t.Fatal(err)
	}
	own := acme.Stream("account-a", "loot")
	streamConfig, err := own.Set(ctx, []byte(`{"name":"steal","subjects":["_INBOX_bob.>"],"republish":{"src":">","dest":"_INBOX_acme.loot.>"}}`), persist.SetOptions{})
	if err != nil {
		t.Fatalf("acme writes its own scope: %v", err)
	}
	pwned, err := own.Set(ctx, []byte("PWNED-by-acme"), persist.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	acmeOwner, err := acme.Owner(ctx, "account-a")
	if err != nil {
		t.Fatal(err)
	}
	bobOwner, err := bob.Owner(ctx, "account-b")
	if err != nil {
		t.Fatal(err)
	}
	getOf := func(seq uint64) *nats.Msg {
		m := nats.NewMsg(bus.APISubject(bus.DefaultService, "account-a", acmeOwner))
		m.Header.Set(persist.HdrCmd, persist.CmdGet)
		m.Header.Set(persist.HdrStream, "loot")
		m.Header.Set(persist.HdrSeq, strconv.FormatUint(seq, 10))
		return m
	}
	question := func() *nats.Msg { return nats.NewMsg(bus.IDSubject(bus.DefaultService, "account-a")) }
	sentinels := 0
	// aimed sends m from acme with reply subject aim, then the same request
	// (same responder, same stream) answered on acme's inbox; the spy reads
	// until that answer: the responder handles and answers requests in
	// order, so an answer on aim would have come before. Only a request (a
	// message with Sy-Cmd, bob's own) may be seen on aim.
	aimed := func(t *testing.T, m *nats.Msg, aim string, same func() *nats.Msg) {
		t.Helper()
		m.Reply = aim
		if err := acmeConn.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		sentinels++
		sentinel := same()
		sentinel.Reply = auth.InboxPrefix("acme") + ".sentinel." + strconv.Itoa(sentinels)
		if err := acmeConn.PublishMsg(sentinel); err != nil {
			t.Fatal(err)
		}
		for {
			var got *nats.Msg
			select {
			case got = <-spyCh:
			case <-ctx.Done():
				t.Fatalf("the spy did not see the answer on %s", sentinel.Reply)
			}
			if got.Subject == sentinel.Reply {
				return
			}
			if got.Subject == aim && got.Header.Get(persist.HdrCmd) == "" {
				t.Fatalf("an answer was published on %s: %q", aim, got.Data)
			}
		}
	}
	// noStream checks the JetStream API of acme's account has no stream
	// name: no responders (no JetStream on the server, or none for the
	// account) or an error, never a stream's info.
	noStream := func(t *testing.T, name string) {
		t.Helper()
		r, err := bus.Request(ctx, spyConn, nats.NewMsg("$JS.API.STREAM.INFO."+name))
		if errors.Is(err, bus.ErrNoResponders) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.Data), `"error"`) || strings.Contains(string(r.Data), `"config"`) {
			t.Fatalf("JetStream knows stream %s: %s", name, r.Data)
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
		{"tenant asks a server for its own figures", func(t *testing.T) {
			_, err := acme.ServerStats(ctx, acmeOwner)
			forbidden(t, err)
		}},
		{"client asks a server for its own figures", func(t *testing.T) {
			c, err := persist.NewClient(persist.ClientConfig{Conn: clientConn})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if st, err := c.ServerStats(ctx, bobOwner); err != nil || st.ID != bobOwner || st.MaxOpenStreams <= 0 {
				t.Fatalf("the trusted client asks server %s: %+v, %v", bobOwner, st, err)
			}
		}},
		{"client forges a feed message", func(t *testing.T) { pubRefused(t, clientConn, clientV, forged) }},
		{"tenant aims a server's answer at the JetStream API", func(t *testing.T) {
			aimed(t, getOf(streamConfig.Seq), "$JS.API.STREAM.CREATE.steal", func() *nats.Msg { return getOf(streamConfig.Seq) })
			noStream(t, "steal")
		}},
		{"tenant aims the balancer's answer at the JetStream API", func(t *testing.T) {
			aimed(t, question(), "$JS.API.STREAM.CREATE.steal-id", question)
			noStream(t, "steal-id")
		}},
		{"tenant aims a server's answer at another tenant's API", func(t *testing.T) {
			aimed(t, getOf(pwned.Seq), bus.APISubject(bus.DefaultService, "account-b", bobOwner), func() *nats.Msg { return getOf(pwned.Seq) })
		}},
		{"tenant aims the balancer's answer at another tenant's API", func(t *testing.T) {
			aimed(t, question(), bus.APISubject(bus.DefaultService, "account-b", bobOwner), question)
		}},
		{"tenant aims a server's answer at a plain subject", func(t *testing.T) {
			aimed(t, getOf(pwned.Seq), "news.today", func() *nats.Msg { return getOf(pwned.Seq) })
		}},
		{"tenant aims a server's answer at a user inbox prefix without a dot", func(t *testing.T) {
			aimed(t, getOf(pwned.Seq), auth.InboxPrefix("bob"), func() *nats.Msg { return getOf(pwned.Seq) })
		}},
		{"tenant writes without a reply subject", func(t *testing.T) {
			m := getOf(0)
			m.Header.Del(persist.HdrSeq)
			m.Header.Set(persist.HdrCmd, persist.CmdSet)
			m.Data = []byte("unanswered")
			aimed(t, m, "", func() *nats.Msg { return getOf(pwned.Seq) })
			inv, err := own.Inventory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Seq != pwned.Seq {
				t.Fatalf("a write without a reply subject was committed: last seq %d, want %d", inv.Seq, pwned.Seq)
			}
		}},
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

// TestUpRefusesClearTextNetworkBus: up --auth on a non-loopback address
// without --tls-cert would take its users' passwords in the clear: it is
// refused, saying what to give, unless --insecure. Before, it started
// without a word.
func TestUpRefusesClearTextNetworkBus(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	args := []string{"up", "--host", "0.0.0.0", "--auth", dir, "--nats-port", strconv.Itoa(testproc.FreePort(t)), "--data", t.TempDir()}
	_, stderr, code := execute(t, args...)
	if code != exitUsage || !strings.Contains(stderr, "--tls-cert FILE --tls-key FILE") || !strings.Contains(stderr, "--insecure") || !strings.Contains(stderr, "in the clear") {
		t.Fatalf("up --host 0.0.0.0 --auth without TLS: exit %d, stderr %q", code, stderr)
	}
	// --insecure lets it past that check: the next one (an out-of-range
	// --workers, checked later) is what stops it, before it listens.
	_, stderr, code = execute(t, append(args, "--insecure", "--workers", "99")...)
	if code != exitUsage || !strings.Contains(stderr, "--workers") {
		t.Fatalf("with --insecure: exit %d, stderr %q; want the --workers usage error", code, stderr)
	}
	// So does TLS.
	_, stderr, code = execute(t, append(args, "--tls-cert", "c.pem", "--tls-key", "k.pem", "--workers", "99")...)
	if code != exitUsage || !strings.Contains(stderr, "--workers") {
		t.Fatalf("with --tls-cert: exit %d, stderr %q; want the --workers usage error", code, stderr)
	}
}
