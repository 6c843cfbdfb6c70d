package web

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Health serves /healthz (the process is up) and /readyz (every readiness
// check passes). Checks are added while the process starts; each must be
// cheap (no I/O): a supervisor polls them.
type Health struct {
	mu     sync.Mutex // protects checks
	checks []check
}

type check struct {
	name  string
	ready func() error
}

// Add adds a readiness check: ready returns nil when name is ready, else
// why not.
func (h *Health) Add(name string, ready func() error) {
	h.mu.Lock()
	h.checks = append(h.checks, check{name, ready})
	h.mu.Unlock()
}

// NotReady runs the checks and lists those that fail, as "name: why".
func (h *Health) NotReady() []string {
	h.mu.Lock()
	checks := append([]check(nil), h.checks...)
	h.mu.Unlock()
	var out []string
	for _, c := range checks {
		if err := c.ready(); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", c.name, err))
		}
	}
	return out
}

// Mount mounts GET /healthz and GET /readyz on s, for any Host
// (Server.HandleAnyHost) and without credentials: orchestrators probe them
// by the address they see, and they hold no data.
func (h *Health) Mount(s *Server) {
	s.HandleAnyHost("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	}))
	s.HandleAnyHost("GET /readyz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if bad := h.NotReady(); len(bad) > 0 {
			plain(w, http.StatusServiceUnavailable, "not ready\n"+strings.Join(bad, "\n")+"\n")
			return
		}
		plain(w, http.StatusOK, "ready\n")
	}))
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
