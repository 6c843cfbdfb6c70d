package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testci"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testtls"
	"github.com/switchyard-dev/switchyard/placement"
)

// TestPlainNATSClient asks `switchyard up` for an owner with the plain NATS
// command-line client, exactly as the README shows. CI installs the client
// (.ci/run); elsewhere the test skips when it is not on PATH, and fails
// under CI=true.
func TestPlainNATSClient(t *testing.T) {
	t.Parallel()
	natsBin, err := exec.LookPath("nats")
	if err != nil {
		testci.Missing(t, "the nats command-line client is not on PATH (.ci/run installs it: go install github.com/nats-io/natscli/nats@v0.5.0)")
	}
	port := testproc.FreePort(t)
	up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", t.TempDir(), "--servers", "4", "--placement", "modulo")
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })

	out, err := exec.Command(natsBin, "--server", "nats://127.0.0.1:"+strconv.Itoa(port), "req", "persist.hub.id", "").CombinedOutput()
	if err != nil {
		t.Fatalf("nats req: %v: %s", err, out)
	}
	// The last line is the reply body: the owner id ("1" for hub over 0..3 under modulo).
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if got, want := strings.TrimSpace(lines[len(lines)-1]), placement.Modulo([]string{"0", "1", "2", "3"}, "hub"); got != want {
		t.Fatalf("nats req printed %q, want the owner %q", out, want)
	}
}

// TestTryLinesWork pastes the Try lines of `switchyard up --auth` over TLS
// on a port of its own into a shell, as a user would, with CA.pem standing
// for the CA file: every line but the endless watch must succeed, so none
// lacks the address, the creds, the CA or, for the nats client, the
// password and the inbox prefix the client user may read.
func TestTryLinesWork(t *testing.T) {
	t.Parallel()
	natsBin, err := exec.LookPath("nats")
	if err != nil {
		testci.Missing(t, "the nats command-line client is not on PATH (.ci/run installs it: go install github.com/nats-io/natscli/nats@v0.5.0)")
	}
	sh, err := exec.LookPath("bash")
	if err != nil {
		testci.Missing(t, "bash is not on PATH")
	}
	dir := filepath.Join(t.TempDir(), "auth")
	if _, stderr, code := testproc.Run(t, cli(t, "auth", "init", dir)); code != 0 {
		t.Fatalf("auth init: exit %d: %s", code, stderr)
	}
	certs := testtls.New(t)
	port := testproc.FreePort(t)
	up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", t.TempDir(), "--auth", dir, "--tls-cert", certs.Cert, "--tls-key", certs.Key)
	banner := startBanner(t, up)

	var tries []string
	in := false
	for _, l := range banner {
		switch {
		case l == "Try:":
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in && !strings.Contains(l, "switchyard watch "):
			tries = append(tries, strings.ReplaceAll(strings.TrimSpace(l), "CA.pem", certs.CA))
		}
	}
	if len(tries) < 5 {
		t.Fatalf("found %d Try lines in the banner:\n%s", len(tries), strings.Join(banner, "\n"))
	}
	// The shell finds both commands by name, as in the banner.
	path := filepath.Dir(binary) + string(os.PathListSeparator) + filepath.Dir(natsBin) + string(os.PathListSeparator) + os.Getenv("PATH")
	owner := ""
	for _, line := range tries {
		cmd := exec.Command(sh, "-c", line)
		cmd.Env = append(os.Environ(), "PATH="+path, "SWITCHYARD_NATS_URL=", "SWITCHYARD_CREDS=", "SWITCHYARD_TLS_CA=", "NATS_URL=")
		stdout, stderr, code := testproc.Run(t, cmd)
		if code != 0 {
			t.Errorf("%s\nexit %d, stdout %q, stderr %q", line, code, stdout, stderr)
			continue
		}
		if strings.HasPrefix(line, "nats req ") {
			owner = strings.TrimSpace(stdout)
		}
	}
	if want := placement.Rendezvous([]string{"0", "1"}, "hub"); owner != want {
		t.Fatalf("the nats req line printed owner %q, want %q", owner, want)
	}
}

// startBanner starts up and returns the lines it prints up to "Stop with
// Ctrl-C"; the rest of its output is read and dropped, and the process is
// killed when the test ends.
func startBanner(t *testing.T, up *exec.Cmd) []string {
	t.Helper()
	out, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	up.Stderr = &stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Process.Kill(); _ = up.Wait() })
	done := make(chan []string, 1)
	go func() {
		var lines []string
		found := false
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if found {
				continue
			}
			lines = append(lines, sc.Text())
			if sc.Text() == "Stop with Ctrl-C." {
				found = true
				done <- lines
			}
		}
		if !found {
			done <- nil
		}
	}()
	select {
	case lines := <-done:
		if lines != nil {
			return lines
		}
		_ = up.Wait() // the stderr copy is complete once Wait returns
		t.Fatalf("%v exited before its banner; stderr: %s", up.Args, stderr.String())
	case <-time.After(testproc.Timeout):
		_ = up.Process.Kill()
		_ = up.Wait()
		t.Fatalf("%v: no banner within %v; stderr: %s", up.Args, testproc.Timeout, stderr.String())
	}
	return nil
}
