package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testtls"
)

// TestConnectRefusedIsNotUnreachable: a NATS server that answers and
// refuses the client (its credentials, its TLS certificate, TLS wanted by
// the client only) fails a command with one line saying the server at the
// URL refused it and what to give, never that NATS cannot be reached nor
// to start switchyard up, as a client command and as a role. Before, each
// began "cannot reach NATS at URL (is `switchyard up` running? ...)".
func TestConnectRefusedIsNotUnreachable(t *testing.T) {
	t.Parallel()
	tlsFiles := testtls.New(t)
	passwordURL, _ := testnats.PasswordBus(t)
	tlsBus, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, TLS: testtls.ServerConfig(t, tlsFiles)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tlsBus.Shutdown)
	plainURL := testnats.Server(t, testnats.Options{}).ClientURL()
	tlsURL := tlsBus.ClientURL()
	// An NKey user's creds file, given to a bus whose users have passwords.
	seed, _, err := auth.NewNkey()
	if err != nil {
		t.Fatal(err)
	}
	nkeyCreds := filepath.Join(t.TempDir(), "nkey.creds")
	if err := os.WriteFile(nkeyCreds, auth.Creds{Seed: seed, Inbox: auth.InboxPrefix("acme")}.Marshal("an NKey user"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, url string
		flags     []string
		want      string // the line, up to the nats.go error
	}{
		{"credentials", passwordURL, nil,
			"switchyard: NATS at " + passwordURL + " refused the credentials (give the creds file of one of its users with --creds or $SWITCHYARD_CREDS): nats: "},
		// (Was: "cannot reach NATS at URL (is switchyard up running?)".)
		{"NKey creds on a password bus", passwordURL, []string{"--creds", nkeyCreds},
			"switchyard: NATS at " + passwordURL + " takes no NKey logins (give the creds file of one of its users with --creds or $SWITCHYARD_CREDS): nats: "},
		{"untrusted certificate", tlsURL, nil,
			"switchyard: NATS at " + tlsURL + " answered with a TLS certificate this client does not trust (give the CA that signed it with --tls-ca or $SWITCHYARD_TLS_CA): nats: tls error: "},
		{"TLS wanted, none offered", plainURL, []string{"--tls-ca", tlsFiles.CA},
			"switchyard: NATS at " + plainURL + " offers no TLS, and --tls-ca (or $SWITCHYARD_TLS_CA) asks for it: nothing was sent (drop --tls-ca for a bus without TLS, or run the bus with TLS: up --tls-cert FILE --tls-key FILE): nats: secure connection not available\n"},
	} {
		for _, cmd := range [][]string{
			{"kv", "get", "hub", "s", "k", "--timeout", "10s"},
			{"balancer", "--ids", "0"},
		} {
			t.Run(tc.name+"/"+cmd[0], func(t *testing.T) {
				args := append(append(append([]string(nil), cmd...), "--nats", tc.url), tc.flags...)
				_, stderr, code := execute(t, args...)
				if code != exitRuntime || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 ||
					strings.Contains(stderr, "cannot reach") || strings.Contains(stderr, "switchyard up` running") {
					t.Fatalf("%q: exit %d, stderr\n%q\nwant exit %d, one line starting\n%q", args, code, stderr, exitRuntime, tc.want)
				}
			})
		}
	}
}

// TestTLSCAFileCheckedFirst: a --tls-ca (or $SWITCHYARD_TLS_CA) that is a
// directory, missing, or holds no PEM certificate fails the command in one
// line naming where it came from and the path, before it dials, as a
// client command and as a role.
// (Was: "cannot reach NATS at URL (is `switchyard up` running? ...): ...
// failed to parse root certificate", with the bus up.)
func TestTLSCAFileCheckedFirst(t *testing.T) {
	t.Parallel()
	url := testnats.Server(t, testnats.Options{}).ClientURL()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ca, want string
	}{
		{"not PEM", notPEM, `--tls-ca "` + notPEM + `": no PEM certificate in it`},
		{"directory", dir, `--tls-ca "` + dir + `": read ` + dir + `: is a directory`},
		{"missing", filepath.Join(dir, "nope.pem"), `--tls-ca "` + filepath.Join(dir, "nope.pem") + `": open `},
	} {
		for _, cmd := range [][]string{
			{"kv", "get", "hub", "s", "k"},
			{"balancer", "--ids", "0"},
		} {
			t.Run(tc.name+"/"+cmd[0], func(t *testing.T) {
				args := append(append([]string(nil), cmd...), "--nats", url, "--tls-ca", tc.ca)
				_, stderr, code := execute(t, args...)
				if code != exitRuntime || !strings.HasPrefix(stderr, "switchyard: "+tc.want) || strings.Count(stderr, "\n") != 1 {
					t.Fatalf("%q: exit %d, stderr\n%q\nwant exit %d, one line starting\n%q", args, code, stderr, exitRuntime, "switchyard: "+tc.want)
				}
			})
		}
	}
	c := cli(t, "kv", "get", "hub", "s", "k", "--nats", url)
	c.Env = append(c.Env, "SWITCHYARD_TLS_CA="+notPEM)
	_, stderr, code := testproc.Run(t, c)
	if want := `switchyard: $SWITCHYARD_TLS_CA "` + notPEM + `": no PEM certificate in it`; code != exitRuntime || !strings.HasPrefix(stderr, want) {
		t.Fatalf("$SWITCHYARD_TLS_CA: exit %d, stderr %q; want exit %d and %q", code, stderr, exitRuntime, want)
	}
}

// TestUnreachableURLRedacted: the password or token of a --nats URL is not
// printed when the connection fails. (Was: "cannot reach NATS at
// nats://alice:s3cret@...".)
func TestUnreachableURLRedacted(t *testing.T) {
	t.Parallel()
	port := strconv.Itoa(testproc.FreePort(t)) // nothing listens there
	for _, tc := range []struct{ url, want string }{
		{"nats://alice:s3cret@127.0.0.1:" + port, "nats://alice:xxxxx@127.0.0.1:" + port},
		{"nats://s3cret@127.0.0.1:" + port, "nats://xxxxx@127.0.0.1:" + port},
	} {
		_, stderr, code := execute(t, "kv", "get", "hub", "s", "k", "--nats", tc.url, "--timeout", "2s")
		if code != exitRuntime || strings.Contains(stderr, "s3cret") || !strings.Contains(stderr, tc.want) {
			t.Errorf("--nats %s: exit %d, stderr %q; want exit %d naming %s and no secret", tc.url, code, stderr, exitRuntime, tc.want)
		}
	}
}
