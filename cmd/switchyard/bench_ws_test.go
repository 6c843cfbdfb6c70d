package main

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"testing"

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
