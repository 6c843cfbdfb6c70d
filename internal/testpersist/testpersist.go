// Package testpersist starts, for one test, an embedded NATS server, persist
// servers on data directories under t.TempDir() and a balancer, and hands
// out persist clients; everything stops when the test ends. Options tune
// the servers' config, hook each new server and set the clients' timeout;
// a server can be stopped and started again on its data directory.
//
// Each persist server, and the balancer, runs as a fleet of its own
// (fleet.Start) on the test's NATS server, as a role command's process
// does: stopping a server stops its process, its connection included, and
// starting it again starts a new one.
//
// The environment is persistenv's. The in-package tests of the packages
// fleet imports use persistenv directly, which starts the servers without
// fleet; persist/server's own tests, which neither can import, share the
// subpackage testservice.
package testpersist

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
)

// ClientTimeoutDefault is Env.Client's request timeout without the
// ClientTimeout option.
const ClientTimeoutDefault = persistenv.ClientTimeoutDefault

// Env is one test's bus and persist servers: see persistenv.Env for its
// fields and methods (Server, StopServer, StartServer, Restart,
// StartBalancer, Client, Conn, URL).
type Env = persistenv.Env

// Option changes how Start sets the environment up.
type Option = persistenv.Option

// Tune changes each server's config before the server is made, restarts
// included: limits, intervals, hooks such as OnChange, or DataDir ("" for a
// server with ephemeral streams only).
func Tune(f func(*server.Config)) Option { return persistenv.Tune(f) }

// OnNewServer runs f on each new server, restarts included, after it was
// made and before it starts: the place for test hooks set on the server.
func OnNewServer(f func(*server.Server)) Option { return persistenv.OnNewServer(f) }

// ClientTimeout is the request timeout of Env.Client's clients. Zero means
// persist's own default; without the option it is ClientTimeoutDefault.
func ClientTimeout(d time.Duration) Option { return persistenv.ClientTimeout(d) }

// NATS sets the embedded NATS server's options (a smaller max payload, ...).
func NATS(o testnats.Options) Option { return persistenv.NATS(o) }

// BalancerPlacement is the balancer's placement; without the option it is
// placement.Rendezvous, the servers' (which Tune can change). A balancer
// that disagrees with the servers is how tests meet wrong-owner.
func BalancerPlacement(f placement.Func) Option { return persistenv.BalancerPlacement(f) }

// WithoutBalancer starts no balancer: for tests of a client that finds none,
// or that answer owner questions themselves. StartBalancer starts it later.
func WithoutBalancer() Option { return persistenv.WithoutBalancer() }

// Start runs n persist servers (ids "0".."n-1", placed by
// placement.Rendezvous) and a balancer on a fresh embedded NATS server,
// changed by opts, each a fleet of its own.
func Start(t testing.TB, n int, opts ...Option) *Env {
	t.Helper()
	return persistenv.StartWith(t, n, fleets{}, opts...)
}

// fleets makes each process a fleet on the environment's NATS server.
type fleets struct{}

func (fleets) Server(e *Env, s persistenv.ServerSpec) (persistenv.Process, error) {
	return &process{cfg: fleet.Config{
		NATS: fleet.NATSConfig{URL: e.URL()},
		Persist: fleet.PersistConfig{
			IDs: s.IDs, Serve: []string{s.ID}, Placement: s.Placement, DataDir: s.Dir,
			Tune: s.Tune, OnNew: s.OnNew,
		},
	}}, nil
}

func (fleets) Balancer(e *Env, s persistenv.BalancerSpec) (persistenv.Process, error) {
	return &process{cfg: fleet.Config{
		NATS:     fleet.NATSConfig{URL: e.URL()},
		Persist:  fleet.PersistConfig{IDs: s.IDs, Placement: s.Placement},
		Balancer: true,
	}}, nil
}

// process is one fleet, started from cfg.
type process struct {
	cfg   fleet.Config
	fleet *fleet.Fleet // the one started, nil before
}

func (p *process) Start(ctx context.Context) error {
	f, err := fleet.Start(ctx, p.cfg)
	if err != nil {
		return err
	}
	p.fleet = f
	return nil
}

func (p *process) Stop(ctx context.Context) error {
	if p.fleet == nil {
		return nil
	}
	return p.fleet.Stop(ctx)
}

// Server is the fleet's persist server, nil for the balancer's.
func (p *process) Server() *server.Server {
	if p.fleet == nil || len(p.fleet.Servers()) == 0 {
		return nil
	}
	return p.fleet.Servers()[0]
}
