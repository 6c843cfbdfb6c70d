package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// TestNNTPCommands drives `switchyard nntp groups|over|head` against the
// in-process test server, including AUTHINFO with the password from the
// environment.
func TestNNTPCommands(t *testing.T) {
	t.Parallel()
	srv := nntptest.New(nntptest.Config{Users: map[string]string{"reader": "s3cret"}})
	srv.AddGroup("alt.binaries.test", 500)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	withPass := func(args ...string) (string, string, int) {
		cmd := cli(t, append(args, "--server", srv.Addr(), "--user", "reader")...)
		cmd.Env = append(cmd.Env, "SWITCHYARD_NNTP_PASS=s3cret")
		return testproc.Run(t, cmd)
	}

	out, stderr, code := withPass("nntp", "groups")
	if code != 0 || !strings.Contains(out, "alt.binaries.test") {
		t.Fatalf("groups: exit %d, out %q, stderr %q", code, out, stderr)
	}
	out, stderr, code = withPass("nntp", "over", "alt.binaries.test", "1-20", "--no-progress")
	if code != 0 {
		t.Fatalf("over: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 20 || !strings.Contains(lines[0], "yEnc") {
		t.Fatalf("over printed %d lines, first %q", len(lines), lines[0])
	}
	out, stderr, code = withPass("nntp", "head", "3", "--group", "alt.binaries.test")
	if code != 0 || !strings.Contains(out, "Message-ID:") && !strings.Contains(out, "Message-Id:") {
		t.Fatalf("head: exit %d, out %q, stderr %q", code, out, stderr)
	}

	// Wrong password: a run-time failure (exit 1) in one line.
	cmd := cli(t, "nntp", "groups", "--server", srv.Addr(), "--user", "reader")
	cmd.Env = append(cmd.Env, "SWITCHYARD_NNTP_PASS=wrong")
	if _, stderr, code := testproc.Run(t, cmd); code != exitRuntime || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("wrong password: exit %d, stderr %q", code, stderr)
	}
	// Missing --server is a usage error.
	if _, stderr, code := execute(t, "nntp", "groups"); code != exitUsage {
		t.Fatalf("no server: exit %d, stderr %q", code, stderr)
	}
}

// TestNNTPServerAddressChecked: the nntp commands refuse a --server without
// a host or with a port outside 1-65535 as a usage error naming it, as
// coordinator run does for --nntp. Before, they only looked for a ':', and
// such an address failed as a dial error.
func TestNNTPServerAddressChecked(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:", ":119", "127.0.0.1:99999", "127.0.0.1:abc"} {
		args := []string{"nntp", "groups", "--server", addr}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "--server")
	}
}

// TestNNTPTimeoutMustBePositive: the nntp commands refuse a --timeout of 0
// or less as a usage error naming it, before they dial, as the bus
// commands do. (Was: 0 or a negative value silently meant the one-minute
// default.)
func TestNNTPTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	server := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	for _, to := range []string{"0", "-1s"} {
		args := []string{"nntp", "groups", "--server", server, "--timeout", to}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "--timeout")
	}
}

// TestNNTPOverRangeCheckedBeforeDialing: nntp over refuses a malformed or
// inverted FIRST-LAST as a usage error before it dials, and an open-ended
// FIRST- ends at the group's high mark. Before, the range was parsed only
// once the server answered, so with the server down a bad range failed as
// "connection refused".
func TestNNTPOverRangeCheckedBeforeDialing(t *testing.T) {
	t.Parallel()
	server := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	for _, r := range []string{"abc", "9-3", "0-5"} {
		args := []string{"nntp", "over", "alt.binaries.x", r, "--server", server}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "range")
	}

	srv := nntptest.New(nntptest.Config{})
	srv.AddGroup("alt.binaries.test", 500)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	out, stderr, code := execute(t, "nntp", "over", "alt.binaries.test", "496-", "--no-progress", "--server", srv.Addr())
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[4], "500\t") {
		t.Errorf("over 496-: exit %d, stderr %q, stdout %q; want articles 496 to 500", code, stderr, out)
	}
}

// TestNNTPOutputEscapesServerText: a subject holding a terminal escape
// sequence and a tab is printed escaped by nntp over and nntp head, so it
// neither reaches the terminal nor shifts over's tab-separated columns.
// (Was: both printed the server's bytes as they came.)
func TestNNTPOutputEscapesServerText(t *testing.T) {
	t.Parallel()
	srv := nntptest.New(nntptest.Config{})
	srv.AddGroup("alt.test", 0)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	ctx := context.Background()
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	art := "From: t <t@example.invalid>\nNewsgroups: alt.test\nSubject: red \x1b[31mtext\x1b[0m and\ttab\nMessage-ID: <esc@example.invalid>\n\nbody\n"
	if err := c.Post(ctx, strings.NewReader(art)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"nntp", "over", "alt.test", "1-1", "--no-progress"}, {"nntp", "head", "<esc@example.invalid>"}} {
		out, stderr, code := testproc.Run(t, cli(t, append(args, "--server", srv.Addr())...))
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if strings.ContainsRune(out, '\x1b') || !strings.Contains(out, `\x1b[31mtext`) {
			t.Errorf("%v printed the escape raw or not at all: %q", args, out)
		}
		if args[1] == "over" {
			if f := strings.Split(strings.TrimSpace(out), "\t"); len(f) != 7 {
				t.Errorf("over line has %d tab-separated fields, want 7: %q", len(f), out)
			}
		}
	}
}
