package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/placement"
)

// serveProc is one `switchyard persist serve` child process on an embedded
// NATS server, for tests that kill, pause and restart servers.
type serveProc struct {
	t    *testing.T
	NATS *embedded.Server
	Conn *nats.Conn // the test's own connection (startServeProc's balancer runs on it)
	id   string
	ids  []string
	data string
	args []string  // more flags of persist serve
	cmd  *exec.Cmd // the running server process
	kill func()
}

// startServeProc starts NATS, the balancer and one server process,
// `persist serve --id 0 --ids 0` with the flags of args.
func startServeProc(t *testing.T, args ...string) *serveProc {
	t.Helper()
	e := testnats.Server(t, testnats.Options{})
	nc := testnats.Conn(t, e)
	startTestBalancer(t, nc, "0")
	p := &serveProc{t: t, NATS: e, Conn: nc, id: "0", ids: []string{"0"}, data: t.TempDir(), args: args}
	p.start()
	t.Cleanup(func() { p.kill() })
	return p
}

// startServer starts `persist serve --id id --ids ids... --data data` on
// e; conn is the test's connection, kept as Conn. Servers given one data
// directory share its files. The process is killed when the test ends.
func startServer(t *testing.T, e *embedded.Server, conn *nats.Conn, data, id string, ids ...string) *serveProc {
	t.Helper()
	p := &serveProc{t: t, NATS: e, Conn: conn, id: id, ids: ids, data: data}
	p.start()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *serveProc) start() {
	p.t.Helper()
	cmd := cli(p.t, append([]string{"persist", "serve", "--id", p.id, "--ids", strings.Join(p.ids, ","), "--data", p.data, "--nats", p.NATS.ClientURL()}, p.args...)...)
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

// testBalancer is the fleet's balancer, run in the test process, whose
// member list a test changes as an operator restarting `switchyard
// balancer --ids` would.
type testBalancer struct {
	t    *testing.T
	conn *nats.Conn
	b    *placement.Balancer
}

// startTestBalancer starts a balancer on conn answering for ids; it is
// stopped when the test ends.
func startTestBalancer(t *testing.T, conn *nats.Conn, ids ...string) *testBalancer {
	t.Helper()
	tb := &testBalancer{t: t, conn: conn}
	tb.b = tb.newBalancer(ids)
	t.Cleanup(func() { _ = tb.b.Stop(context.Background()) })
	return tb
}

func (tb *testBalancer) newBalancer(ids []string) *placement.Balancer {
	tb.t.Helper()
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: tb.conn, IDs: ids})
	if err != nil {
		tb.t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		tb.t.Fatal(err)
	}
	return b
}

// SetIDs changes the member list as a rolling restart of balancer replicas
// does: a balancer with the new list starts (both answer, in one queue
// group, for a moment), then the old one stops. Clients keep the owners
// they cached until a request fails.
func (tb *testBalancer) SetIDs(ids ...string) {
	tb.t.Helper()
	b := tb.newBalancer(ids)
	if err := tb.b.Stop(context.Background()); err != nil {
		tb.t.Fatal(err)
	}
	tb.b = b
}
