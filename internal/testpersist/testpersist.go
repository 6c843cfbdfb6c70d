// Package testpersist starts, for one test, an embedded NATS server, persist
// servers on data directories under t.TempDir() and a balancer, and hands
// out persist clients; everything stops when the test ends.
package testpersist

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
)

// Env is one test's bus and persist servers.
type Env struct {
	t    testing.TB
	NATS *embedded.Server
	IDs  []string
	Dir  string
}

// Start runs n persist servers (ids "0".."n-1") and a balancer on a fresh
// embedded NATS server.
func Start(t testing.TB, n int) *Env {
	t.Helper()
	e := testnats.Server(t, testnats.Options{})
	env := &Env{t: t, NATS: e, Dir: t.TempDir()}
	for i := range n {
		env.IDs = append(env.IDs, string(rune('0'+i)))
	}
	for _, id := range env.IDs {
		srv, err := server.New(server.Config{Conn: testnats.Conn(t, e), ID: id, IDs: env.IDs, Placement: placement.Rendezvous, DataDir: env.Dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	}
	b, err := placement.NewBalancer(placement.BalancerConfig{Conn: testnats.Conn(t, e), IDs: env.IDs, Placement: placement.Rendezvous})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return env
}

// URL is the NATS server's client URL, for child processes.
func (e *Env) URL() string { return e.NATS.ClientURL() }

// Conn is a new NATS connection, closed when the test ends.
func (e *Env) Conn() *nats.Conn { return testnats.Conn(e.t, e.NATS) }

// Client is a persist client on a new connection.
func (e *Env) Client() *persist.Client {
	e.t.Helper()
	c, err := persist.NewClient(persist.ClientConfig{Conn: e.Conn(), Timeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}
