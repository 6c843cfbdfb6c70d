package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/bench"
)

// TestBenchWSSmoke runs bench ws with a few watchers: our up as a child
// process, and beside it Centrifugo without and with history when a
// centrifugo binary is on PATH (building one is minutes of CI, so the
// test skips that half without one). Every write must reach every
// watcher, with no resync, and each server's RSS must have been read.
func TestBenchWSSmoke(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the server's CPU and RSS are read from /proc")
	}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"ours", []string{bench.ServerOurs}},
		{"centrifugo", []string{bench.ServerOurs, bench.ServerCentrifugo, bench.ServerCentrifugoHistory}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", "ws", "--quick", "--watchers", "3", "--rate", "20", "--duration", "500ms", "--json", "--no-progress"}
			if c.name == "ours" {
				args = append(args, "--only", "ours")
			} else {
				bin, err := exec.LookPath("centrifugo")
				if err != nil {
					t.Skip("no centrifugo on PATH (go install github.com/centrifugal/centrifugo/v6@" + bench.CentrifugoVersion + ")")
				}
				args = append(args, "--centrifugo", bin)
			}
			out, err := cli(t, args...).Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var res bench.EventsResult
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if res.Subscribers != 3 || !res.Shared {
				t.Errorf("ran %d subscribers, shared %v; want 3 on one stream", res.Subscribers, res.Shared)
			}
			if len(res.Runs) != len(c.want) {
				t.Fatalf("runs %+v, want %v", res.Runs, c.want)
			}
			for i, r := range res.Runs {
				if r.Server != c.want[i] {
					t.Fatalf("run %d is %s, want %s", i, r.Server, c.want[i])
				}
				// 3 watchers of one stream: each write reaches all three.
				if r.Published == 0 || r.Expected != 3*r.Published || r.Delivered != r.Expected || r.Gaps != 0 {
					t.Errorf("%s: published %d, delivered %d of %d, %d gaps", r.Server, r.Published, r.Delivered, r.Expected, r.Gaps)
				}
				// CPU is read in 10 ms ticks, too coarse for so small a run
				// to assert on; the RSS is read in pages.
				if r.PeakRSS == 0 {
					t.Errorf("%s: peak RSS 0: the server's /proc was not read", r.Server)
				}
			}
		})
	}
}

// TestBenchWSLostDeliveriesExit1: bench ws prints a run's figures in
// full, as a table or JSON, and then, when a server lost deliveries (a
// resync names none), fails with a line naming it (exit 1); a full run,
// or one whose shortfall skipped messages name, succeeds. (Was: the
// figures were printed and the command exited 0 whatever was lost.)
func TestBenchWSLostDeliveriesExit1(t *testing.T) {
	t.Parallel()
	run := func(server string, delivered, skipped, gaps int64) bench.EventsRun {
		return bench.EventsRun{Server: server, Subscribers: 3, Channels: 1, Published: 10, Expected: 30, Delivered: delivered, GapEvents: skipped, Gaps: gaps}
	}
	for _, asJSON := range []bool{false, true} {
		for _, c := range []struct {
			name     string
			runs     []bench.EventsRun
			wantCode int
			wantErr  string
		}{
			{"full", []bench.EventsRun{run(bench.ServerOurs, 30, 0, 0), run(bench.ServerCentrifugo, 30, 0, 0)}, 0, ""},
			{"skipped names the shortfall", []bench.EventsRun{run(bench.ServerOurs, 27, 3, 1)}, 0, ""},
			{"ours resynced", []bench.EventsRun{run(bench.ServerOurs, 29, 0, 1), run(bench.ServerCentrifugo, 30, 0, 0)}, exitRuntime,
				"switchyard lost 1 of 30 deliveries"},
			{"centrifugo short", []bench.EventsRun{run(bench.ServerOurs, 30, 0, 0), run(bench.ServerCentrifugoHistory, 28, 0, 0)}, exitRuntime,
				"centrifugo+history lost 2 of 30 deliveries"},
		} {
			name := c.name
			if asJSON {
				name += ", JSON"
			}
			res := bench.EventsResult{Subscribers: 3, Shared: true, Rate: 20, Duration: time.Second, Payload: 128, Runs: c.runs,
				Layout: "3 watchers of one stream"}
			var out, stderr bytes.Buffer
			code := exitCode(&stderr, reportWS(&out, res, asJSON))
			if code != c.wantCode {
				t.Errorf("%s: exit %d, want %d; stderr %q", name, code, c.wantCode, stderr.String())
			}
			if c.wantErr != "" && !strings.Contains(stderr.String(), c.wantErr) {
				t.Errorf("%s: stderr %q does not say %q", name, stderr.String(), c.wantErr)
			}
			// The figures are printed either way: every server's.
			if asJSON {
				var got bench.EventsResult
				if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Runs) != len(c.runs) {
					t.Errorf("%s: stdout is not the result (%v): %s", name, err, out.String())
				}
				continue
			}
			for _, r := range c.runs {
				if !strings.Contains(out.String(), r.Server+" ") {
					t.Errorf("%s: the table does not show %s:\n%s", name, r.Server, out.String())
				}
			}
		}
	}
}
