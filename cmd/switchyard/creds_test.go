package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard-dev/switchyard/bus/auth"
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
