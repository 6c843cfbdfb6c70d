package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/auth"
)

// TestUpTryDefaults: on the default bus the Try lines need no flags.
func TestUpTryDefaults(t *testing.T) {
	t.Parallel()
	got := upTry(upConfig{service: "persist", work: upWork{off: true}}, defaultLocalURL)
	want := `Try:
  switchyard kv set hub demo greeting hello
  switchyard kv get hub demo greeting
  switchyard stream pub hub log 'first event'
  switchyard watch hub log                # every change, live
  nats req persist.hub.id ''          # the plain NATS client works too
`
	if got != want {
		t.Fatalf("Try block:\n%s\nwant:\n%s", got, want)
	}
}

// TestUpTryCarriesFlags: under --auth, TLS, a non-default port and service
// every Try line carries what it needs to reach the bus: the switchyard
// commands --nats, --creds, --tls-ca and --service, the nats client
// --server, the client's user and password (read from the file, never
// printed), its inbox prefix and --tlsca.
func TestUpTryCarriesFlags(t *testing.T) {
	t.Parallel()
	const url = "nats://127.0.0.1:4333"
	for _, nkey := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "my auth")
		if _, err := auth.Init(dir, auth.Plan{Service: "svc", IDs: []string{"0"}}, nkey); err != nil {
			t.Fatal(err)
		}
		creds := auth.CredsFile(dir, auth.RoleClient)
		c, err := auth.LoadCreds(creds)
		if err != nil {
			t.Fatal(err)
		}
		cfg := upConfig{service: "svc", authDir: dir, tlsCert: "cert.pem", work: upWork{source: "src"}}
		got := upTry(cfg, url)
		sy := " --nats " + url + " --creds '" + creds + "' --tls-ca CA.pem --service svc"
		natsWant := " --server " + url + ` --user=client --password="$(sed -n 's/^password: //p' '` + creds + `')" --inbox-prefix _INBOX_client --tlsca CA.pem`
		if nkey {
			natsWant = " --server " + url + " --nkey '" + strings.TrimSuffix(creds, ".creds") + ".nk' --inbox-prefix _INBOX_client --tlsca CA.pem"
		}
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if lines[0] != "Try:" {
			t.Fatalf("block starts %q", lines[0])
		}
		var sawNATS, sawWork bool
		for _, l := range lines[1:] {
			cmd, _, _ := strings.Cut(l, "#")
			cmd = strings.TrimSpace(cmd)
			switch {
			case strings.HasPrefix(cmd, "switchyard "):
				if !strings.HasSuffix(cmd, sy) {
					t.Errorf("nkey %v: %q does not end in %q", nkey, cmd, sy)
				}
				sawWork = sawWork || strings.HasPrefix(cmd, "switchyard work status --source src")
			case strings.HasPrefix(cmd, "nats "):
				sawNATS = true
				if want := "nats req svc.hub.id ''" + natsWant; cmd != want {
					t.Errorf("nkey %v: nats line\n%q, want\n%q", nkey, cmd, want)
				}
			case nkey && strings.HasPrefix(cmd, "(umask 077; sed -n 's/^nkey: //p' '"+creds+"' > "):
			default:
				t.Errorf("nkey %v: unexpected line %q", nkey, l)
			}
			if c.Password != "" && strings.Contains(l, c.Password) || c.Seed != "" && strings.Contains(l, c.Seed) {
				t.Errorf("nkey %v: %q shows the secret", nkey, l)
			}
		}
		if !sawNATS || !sawWork {
			t.Errorf("nkey %v: no nats or work status line in\n%s", nkey, got)
		}
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/tmp/sy-auth/client.creds": "/tmp/sy-auth/client.creds",
		"nats://127.0.0.1:4333":     "nats://127.0.0.1:4333",
		"/tmp/my auth/x":            "'/tmp/my auth/x'",
		"it's":                      `'it'\''s'`,
		"$HOME":                     "'$HOME'",
		"":                          "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
