package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
)

// startFleet starts an embedded NATS server on a random port, a balancer and
// one persist server (id "0") on it, all owned by t, and returns the server
// and a connection to it. dataDir "" gives a server with ephemeral streams
// only.
func startFleet(t *testing.T, dataDir string) (*embedded.Server, *nats.Conn) {
	t.Helper()
	e, nc := testnats.Start(t)
	ids := []string{"0"}
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: nc, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	srv, err := server.New(server.Config{Conn: testnats.Conn(t, e), ID: "0", IDs: ids, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return e, nc
}

// startPersist is startFleet with a data directory, and returns a function
// that runs the switchyard CLI against it: stdout, stderr and the exit code.
// stdin, when not nil, is the child's standard input.
func startPersist(t *testing.T) func(stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	e, _ := startFleet(t, t.TempDir())
	url := e.ClientURL()
	return func(stdin []byte, args ...string) (string, string, int) {
		t.Helper()
		cmd := cli(t, append(args, "--nats", url)...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		return testproc.Run(t, cmd)
	}
}

// mustRun fails the test unless the command exits 0, and returns its stdout.
func mustRun(t *testing.T, sy func([]byte, ...string) (string, string, int), stdin []byte, args ...string) string {
	t.Helper()
	out, stderr, code := sy(stdin, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	return out
}

// TestGetRawRoundTrip: a binary value written from stdin comes back byte for
// byte with --raw (NUL bytes, invalid UTF-8, no trailing newline, a trailing
// CR), and with one newline added without --raw, for kv and stream alike.
func TestGetRawRoundTrip(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	values := map[string][]byte{
		"binary":      {0x00, 0xff, 0xfe, 'a', 0x00, 0x80, '\r'},
		"no-newline":  []byte("no newline at the end"),
		"two-newline": []byte("ends in two\n\n"),
		"nul-only":    {0x00},
	}
	for name, v := range values {
		mustRun(t, sy, v, "kv", "set", "hub", "blobs", name, "-")
		if got := mustRun(t, sy, nil, "kv", "get", "hub", "blobs", name, "--raw"); got != string(v) {
			t.Errorf("kv get --raw %s = %q, want %q", name, got, v)
		}
		if got := mustRun(t, sy, nil, "kv", "get", "hub", "blobs", name); got != string(v)+"\n" {
			t.Errorf("kv get %s = %q, want the value and a newline", name, got)
		}
		seq := strings.TrimSpace(mustRun(t, sy, v, "stream", "pub", "hub", "raw", "-"))
		if got := mustRun(t, sy, nil, "stream", "get", "hub", "raw", seq, "--raw"); got != string(v) {
			t.Errorf("stream get --raw %s = %q, want %q", name, got, v)
		}
		if got := mustRun(t, sy, nil, "stream", "get", "hub", "raw", seq); got != string(v)+"\n" {
			t.Errorf("stream get %s = %q, want the value and a newline", name, got)
		}
	}
}

// TestNotFoundExitCode: a missing key or message exits 3 with the code on
// stderr, while a refused request exits 1 and NATS being unreachable exits 1.
func TestNotFoundExitCode(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	mustRun(t, sy, nil, "kv", "set", "hub", "demo", "k", "v")
	mustRun(t, sy, nil, "stream", "pub", "hub", "log", "one")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"kv get missing key", []string{"kv", "get", "hub", "demo", "nope"}, exitNotFound, "not-found"},
		{"kv get missing stream", []string{"kv", "get", "hub", "never-written", "k", "--raw"}, exitNotFound, "not-found"},
		{"stream get missing seq", []string{"stream", "get", "hub", "log", "99"}, exitNotFound, "not-found"},
		{"refused write", []string{"kv", "set", "hub", "demo", "k", "w", "--prev-seq", "0"}, exitRuntime, "wrong-last-sequence"},
	}
	for _, c := range cases {
		out, stderr, code := sy(nil, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, stderr, c.code, c.want)
		}
		if out != "" {
			t.Errorf("%s: stdout %q, want nothing", c.name, out)
		}
	}
}
