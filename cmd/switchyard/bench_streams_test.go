package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/bench"
	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// TestBenchPersistStreamsSmoke runs bench persist --streams end to end at
// a small N, both sides as processes of their own (nats-server -js; this
// binary's persist serve and balancer on another nats-server), and checks
// that every figure of both sides is in the JSON and positive.
func TestBenchPersistStreamsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five server processes")
	}
	natsServer, err := bench.FindNATSServer(t.Context(), "")
	if err != nil {
		t.Skipf("no nats-server binary to run JetStream's side: %v", err)
	}
	args := []string{"bench", "persist", "--streams", "50", "--duration", "300ms", "--settle", "100ms",
		"--json", "--no-progress", "--nats-server", natsServer, "--dir", t.TempDir()}
	out, stderr, code := testproc.Run(t, cli(t, args...))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res bench.StreamsResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, out)
	}
	if res.Streams != 50 || res.Keys != 3 || res.Clients != 16 {
		t.Errorf("run of %d streams of %d keys, %d clients; want 50, 3, 16", res.Streams, res.Keys, res.Clients)
	}
	if res.Hot != 50 {
		t.Errorf("hot streams %d, want 50 (the default 500, held to the 50 streams there are)", res.Hot)
	}
	if res.JetStream == nil {
		t.Fatal("no JetStream side in the result")
	}
	for _, s := range []bench.StreamsSide{res.Persist, *res.JetStream} {
		if s.Error != "" || s.CreateTimedOut || s.RestartTimedOut {
			t.Errorf("%s: error %q, create timed out %v, restart timed out %v", s.Name, s.Error, s.CreateTimedOut, s.RestartTimedOut)
		}
		if s.Streams != 50 || s.Touched != 1 {
			t.Errorf("%s: %d streams created, %d touched; want 50 and 1", s.Name, s.Streams, s.Touched)
		}
		if s.CreateErrors+s.WriteErrors+s.GetErrors != 0 {
			t.Errorf("%s: errors: create %d, writes %d (%s), gets %d", s.Name, s.CreateErrors, s.WriteErrors, s.WriteError, s.GetErrors)
		}
		figures := map[string]float64{
			"create":                 s.CreateSeconds,
			"spread writes":          s.WritesPerSecond,
			"spread writes, hot":     s.HotWritesPerSecond,
			"get p99 before":         s.GetP99Before,
			"stop":                   s.StopSeconds,
			"restart first get":      s.FirstGet,
			"restart p99 back":       s.P99Back,
			"memory restart first":   s.FirstGetMemory,
			"rss idle":               float64(s.RSSIdle),
			"rss touched":            float64(s.RSSTouched),
			"disk":                   float64(s.DiskBytes),
			"disk per stream":        s.DiskPerStream,
			"p99 of the back window": s.P99BackWindow,
		}
		if s.Name == "persist" {
			figures["bus rss idle"] = float64(s.BusRSSIdle)
			figures["bus rss touched"] = float64(s.BusRSSTouched)
		}
		for name, v := range figures {
			if !(v > 0) {
				t.Errorf("%s: %s = %v, want positive", s.Name, name, v)
			}
		}
	}
}

// TestBenchPersistKeysSmoke runs bench persist --keys end to end at a small
// N, both sides as processes of their own, and checks that every figure of
// both sides is in the JSON and positive.
func TestBenchPersistKeysSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four server processes")
	}
	natsServer, err := bench.FindNATSServer(t.Context(), "")
	if err != nil {
		t.Skipf("no nats-server binary to run JetStream's side: %v", err)
	}
	args := []string{"bench", "persist", "--keys", "2000", "--gets", "500", "--batch", "300", "--settle", "100ms",
		"--json", "--no-progress", "--nats-server", natsServer, "--dir", t.TempDir()}
	out, stderr, code := testproc.Run(t, cli(t, args...))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res bench.KeysResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, out)
	}
	if res.Keys != 2000 || res.Batch != 300 || res.GetClients != 16 || res.ValueBytes <= 0 {
		t.Errorf("run of %d keys, batch %d, %d get clients, %d value bytes; want 2000, 300, 16, positive", res.Keys, res.Batch, res.GetClients, res.ValueBytes)
	}
	if res.JetStream == nil {
		t.Fatal("no JetStream side in the result")
	}
	for _, s := range []bench.KeysSide{res.Persist, *res.JetStream} {
		if s.Error != "" || s.TimedOut {
			t.Errorf("%s: error %q, timed out %v", s.Name, s.Error, s.TimedOut)
		}
		if s.Loaded != 2000 || s.Gets != 500 || s.LoadErrors+s.GetErrors != 0 {
			t.Errorf("%s: %d loaded, %d gets, errors load %d (%s) gets %d (%s); want 2000, 500, none", s.Name, s.Loaded, s.Gets, s.LoadErrors, s.LoadError, s.GetErrors, s.GetError)
		}
		figures := map[string]float64{
			"load":            s.LoadSeconds,
			"rss loaded":      float64(s.RSSLoaded),
			"rss idle":        float64(s.RSSIdle),
			"rss gets":        float64(s.RSSGets),
			"stop":            s.StopSeconds,
			"first get":       s.FirstGet,
			"gets per second": s.GetsPerSecond,
			"get p50":         s.GetP50,
			"get p99":         s.GetP99,
			"disk":            float64(s.DiskBytes),
			"disk per key":    s.DiskPerKey,
		}
		if s.Name == "persist" {
			figures["bus rss loaded"] = float64(s.BusRSSLoaded)
			figures["bus rss idle"] = float64(s.BusRSSIdle)
			figures["bus rss gets"] = float64(s.BusRSSGets)
		}
		for name, v := range figures {
			if !(v > 0) {
				t.Errorf("%s: %s = %v, want positive", s.Name, name, v)
			}
		}
		if s.GetP50 > s.GetP99 {
			t.Errorf("%s: p50 %v above p99 %v", s.Name, s.GetP50, s.GetP99)
		}
	}
}

// TestBenchPersistStreamsRefusesIgnoredFlags: bench persist --streams runs
// a fixed concurrency (16 clients) and sends no batches, so it refuses
// --clients and --batch as a usage error, as --keys refuses the flags it
// does not use. (Was: both were silently ignored, so a run measured other
// than what was asked.) The nats-server path is missing, so a flag let
// through fails at run time instead (exit 1), not with a benchmark.
func TestBenchPersistStreamsRefusesIgnoredFlags(t *testing.T) {
	t.Parallel()
	missing := t.TempDir() + "/no-nats-server"
	for _, extra := range [][]string{{"--clients", "4"}, {"--batch", "10"}} {
		args := append([]string{"bench", "persist", "--streams", "10", "--nats-server", missing, "--no-progress"}, extra...)
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, extra[0])
	}
}

// refusingNATSServer is a nats-server BIN for --nats-server that runs the
// real one but refuses (exit 1, at once) every JetStream start (-js) past
// the first allow: allow 1 is a JetStream that does not come back after
// its restart, allow 0 one that never starts. persist's own nats-server
// (no -js) always runs.
func refusingNATSServer(t *testing.T, real string, allow int) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in *" -js "*)
	n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q
	if [ $n -gt %[2]d ]; then echo "test: JetStream start $n refused" >&2; exit 1; fi;;
esac
exec %[3]q "$@"
`, filepath.Join(dir, "js-starts"), allow, real)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestBenchPersistStreamsKeysFailedPhaseExits1: when a phase of bench
// persist --streams or --keys fails (here JetStream's restart, or its
// start), the run still prints what it measured (persist's figures in
// full, JetStream's up to the failure) and exits 1 with the failure said.
// (Was: a failed phase was only a line of the table, or a field of the
// JSON, and the run exited 0; a JetStream side that did not start dropped
// persist's figures.)
func TestBenchPersistStreamsKeysFailedPhaseExits1(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	natsServer, err := bench.FindNATSServer(t.Context(), "")
	if err != nil {
		t.Skipf("no nats-server binary to run JetStream's side: %v", err)
	}
	for _, c := range []struct {
		mode  string
		args  []string
		allow int
		want  string // in JetStream's error and the command's
	}{
		{"streams", []string{"--streams", "20", "--duration", "100ms"}, 1, "restart: "},
		{"keys", []string{"--keys", "500", "--gets", "50", "--batch", "100"}, 1, "restart: "},
		{"streams", []string{"--streams", "20", "--duration", "100ms"}, 0, "start: "},
		{"keys", []string{"--keys", "500", "--gets", "50", "--batch", "100"}, 0, "start: "},
	} {
		name := fmt.Sprintf("%s, JetStream starts allowed %d", c.mode, c.allow)
		args := append([]string{"bench", "persist", "--settle", "10ms", "--json", "--no-progress",
			"--nats-server", refusingNATSServer(t, natsServer, c.allow), "--dir", t.TempDir()}, c.args...)
		out, stderr, code := testproc.Run(t, cli(t, args...))
		if code != exitRuntime {
			t.Errorf("%s: exit %d, want %d; stderr: %s", name, code, exitRuntime, stderr)
		}
		if !strings.Contains(stderr, "JetStream: "+c.want) {
			t.Errorf("%s: stderr %q does not say JetStream's %q failure", name, stderr, c.want)
		}
		var persistSide, jsSide struct {
			Name  string `json:"name"`
			Error string `json:"error"`
		}
		var res struct {
			Persist   json.RawMessage `json:"persist"`
			JetStream json.RawMessage `json:"jetstream"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Errorf("%s: stdout is not the JSON result: %v\n%s", name, err, out)
			continue
		}
		if err := json.Unmarshal(res.Persist, &persistSide); err != nil || persistSide.Name != "persist" || persistSide.Error != "" {
			t.Errorf("%s: persist side %s (%v): want its figures, no error", name, res.Persist, err)
		}
		if err := json.Unmarshal(res.JetStream, &jsSide); err != nil || !strings.HasPrefix(jsSide.Error, c.want) {
			t.Errorf("%s: JetStream side %s (%v): want an error starting %q", name, res.JetStream, err, c.want)
		}
		// persist's side ran to its end: its figures are there.
		if c.mode == "keys" {
			var p bench.KeysSide
			_ = json.Unmarshal(res.Persist, &p)
			if p.Gets != 50 || !(p.GetP99 > 0) {
				t.Errorf("%s: persist gets %d, p99 %v: want its figures", name, p.Gets, p.GetP99)
			}
		} else {
			var p bench.StreamsSide
			_ = json.Unmarshal(res.Persist, &p)
			if p.Streams != 20 || !(p.FirstGetMemory > 0) {
				t.Errorf("%s: persist streams %d, memory first get %v: want its figures", name, p.Streams, p.FirstGetMemory)
			}
		}
	}
}
