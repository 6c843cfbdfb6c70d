package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/postproc"
	"github.com/switchyard-dev/switchyard/web"
	"github.com/switchyard-dev/switchyard/web/dashboard"
	"github.com/switchyard-dev/switchyard/web/eventsws"
	"github.com/switchyard-dev/switchyard/web/metrics"
	"github.com/switchyard-dev/switchyard/web/releases"
	"github.com/switchyard-dev/switchyard/web/watch"
	"github.com/switchyard-dev/switchyard/work"
)

// HTTPConfig is the process's HTTP side: /metrics, /healthz and /readyz,
// and what else the process mounts on it.
type HTTPConfig struct {
	// Addr (host:port) to listen on. "" means no HTTP side. Whether a
	// non-loopback address is allowed is the caller's decision.
	Addr string

	// Dashboard serves the live dashboard at / (and /ws/dashboard).
	Dashboard bool

	// Watch serves the WebSocket watch gateway (/ws/watch, /watch). With
	// NATS.AuthDir its users log in as the bus's users and read what the
	// bus lets them; without, it is as open as the bus. With the API the
	// gateway runs whatever Watch says, so that the releases page can
	// follow the releases stream: without Watch it admits only the API's
	// key, reading only the usenet scope.
	Watch bool

	// Events serves the events layer's WebSocket API (/ws/events, with
	// its JS client and the /events page), authorized as Watch is.
	Events bool

	// Hosts are names (DNS names or IPs, no port) that requests may carry
	// in their Host header, and browser pages in their Origin, besides
	// the loopback names (localhost, 127.0.0.0/8, ::1) and Addr's host,
	// which are always allowed; a wildcard Addr (0.0.0.0, ::) adds no
	// name. Any other Host is answered 421 on every route but /healthz
	// and /readyz: this is what keeps a DNS-rebinding page out. Nil means
	// none besides those.
	Hosts []string

	// MetricsOpen serves /metrics without credentials under
	// NATS.AuthDir, for a scraper that has no bus user. False means that
	// with NATS.AuthDir /metrics, like the dashboard, needs a bus user or
	// API key (web.AuthDirAccounts); without NATS.AuthDir it is open
	// anyway.
	MetricsOpen bool
}

func (c HTTPConfig) validate() error {
	for _, n := range c.Hosts {
		if err := web.ValidHostName(n); err != nil {
			return fmt.Errorf("fleet: HTTP.Hosts: %w", err)
		}
	}
	return nil
}

// httpSide is the HTTP side of one process: the web.Server the roles mount
// their handlers on, the metrics registry they add themselves to, and the
// readiness checks. A nil *httpSide (no HTTP side) is valid: every method
// is then a no-op and the roles get no observer hooks.
type httpSide struct {
	srv     *web.Server
	hosts   *web.Hosts     // the names the server answers to
	authz   web.Authorizer // the bus's users with NATS.AuthDir; nil: open
	metrics *metrics.Registry
	health  web.Health
	started atomic.Bool
	stopped atomic.Bool  // Stop began
	parts   dashParts    // what the dashboard shows
	ln      net.Listener // the server's, once it listens
	// late are the routes held from the start for roles that mount after
	// the server listens (by pattern).
	late map[string]*lateRoute
}

// Handle mounts handler for a role: on its held route if there is one,
// else on the server.
func (h *httpSide) Handle(pattern string, handler http.Handler) {
	if r, ok := h.late[pattern]; ok {
		r.h.Store(&handler)
		return
	}
	h.srv.Handle(pattern, handler)
}

// lateRoute is a route that answers 503 until its role mounts the real
// handler: the HTTP side listens first, and a browser or an indexer app
// that calls in the meantime must hear "not yet" (which it retries), not
// "no such page".
type lateRoute struct{ h atomic.Pointer[http.Handler] }

func (l *lateRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "starting", http.StatusServiceUnavailable)
}

// startHTTP listens first, so /healthz answers and /readyz says what is
// not ready yet while the roles come up (and go down: it stops last).
func (f *Fleet) startHTTP(ctx context.Context) error {
	if f.cfg.HTTP.Addr == "" {
		return nil
	}
	hosts, err := web.NewHosts(f.cfg.HTTP.Addr, f.cfg.HTTP.Hosts...)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	h := &httpSide{srv: web.New(f.cfg.HTTP.Addr), hosts: hosts, metrics: metrics.New()}
	h.parts.watchers = h.metrics.Watchers
	h.srv.Logger = f.log
	// The one Host check of the HTTP side: every route the roles mount
	// answers only to these names (DNS rebinding).
	h.srv.Hosts = hosts
	// With the bus's users, the HTTP side admits only them (the Newznab
	// API has its own key): one checker for the dashboard, /metrics and
	// the watch gateway.
	if dir := f.cfg.NATS.AuthDir; dir != "" {
		accounts, err := web.AuthDirAccounts(dir, f.cfg.Service)
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		if len(accounts) == 0 {
			f.log.Warn("http: the auth directory has no password users (NKey users cannot log in over HTTP): " +
				"the dashboard, /ws/watch, /ws/events and /metrics refuse every request; /metrics opens with --metrics-open")
		}
		h.authz = web.Accounts(accounts)
	}
	h.health.Add("roles", func() error {
		// A role that ended on its own comes first: the stop it leads to
		// must not hide why the process went unready.
		if err := f.Err(); err != nil {
			return fmt.Errorf("failed: %w", err)
		}
		switch {
		case h.stopped.Load():
			return errors.New("stopping")
		case !h.started.Load():
			return errors.New("starting")
		}
		return nil
	})
	metricsAuthz := h.authz
	if f.cfg.HTTP.MetricsOpen {
		metricsAuthz = nil
	}
	h.srv.Handle("GET /metrics", web.RequireAuth(metricsAuthz, h.metrics.Handler()))
	h.health.Mount(h.srv)
	// The routes of roles that mount later answer 503 until they do.
	h.late = map[string]*lateRoute{}
	var held []string
	if f.cfg.HTTP.Watch || f.cfg.API.Dir != "" {
		held = append(held, watch.Patterns...)
	}
	if f.cfg.HTTP.Events {
		held = append(held, eventsws.Patterns...)
	}
	if f.cfg.API.Dir != "" {
		held = append(held, apiPattern)
		held = append(held, releases.Patterns...)
	}
	for _, p := range held {
		r := &lateRoute{}
		h.late[p] = r
		h.srv.Handle(p, r)
	}
	if err := f.start(ctx, "http", lifecycle.Funcs("http", func(ctx context.Context) error {
		// The fleet listens and keeps the listener, as it does the
		// forward receiver's, so that what closes it under the server
		// can be shown to end the role; the server takes it over (its
		// Stop closes it).
		ln, err := net.Listen("tcp", f.cfg.HTTP.Addr)
		if err != nil {
			return fmt.Errorf("http: listen %s: %w", f.cfg.HTTP.Addr, err)
		}
		h.srv.Listener = ln
		if err := h.srv.Start(ctx); err != nil {
			_ = ln.Close()
			return fmt.Errorf("http: %w", err)
		}
		h.ln = ln
		// A server that stopped serving on its own (its listener failed
		// or was closed under it) leaves the process with no HTTP side:
		// no /metrics, no API, no /readyz to say so. It ends with no
		// error when Stop stops it.
		go func() {
			<-h.srv.Done()
			if err := h.srv.Err(); err != nil {
				f.roleEnded("http", err)
			}
		}()
		return nil
	}, h.srv.Stop)); err != nil {
		return err
	}
	f.http = h
	return nil
}

// startDashboard serves the dashboard at /, fed by the roles as they
// start. It runs from the start, so a page never meets a server that
// listens without it, and stops before the HTTP server (dashboard.Hub
// closes its own sockets, which the server's shutdown does not wait for).
func (f *Fleet) startDashboard(ctx context.Context) error {
	if f.http == nil || !f.cfg.HTTP.Dashboard {
		return nil
	}
	h, err := dashboard.New(dashboard.Config{Source: &f.http.parts, Logger: f.log, Hosts: f.http.hosts, Authorizer: f.http.authz})
	if err != nil {
		return err
	}
	if err := f.start(ctx, "dashboard", h); err != nil {
		return err
	}
	h.Mount(f.http.srv)
	return nil
}

func (h *httpSide) addMetrics(add func(*metrics.Registry)) {
	if h != nil {
		add(h.metrics)
	}
}

func (h *httpSide) persistObserver(id string) server.Observer {
	if h == nil {
		return nil
	}
	return h.metrics.PersistObserver(id)
}

func (h *httpSide) check(name string, ready func() error) {
	if h != nil {
		h.health.Add(name, ready)
	}
}

// checkBus makes the connection nc a readiness check.
func (h *httpSide) checkBus(name string, nc *nats.Conn) {
	h.check("bus "+name, func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("NATS connection %s", nc.Status())
		}
		return nil
	})
}

func (h *httpSide) addPersistServer(id string, srv *server.Server) {
	if h == nil {
		return
	}
	h.metrics.AddPersistServer(id, srv)
	h.parts.addServer(id, srv)
	h.health.Add("persist server "+id, srv.Ready)
}

func (h *httpSide) rolesStarted() {
	if h != nil {
		h.started.Store(true)
	}
}

// stopping makes the roles unready for good: the process is stopping.
func (h *httpSide) stopping() {
	if h != nil {
		h.stopped.Store(true)
	}
}

func (h *httpSide) url() string {
	if h == nil {
		return ""
	}
	return h.srv.URL()
}

// usenetCounters are the process's usenet totals, exported as metrics and
// shown on the dashboard; nil without an HTTP side.
func (h *httpSide) usenetCounters() *usenet.Counters {
	if h == nil {
		return nil
	}
	c := &usenet.Counters{}
	h.metrics.AddUsenet(c)
	h.parts.setCounters(c)
	return c
}

// postprocCounters are the post-processor's totals, exported as metrics;
// fresh ones (not exported) without an HTTP side.
func (h *httpSide) postprocCounters() *postproc.Counters {
	c := &postproc.Counters{}
	if h != nil {
		h.metrics.AddPostProcess(c)
	}
	return c
}

// countedIndexer wraps ix to feed c, or returns ix when c is nil.
func countedIndexer(ix work.Indexer, c *usenet.Counters) work.Indexer {
	if c == nil {
		return ix
	}
	return usenet.Counted(ix, c)
}
