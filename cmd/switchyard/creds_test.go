package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// TestCredsModeRefused: a client command refuses a creds file that group
// or others may read, on one line naming the chmod and the flag; it uses
// the file with --insecure-creds, and once the file is 0600.
func TestCredsModeRefused(t *testing.T) {
	t.Parallel()
	e, _ := startFleet(t, t.TempDir())
	url := e.ClientURL()
	creds := filepath.Join(t.TempDir(), "client.creds")
	if err := os.WriteFile(creds, auth.Creds{User: "client", Password: "secret"}.Marshal("test"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(creds, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"kv", "keys", "hub", "s", "--nats", url, "--creds", creds}

	_, stderr, code := execute(t, args...)
	want := "switchyard: creds " + creds + " is open to other users (mode 0644): chmod 600 " + creds + " (or --insecure-creds to use it anyway)\n"
	if code != exitRuntime || stderr != want {
		t.Fatalf("mode 0644: exit %d, stderr %q; want exit %d, %q", code, stderr, exitRuntime, want)
	}
	if _, stderr, code := execute(t, append(args, "--insecure-creds")...); code != 0 {
		t.Fatalf("mode 0644 with --insecure-creds: exit %d, stderr %q", code, stderr)
	}
	if err := os.Chmod(creds, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := execute(t, args...); code != 0 {
		t.Fatalf("mode 0600: exit %d, stderr %q", code, stderr)
	}
}

// TestAuthInitCredsLoad: the files auth init writes pass the mode check.
func TestAuthInitCredsLoad(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, stderr, code := execute(t, "auth", "init", dir, "--tenant", "acme=account-a"); code != 0 {
		t.Fatalf("auth init: exit %d: %s", code, stderr)
	}
	for _, user := range []string{auth.RoleClient, "acme", "server-0"} {
		if _, err := auth.LoadCreds(auth.CredsFile(dir, user)); err != nil {
			t.Errorf("%s: %v", user, err)
		}
	}
}

// TestUpAuthCredsHints: up --auth's error for a creds file of the auth
// directory says what is wrong with it: open to other users, the chmod and
// --insecure-creds (which up takes, as the other commands do, and then
// starts); missing, auth init --ids. Before, a file at mode 0644 got the
// hint of a missing one ("does the auth directory hold credentials for
// server-0? see switchyard auth init --ids"), and up had no
// --insecure-creds.
func TestUpAuthCredsHints(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := auth.Init(dir, auth.Plan{IDs: []string{"0"}}, false); err != nil {
		t.Fatal(err)
	}
	creds := auth.CredsFile(dir, "server-0")
	if err := os.Chmod(creds, 0o644); err != nil {
		t.Fatal(err)
	}
	up := func(extra ...string) []string {
		return append([]string{"up", "--nats-port", strconv.Itoa(testproc.FreePort(t)), "--auth", dir, "--data", t.TempDir(), "--no-work", "--http", "", "--servers", "1"}, extra...)
	}

	_, stderr, code := execute(t, up()...)
	want := "switchyard: switchyard-persist-0: creds " + creds + " is open to other users (mode 0644): chmod 600 " + creds + " (or --insecure-creds to use it anyway)\n"
	if code != exitRuntime || stderr != want {
		t.Fatalf("server-0.creds at 0644: exit %d, stderr\n%q\nwant exit %d,\n%q", code, stderr, exitRuntime, want)
	}

	_, stderr, code = execute(t, up("--servers", "2", "--insecure-creds")...)
	if code != exitRuntime || !strings.Contains(stderr, "server-1.creds") || !strings.HasSuffix(stderr, "(does the auth directory hold credentials for server-1? see switchyard auth init --ids)\n") {
		t.Fatalf("no server-1.creds: exit %d, stderr %q; want the --ids hint", code, stderr)
	}

	cmd := cli(t, up("--insecure-creds")...)
	testproc.Start(t, cmd, "Stop with Ctrl-C")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, cmd); code != 0 {
		t.Fatalf("up --insecure-creds: exit %d after SIGTERM, want 0", code)
	}
}
