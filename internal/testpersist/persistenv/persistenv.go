// Package persistenv is the environment of package testpersist — for one
// test, an embedded NATS server, persist servers on data directories under
// t.TempDir(), a balancer and persist clients; everything stops when the
// test ends — with the way its servers and balancer are started left to a
// Maker.
//
// Start starts them directly (server.New, placement.NewBalancer). It is
// for the in-package tests of the packages fleet imports (usenet,
// usenet/search, web/watch, work): they cannot import testpersist, which
// starts them through fleet, without an import cycle. Every other test
// uses testpersist.
package persistenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
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
	Dir   string
	opts  options
	maker Maker

	servers map[string]*testservice.Node[Process]
}

// Process is the process of one persist server, or of the balancer: made
// anew by a Maker for each start, as a process started again.
type Process interface {
	lifecycle.Service
	// Server is the persist server of a server's process once it started
	// (it stays after Stop); nil for the balancer's.
	Server() *server.Server
}

// Maker makes an environment's processes. Its methods run on the test's
// goroutine.
type Maker interface {
	// Server makes the process of persist server spec.ID.
	Server(e *Env, spec ServerSpec) (Process, error)
	// Balancer makes the balancer's process.
	Balancer(e *Env, spec BalancerSpec) (Process, error)
}

// ServerSpec is what a persist server's process runs: the options applied.
type ServerSpec struct {
	ID  string
	IDs []string
	// Placement is placement.Rendezvous, which Tune can change.
	Placement placement.Func
	// Dir is the data directory (Env.Dir).
	Dir string
	// Tune and OnNew are the options' (nil without them): Tune changes the
	// server's config before the server is made, OnNew sees the server
	// made and not yet started.
	Tune  func(*server.Config)
	OnNew func(*server.Server)
}

// BalancerSpec is what the balancer's process runs.
type BalancerSpec struct {
	IDs []string
	// Placement is the BalancerPlacement option's, placement.Rendezvous
	// without it.
	Placement placement.Func
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
// changed by opts, each made directly on a connection of its own.
func Start(t testing.TB, n int, opts ...Option) *Env {
	t.Helper()
	return StartWith(t, n, direct{}, opts...)
}

// StartWith is Start with the processes made by mk.
func StartWith(t testing.TB, n int, mk Maker, opts ...Option) *Env {
	t.Helper()
	env := &Env{t: t, Dir: t.TempDir(), maker: mk, opts: options{timeout: ClientTimeoutDefault, balancer: placement.Rendezvous}, servers: map[string]*testservice.Node[Process]{}}
	for _, o := range opts {
		o(&env.opts)
	}
	env.NATS = testnats.Server(t, env.opts.nats)
	for i := range n {
		env.IDs = append(env.IDs, string(rune('0'+i)))
	}
	for _, id := range env.IDs {
		spec := ServerSpec{ID: id, IDs: env.IDs, Placement: placement.Rendezvous, Dir: env.Dir, Tune: env.opts.tune, OnNew: env.opts.onNew}
		env.servers[id] = testservice.Start(t, func() (Process, error) { return mk.Server(env, spec) })
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
	spec := BalancerSpec{IDs: e.IDs, Placement: e.opts.balancer}
	testservice.Start(e.t, func() (Process, error) { return e.maker.Balancer(e, spec) })
}

// node is server id's, failing the test for an unknown id.
func (e *Env) node(id string) *testservice.Node[Process] {
	e.t.Helper()
	n, ok := e.servers[id]
	if !ok {
		e.t.Fatalf("testpersist: no server %q (ids %v)", id, e.IDs)
	}
	return n
}

// Server is server id: the one running, or the one StopServer stopped.
func (e *Env) Server(id string) *server.Server { e.t.Helper(); return e.node(id).Current().Server() }

// StopServer stops server id, failing the test on an error.
func (e *Env) StopServer(id string) { e.t.Helper(); e.node(id).Stop() }

// StartServer starts a new server id on the data directory, after
// StopServer: as a server process started again.
func (e *Env) StartServer(id string) *server.Server {
	e.t.Helper()
	return e.node(id).Start().Server()
}

// Restart stops server id and starts a new one on the data directory.
func (e *Env) Restart(id string) *server.Server {
	e.t.Helper()
	return e.node(id).Restart().Server()
}

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

// direct makes each server and the balancer itself, on a connection of
// its own (Env.Conn: closed when the test ends).
type direct struct{}

func (direct) Server(e *Env, spec ServerSpec) (Process, error) {
	cfg := server.Config{Conn: e.Conn(), ID: spec.ID, IDs: spec.IDs, Placement: spec.Placement, DataDir: spec.Dir}
	if spec.Tune != nil {
		spec.Tune(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return nil, err
	}
	if spec.OnNew != nil {
		spec.OnNew(srv)
	}
	return serverProcess{srv: srv}, nil
}

func (direct) Balancer(e *Env, spec BalancerSpec) (Process, error) {
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: e.Conn(), IDs: spec.IDs, Placement: spec.Placement})
	if err != nil {
		return nil, err
	}
	return balancerProcess{b}, nil
}

type serverProcess struct{ srv *server.Server }

func (p serverProcess) Start(ctx context.Context) error { return p.srv.Start(ctx) }
func (p serverProcess) Stop(ctx context.Context) error  { return p.srv.Stop(ctx) }
func (p serverProcess) Server() *server.Server          { return p.srv }

type balancerProcess struct{ *placement.Balancer }

func (balancerProcess) Server() *server.Server { return nil }
