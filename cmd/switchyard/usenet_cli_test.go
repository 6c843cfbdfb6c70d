package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/usenet"
)

// TestUsenetCommandsBadInput: the usenet commands refuse bad flags and
// arguments with exit 2 naming what is wrong, before they connect.
func TestUsenetCommandsBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usenet", "nzb"}, "RELEASE"},
		{[]string{"usenet", "nzb", "a", "b"}, "RELEASE"},
		{[]string{"usenet", "releases", "--limit", "-1"}, "--limit -1"},
		{[]string{"usenet", "releases", "--usenet-scope", "Bad Scope"}, "Bad Scope"},
		{[]string{"usenet", "serve", "--http", ""}, "--http"},
		{[]string{"usenet", "serve", "--http", "0.0.0.0:8080"}, "--http-insecure"},
		{[]string{"worker", "run", "--settle-completion", "1.5"}, "--settle-completion 1.5"},
		{[]string{"worker", "run", "--settle", "0s"}, "--settle"},
		{[]string{"bench", "index", "--search", "x"}, `"x"`},
		{[]string{"bench", "ingest", "--indexer", "nope"}, `"nope"`},
		{[]string{"bench", "ingest", "--postprocess"}, "--postprocess needs --indexer usenet"},
		{[]string{"usenet", "postprocess", "--usenet-scope", "Bad Scope"}, "Bad Scope"},
		// (Was: a --base-url without a scheme or host was taken, and every
		// feed link built on it was broken.)
		{[]string{"usenet", "serve", "--base-url", "indexer.lan"}, `"indexer.lan"`},
		{[]string{"usenet", "serve", "--base-url", "ftp://indexer.lan"}, "--base-url"},
		{[]string{"up", "--base-url", "https://indexer.lan/?x=1"}, "--base-url"},
		{[]string{"up", "--base-url", "https://u:p@indexer.lan"}, "--base-url"},
	} {
		_, stderr, code := execute(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// TestUsenetCommandsEmpty: against a fleet with nothing indexed, releases
// says so (and --json is an empty array), and nzb of an unknown release
// exits 3.
func TestUsenetCommandsEmpty(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	out, stderr, code := execute(t, "usenet", "releases", "--nats", env.URL())
	if code != 0 || !strings.Contains(out, "no visible releases") {
		t.Fatalf("releases: exit %d, %q %q", code, out, stderr)
	}
	if out, _, code := execute(t, "usenet", "releases", "--json", "--nats", env.URL()); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("releases --json: exit %d, %q", code, out)
	}
	if _, stderr, code := execute(t, "usenet", "nzb", "0123456789abcdef0123456789abcdef", "--nats", env.URL()); code != exitNotFound || !strings.Contains(stderr, "no visible release") {
		t.Fatalf("nzb of an unknown release: exit %d, %q", code, stderr)
	}
	if out, stderr, code := execute(t, "usenet", "postprocess", "--nats", env.URL()); code != 0 || !strings.Contains(out, "releases processed  0") {
		t.Fatalf("postprocess: exit %d, %q %q", code, out, stderr)
	}
	if out, _, code := execute(t, "usenet", "postprocess", "--json", "--nats", env.URL()); code != 0 || !strings.Contains(out, `"pending": 0`) {
		t.Fatalf("postprocess --json: exit %d, %q", code, out)
	}
}

// TestUsenetServeLogsItsStop: usenet serve says when it stops on a signal,
// as the other long-running commands do, then exits 0.
// (Was: it logged "usenet api listening" and then nothing at all when SIGTERM stopped it.)
func TestUsenetServeLogsItsStop(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	ch := startWatched(t, cli(t, "usenet", "serve", "--http", "127.0.0.1:0", "--data", t.TempDir(), "--nats", env.URL()))
	if ch.waitExitOrLine(t, "newznab api") {
		t.Fatalf("usenet serve exited %d before serving; stderr %s", ch.code, ch.stderr.String())
	}
	if err := ch.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := ch.waitExit(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d, want 0; stderr %q", code, ch.stderr.String())
	}
	if s := ch.stderr.String(); !strings.Contains(s, "usenet api stopping") {
		t.Fatalf("stderr says nothing of the stop: %q", s)
	}
}

// TestMinZeroMeansNoMinimum: --min-files 0 and --min-bytes 0 ("at least
// nothing") turn the minimum off, passed on as -1 since usenet.SettleConfig
// reads 0 as its default; other values pass unchanged. Before, 0 was passed
// on as it was and silently became the default (1 file, 1 MiB).
func TestMinZeroMeansNoMinimum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		files, wantFiles int
		bytes, wantBytes int64
	}{
		{0, -1, 0, -1},
		{-1, -1, -1, -1},
		{3, 3, 5000, 5000},
	} {
		f := usenetFlags{scope: usenet.DefaultScope, settle: 2 * time.Hour, completion: 0.95, postGap: time.Hour, minFiles: tc.files, minBytes: tc.bytes}
		cfg, err := f.settleConfig()
		if err != nil || cfg.MinFiles != tc.wantFiles || cfg.MinBytes != tc.wantBytes {
			t.Errorf("--min-files %d --min-bytes %d: MinFiles %d, MinBytes %d, %v; want %d, %d", tc.files, tc.bytes, cfg.MinFiles, cfg.MinBytes, err, tc.wantFiles, tc.wantBytes)
		}
	}
}
