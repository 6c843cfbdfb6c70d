package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
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

// TestClientTimeoutMustBePositive: the client commands refuse a
// non-positive --timeout as a usage error naming it, before they connect,
// as watch and events tail do. Before, only those two checked it, and the
// others reported a misleading run-time error from a live bus ("timeout
// invalid", "context deadline exceeded").
func TestClientTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	e, _ := testnats.Start(t) // a live bus: the failure is the flag's alone
	for _, to := range []string{"-1s", "0"} {
		args := []string{"kv", "get", "hub", "s", "k", "--nats", e.ClientURL(), "--timeout", to}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "--timeout")
	}
}

// slowProxy forwards TCP connections to target, holding back the server's
// first bytes (the NATS INFO) for delay: a bus that is slow to accept a
// client, as a loaded server is.
func slowProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			go func() {
				defer client.Close()
				defer server.Close()
				_, _ = io.Copy(server, client)
			}()
			go func() {
				defer client.Close()
				defer server.Close()
				time.Sleep(delay) // the latency simulated, not a wait for an event
				_, _ = io.Copy(client, server)
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

// TestTimeoutBoundsWholeCommand: --timeout ("time limit for the whole
// command") is one deadline from before the connect: a bus slow to accept
// the client leaves the requests only what remains of it. (Was: the
// connect got a --timeout of its own and the requests then a full
// --timeout, so a command could run for twice --timeout.) Here the connect
// takes 2s of a 3s --timeout and persist never answers: the command must
// end near 3s, where it took 5s. The ceiling, --timeout plus half, is a
// bound on overrunning, not a measure of how close the command keeps to it.
func TestTimeoutBoundsWholeCommand(t *testing.T) {
	t.Parallel()
	e, nc := testnats.Start(t)
	silentPersist(t, nc)
	u, _ := strings.CutPrefix(e.ClientURL(), "nats://")
	const timeout = 3 * time.Second
	url := slowProxy(t, u, 2*time.Second)
	start := time.Now()
	_, stderr, code := testproc.Run(t, cli(t, "kv", "get", "hub", "demo", "k", "--timeout", timeout.String(), "--nats", url))
	took := time.Since(start)
	if code == 0 {
		t.Fatalf("kv get against a silent persist answered: %s", stderr)
	}
	if took > timeout+timeout/2 {
		t.Errorf("kv get --timeout %v took %v (exit %d, %s): --timeout does not bound the whole command", timeout, took.Round(100*time.Millisecond), code, strings.TrimSpace(stderr))
	}
}

// silentPersist subscribes nc to every persist subject (the balancer's and
// the servers') and answers nothing, until the test ends.
func silentPersist(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.Subscribe("persist.>", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestTimeoutRanOutSaysSo: a command whose --timeout ends before persist
// answers says that the time limit ran out, naming the flag and its
// value. (Was: "get "hub"/"s": context deadline exceeded (last error: ask
// balancer: ...: request timed out)", and with a very short --timeout
// "cannot reach NATS ... (is `switchyard up` running?)" against a bus that
// was up.)
func TestTimeoutRanOutSaysSo(t *testing.T) {
	t.Parallel()
	e, nc := testnats.Start(t)
	silentPersist(t, nc)
	for _, to := range []string{"300ms", "1ns"} {
		args := []string{"kv", "get", "hub", "s", "k", "--nats", e.ClientURL(), "--timeout", to}
		_, stderr, code := execute(t, args...)
		// 1ns may end during the connect or after it: either way the
		// line starts with the flag.
		if code != exitRuntime || !strings.HasPrefix(stderr, "switchyard: --timeout "+to+" ran out ") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and a line starting %q", args, code, stderr, exitRuntime, "switchyard: --timeout "+to+" ran out")
		}
	}
}

// TestStreamArgumentChecked: the kv and stream commands check STREAM
// (persist.ValidStreamName) and stream pub's --key (persist.ValidKey)
// before they connect, and refuse a bad one as a usage error naming it.
// Before, STREAM was not checked at all, so an empty or whitespace-padded
// name failed as "cannot reach NATS" or as a run-time bad request.
func TestStreamArgumentChecked(t *testing.T) {
	t.Parallel()
	dead := deadNATS(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"kv", "get", "hub", "", "k"}, "STREAM"},
		{[]string{"kv", "set", "hub", " s", "k", "v"}, "STREAM"},
		{[]string{"kv", "keys", "hub", "s\n"}, "STREAM"},
		{[]string{"stream", "pub", "hub", "", "v"}, "STREAM"},
		{[]string{"stream", "ls", "hub", "s "}, "STREAM"},
		{[]string{"stream", "pub", "hub", "s", "v", "--key", " k"}, "--key"},
	} {
		args := append(tc.args, "--nats", dead)
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, tc.want)
	}
}

// TestStreamLsRefusesInvertedRange: stream ls refuses --from after --to as
// a usage error naming them, before it connects, as nntp over refuses an
// inverted range. Before, it listed nothing and exited 0.
func TestStreamLsRefusesInvertedRange(t *testing.T) {
	t.Parallel()
	args := []string{"stream", "ls", "hub", "s", "--from", "5", "--to", "3", "--nats", deadNATS(t)}
	_, stderr, code := execute(t, args...)
	wantUsage(t, args, stderr, code, "--from")
}

// TestStreamLsJSONBinaryValue: stream ls --json prints a value that is
// not UTF-8 in hex with "enc":"hex", as events tail --json does, and a
// UTF-8 value as itself without "enc". Before, a binary value was put in
// the JSON string as it was, so its bytes became U+FFFD unnoticed.
func TestStreamLsJSONBinaryValue(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	binary := []byte{0xff, 0xfe, 'x', 0x80}
	mustRun(t, sy, binary, "stream", "pub", "hub", "bin", "-")
	mustRun(t, sy, nil, "stream", "pub", "hub", "bin", "grüße")
	out := mustRun(t, sy, nil, "stream", "ls", "hub", "bin", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("stream ls --json printed %d lines, want 2: %q", len(lines), out)
	}
	for i, want := range []map[string]any{
		{"value": "fffe7880", "enc": "hex"},
		{"value": "grüße", "enc": nil},
	} {
		var l map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatalf("stream ls --json: %v: %q", err, lines[i])
		}
		if l["value"] != want["value"] || l["enc"] != want["enc"] {
			t.Errorf("stream ls --json line %d = %s, want value %q, enc %v", i+1, lines[i], want["value"], want["enc"])
		}
	}
}

// TestPreviewCutsOnRuneBoundary: preview, the value column of stream ls
// and watch, cuts a long value between two runes. Before, it cut at a byte
// offset and could split a multi-byte rune into invalid UTF-8.
func TestPreviewCutsOnRuneBoundary(t *testing.T) {
	t.Parallel()
	v := []byte(strings.Repeat("a", 119) + strings.Repeat("日本語", 10))
	p := preview(v)
	if !utf8.ValidString(p) {
		t.Errorf("preview of a valid UTF-8 value is not valid UTF-8: %q", p)
	}
	if !strings.HasPrefix(p, strings.Repeat("a", 119)+"…") {
		t.Errorf("preview = %q, want the 119 a's, then the cut", p)
	}
}

// TestPersistServeRefusesUnusableDirs: persist serve stores every stream
// under --data (and backs it up to --archive), so given a --data or an
// --archive it cannot use (here: a regular file) it fails at start with a
// run-time error. (Was: it checked neither, announced "persist server 0
// ready" and reported ready on /readyz, then answered every persistent
// request with internal, "open stream: mkdir ...: not a directory".)
func TestPersistServeRefusesUnusableDirs(t *testing.T) {
	t.Parallel()
	e, _ := testnats.Start(t)
	for _, c := range unusableDirCases(t) {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"persist", "serve", "--id", "0", "--ids", "0", "--service", "unusable" + c.name, "--nats", e.ClientURL()}, c.args...)
			ch := startWatched(t, cli(t, args...))
			if !ch.waitExitOrLine(t, "ready on") {
				_ = ch.cmd.Process.Signal(syscall.SIGTERM)
				ch.waitExit(t)
				t.Fatalf("%q with --%s a regular file started and printed %q; want a start error and a non-zero exit", args, c.name, strings.TrimSpace(ch.stdout()))
			}
			if ch.code != exitRuntime || !strings.Contains(ch.stderr.String(), "--"+c.name) {
				t.Fatalf("%q: exit %d, stderr %q; want exit %d naming --%s", args, ch.code, ch.stderr.String(), exitRuntime, c.name)
			}
		})
	}
}

// TestStreamPubSaysDuplicate: a pub repeated with its --msg-id prints the
// first write's seq, as before, and says on stderr that nothing was
// written now.
// (Was: the repeat looked like a write of its own.)
func TestStreamPubSaysDuplicate(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	first := mustRun(t, sy, nil, "stream", "pub", "hub", "log", "one", "--msg-id", "order-1")
	out, stderr, code := sy(nil, "stream", "pub", "hub", "log", "one", "--msg-id", "order-1")
	if code != 0 || out != first || !strings.Contains(stderr, "duplicate: --msg-id order-1") {
		t.Fatalf("repeat: exit %d, stdout %q (first %q), stderr %q; want the first seq and a duplicate note", code, out, first, stderr)
	}
	if _, stderr, _ := sy(nil, "stream", "pub", "hub", "log", "two", "--msg-id", "order-2"); stderr != "" {
		t.Fatalf("a new msg id: stderr %q, want nothing", stderr)
	}
}

// TestStreamPubRefusesEmptyKeyAndMsgID: --key "" and --msg-id "" (a
// script's unset variable) are usage errors naming the flag, and nothing
// is written.
// (Was: the CLI sent no key or msg id for them, so the value was written
// unkeyed, or without de-duplication, and the command exited 0.)
func TestStreamPubRefusesEmptyKeyAndMsgID(t *testing.T) {
	t.Parallel()
	sy := startPersist(t)
	for _, flag := range []string{"--key", "--msg-id"} {
		args := []string{"stream", "pub", "hub", "log", "v", flag, ""}
		_, stderr, code := sy(nil, args...)
		wantUsage(t, args, stderr, code, flag+" is empty")
		args = []string{"stream", "pub", "hub", "log", "v", flag + "="}
		_, stderr, code = sy(nil, args...)
		wantUsage(t, args, stderr, code, flag+" is empty")
	}
	if out := mustRun(t, sy, nil, "stream", "ls", "hub", "log"); out != "" {
		t.Fatalf("the refused pubs wrote:\n%s", out)
	}
}

// (Was: persist serve with --archive naming a regular file created a
// missing --data, then refused to start.)
func TestDataDirsCreateNothingWhenRefused(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := checkDataDirs(data, file); err == nil || !strings.Contains(err.Error(), "--archive") {
		t.Fatalf("checkDataDirs with --archive a file: %v, want an error naming --archive", err)
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused start left --data %s: %v", data, err)
	}
}

// TestPersistServeQueueFlags: --max-queue and --max-queue-bytes reach the
// server (its stats, as persist inventory --json prints them), sizes take
// binary units, and a size that is not one is a usage error.
// (Was: the bounds had no flag; an operator could not change them.)
func TestPersistServeQueueFlags(t *testing.T) {
	t.Parallel()
	e, _ := testnats.Start(t)
	url := e.ClientURL()
	ch := startWatched(t, cli(t, "persist", "serve", "--id", "0", "--ids", "0", "--service", "queueflags", "--data", t.TempDir(),
		"--max-queue", "7", "--max-queue-bytes", "3MiB", "--nats", url))
	if ch.waitExitOrLine(t, "ready on") {
		t.Fatalf("persist serve exited %d: %s", ch.code, ch.stderr.String())
	}
	out, stderr, code := testproc.Run(t, cli(t, "persist", "inventory", "--ids", "0", "--service", "queueflags", "--json", "--nats", url))
	if code != 0 {
		t.Fatalf("inventory: exit %d: %s", code, stderr)
	}
	var got []persist.ServerStats
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
		t.Fatalf("inventory --json %q: %v", out, err)
	}
	if got[0].MaxQueue != 7 || got[0].MaxQueueBytes != 3<<20 {
		t.Fatalf("server's bounds: max_queue %d, max_queue_bytes %d; want 7 and %d", got[0].MaxQueue, got[0].MaxQueueBytes, 3<<20)
	}
	for _, bad := range [][]string{{"--max-queue-bytes", "12XB"}, {"--max-queue-bytes", "-1"}, {"--max-queue-bytes", "0"}, {"--max-queue", "0"}} {
		args := append([]string{"persist", "serve", "--id", "0", "--ids", "0", "--data", t.TempDir(), "--nats", url}, bad...)
		if _, stderr, code := testproc.Run(t, cli(t, args...)); code != exitUsage {
			t.Errorf("%q: exit %d (%s), want usage (%d)", bad, code, stderr, exitUsage)
		}
	}
}

// TestPersistServePacks: persist serve --packs N keeps new streams in the
// data directory's packs, not a file each, serves them (a kv set and get,
// again after a restart with the flag left out: a directory's packs are
// read whatever it says), reports the cap it then defaults to, and refuses
// a bad count, a count other than the directory's, or --packs with
// --archive.
func TestPersistServePacks(t *testing.T) {
	t.Parallel()
	e, nc := testnats.Start(t)
	url := e.ClientURL()
	data := t.TempDir()
	serve := func(extra ...string) *watchedChild {
		ch := startWatched(t, cli(t, append([]string{"persist", "serve", "--id", "0", "--ids", "0", "--service", "packs", "--data", data, "--nats", url}, extra...)...))
		if ch.waitExitOrLine(t, "ready on") {
			t.Fatalf("persist serve %q exited %d: %s", extra, ch.code, ch.stderr.String())
		}
		return ch
	}
	startWatched(t, cli(t, "balancer", "--ids", "0", "--service", "packs", "--nats", url))
	testwait.Until(t, "the balancer to answer", func() (bool, string) {
		_, err := bus.Request(context.Background(), nc, nats.NewMsg(bus.IDSubject("packs", "hub")))
		return err == nil, fmt.Sprint(err)
	})
	srv := serve("--packs", "3")
	for i := range 5 {
		if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", fmt.Sprintf("s%d", i), "kv", "k", fmt.Sprintf("v%d", i), "--service", "packs", "--nats", url)); code != 0 {
			t.Fatalf("kv set: exit %d: %s", code, stderr)
		}
	}
	out, stderr, code := testproc.Run(t, cli(t, "persist", "inventory", "--ids", "0", "--service", "packs", "--json", "--nats", url))
	var got []persist.ServerStats
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 {
		t.Fatalf("inventory: exit %d %q: %s", code, out, stderr)
	}
	if got[0].MaxOpenStreams != server.PackedMaxOpenStreamsDefault || got[0].Streams != 5 {
		t.Fatalf("with --packs: max_open_streams %d, streams %d; want %d and 5", got[0].MaxOpenStreams, got[0].Streams, server.PackedMaxOpenStreamsDefault)
	}
	stop(t, srv)
	entries, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".packs" {
			t.Errorf("a scope directory %q: streams were given files of their own", e.Name())
		}
	}
	packs, _ := filepath.Glob(filepath.Join(data, ".packs", "pack-*.db"))
	if len(packs) == 0 || len(packs) > 3 {
		t.Errorf("pack files %v, want 1 to 3", packs)
	}
	srv = serve() // no --packs: the directory's are read
	if out, stderr, code := testproc.Run(t, cli(t, "kv", "get", "s3", "kv", "k", "--service", "packs", "--nats", url)); code != 0 || strings.TrimSpace(out) != "v3" {
		t.Fatalf("kv get after a restart without --packs: exit %d, %q %s", code, out, stderr)
	}
	stop(t, srv)
	ch := startWatched(t, cli(t, "persist", "serve", "--id", "0", "--ids", "0", "--service", "packs", "--data", data, "--nats", url, "--packs", "5"))
	if !ch.waitExitOrLine(t, "ready on") || ch.code == 0 || !strings.Contains(ch.stderr.String(), "has 3 packs") {
		t.Fatalf("--packs 5 on a directory of 3: exit %d, stderr %s; want a refusal naming its 3", ch.code, ch.stderr.String())
	}
	for _, bad := range [][]string{{"--packs", "-1"}, {"--packs", "257"}, {"--packs", "2", "--archive", t.TempDir()}} {
		args := append([]string{"persist", "serve", "--id", "0", "--ids", "0", "--data", t.TempDir(), "--nats", url}, bad...)
		if _, stderr, code := testproc.Run(t, cli(t, args...)); code != exitUsage {
			t.Errorf("%q: exit %d (%s), want usage (%d)", bad, code, stderr, exitUsage)
		}
	}
}

// stop ends a watched persist serve with SIGTERM, as an operator's stop
// does, and waits for its exit (0).
func stop(t *testing.T, c *watchedChild) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.waitExit(t); code != 0 {
		t.Fatalf("%v exited %d after SIGTERM: %s", c.cmd.Args, code, c.stderr.String())
	}
}
