package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/web"
	"github.com/switchyard-dev/switchyard/web/metrics"
	"github.com/switchyard-dev/switchyard/work"
)

// upHTTPDefault is where up serves HTTP unless --http says otherwise.
const upHTTPDefault = "127.0.0.1:8080"

// httpFlags are --http and --http-insecure of a process's HTTP side.
type httpFlags struct {
	addr     string
	insecure bool
}

// register adds the flags; def is --http's default ("" = off).
func (f *httpFlags) register(cmd *cobra.Command, def string) {
	f.registerServing(cmd, def, "/metrics, /healthz and /readyz")
}

// registerServing is register for a command whose HTTP side serves more
// than the operations endpoints: serves lists what.
func (f *httpFlags) registerServing(cmd *cobra.Command, def, serves string) {
	off := ""
	if def != "" {
		off = `; "" turns it off`
	}
	cmd.Flags().StringVar(&f.addr, "http", def, "`ADDR` (host:port) to serve "+serves+" on"+off+" (loopback only unless --http-insecure)")
	cmd.Flags().BoolVar(&f.insecure, "http-insecure", false, "allow a non-loopback --http: the endpoints have no authentication yet, anyone who reaches the port can read them")
}

// validate refuses a non-loopback address without --http-insecure (or, in
// up, --insecure): the HTTP side has no authentication yet, and what it
// mounts will grow beyond metrics.
func (f httpFlags) validate(insecure bool) error {
	if f.addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usagef("--http %q: want host:port: %v", f.addr, err)
	}
	if !isLoopback(host) && !f.insecure && !insecure {
		return usagef("--http %s is reachable from other machines and the HTTP side has no authentication yet: use a loopback address, or --http-insecure to serve it anyway", f.addr)
	}
	return nil
}

// procHTTP is the HTTP side of one process: the web.Server every part of
// the process mounts its handlers on, the metrics registry its parts add
// themselves to, and the readiness checks. A nil *procHTTP (no --http) is
// valid: every method is then a no-op and the parts get no observer hooks,
// so a process without --http pays nothing for metrics.
//
// The order: newProcHTTP, then each part as it starts (persistObserver,
// addMetrics, check), then start (before the roles, so /healthz answers
// while they come up), then rolesStarted once all run; stop last.
type procHTTP struct {
	srv     *web.Server
	metrics *metrics.Registry
	health  web.Health
	started atomic.Bool
	// parts are what the dashboard shows (up_dashboard.go).
	parts dashParts
}

// newProcHTTP returns the HTTP side for f, nil when f.addr is "".
func newProcHTTP(f httpFlags) *procHTTP {
	if f.addr == "" {
		return nil
	}
	p := &procHTTP{srv: web.New(f.addr), metrics: metrics.New()}
	p.health.Add("roles", func() error {
		if !p.started.Load() {
			return errors.New("starting")
		}
		return nil
	})
	return p
}

// server is the web.Server, for parts that mount more handlers (nil when
// off).
func (p *procHTTP) server() *web.Server {
	if p == nil {
		return nil
	}
	return p.srv
}

// addMetrics runs add with the registry, when on.
func (p *procHTTP) addMetrics(add func(*metrics.Registry)) {
	if p != nil {
		add(p.metrics)
	}
}

// persistObserver is the Observer for the persist server id (nil when off).
func (p *procHTTP) persistObserver(id string) server.Observer {
	if p == nil {
		return nil
	}
	return p.metrics.PersistObserver(id)
}

// check adds a readiness check.
func (p *procHTTP) check(name string, ready func() error) {
	if p != nil {
		p.health.Add(name, ready)
	}
}

// checkBus adds a readiness check that nc is connected.
func (p *procHTTP) checkBus(name string, nc *nats.Conn) {
	p.check("bus "+name, func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("NATS connection %s", nc.Status())
		}
		return nil
	})
}

// addPersistServer exports srv and makes it a readiness check.
func (p *procHTTP) addPersistServer(id string, srv *server.Server) {
	if p == nil {
		return
	}
	p.metrics.AddPersistServer(id, srv)
	p.parts.addServer(id, srv)
	p.health.Add("persist server "+id, srv.Ready)
}

// start mounts /metrics, /healthz and /readyz and listens.
func (p *procHTTP) start(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.srv.Handle("GET /metrics", p.metrics.Handler())
	p.health.Mount(p.srv)
	if err := p.srv.Start(ctx); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// rolesStarted makes the "roles" readiness check pass.
func (p *procHTTP) rolesStarted() {
	if p != nil {
		p.started.Store(true)
	}
}

// url is the base URL once started ("" when off).
func (p *procHTTP) url() string {
	if p == nil {
		return ""
	}
	return p.srv.URL()
}

// stopHTTP stops ph within httpStopWait, logging a failure: the process is
// on its way out and has its own exit status to return.
func stopHTTP(ph *procHTTP) {
	ctx, cancel := context.WithTimeout(context.Background(), httpStopWait)
	defer cancel()
	if err := ph.stop(ctx); err != nil {
		slog.Warn("switchyard: stop http", "err", err)
	}
}

// httpStopWait bounds the HTTP side's stop: its requests are short.
const httpStopWait = 5 * time.Second

// stop stops the server.
func (p *procHTTP) stop(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.srv.Stop(ctx)
}

// usenetCounters are the usenet totals of the process, added to the
// metrics; nil when the HTTP side is off.
func usenetCounters(p *procHTTP) *usenet.Counters {
	if p == nil {
		return nil
	}
	c := &usenet.Counters{}
	p.metrics.AddUsenet(c)
	p.parts.setCounters(c)
	return c
}

// countedIndexer wraps ix to feed c, or returns ix when c is nil.
func countedIndexer(ix work.Indexer, c *usenet.Counters) work.Indexer {
	if c == nil {
		return ix
	}
	return usenet.Counted(ix, c)
}
