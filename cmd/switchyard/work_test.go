package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
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
