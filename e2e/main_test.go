package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildTimeout bounds the build in TestMain, which runs before go test's
// -timeout alarm is set.
const buildTimeout = 10 * time.Minute

// binary is the switchyard binary TestMain built.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "switchyard")
	if err := build(binary); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles ./cmd/switchyard to out, with -race when this test binary
// runs under the race detector.
func build(out string) error {
	goCmd, err := goTool()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, append(args, "./cmd/switchyard")...)
	cmd.Dir = ".." // the module root: go test runs a package's tests in its directory
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build switchyard: %v: %w\n%s", cmd.Args, err, b)
	}
	return nil
}

// goTool is the go command to build with: $GOROOT's, so that the binary
// is built by the toolchain of a test run that chose one, else the one on
// PATH.
func goTool() (string, error) {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("find the go command to build switchyard: %w", err)
	}
	return p, nil
}

// cli prepares the switchyard command with args as a child process.
func cli(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	// up serves HTTP on 127.0.0.1:8080 by default, one fixed port that the
	// tests' parallel ups would fight over: unless a test chose, a free one.
	if len(args) > 0 && args[0] == "up" && !slices.ContainsFunc(args, func(a string) bool { return a == "--http" || strings.HasPrefix(a, "--http=") }) {
		args = append(slices.Clone(args), "--http", "127.0.0.1:0")
	}
	cmd := exec.Command(binary, args...)
	// Under -race a child waits atexit_sleep_ms (1s by default) before it
	// exits, which would make every CLI call take a second; keep the
	// caller's other GORACE options.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), "SWITCHYARD_NATS_URL=", "GORACE="+gorace)
	return cmd
}

// pace waits d or until ctx ends: a deliberate pause (in the chaos, or
// before a writer retries), not a wait for something to happen.
func pace(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
