package auth_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchyard-dev/switchyard/bus/auth"
)

// TestInitConfMatchesPlan writes an auth directory and reads the
// configuration back with nats-server's own parser: every user must be
// there with exactly the permissions of its role.
func TestInitConfMatchesPlan(t *testing.T) {
	for _, nkey := range []bool{false, true} {
		name := "password"
		if nkey {
			name = "nkey"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "auth")
			plan := auth.Plan{IDs: []string{"0", "1"}, Tenants: map[string][]string{"acme": {"account-a", "project-p"}, "bob": {"account-b"}}}
			users, err := auth.Init(dir, plan, nkey)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := server.ProcessConfigFile(filepath.Join(dir, auth.ConfFile))
			if err != nil {
				t.Fatalf("nats-server cannot parse the configuration: %v", err)
			}
			perms := map[string]*server.Permissions{}
			accounts := map[string]string{}
			for _, u := range opts.Users {
				perms[u.Username] = u.Permissions
				if u.Account != nil {
					accounts[u.Username] = u.Account.Name
				}
			}
			for _, u := range opts.Nkeys {
				perms[u.Nkey] = u.Permissions
				if u.Account != nil {
					accounts[u.Nkey] = u.Account.Name
				}
			}
			// One account, all of switchyard's users in it (its JetStream
			// is disabled: bus/embedded checks that on a running server).
			if len(opts.Accounts) != 1 || opts.Accounts[0].Name != auth.Account {
				t.Fatalf("accounts %v, want only %s", opts.Accounts, auth.Account)
			}
			for key, acc := range accounts {
				if acc != auth.Account {
					t.Errorf("%s: account %q, want %s", key, acc, auth.Account)
				}
			}
			if len(accounts) != len(perms) {
				t.Errorf("%d of %d users are in an account", len(accounts), len(perms))
			}
			if len(perms) != len(users) {
				t.Fatalf("configuration has %d users, plan %d", len(perms), len(users))
			}
			for _, u := range users {
				c, err := auth.LoadCreds(auth.CredsFile(dir, u.Name))
				if err != nil {
					t.Fatal(err)
				}
				if c.Inbox != u.Inbox {
					t.Errorf("%s: creds inbox %q, want %q", u.Name, c.Inbox, u.Inbox)
				}
				key := c.User
				if nkey {
					key = publicKey(t, c)
				}
				p := perms[key]
				if p == nil {
					t.Fatalf("%s: not in the configuration", u.Name)
				}
				if !slices.Equal(p.Subscribe.Allow, u.Perms.Subscribe) {
					t.Errorf("%s: subscribe %v, want %v", u.Name, p.Subscribe.Allow, u.Perms.Subscribe)
				}
				if len(u.Perms.Publish) > 0 && !slices.Equal(p.Publish.Allow, u.Perms.Publish) {
					t.Errorf("%s: publish %v, want %v", u.Name, p.Publish.Allow, u.Perms.Publish)
				}
				if len(u.Perms.Publish) == 0 && len(p.Publish.Allow) != 0 {
					t.Errorf("%s: may publish on %v, want nothing but responses", u.Name, p.Publish.Allow)
				}
				if (p.Response != nil) != u.Perms.Responses {
					t.Errorf("%s: allow_responses %v, want %v", u.Name, p.Response, u.Perms.Responses)
				}
				if p.Response != nil && (p.Response.MaxMsgs != -1 || p.Response.Expires != auth.ResponseExpiry) {
					t.Errorf("%s: allow_responses %+v", u.Name, *p.Response)
				}
			}
			// Secrets are private, and a second init refuses to replace them.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", e.Name(), fi.Mode().Perm())
				}
			}
			if _, err := auth.Init(dir, plan, nkey); err == nil || !strings.Contains(err.Error(), "exists") {
				t.Fatalf("second init: %v", err)
			}
		})
	}
}

func publicKey(t *testing.T, c auth.Creds) string {
	t.Helper()
	kp, err := nkeysFromSeed(c.Seed)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// TestInitMakesItsDirectoryPrivate: Init leaves its directory mode 0700,
// as docs/security.md promises ("mode 0600 in a 0700 directory"), also one
// that already existed. (Was: os.MkdirAll keeps an existing directory's
// mode, so `mkdir auth && switchyard auth init auth` under umask 022 left
// a 0755 directory listing every user and tenant name to every account.)
func TestInitMakesItsDirectoryPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}}}, false); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Fatalf("auth directory written by Init has mode %#o, want 0700 (docs: \"mode 0600 in a 0700 directory\")", perm)
	}
}

// TestInitLeavesASharedDirectoryAlone: a directory that holds other files
// (auth init ., a shared config directory) is not Init's to chmod: one
// others can read is refused, naming the fix, with its mode and files as
// they were; one private already is used. (Was: chmod 0700 on whatever
// directory was given, locking others out of a shared one.)
func TestInitLeavesASharedDirectoryAlone(t *testing.T) {
	t.Parallel()
	plan := auth.Plan{IDs: []string{"0"}}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.conf")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := auth.Init(dir, plan, false)
	if err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("Init into a shared 0755 directory: %v, want a refusal naming chmod 700", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the shared directory's mode after the refusal: %v %v, want 0755 as it was", fi.Mode().Perm(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, auth.ConfFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused Init wrote %s: %v", auth.ConfFile, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Init(dir, plan, false); err != nil {
		t.Fatalf("Init into a private directory holding other files: %v", err)
	}
}

func TestTenantPermissions(t *testing.T) {
	t.Parallel()
	u := auth.Tenant("persist", "acme", []string{"account-a"})
	want := auth.Permissions{
		Publish:   []string{"persist.account-a.id", "persist.account-a.api.*"},
		Subscribe: []string{"persist.account-a.feed.>", "_INBOX_acme.>"},
	}
	if !slices.Equal(u.Perms.Publish, want.Publish) || !slices.Equal(u.Perms.Subscribe, want.Subscribe) || u.Perms.Responses || u.Inbox != "_INBOX_acme" {
		t.Fatalf("tenant = %+v", u)
	}
}

func TestPlanRejects(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]auth.Plan{
		"no ids":          {},
		"role name":       {IDs: []string{"0"}, Tenants: map[string][]string{"client": {"a"}}},
		"server name":     {IDs: []string{"0"}, Tenants: map[string][]string{"server-9": {"a"}}},
		"bad tenant":      {IDs: []string{"0"}, Tenants: map[string][]string{"Acme": {"a"}}},
		"bad scope":       {IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"a.b"}}},
		"wildcard scope":  {IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"*"}}},
		"no scopes":       {IDs: []string{"0"}, Tenants: map[string][]string{"acme": nil}},
		"bad service":     {Service: "a.b", IDs: []string{"0"}},
		"wildcard server": {IDs: []string{">"}},
	} {
		if _, err := p.Users(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseCreds(t *testing.T) {
	t.Parallel()
	good := "# c\nuser: a\npassword: b\ninbox: _INBOX_a\n"
	c, err := auth.ParseCreds([]byte(good))
	if err != nil || c.User != "a" || c.Password != "b" || c.Inbox != "_INBOX_a" {
		t.Fatalf("ParseCreds = %+v, %v", c, err)
	}
	back, err := auth.ParseCreds(c.Marshal("x"))
	if err != nil || back != c {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	for name, bad := range map[string]string{
		"no password": "user: a\n",
		"unknown key": "user: a\npassword: b\ntoken: c\n",
		"no colon":    "user a\n",
		"both":        "user: a\npassword: b\nnkey: SUAxx\n",
		"bad seed":    "nkey: SUAxx\n",
		"bad inbox":   "user: a\npassword: b\ninbox: _INBOX.x\n",
	} {
		if _, err := auth.ParseCreds([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestPlanRefusesInboxService: a service named like an inbox ("_INBOX",
// "_INBOX_bob") is refused. (Was: accepted, and then every service subject
// passes bus.IsInbox: acme asked the balancer about its own scope with
// reply subject "_INBOX.account-b.feed.log", and the balancer published
// its answer on bob's feed, a forged change bob's watcher reads.)
func TestPlanRefusesInboxService(t *testing.T) {
	t.Parallel()
	for _, service := range []string{"_INBOX", "_INBOX_bob", "_INBOX_client"} {
		p := auth.Plan{Service: service, IDs: []string{"0"}, Tenants: map[string][]string{"acme": {"account-a"}, "bob": {"account-b"}}}
		if _, err := p.Users(); err == nil || !strings.Contains(err.Error(), "_INBOX") {
			t.Errorf("service %q: %v, want a refusal naming _INBOX", service, err)
		}
		if _, err := auth.Init(filepath.Join(t.TempDir(), "auth"), p, false); err == nil {
			t.Errorf("Init with service %q wrote an auth directory", service)
		}
	}
}
