package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/placement"
	"github.com/switchyard-dev/switchyard/work"
)

// TestWorkBadConfig: bad values fail at once with a message naming the
// value, exit 2, before anything connects.
func TestWorkBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"coordinator", "run", "--shard", "0/2", "--nntp", "h:119"}, `"0/2"`},
		{[]string{"coordinator", "run", "--shard", "3/2", "--nntp", "h:119"}, `"3/2"`},
		{[]string{"coordinator", "run", "--shard", "x", "--nntp", "h:119"}, `"x"`},
		{[]string{"coordinator", "run", "--shard", "1/0", "--nntp", "h:119"}, `"1/0"`},
		{[]string{"coordinator", "run"}, "--nntp"},
		{[]string{"coordinator", "run", "--nntp", "nohost"}, `"nohost"`},
		{[]string{"coordinator", "run", "--nntp", "h:abc"}, `"abc"`},
		{[]string{"coordinator", "run", "--nntp", "[::1]"}, `"[::1]"`},
		{[]string{"coordinator", "run", "--nntp", ":119"}, `":119"`},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--nntp-conns", "0"}, "--nntp-conns 0"},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--retain-done", "10s"}, "--retain-done 10s"},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--groups", " , "}, "--groups"},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--range-size", "0"}, "--range-size 0"},
		{[]string{"coordinator", "run", "--nntp", "h:119", "--source", "Bad Name"}, "Bad Name"},
		{[]string{"worker", "run", "--indexer", "nope"}, `"nope"`},
		{[]string{"worker", "run", "--lease-ttl", "-1s"}, "--lease-ttl"},
		{[]string{"work", "status", "--source", "UPPER"}, "UPPER"},
		{[]string{"up", "--workers", "-1"}, "--workers -1"},
		{[]string{"up", "--nntp-conns", "0"}, "--nntp-conns 0"},
	} {
		_, stderr, code := execute(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// TestCoordinatorPostprocessOnlyWithShardOne: coordinator run refuses
// --postprocess on a shard other than 1, beside which alone the
// post-processor runs, as a usage error naming --postprocess. Before,
// --shard 2/3 --postprocess was accepted and the flag did nothing.
func TestCoordinatorPostprocessOnlyWithShardOne(t *testing.T) {
	t.Parallel()
	args := []string{"coordinator", "run", "--shard", "2/3", "--postprocess", "--nntp", "127.0.0.1:119", "--nats", deadNATS(t)}
	_, stderr, code := execute(t, args...)
	wantUsage(t, args, stderr, code, "--postprocess")
}

// TestWorkerCountBadScopeIsUsage: an invalid --usenet-scope is a usage
// error (exit 2) naming the flag with every --indexer, as the README's
// table and the flag's own commands say of an invalid value. (Was: with
// --indexer count the command did not check it; fleet's validation caught
// it and it exited 1 as a run-time error, "fleet: usenet scope: ...".)
func TestWorkerCountBadScopeIsUsage(t *testing.T) {
	t.Parallel()
	args := []string{"worker", "run", "--indexer", "count", "--usenet-scope", "BAD!", "--nats", deadNATS(t)}
	_, stderr, code := execute(t, args...)
	wantUsage(t, args, stderr, code, "--usenet-scope")
}

// TestSignalWhileStartingExitsZero: a SIGTERM that comes while the roles
// are still starting (here coordinator run waits for a persist server that
// is slow to answer) is an ordinary stop, exit 0, as coordinator run
// --help promises of SIGTERM; a start that fails by itself still exits 1.
// (Was: the command exited 1 with "start coordinator-1/1: ...: context
// canceled", as if it had failed, and a supervisor stopping it saw a
// failed unit.)
func TestSignalWhileStartingExitsZero(t *testing.T) {
	t.Parallel()
	e, nc := testnats.Start(t)
	const service = "signalstart"
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: nc, IDs: []string{"0"}, Service: service})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	// A persist server that takes requests and is slow to answer.
	asked := make(chan struct{}, 1)
	sub, err := nc.Subscribe(service+".*.api.0", func(*nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ch := startWatched(t, cli(t, "coordinator", "run", "--nats", e.ClientURL(), "--service", service, "--nntp", "127.0.0.1:1"))
	select {
	case <-asked:
	case <-ch.exited:
		t.Fatalf("coordinator run exited %d before asking persist; stderr %s", ch.code, ch.stderr.String())
	case <-time.After(testproc.Timeout):
		t.Fatalf("coordinator run asked persist nothing within %v", testproc.Timeout)
	}
	if err := ch.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := ch.waitExit(t); code != 0 {
		t.Fatalf("SIGTERM while starting: exit %d, want 0 (a stop, not a failure); stderr %q", code, strings.TrimSpace(ch.stderr.String()))
	}

	// No signal: a start that fails (no bus) is still a failure.
	args := []string{"coordinator", "run", "--nats", deadNATS(t), "--service", service, "--nntp", "127.0.0.1:1"}
	if _, stderr, code := execute(t, args...); code != exitRuntime || !strings.Contains(stderr, "cannot reach NATS") {
		t.Fatalf("%q: exit %d, stderr %q; want exit %d, cannot reach NATS", args, code, strings.TrimSpace(stderr), exitRuntime)
	}
}

// TestWorkStatusSources: without --source, work status shows the source
// "default" while no coordinator has started, then every source whose
// coordinator has (the only one, then both); --source still picks one.
func TestWorkStatusSources(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	status := func(args ...string) string {
		t.Helper()
		out, stderr, code := execute(t, append([]string{"work", "status", "--nats", env.URL()}, args...)...)
		if code != 0 {
			t.Fatalf("work status %v: exit %d: %s", args, code, stderr)
		}
		return out
	}
	if out := status(); !strings.Contains(out, "source default:") {
		t.Fatalf("nothing started: %q", out)
	}
	for _, src := range []string{"demo", "eu"} {
		st, err := work.NewStore(env.Client(), src)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Init(context.Background()); err != nil {
			t.Fatal(err)
		}
		if src == "demo" {
			if out := status(); !strings.Contains(out, "source demo:") || strings.Contains(out, "source default") {
				t.Fatalf("one source: %q", out)
			}
		}
	}
	if out := status(); !strings.Contains(out, "source demo:") || !strings.Contains(out, "source eu:") || strings.Contains(out, "source default") {
		t.Fatalf("two sources: %q", out)
	}
	var many []work.Status
	if err := json.Unmarshal([]byte(status("--json")), &many); err != nil || len(many) != 2 {
		t.Fatalf("two sources --json: %v, %+v", err, many)
	}
	if out := status("--source", "eu"); !strings.Contains(out, "source eu:") || strings.Contains(out, "source demo") {
		t.Fatalf("--source eu: %q", out)
	}
}

// TestWorkStatusUnknownSource: a --source no coordinator has started and
// that holds no work is an error naming it and the sources that have
// started, exit 3; a started source that has planned nothing says so.
// (Was: work status --source nosuch printed the empty tables of a source
// nobody runs and exited 0, so a typo looked like an idle source.)
func TestWorkStatusUnknownSource(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	run := func(args ...string) (string, string, int) {
		return execute(t, append([]string{"work", "status", "--nats", env.URL()}, args...)...)
	}
	for _, args := range [][]string{{"--source", "nosuch"}, {"--source", "nosuch", "--json"}} {
		out, stderr, code := run(args...)
		if code != exitNotFound || !strings.Contains(stderr, `"nosuch"`) || !strings.Contains(stderr, "no coordinator has started yet") || out != "" {
			t.Errorf("nothing started, %v: exit %d, stdout %q, stderr %q; want exit %d naming the source, no output", args, code, out, stderr, exitNotFound)
		}
	}
	for _, src := range []string{"demo", "eu"} {
		st, err := work.NewStore(env.Client(), src)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Init(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if out, stderr, code := run("--source", "nosuch"); code != exitNotFound || !strings.Contains(stderr, `"nosuch"`) || !strings.Contains(stderr, "known: demo, eu") || strings.Contains(stderr, "not-found") {
		t.Errorf("two started, --source nosuch: exit %d, stdout %q, stderr %q; want exit %d listing demo, eu", code, out, stderr, exitNotFound)
	}
	// Started, not planned yet: not an error, and the output says why it
	// is empty.
	out, stderr, code := run("--source", "eu")
	if code != 0 || !strings.Contains(out, "source eu:") || !strings.Contains(out, "no groups planned yet") {
		t.Errorf("--source eu (started, nothing planned): exit %d, stderr %q, stdout:\n%s", code, stderr, out)
	}
}

// TestWorkStatusEscapes: work status escapes what it prints from the NNTP
// provider and the workers (terminalSafe): a failed range's error holding
// an escape and a CR LF prints as one escaped line. (Was: the error, often
// the provider's own response text, printed raw, so a provider could write
// terminal escapes and forged "failed: range" lines into an operator's
// terminal.)
func TestWorkStatusEscapes(t *testing.T) {
	t.Parallel()
	e, nc := startFleet(t, t.TempDir())
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := work.NewStore(c, "esc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutGroup(ctx, work.Group{Name: "alt.bin", Low: 1, High: 10}, 0); err != nil {
		t.Fatal(err)
	}
	failed := work.Range{ID: 1, Group: "alt.bin", First: 1, Last: 10, Kind: work.KindHistory, State: work.StateFailed, Attempts: 3,
		Error: "over: 503 \x1b[31mserver said\r\nfailed: range 2 alt.bin 1-10 after 1 attempts: forged"}
	if _, err := st.PutRange(ctx, failed, 0); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := testproc.Run(t, cli(t, "work", "status", "--source", "esc", "--nats", e.ClientURL()))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	noControl(t, "work status", out)
	// The escaped error still holds the forged text, on the line of the
	// real range: count the lines that start as a failed range's does.
	if n := strings.Count("\n"+out, "\nfailed: range"); n != 1 {
		t.Errorf("work status shows %d failed-range lines for one failed range (its error's newline forged one):\n%s", n, out)
	}
}

// TestPrintStatusDoneRoundsDown: a group's DONE percentage is rounded
// down, so 100% means every planned article is done. (Was: rounded to the
// nearest percent, so 999 of 1000 showed as 100%.)
func TestPrintStatusDoneRoundsDown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		done, planned int64
		want          string
	}{{999, 1000, "(99%)"}, {1000, 1000, "(100%)"}, {29, 100, "(29%)"}, {0, 0, "(0%)"}} {
		var out strings.Builder
		printStatus(&out, work.Status{Source: "s", Groups: []work.GroupStatus{{Name: "alt.bin", Done: c.done, Planned: c.planned}}})
		if !strings.Contains(out.String(), fmt.Sprintf("%d of %d %s", c.done, c.planned, c.want)) {
			t.Errorf("%d of %d done: want %s, got:\n%s", c.done, c.planned, c.want, out.String())
		}
	}
}

// TestWorkerLogsItsStop: worker run says when it stops on a signal, as the
// other roles do, then exits 0.
// (Was: a worker logged "worker started" and then nothing at all when
// SIGTERM stopped it.)
func TestWorkerLogsItsStop(t *testing.T) {
	t.Parallel()
	env := testpersist.Start(t, 1)
	ch := startWatched(t, cli(t, "worker", "run", "--indexer", "count", "--name", "w-stop", "--nats", env.URL()))
	pollUntil(t, "worker started", func() (bool, string) {
		select {
		case <-ch.exited:
			t.Fatalf("worker run exited %d before starting; stderr %s", ch.code, ch.stderr.String())
		default:
		}
		s := ch.stderr.String()
		return strings.Contains(s, "worker started"), s
	})
	if err := ch.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := ch.waitExit(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d, want 0; stderr %q", code, ch.stderr.String())
	}
	if s := ch.stderr.String(); !strings.Contains(s, "worker stopping") || !strings.Contains(s, "w-stop") {
		t.Fatalf("stderr says nothing of the stop: %q", s)
	}
}

// TestPrintStatusBrokenAndRetired: records that do not decode are listed,
// escaped, and retired ranges are said to be counted. (Was: neither was
// printed; only --json showed them.)
func TestPrintStatusBrokenAndRetired(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printStatus(&out, work.Status{Source: "s", Ranges: map[work.RangeState]int{work.StateDone: 5}, Retired: 4,
		Broken: []work.BrokenRecord{{Stream: "ranges", Key: "000000000003\x1b[31m", Seq: 9, Error: "invalid character 'o'"}}})
	noControl(t, "work status", out.String())
	for _, want := range []string{"4 of the done ranges are retired", "broken: ranges/000000000003", "(seq 9)", "invalid character 'o'"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status without %q:\n%s", want, out.String())
		}
	}
	if noWorkState(work.Status{Broken: []work.BrokenRecord{{Stream: "leases", Key: "1"}}}) {
		t.Error("a source with only a broken record reads as no work state")
	}
}
