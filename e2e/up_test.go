package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/placement"
	"github.com/switchyard-dev/switchyard/work"
)

// The exit codes the README lists, and the number of groups of up's demo
// provider: the binary's, restated because a test of it cannot import
// package main.
const (
	exitRuntime  = 1
	exitNotFound = 3
	demoGroups   = 2
)

// TestUpEndToEnd runs `switchyard up` as its own process and drives it with
// the client commands, as a newcomer following the README would.
func TestUpEndToEnd(t *testing.T) {
	t.Parallel()
	port := testproc.FreePort(t)
	data := t.TempDir()
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	// --http on a free port: the default 8080 may be taken, and other
	// tests run up beside this one.
	up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", data, "--servers", "3", "--http", "127.0.0.1:0")
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })

	sy := func(args ...string) (string, string, int) {
		return testproc.Run(t, cli(t, append(args, "--nats", url)...))
	}
	must := func(args ...string) string {
		t.Helper()
		out, stderr, code := sy(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		return out
	}

	if got := must("kv", "set", "hub", "demo", "greeting", "hello"); strings.TrimSpace(got) != "1" {
		t.Fatalf("first kv set seq = %q", got)
	}
	if got := must("kv", "get", "hub", "demo", "greeting"); got != "hello\n" {
		t.Fatalf("kv get = %q", got)
	}
	must("kv", "set", "hub", "demo", "other", "x")
	if got := must("kv", "keys", "hub", "demo"); !strings.Contains(got, "greeting\n") || !strings.Contains(got, "other\n") {
		t.Fatalf("kv keys = %q", got)
	}
	// Compare-and-set against a stale seq fails at run time (exit 1) with the code.
	if _, stderr, code := sy("kv", "set", "hub", "demo", "greeting", "bye", "--prev-seq", "0"); code != exitRuntime || !strings.Contains(stderr, "wrong-last-sequence") {
		t.Fatalf("stale CAS: exit %d, %q", code, stderr)
	}
	must("kv", "del", "hub", "demo", "greeting")
	if _, stderr, code := sy("kv", "get", "hub", "demo", "greeting"); code != exitNotFound || !strings.Contains(stderr, "not-found") {
		t.Fatalf("get after delete: exit %d, %q", code, stderr)
	}

	seq := strings.TrimSpace(must("stream", "pub", "project-1", "log", "first event"))
	must("stream", "pub", "project-1", "log", "second event")
	if got := must("stream", "get", "project-1", "log", seq); got != "first event\n" {
		t.Fatalf("stream get = %q", got)
	}
	ls := must("stream", "ls", "project-1", "log")
	if lines := strings.Split(strings.TrimSpace(ls), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "second event") {
		t.Fatalf("stream ls = %q", ls)
	}
	var inv persist.Inventory
	if err := json.Unmarshal([]byte(must("persist", "inventory", "project-1", "log")), &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Count != 2 || inv.Seq != 2 {
		t.Fatalf("inventory %+v", inv)
	}

	// The plain NATS request the README shows: the reply is the owner id.
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reply, err := bus.Request(context.Background(), nc, nats.NewMsg("persist.hub.id"))
	if err != nil {
		t.Fatal(err)
	}
	if want := placement.Rendezvous([]string{"0", "1", "2"}, "hub"); string(reply.Data) != want {
		t.Fatalf("persist.hub.id = %q, want %q", reply.Data, want)
	}
	nc.Close()

	// The work pipeline runs in up against the demo provider: articles
	// flow to the worker and work status shows it, with two shares of the
	// connections: the coordinator's and post-processing's.
	testwait.Until(t, "up's work pipeline to index the demo groups", func() (bool, string) {
		out, _, code := sy("work", "status", "--source", "demo", "--json")
		var st work.Status
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Articles[work.StateDone] > 0 && len(st.Groups) == demoGroups && len(st.Shares) == 2, out
	})
	if out := must("work", "status", "--source", "demo"); !strings.Contains(out, "alt.binaries.demo.1") || !strings.Contains(out, "done") {
		t.Fatalf("work status:\n%s", out)
	}

	// SIGTERM: a clean stop, exit 0, and the data is there after a restart.
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, up); code != 0 {
		t.Fatalf("up exited %d after SIGTERM", code)
	}
	files, _ := filepath.Glob(filepath.Join(data, "*"))
	if len(files) == 0 {
		t.Fatalf("no files under the data directory")
	}
	// A new port rather than the old one: tests run in parallel, and another
	// one's connection may take the port this process just freed.
	port = testproc.FreePort(t)
	url = "nats://127.0.0.1:" + strconv.Itoa(port)
	up2 := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", data, "--servers", "3", "--http", "127.0.0.1:0")
	testproc.Start(t, up2, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up2.Process.Kill() })
	if got := must("stream", "get", "project-1", "log", seq); got != "first event\n" {
		t.Fatalf("after restart stream get = %q", got)
	}
	if got := must("kv", "get", "hub", "demo", "other"); got != "x\n" {
		t.Fatalf("after restart kv get = %q", got)
	}
	_ = up2.Process.Signal(os.Interrupt)
	if code := testproc.Wait(t, up2); code != 0 {
		t.Fatalf("up exited %d after interrupt", code)
	}
}
