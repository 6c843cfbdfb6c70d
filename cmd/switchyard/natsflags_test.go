package main

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
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

	for _, tc := range []struct {
		name, url string
		flags     []string
		want      string // the line, up to the nats.go error
	}{
		{"credentials", passwordURL, nil,
			"switchyard: NATS at " + passwordURL + " refused the credentials (give the creds file of one of its users with --creds or $SWITCHYARD_CREDS): nats: "},
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
