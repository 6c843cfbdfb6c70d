package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testci"
	"github.com/switchyard-dev/switchyard/internal/testproc"
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
