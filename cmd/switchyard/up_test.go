package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/placement"
)

// TestUpChecksFlagsBeforeCreatingData: up checks every flag before it
// writes anything, so a usage error leaves no --data directory behind.
// Before, it created --data before checking --workers, the work flags,
// --source, the settle flags and the region flags.
func TestUpChecksFlagsBeforeCreatingData(t *testing.T) {
	t.Parallel()
	for _, bad := range [][]string{
		{"--workers", "99"},
		{"--peer", "us=http://127.0.0.1:1"},
		{"--settle", "-1s"},
	} {
		dir := filepath.Join(t.TempDir(), "new-data")
		args := append([]string{"up", "--data", dir, "--http", ""}, bad...)
		_, stderr, code := execute(t, args...)
		if code != exitUsage {
			t.Fatalf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%q: refused as a usage error, but created --data %s", args, dir)
		}
	}
}

// TestUpRefusesUnusableDirs: up, like persist serve, fails at start with
// a run-time error naming the flag when its --data or --archive is not a
// directory it can write (here: a regular file). (Was: up made --data but
// did not check --archive: it started, said it was up, and its persist
// servers answered every persistent request with internal.)
func TestUpRefusesUnusableDirs(t *testing.T) {
	t.Parallel()
	for _, c := range unusableDirCases(t) {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"up", "--no-work", "--nats-port", strconv.Itoa(testproc.FreePort(t))}, c.args...)
			ch := startWatched(t, cli(t, args...))
			if !ch.waitExitOrLine(t, "switchyard is up") {
				_ = ch.cmd.Process.Signal(syscall.SIGTERM)
				ch.waitExit(t)
				t.Fatalf("%q with --%s a regular file started; want a start error and a non-zero exit", args, c.name)
			}
			if ch.code != exitRuntime || !strings.Contains(ch.stderr.String(), "--"+c.name) {
				t.Fatalf("%q: exit %d, stderr %q; want exit %d naming --%s", args, ch.code, ch.stderr.String(), exitRuntime, c.name)
			}
		})
	}
}

// TestUpNoWorkKeepsUsenetScope: up --no-work still serves the Newznab
// API, the releases page and the search index (its HTTP side), which read
// the usenet records of --usenet-scope (written by the workers of a fleet
// on up's bus), so the fleet config keeps the scope. (Was: with --no-work
// up dropped the flag, and the API silently read the default scope
// "usenet" whatever --usenet-scope said.)
func TestUpNoWorkKeepsUsenetScope(t *testing.T) {
	t.Parallel()
	cfg := upConfig{
		host: "127.0.0.1", port: 4222, dataDir: t.TempDir(), servers: 1, placementName: "rendezvous",
		placement: placement.Rendezvous, service: "persist",
		http: httpFlags{addr: "127.0.0.1:0"},
		work: upWork{off: true, source: sourceDefault, usenetOpts: usenetFlags{scope: "indexer-eu"}},
	}
	fc, err := cfg.fleetConfig()
	if err != nil {
		t.Fatal(err)
	}
	if fc.API.Dir == "" {
		t.Fatal("up with --http serves no API")
	}
	if fc.Work.UsenetScope != "indexer-eu" {
		t.Fatalf("up --no-work --usenet-scope indexer-eu: the API reads scope %q (\"\" is the default usenet), want indexer-eu", fc.Work.UsenetScope)
	}
}

// TestUpRefusesUnreadableAuthAndTLSFirst: an --auth DIR without the
// nats-server.conf of switchyard auth init, or a --tls-cert and --tls-key
// that cannot be read, fail the start in one line naming the flag (and,
// for --auth, the command that makes the directory), before up (or events
// serve, for --auth) has started anything or made its --data.
// (Was: "http: read auth dir: error opening config file: ..." or "tls
// certificate: open ...", with --data made.)
func TestUpRefusesUnreadableAuthAndTLSFirst(t *testing.T) {
	t.Parallel()
	emptyAuth := t.TempDir()
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"up auth", []string{"up", "--auth", emptyAuth}, []string{`--auth "` + emptyAuth + `": no nats-server.conf in it`, "switchyard auth init DIR"}},
		{"up tls", []string{"up", "--tls-cert", missing, "--tls-key", missing}, []string{`--tls-cert "` + missing + `"`, "no such file"}},
		{"events serve auth", []string{"events", "serve", "--auth", emptyAuth, "--http", "127.0.0.1:0", "--nats", deadNATS(t)}, []string{`--auth "` + emptyAuth + `": no nats-server.conf in it`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new-data")
			args := append(c.args, "--no-work", "--data", dir, "--nats-port", strconv.Itoa(testproc.FreePort(t)), "--http", "127.0.0.1:0")
			if c.args[0] == "events" {
				args = c.args
			}
			_, stderr, code := execute(t, args...)
			if code != exitRuntime || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("%q: exit %d, stderr %q; want exit %d and one line", args, code, stderr, exitRuntime)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%q: stderr %q does not say %q", args, stderr, w)
				}
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("%q: refused, but created --data %s", args, dir)
			}
		})
	}
}

// TestDataDirEmptyIsUsage: an empty --data (a script's unset variable) is a
// usage error naming it.
// (Was: up and usenet serve tried to make it: "--data \"\": create: mkdir : no
// such file or directory", exit 1.)
func TestDataDirEmptyIsUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"up", "--no-work", "--data", "", "--http", ""},
		{"usenet", "serve", "--data", "", "--nats", deadNATS(t)},
	} {
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "--data is empty")
	}
}
