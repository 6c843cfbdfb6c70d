// Package testpersist starts, for one test, an embedded NATS server, persist
// servers on data directories under t.TempDir() and a balancer, and hands
// out persist clients; everything stops when the test ends. Options tune
// the servers' config, hook each new server and set the clients' timeout;
// a server can be stopped and started again on its data directory.
//
// persist/server's own tests cannot import this package (it imports
// persist/server); they share its subpackage testservice instead.
package testpersist

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist/testservice"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
)

// ClientTimeoutDefault is Env.Client's request timeout without the
// ClientTimeout option.
const ClientTimeoutDefault = 5 * time.Second

// Env is one test's bus and persist servers.
type Env struct {
	t    testing.TB
	NATS *embedded.Server
	IDs  []string
	// Dir is the data directory all the servers share (each stream file
	// lives under its scope, which one server owns).
	Dir  string
	opts options

	servers map[string]*testservice.Node[*server.Server]
}

// Option changes how Start sets the environment up.
type Option func(*options)

type options struct {
	nats       testnats.Options
	tune       func(*server.Config)
	onNew      func(*server.Server)
	timeout    time.Duration
	balancer   placement.Func
	noBalancer bool
}

// Tune changes each server's config before the server is made, restarts
// included: limits, intervals, hooks such as OnChange, or DataDir ("" for a
// server with ephemeral streams only).
func Tune(f func(*server.Config)) Option { return func(o *options) { o.tune = f } }

// OnNewServer runs f on each new server, restarts included, after it was
// made and before it starts: the place for test hooks set on the server.
func OnNewServer(f func(*server.Server)) Option { return func(o *options) { o.onNew = f } }

// ClientTimeout is the request timeout of Env.Client's clients. Zero means
// persist's own default; without the option it is ClientTimeoutDefault.
func ClientTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// NATS sets the embedded NATS server's options (a smaller max payload, ...).
func NATS(o testnats.Options) Option { return func(opts *options) { opts.nats = o } }

// BalancerPlacement is the balancer's placement; without the option it is
// placement.Rendezvous, the servers' (which Tune can change). A balancer
// that disagrees with the servers is how tests meet wrong-owner.
func BalancerPlacement(f placement.Func) Option { return func(o *options) { o.balancer = f } }

// WithoutBalancer starts no balancer: for tests of a client that finds none,
// or that answer owner questions themselves. StartBalancer starts it later.
func WithoutBalancer() Option { return func(o *options) { o.noBalancer = true } }

// Start runs n persist servers (ids "0".."n-1", placed by
// placement.Rendezvous) and a balancer on a fresh embedded NATS server,
// changed by opts.
func Start(t testing.TB, n int, opts ...Option) *Env {
	t.Helper()
	env := &Env{t: t, Dir: t.TempDir(), opts: options{timeout: ClientTimeoutDefault, balancer: placement.Rendezvous}, servers: map[string]*testservice.Node[*server.Server]{}}
	for _, o := range opts {
		o(&env.opts)
	}
	env.NATS = testnats.Server(t, env.opts.nats)
	for i := range n {
		env.IDs = append(env.IDs, string(rune('0'+i)))
	}
	for _, id := range env.IDs {
		env.servers[id] = testservice.Start(t, func() (*server.Server, error) { return env.newServer(id) })
	}
	if !env.opts.noBalancer {
		env.StartBalancer()
	}
	return env
}

// StartBalancer starts a balancer for the servers, stopped when the test
// ends; Start does unless WithoutBalancer.
func (e *Env) StartBalancer() {
	e.t.Helper()
	testservice.Start(e.t, func() (*placement.Balancer, error) {
		return placement.NewBalancer(placement.BalancerConfig{Conn: e.Conn(), IDs: e.IDs, Placement: e.opts.balancer})
	})
}

// newServer makes server id with a connection of its own, the options
// applied.
func (e *Env) newServer(id string) (*server.Server, error) {
	cfg := server.Config{Conn: testnats.Conn(e.t, e.NATS), ID: id, IDs: e.IDs, Placement: placement.Rendezvous, DataDir: e.Dir}
	if e.opts.tune != nil {
		e.opts.tune(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return nil, err
	}
	if e.opts.onNew != nil {
		e.opts.onNew(srv)
	}
	return srv, nil
}

// node is server id's, failing the test for an unknown id.
func (e *Env) node(id string) *testservice.Node[*server.Server] {
	e.t.Helper()
	n, ok := e.servers[id]
	if !ok {
		e.t.Fatalf("testpersist: no server %q (ids %v)", id, e.IDs)
	}
	return n
}

// Server is server id: the one running, or the one StopServer stopped.
func (e *Env) Server(id string) *server.Server { e.t.Helper(); return e.node(id).Current() }

// StopServer stops server id, failing the test on an error.
func (e *Env) StopServer(id string) { e.t.Helper(); e.node(id).Stop() }

// StartServer starts a new server id on the data directory, after
// StopServer: as a server process started again.
func (e *Env) StartServer(id string) *server.Server { e.t.Helper(); return e.node(id).Start() }

// Restart stops server id and starts a new one on the data directory.
func (e *Env) Restart(id string) *server.Server { e.t.Helper(); return e.node(id).Restart() }

// URL is the NATS server's client URL, for child processes.
func (e *Env) URL() string { return e.NATS.ClientURL() }

// Conn is a new NATS connection, closed when the test ends.
func (e *Env) Conn() *nats.Conn { return testnats.Conn(e.t, e.NATS) }

// Client is a persist client on a new connection, with the ClientTimeout
// option's timeout, closed when the test ends.
func (e *Env) Client() *persist.Client {
	e.t.Helper()
	c, err := persist.NewClient(persist.ClientConfig{Conn: e.Conn(), Timeout: e.opts.timeout})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}
