package e2e

import (
	"context"
	"os/exec"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/placement"
)

// serveProc is one `switchyard persist serve --id 0 --ids 0` child process
// on an embedded NATS server with a balancer, for tests that kill and
// restart the server.
type serveProc struct {
	t    *testing.T
	NATS *embedded.Server
	Conn *nats.Conn // the test's own connection (the balancer runs on it)
	data string
	cmd  *exec.Cmd // the running server process
	kill func()
}

// startServeProc starts NATS, the balancer and the first server process.
func startServeProc(t *testing.T) *serveProc {
	t.Helper()
	e := testnats.Server(t, testnats.Options{})
	p := &serveProc{t: t, NATS: e, Conn: testnats.Conn(t, e), data: t.TempDir()}
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: p.Conn, IDs: []string{"0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	p.start()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *serveProc) start() {
	p.t.Helper()
	cmd := cli(p.t, "persist", "serve", "--id", "0", "--ids", "0", "--data", p.data, "--nats", p.NATS.ClientURL())
	testproc.Start(p.t, cmd, "ready")
	p.cmd = cmd
	p.kill = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}

// Restart kills the server with SIGKILL and starts a new one on the same data.
func (p *serveProc) Restart() {
	p.t.Helper()
	p.kill()
	p.start()
}
