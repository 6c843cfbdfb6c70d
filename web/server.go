// Package web is the HTTP side of switchyard: the server `up` and each
// role command run on --http, with Prometheus /metrics, /healthz and
// /readyz. The parts of a process mount theirs on it: the dashboard
// (web/dashboard), the WebSocket watch gateway (web/watch), the releases
// page (web/releases) and the Newznab API of the usenet indexer; the
// embedded pages are served by StaticPage and StaticAssets. Every route answers only the Host names of
// its Hosts (against DNS rebinding), and the bus's users log in to the
// guarded ones through an Authorizer (Accounts, AuthDirAccounts).
package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Server is one HTTP listener with a mux that the parts of a process mount
// their handlers on before Start. It follows the lifecycle rules: Start
// twice is ErrStarted, Stop before Start and twice are no-ops, and a
// stopped server does not start again.
type Server struct {
	// Logger receives the http.Server's own errors (at debug level: they
	// are a client's bad TLS or headers). Set it before Start. Nil means
	// slog.Default() (through lifecycle.Logger, as role http).
	Logger *slog.Logger

	// Hosts are the names requests may carry in their Host header; any
	// other answers 421 Misdirected Request, on every route but those
	// mounted with HandleAnyHost. Set it before Start. Nil means
	// NewHosts(addr): the loopback names and the listen address's host.
	Hosts *Hosts

	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request before the server closes it. Set it before Start.
	// Zero means 2 minutes (IdleTimeoutDefault).
	IdleTimeout time.Duration

	// Listener, if set before Start, is served instead of a listener of
	// the server's own on addr (addr then only names the server for
	// Hosts' default and errors): for a caller that must hold the
	// listener. A Start that succeeds takes it over (Stop closes it); a
	// failed one leaves it to the caller. Nil means listen on addr.
	Listener net.Listener

	// readTimeout is readTimeout (the constant) but in tests.
	readTimeout time.Duration

	addr    string
	mux     *http.ServeMux
	anyHost map[string]bool // patterns served whatever the Host
	base    lifecycle.Base

	// served is closed once Serve returned, serveErr (written before the
	// close) saying why when Stop was not it.
	served   chan struct{}
	serveErr error

	mu    sync.Mutex // protects ln, srv and conns
	ln    net.Listener
	srv   *http.Server
	conns *connSet
}

// New returns a server that will listen on addr ("host:port"; port 0
// picks a free one).
func New(addr string) *Server {
	return &Server{addr: addr, mux: http.NewServeMux(), anyHost: map[string]bool{}, served: make(chan struct{})}
}

// Handle mounts h on pattern (http.ServeMux patterns, such as "GET /api").
// It answers only the requests whose Host is one of Hosts.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleAnyHost mounts h on pattern for every Host: for probes that
// address the server by whatever IP they see (an orchestrator's health
// checks) and that tell a rebinding page nothing worth reading. Mount
// before Start.
func (s *Server) HandleAnyHost(pattern string, h http.Handler) {
	s.anyHost[pattern] = true
	s.mux.Handle(pattern, h)
}

// checkHost is the server's one Host check, in front of its mux.
func (s *Server) checkHost(hosts *Hosts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.Allowed(r.Host) {
			if _, pattern := s.mux.Handler(r); !s.anyHost[pattern] {
				hosts.refuse(w, r)
				return
			}
		}
		s.mux.ServeHTTP(w, r)
	})
}

// Start listens and serves in its own goroutine until Stop, or until the
// listener fails (Done).
func (s *Server) Start(ctx context.Context) error {
	return s.base.Start(ctx, "web server", func(context.Context) error {
		hosts := s.Hosts
		if hosts == nil {
			var err error
			if hosts, err = NewHosts(s.addr); err != nil {
				return fmt.Errorf("web: %w", err)
			}
		}
		ln := s.Listener
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", s.addr); err != nil {
				return fmt.Errorf("web: listen %s: %w", s.addr, err)
			}
		}
		log := lifecycle.Logger(s.Logger, "http")
		srv := &http.Server{
			Handler:           s.checkHost(hosts),
			ReadHeaderTimeout: readHeaderTimeout,
			// Without it a body is read with no deadline: a request that
			// declares one and never sends it held its connection and
			// goroutine for good, unanswered (net/http reads what a
			// handler left of a body before it answers), on any route
			// and whatever its Host or credentials. net/http lifts the
			// deadline once the body is read, so a handler may run longer.
			ReadTimeout: cmp.Or(s.readTimeout, readTimeout),
			// Without it a kept-alive connection waits for its next
			// request with no deadline: anyone who reaches the port could
			// hold connections (and their goroutines) for good.
			IdleTimeout: cmp.Or(s.IdleTimeout, IdleTimeoutDefault),
			ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
		conns := newConnSet()
		s.mu.Lock()
		s.ln, s.srv, s.conns = ln, srv, conns
		s.mu.Unlock()
		go func() {
			err := srv.Serve(conns.listener(ln))
			if !errors.Is(err, http.ErrServerClosed) {
				// Not our Stop: the listener failed or was closed under
				// us, and nothing listens again.
				s.serveErr = fmt.Errorf("web: serve %s: %w", ln.Addr(), err)
			}
			close(s.served)
		}()
		return nil
	})
}

// Done is closed once the started server stopped serving: on Stop, or on
// its own when its listener failed or was closed by something else
// (Err then says why). It stays open on a server that did not start.
func (s *Server) Done() <-chan struct{} { return s.served }

// Err is why the server stopped serving on its own: nil while Done is
// open, and nil when Stop stopped it.
func (s *Server) Err() error {
	select {
	case <-s.served:
		return s.serveErr
	default:
		return nil
	}
}

// Addr is the address the server listens on, once started.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return s.addr
	}
	return s.ln.Addr().String()
}

// URL is the server's base URL, once started.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Stop stops accepting, lets requests in flight finish until ctx ends, then
// closes what is left: WebSocket connections among them, which
// http.Server.Shutdown neither waits for nor closes (a gateway with a Stop
// of its own has closed its sockets before).
func (s *Server) Stop(ctx context.Context) error {
	return s.base.Stop(ctx, func(ctx context.Context) error {
		s.mu.Lock()
		srv, conns := s.srv, s.conns
		s.mu.Unlock()
		err := srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(fmt.Errorf("web: shutdown: %w", err), srv.Close())
		}
		// What Shutdown left are the connections handlers took over.
		conns.closeAfter(ctx)
		<-s.served
		return errors.Join(err, s.serveErr)
	})
}
