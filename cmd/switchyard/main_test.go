package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/internal/syncbuf"
	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// runMainEnv makes the test binary act as the switchyard command, so tests
// run the real CLI in a separate process without building it first.
const runMainEnv = "SWITCHYARD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	// The children run without it (cli); so do the commands run in this
	// process (execute).
	os.Unsetenv("SWITCHYARD_NATS_URL")
	os.Exit(m.Run())
}

// inProcessMu serialises the commands run in this process: the root's log
// set-up replaces the process-wide slog (and log) default, which execute
// restores after each command.
var inProcessMu sync.Mutex

// inProcessBound ends a command run in this process that did not end by
// itself (a usage error that a bug let through to a server), so the test
// fails instead of hanging.
const inProcessBound = 2 * time.Minute

// execute runs the switchyard command with args in this process, as main
// does: a fresh tree from newRootCmd, stdin empty, stdout and stderr
// captured, the error printed and mapped to the exit code by exitCode. It
// is for commands that need no process of their own: help, usage errors,
// exit codes, parsing. Signals, up and servers that outlive a call need cli.
func execute(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	inProcessMu.Lock()
	defer inProcessMu.Unlock()
	logger, logOut, logFlags := slog.Default(), log.Writer(), log.Flags()
	defer func() {
		slog.SetDefault(logger)
		log.SetOutput(logOut)
		log.SetFlags(logFlags)
	}()

	ctx, cancel := context.WithTimeout(t.Context(), inProcessBound)
	defer cancel()
	var out, errb syncbuf.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(""))
	root.SetOut(&out)
	root.SetErr(&errb)
	code = exitCode(root.ErrOrStderr(), root.ExecuteContext(ctx))
	if ctx.Err() == context.DeadlineExceeded {
		t.Errorf("%v did not end within %v", args, inProcessBound)
	}
	return out.String(), errb.String(), code
}

// cli prepares the switchyard command with args as a child process.
func cli(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	// up serves HTTP on 127.0.0.1:8080 by default, one fixed port that the
	// tests' parallel ups would fight over: unless a test chose, a free one.
	if len(args) > 0 && args[0] == "up" && !slices.ContainsFunc(args, func(a string) bool { return a == "--http" || strings.HasPrefix(a, "--http=") }) {
		args = append(slices.Clone(args), "--http", "127.0.0.1:0")
	}
	cmd := exec.Command(os.Args[0], args...)
	// Under -race a child waits atexit_sleep_ms (1s by default) before it
	// exits, which made every CLI call in these tests take a second; keep
	// the caller's other GORACE options.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "SWITCHYARD_NATS_URL=", "GORACE="+gorace)
	return cmd
}

// deadNATS is a NATS URL where nothing listens.
func deadNATS(t *testing.T) string {
	return "nats://127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
}

// watchedChild is a started child whose stdout lines are kept, for a test
// that must tell a child that exits from one that starts and prints its
// ready line (testproc.Start fails the test on the first).
type watchedChild struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	code   int // valid once exited is closed
}

// startWatched starts cmd, keeps its stdout and stderr, and records its
// exit code when it ends; the child is killed when the test ends.
func startWatched(t *testing.T, cmd *exec.Cmd) *watchedChild {
	t.Helper()
	c := &watchedChild{cmd: cmd, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
		}
	}()
	go func() {
		// Wait closes the pipe: read all of it first.
		<-copied
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			c.code = ee.ExitCode()
		case err != nil:
			c.code = -1
		}
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

func (c *watchedChild) stdout() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// waitExitOrLine waits until the child exits (true) or prints a line
// containing line (false), within testproc.Timeout.
func (c *watchedChild) waitExitOrLine(t *testing.T, line string) (exited bool) {
	t.Helper()
	deadline := time.Now().Add(testproc.Timeout)
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			return true
		case <-time.After(20 * time.Millisecond):
		}
		if strings.Contains(c.stdout(), line) {
			return false
		}
	}
	t.Fatalf("%v neither exited nor printed %q within %v; stderr: %s", c.cmd.Args, line, testproc.Timeout, c.stderr.String())
	return false
}

// waitExit waits for the child's exit code (testproc.Timeout).
func (c *watchedChild) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-c.exited:
		return c.code
	case <-time.After(testproc.Timeout):
		t.Fatalf("%v did not exit within %v", c.cmd.Args, testproc.Timeout)
		return -1
	}
}

// wantUsage checks a usage error (exit 2) whose message names want.
func wantUsage(t *testing.T, args []string, stderr string, code int, want string) {
	t.Helper()
	if code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("%q: exit %d, stderr %q; want exit %d naming %q", args, code, strings.TrimSpace(stderr), exitUsage, want)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	dead := "nats://127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	cases := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", []string{"up", "--bogus"}, exitUsage, "unknown flag"},
		{"missing args", []string{"kv", "get", "hub"}, exitUsage, "accepts 3 arg"},
		{"bad scope", []string{"kv", "get", "Not.A.Scope", "s", "k"}, exitUsage, "invalid scope"},
		{"empty key", []string{"kv", "get", "hub", "s", ""}, exitUsage, "KEY is empty"},
		{"aliasing key", []string{"kv", "del", "hub", "s", " k"}, exitUsage, "KEY"},
		{"bad seq", []string{"stream", "get", "hub", "s", "x"}, exitUsage, "SEQ"},
		{"bad ids", []string{"balancer", "--ids", "0,0"}, exitUsage, "distinct"},
		{"id not in ids", []string{"persist", "serve", "--id", "7", "--ids", "0,1"}, exitUsage, "not one of"},
		{"bad placement", []string{"balancer", "--placement", "random"}, exitUsage, "placement"},
		{"bad port", []string{"up", "--nats-port", "0"}, exitUsage, "nats-port"},
		{"bad service", []string{"kv", "get", "hub", "s", "k", "--service", "a b", "--nats", dead}, exitUsage, `--service "a b"`},
		{"bad service of a role", []string{"balancer", "--service", "a.b", "--nats", dead}, exitUsage, `--service "a.b"`},
		{"empty release", []string{"usenet", "nzb", "", "--nats", dead}, exitUsage, "RELEASE is empty"},
		{"no nats", []string{"kv", "get", "hub", "s", "k", "--nats", dead, "--timeout", "2s"}, exitRuntime, "cannot reach NATS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := execute(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Fatalf("stderr %q does not mention %q", stderr, c.want)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
				t.Fatalf("stderr has %d lines, want one: %q", n+1, stderr)
			}
		})
	}
}

// TestFlagValueErrorsSayWhatIsWanted: a flag value its type's parser
// refuses is a one-line usage error naming the flag, the value and what
// it wants, in the words the commands' own checks use.
// (Was: pflag's text with Go's, "invalid argument "abc" for "--from" flag:
// strconv.ParseUint: parsing "abc": invalid syntax".)
func TestFlagValueErrorsSayWhatIsWanted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stream", "ls", "hub", "log", "--from", "abc"}, `--from "abc": want a whole number, 0 or more`},
		{[]string{"watch", "hub", "log", "--from", "-1"}, `--from "-1": want a whole number, 0 or more`},
		{[]string{"stream", "ls", "hub", "log", "--from", "99999999999999999999"}, `--from "99999999999999999999": out of range (want a whole number, 0 or more)`},
		{[]string{"usenet", "releases", "--limit", "ten"}, `--limit "ten": want a whole number`},
		{[]string{"usenet", "releases", "--json=maybe"}, `--json "maybe": want true or false`},
		{[]string{"kv", "get", "hub", "s", "k", "--timeout", "5"}, `--timeout "5": want a duration with its unit, such as 500ms, 5s, 2m or 1h`},
		{[]string{"up", "--settle-completion", "most"}, `--settle-completion "most": want a number`},
		// A negative number as an argument is taken for shorthand flags.
		// (Was: "unknown shorthand flag: '1' in -1".)
		{[]string{"stream", "get", "hub", "log", "-1"}, `"-1": an argument starting with - reads as a flag`},
		// A flag type of the project's own keeps the words its Set chose.
		{[]string{"bench", "index", "--search", "a"}, `--search "a": want a list of release counts`},
	} {
		_, stderr, code := execute(t, c.args...)
		if code != exitUsage || !strings.HasPrefix(stderr, "switchyard: "+c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and the line %q", c.args, code, stderr, exitUsage, "switchyard: "+c.want)
		}
	}
}

// TestEveryCommandHasHelp walks the command tree: each command must describe
// itself and answer --help with exit 0.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		if c.Short == "" {
			t.Errorf("%q has no short description", c.CommandPath())
		}
		parts := strings.Fields(c.CommandPath())[1:]
		paths = append(paths, append(parts, "--help"))
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub)
			}
		}
	}
	walk(newRootCmd())
	for _, p := range paths {
		t.Run(strings.Join(p[:len(p)-1], "_"), func(t *testing.T) {
			t.Parallel()
			out, stderr, code := execute(t, p...)
			if code != 0 || !strings.Contains(out, "Usage:") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", p, code, out, stderr)
			}
		})
	}
}

// TestExecuteIsMain: a command run in this process (execute) prints and
// exits as the binary does (cli), so the tests moved in-process still test
// what a user sees.
func TestExecuteIsMain(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"kv", "--help"},
		{"frobnicate"},
		{"kv", "get", "hub"},
		{"up", "--bogus"},
		{"usenet", "parse", `[04/15] - "k2j3h4g5f6.r02" yEnc (7/50)`, "--json"},
		{"--log-level", "loud", "usenet", "parse", "x"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			t.Parallel()
			out, stderr, code := execute(t, args...)
			wantOut, wantErr, wantCode := testproc.Run(t, cli(t, args...))
			if out != wantOut || stderr != wantErr || code != wantCode {
				t.Errorf("in-process: exit %d, stdout %q, stderr %q\nprocess:    exit %d, stdout %q, stderr %q", code, out, stderr, wantCode, wantOut, wantErr)
			}
		})
	}
}

// TestTreesAreIndependent: each newRootCmd builds its own commands and
// flags, so a flag set in one run does not carry into the next.
func TestTreesAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := newRootCmd(), newRootCmd()
	if err := a.PersistentFlags().Set("log-level", "debug"); err != nil {
		t.Fatal(err)
	}
	if got := b.PersistentFlags().Lookup("log-level").Value.String(); got != "info" {
		t.Fatalf("second tree's --log-level is %q after the first's was set, want the default info", got)
	}
	ka, _, _ := a.Find([]string{"kv", "get"})
	kb, _, _ := b.Find([]string{"kv", "get"})
	if ka == kb || ka.Flags().Lookup("nats") == kb.Flags().Lookup("nats") {
		t.Fatal("the two trees share kv get or its --nats flag")
	}
}

// unusableDirCase is a --data or --archive a server cannot use.
type unusableDirCase struct {
	name string
	args []string
}

// unusableDirCases give --data, then --archive, a regular file.
func unusableDirCases(t *testing.T) []unusableDirCase {
	t.Helper()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []unusableDirCase{
		{"data", []string{"--data", file}},
		{"archive", []string{"--data", t.TempDir(), "--archive", file}},
	}
}
