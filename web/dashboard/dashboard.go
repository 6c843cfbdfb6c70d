// Package dashboard is the live operations page of a switchyard process:
// one HTML page, its script and stylesheet (embedded), and a WebSocket,
// GET /ws/dashboard, on which a Hub pushes a JSON Snapshot of the process
// every tick to every connected page.
//
// The hub builds one snapshot per tick, whoever is connected, and hands it
// to each connection's bounded queue. A connection that falls behind loses
// its oldest queued snapshots (each is whole, so the next one repairs
// everything), and one that stops reading is closed once a write has
// waited WriteTimeout: a slow page costs at most Queue snapshots of memory.
package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/web"
)

// Defaults of Config.
const (
	EveryDefault        = time.Second
	SamplesDefault      = 120
	QueueDefault        = 4
	WriteTimeoutDefault = 5 * time.Second
	ReadTimeoutDefault  = 2 * time.Second
	ReleasesDefault     = 10
)

// Config configures a Hub.
type Config struct {
	// Source gives the parts' snapshots. Required.
	Source Source
	// Every is the tick. Zero means EveryDefault.
	Every time.Duration
	// Samples is how many throughput samples the chart keeps. Zero means
	// SamplesDefault.
	Samples int
	// Queue bounds the snapshots waiting to be sent on one connection.
	// Zero means QueueDefault.
	Queue int
	// WriteTimeout bounds one snapshot's write; a connection whose write
	// takes longer is closed. Zero means WriteTimeoutDefault.
	WriteTimeout time.Duration
	// ReadTimeout bounds the reads of Source.Work and Source.Releases per
	// tick. Zero means ReadTimeoutDefault.
	ReadTimeout time.Duration
	// Releases is how many of the newest releases a snapshot lists. Zero
	// means ReleasesDefault.
	Releases int
	// Logger gets the failures the page cannot show. Nil means
	// slog.Default() (through lifecycle.Logger, as role dashboard).
	Logger *slog.Logger
	// Hosts are the server's names: the WebSocket admits a browser page
	// whose Origin is one of them (web.Hosts.CheckOrigin), never one that
	// merely matches the request's Host, which a rebinding page sets to
	// its own. Nil means the loopback names only.
	Hosts *web.Hosts
	// Authorizer, when set, guards the page (GET /, answered 401 with
	// WWW-Authenticate: Basic so a browser prompts) and the WebSocket:
	// any principal it admits sees the dashboard. Nil means open (an open
	// bus on loopback). The page's assets are open: they hold no data.
	Authorizer web.Authorizer
}

func (c Config) withDefaults() Config {
	if c.Every == 0 {
		c.Every = EveryDefault
	}
	if c.Samples == 0 {
		c.Samples = SamplesDefault
	}
	if c.Queue == 0 {
		c.Queue = QueueDefault
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = WriteTimeoutDefault
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = ReadTimeoutDefault
	}
	if c.Releases == 0 {
		c.Releases = ReleasesDefault
	}
	c.Logger = lifecycle.Logger(c.Logger, "dashboard")
	return c
}

func (c Config) validate() error {
	switch {
	case c.Source == nil:
		return errors.New("dashboard: no Source")
	case c.Every < 0, c.Samples < 0, c.Queue < 0, c.WriteTimeout < 0, c.ReadTimeout < 0, c.Releases < 0:
		return errors.New("dashboard: negative setting")
	}
	return nil
}

// Hub pushes snapshots to the connected dashboards. Start it, mount it,
// and Stop it before the HTTP server: the server's Shutdown does not wait
// for WebSocket connections (they are hijacked), Stop closes them and
// waits for their handlers.
type Hub struct {
	cfg      Config
	instance string
	samples  sampler // used by the tick goroutine only

	base lifecycle.Base // its run context ends the ticks at Stop

	mu      sync.Mutex // protects the fields below
	conns   map[*conn]struct{}
	last    []byte // the latest snapshot, sent first to a new connection
	seq     uint64
	started bool          // set once Start succeeded: handlers serve from then
	stopped bool          // set by Stop: handlers refuse and close
	stop    chan struct{} // closed by Stop: handlers close their connections
	tick    sync.WaitGroup
	handler sync.WaitGroup // the WebSocket handlers in flight
}

// New checks cfg and returns a hub that is not yet ticking.
func New(cfg Config) (*Hub, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &Hub{
		cfg:      cfg,
		instance: hex.EncodeToString(id[:]),
		samples:  sampler{n: cfg.Samples},
		conns:    map[*conn]struct{}{},
		stop:     make(chan struct{}),
	}, nil
}

// Start starts the tick goroutine. It runs until Stop, whatever becomes of
// ctx (which bounds starting only). Start twice is lifecycle.ErrStarted;
// after Stop, lifecycle.ErrStopped.
func (h *Hub) Start(ctx context.Context) error {
	return h.base.Start(ctx, "dashboard", func(context.Context) error {
		h.mu.Lock()
		h.started = true
		h.mu.Unlock()
		h.tick.Add(1)
		go h.run(h.base.Run())
		return nil
	})
}

// Stop ends the ticks, closes every connection (going away) and waits for
// their handlers until ctx ends. Stop before Start and Stop twice are
// no-ops.
func (h *Hub) Stop(ctx context.Context) error {
	return h.base.Stop(ctx, func(ctx context.Context) error {
		h.halt()
		done := make(chan struct{})
		go func() {
			h.tick.Wait()
			h.handler.Wait()
			close(done)
		}()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("dashboard: stop: %w", ctx.Err())
		}
	})
}

// halt refuses new connections and tells the handlers to close theirs.
func (h *Hub) halt() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	close(h.stop)
}

// run builds and sends a snapshot every tick until ctx ends.
func (h *Hub) run(ctx context.Context) {
	defer h.tick.Done()
	t := time.NewTicker(h.cfg.Every)
	defer t.Stop()
	for {
		h.publish(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publish builds one snapshot and queues it on every connection.
func (h *Hub) publish(ctx context.Context, now time.Time) {
	h.mu.Lock()
	watched := len(h.conns) > 0
	h.mu.Unlock()
	s := h.build(ctx, now, watched)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	s.Seq = h.seq
	b, err := json.Marshal(s)
	if err != nil {
		h.cfg.Logger.Warn("dashboard: encode snapshot", "err", err)
		return
	}
	h.last = b
	for c := range h.conns {
		c.offer(b)
	}
}

// Mount mounts the page (GET /), its assets (GET /dashboard/...) and the
// WebSocket (GET /ws/dashboard) on mux (a *web.Server or *http.ServeMux),
// the page and the WebSocket behind Config.Authorizer.
func (h *Hub) Mount(mux interface {
	Handle(pattern string, handler http.Handler)
}) {
	mux.Handle("GET /{$}", web.RequireAuth(h.cfg.Authorizer, web.StaticPage(page)))
	mux.Handle("GET /dashboard/", http.StripPrefix("/dashboard/", web.StaticAssets(assetFS)))
	// A foreign page is refused before credentials are asked for, as on
	// /ws/watch: 403, not a 401 whose challenge a browser would prompt.
	mux.Handle("GET /ws/dashboard", h.checkOrigin(web.RequireAuth(h.cfg.Authorizer, http.HandlerFunc(h.serveWS))))
}

// checkOrigin answers 403 to a request whose Origin is not one of Hosts.
// The page is served by this server under one of its names; another site
// must not read the process's state through a visitor's browser. The
// request's Host proves nothing (a rebinding page sets it to its own
// name), so the WebSocket library's same-host check is replaced by this.
func (h *Hub) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.cfg.Hosts.CheckOrigin(r, nil); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
