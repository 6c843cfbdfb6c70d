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

	addr    string
	mux     *http.ServeMux
	anyHost map[string]bool // patterns served whatever the Host
	base    lifecycle.Base

	mu    sync.Mutex // protects ln, srv, conns and done
	ln    net.Listener
	srv   *http.Server
	conns *connSet
	done  chan error
}

// New returns a server that will listen on addr ("host:port"; port 0
// picks a free one).
func New(addr string) *Server {
	return &Server{addr: addr, mux: http.NewServeMux(), anyHost: map[string]bool{}}
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

// Start listens and serves in its own goroutine until Stop.
func (s *Server) Start(ctx context.Context) error {
	return s.base.Start(ctx, "web server", func(context.Context) error {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("web: listen %s: %w", s.addr, err)
		}
		hosts := s.Hosts
		if hosts == nil {
			if hosts, err = NewHosts(s.addr); err != nil {
				return fmt.Errorf("web: %w", err)
			}
		}
		log := lifecycle.Logger(s.Logger, "http")
		srv := &http.Server{
			Handler:           s.checkHost(hosts),
			ReadHeaderTimeout: readHeaderTimeout,
			// Without it a kept-alive connection waits for its next
			// request with no deadline: anyone who reaches the port could
			// hold connections (and their goroutines) for good.
			IdleTimeout: cmp.Or(s.IdleTimeout, IdleTimeoutDefault),
			ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
		conns := newConnSet()
		done := make(chan error, 1)
		s.mu.Lock()
		s.ln, s.srv, s.conns, s.done = ln, srv, conns, done
		s.mu.Unlock()
		go func() { done <- srv.Serve(conns.listener(ln)) }()
		return nil
	})
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
		srv, conns, done := s.srv, s.conns, s.done
		s.mu.Unlock()
		err := srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(fmt.Errorf("web: shutdown: %w", err), srv.Close())
		}
		// What Shutdown left are the connections handlers took over.
		conns.closeAfter(ctx)
		if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	})
}
