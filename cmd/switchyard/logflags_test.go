package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// logLine is what every JSON log line must carry.
type logLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
}

// jsonLogLines decodes every line of stderr as a JSON log line, failing on
// any line that is not one.
func jsonLogLines(t *testing.T, stderr string) []logLine {
	t.Helper()
	var lines []logLine
	for _, s := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if s == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", s, err)
		}
		if l.Level == "" || l.Msg == "" {
			t.Fatalf("stderr line %q lacks level or msg", s)
		}
		lines = append(lines, l)
	}
	return lines
}

// TestLogFlagsJSONLifecycle runs the balancer with --log-format json and
// reads its start and stop lines as JSON from stderr.
func TestLogFlagsJSONLifecycle(t *testing.T) {
	t.Parallel()
	srv := testnats.Server(t, testnats.Options{})
	cmd := cli(t, "balancer", "--nats", srv.ClientURL(), "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got []string
	sc := bufio.NewScanner(stderr)
	running := false
	for sc.Scan() {
		l := jsonLogLines(t, sc.Text())
		for _, l := range l {
			got = append(got, l.Level+" "+l.Msg)
			if l.Msg == "balancer running" && !running {
				running = true
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if code := testproc.Wait(t, cmd); code != 0 {
		t.Fatalf("balancer exit %d; log %q", code, got)
	}
	want := []string{"INFO balancer running", "INFO balancer stopped"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log lines %q, want %q", got, want)
	}
}

// TestLogLevelDebugOnlyAtDebug: the debug line of the log set-up appears at
// --log-level debug (or the environment's debug) and not at the default.
func TestLogLevelDebugOnlyAtDebug(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		args  []string
		env   []string
		debug bool
	}{
		{"default", []string{"--log-format", "json"}, nil, false},
		{"flag", []string{"--log-format", "json", "--log-level", "debug"}, nil, true},
		{"env", []string{"--log-format", "json"}, []string{logLevelEnv + "=debug"}, true},
		{"flag wins over env", []string{"--log-format", "json", "--log-level", "info"}, []string{logLevelEnv + "=debug"}, false},
		{"format from env", []string{"--log-level", "debug"}, []string{logFormatEnv + "=json"}, true},
		{"format flag wins over env", []string{"--log-format", "json", "--log-level", "debug"}, []string{logFormatEnv + "=text"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "auth")
			cmd := cli(t, append([]string{"auth", "init", dir}, c.args...)...)
			cmd.Env = append(cmd.Env, c.env...)
			_, stderr, code := testproc.Run(t, cmd)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			lines := jsonLogLines(t, stderr)
			sawDebug := false
			for _, l := range lines {
				sawDebug = sawDebug || l.Level == "DEBUG" && l.Msg == "logging configured"
			}
			if sawDebug != c.debug {
				t.Fatalf("debug line shown = %v, want %v; stderr %q", sawDebug, c.debug, stderr)
			}
		})
	}
}

// TestLogFlagsBadValues: a bad value, by flag or environment, is a usage
// error (exit 2) naming the flag and the values it takes.
func TestLogFlagsBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  string
		want []string
	}{
		{"format flag", []string{"--log-format", "xml"}, "", []string{"--log-format", "text or json"}},
		{"level flag", []string{"--log-level", "loud"}, "", []string{"--log-level", "debug, info, warn or error"}},
		{"format env", nil, logFormatEnv + "=xml", []string{"--log-format", logFormatEnv, "text or json"}},
		{"level env", nil, logLevelEnv + "=loud", []string{"--log-level", logLevelEnv, "debug, info, warn or error"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "auth")
			cmd := cli(t, append([]string{"auth", "init", dir}, c.args...)...)
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			_, stderr, code := testproc.Run(t, cmd)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not mention %q", stderr, w)
				}
			}
			// Refused before the command ran: it wrote nothing.
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("auth init ran despite the bad value: stat %s: %v", dir, err)
			}
		})
	}
}

// TestLogFlagsDefaultText: with no flags the lines are slog's text format.
func TestLogFlagsDefaultText(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "auth")
	_, stderr, code := testproc.Run(t, cli(t, "auth", "init", dir, "--log-level", "debug"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, `level=DEBUG msg="logging configured"`) {
		t.Fatalf("stderr %q has no text-format debug line", stderr)
	}
}
