// Package web is the HTTP side of switchyard: the server `up` and each
// role command run on --http, with Prometheus /metrics, /healthz and
// /readyz. The parts of a process mount theirs on it: the dashboard
// (web/dashboard), the WebSocket watch gateway (web/watch) and the Newznab
// API of the usenet indexer.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is one HTTP listener with a mux that the parts of a process mount
// their handlers on before Start.
type Server struct {
	addr string
	mux  *http.ServeMux

	mu   sync.Mutex
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// New returns a server that will listen on addr ("host:port"; port 0
// picks a free one).
func New(addr string) *Server {
	return &Server{addr: addr, mux: http.NewServeMux()}
}

// Handle mounts h on pattern (http.ServeMux patterns, such as "GET /api").
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Start listens and serves in its own goroutine until Stop.
func (s *Server) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("web: server started twice")
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("web: listen %s: %w", s.addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.srv.Serve(ln) }()
	return nil
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
// closes what is left (WebSocket connections among them).
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
