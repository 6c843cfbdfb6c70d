package eventsws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/wscork"
	"github.com/switchyard-dev/switchyard/web"
)

// Gateway defaults.
const (
	// QueueMessagesDefault bounds the deliveries waiting to be written to
	// one socket; past it deliveries are dropped, and each subscription
	// that lost some gets one queue_overflow gap once the queue has room.
	QueueMessagesDefault = 1024
	// QueueBytesDefault bounds the bytes of the messages waiting for one
	// socket, as QueueMessagesDefault their number (1,024 messages of
	// 1 KiB): a value may be megabytes, and each subscription it reaches
	// queues a copy, so a socket that stops reading would otherwise hold
	// up to 1,024 of them until WriteTimeout. A delivery larger than it
	// still passes an empty queue.
	QueueBytesDefault = 1 << 20
	// WriteTimeoutDefault bounds one write to a socket; a peer that stops
	// reading is cut off by it.
	WriteTimeoutDefault = 10 * time.Second
	// PingIntervalDefault is how often an idle connection is pinged.
	PingIntervalDefault = 30 * time.Second
	// SubscribeTimeoutDefault bounds a subscribe's wait for its stream's
	// watcher to read the stream.
	SubscribeTimeoutDefault = 15 * time.Second
	// AppDefault is a connection's app for presence when its URL names
	// none (?app=NAME).
	AppDefault = "web"
	// TenantConnectionsDefault bounds the sockets one principal may have
	// open at once, as the watch gateway's: a page holds one, so a user
	// with many tabs and devices stays well below it, while one tenant (a
	// leaked key, a reconnect loop that never closes) holds at most this
	// many descriptors, sessions and queues.
	TenantConnectionsDefault = 100
)

// Config configures a Gateway.
type Config struct {
	// Router delivers the subscriptions. Required; the gateway neither
	// starts nor stops it.
	Router *events.Router
	// Authorizer checks each request. Required: web.Open() for an open
	// loopback bus, as the watch gateway.
	Authorizer web.Authorizer
	// Presence, when set, records each user's connections: the first of a
	// (user, app) joins, the last one's close leaves after the presence
	// delay. Nil records none.
	Presence *events.Presence
	// PresenceScope is the scope of presence rows, whose events are sent
	// as "presence" messages. Empty means events.PresenceScopeDefault.
	PresenceScope string
	// Hosts and OriginPatterns are the browser origins allowed, as the
	// watch gateway's (nil Hosts: the loopback names).
	Hosts          *web.Hosts
	OriginPatterns []string
	// QueueMessages bounds one socket's queue. Zero means
	// QueueMessagesDefault.
	QueueMessages int
	// QueueBytes bounds the bytes of one socket's queue, the same way.
	// Zero means QueueBytesDefault.
	QueueBytes int
	// WriteTimeout bounds each write. Zero means WriteTimeoutDefault.
	WriteTimeout time.Duration
	// PingInterval spaces pings. Zero means PingIntervalDefault; negative
	// turns them off.
	PingInterval time.Duration
	// SubscribeTimeout bounds a subscribe. Zero means
	// SubscribeTimeoutDefault.
	SubscribeTimeout time.Duration
	// TenantConnections bounds the sockets one principal (by its
	// web.Principal.Name: a user, whether it signs in with its password
	// or one of its API keys) may have open; a request past it is refused
	// 429 before the upgrade. The anonymous principal of web.Open is not
	// bounded: on an open bus everyone is it, so its bound would be the
	// whole gateway's. Zero means TenantConnectionsDefault; negative means
	// no bound.
	TenantConnections int
	// Logger receives connections that end abnormally. Nil means
	// slog.Default() (role events).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.PresenceScope == "" {
		c.PresenceScope = events.PresenceScopeDefault
	}
	if c.QueueMessages == 0 {
		c.QueueMessages = QueueMessagesDefault
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = QueueBytesDefault
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = WriteTimeoutDefault
	}
	if c.PingInterval == 0 {
		c.PingInterval = PingIntervalDefault
	}
	if c.SubscribeTimeout == 0 {
		c.SubscribeTimeout = SubscribeTimeoutDefault
	}
	if c.TenantConnections == 0 {
		c.TenantConnections = TenantConnectionsDefault
	}
	c.Logger = lifecycle.Logger(c.Logger, "events")
	return c
}

func (c Config) validate() error {
	switch {
	case c.Router == nil:
		return errors.New("eventsws: Config.Router is required")
	case c.Authorizer == nil:
		return errors.New("eventsws: Config.Authorizer is required (web.Open() for an open loopback bus)")
	case c.QueueMessages < 1 || c.QueueBytes < 1 || c.WriteTimeout < 0 || c.SubscribeTimeout < 0:
		return errors.New("eventsws: Config queue bounds and timeouts must be positive")
	}
	return nil
}

// Stats counts what a gateway did.
type Stats struct {
	Open     int64  // connections open now
	Accepted uint64 // connections upgraded
	Sent     uint64 // messages written
	Dropped  uint64 // deliveries dropped for a full queue (each under a queue_overflow gap)
	Errors   uint64 // error messages sent for requests
	Gaps     uint64 // queue_overflow gaps sent
	// TenantRefusals counts requests refused (429) because their principal
	// had Config.TenantConnections open.
	TenantRefusals uint64
}

// Gateway serves GET /ws/events: one events.Session per socket.
// WebSocket connections are hijacked, so the HTTP server's shutdown does
// not wait for them: Stop closes them.
type Gateway struct {
	base lifecycle.Base
	cfg  Config

	wg      sync.WaitGroup
	mu      sync.Mutex // protects closing; held across enter's check and wg.Add
	closing bool
	// limit counts each principal's requests past the check of
	// TenantConnections, upgraded or about to be.
	limit *web.ConnLimit

	open                                                atomic.Int64
	accepted, sent, dropped, errs, gaps, tenantRefusals atomic.Uint64

	enc eventEncoder // a change's common part, shared by its deliveries to every socket
}

// New checks cfg and returns a gateway to Start and Mount.
func New(cfg Config) (*Gateway, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Gateway{cfg: cfg, limit: web.NewConnLimit(cfg.TenantConnections)}, nil
}

// Patterns are the routes Mount registers: the socket, the JS client and
// the page.
var Patterns = []string{"GET /ws/events", "GET /ws/events.js", "GET /events"}

// Mount registers the socket, the JS client and the page on mux.
func (g *Gateway) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle(Patterns[0], g)
	mux.Handle(Patterns[1], staticFile("events.js", "text/javascript; charset=utf-8"))
	mux.Handle(Patterns[2], staticFile("events.html", "text/html; charset=utf-8"))
}

// Start opens the gateway to connections.
func (g *Gateway) Start(ctx context.Context) error {
	return g.base.Start(ctx, "events gateway", func(context.Context) error { return nil })
}

// Stop closes every connection (1001) and waits for them.
func (g *Gateway) Stop(ctx context.Context) error {
	return g.base.Stop(ctx, func(ctx context.Context) error {
		g.mu.Lock()
		g.closing = true
		g.mu.Unlock()
		done := make(chan struct{})
		go func() { g.wg.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("eventsws: stop gateway: %w", ctx.Err())
		}
	})
}

// Stats returns the gateway's counters.
func (g *Gateway) Stats() Stats {
	return Stats{
		Open: g.open.Load(), Accepted: g.accepted.Load(), Sent: g.sent.Load(), Dropped: g.dropped.Load(),
		Errors: g.errs.Load(), Gaps: g.gaps.Load(), TenantRefusals: g.tenantRefusals.Load(),
	}
}

// EventsGaps is the gap markers the gateway itself left, by reason (for
// /metrics, beside the router's).
func (g *Gateway) EventsGaps() map[events.Reason]uint64 {
	return map[events.Reason]uint64{events.ReasonQueueOverflow: g.gaps.Load()}
}

// ServeHTTP checks the browser page's Origin (403), the credentials
// (401), the app (400), the gateway running (503), the principal's open
// sockets (429) and its apps present (429, joining the app's presence),
// then upgrades and serves the socket until either side ends it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := g.cfg.Hosts.CheckOrigin(r, g.cfg.OriginPatterns); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	who, ok := web.Authorize(w, r, g.cfg.Authorizer)
	if !ok {
		return
	}
	app := r.URL.Query().Get("app")
	if app == "" {
		app = AppDefault
	}
	if !validApp(app) {
		http.Error(w, "bad-request: app: want 1 to 64 of [a-zA-Z0-9_-]", http.StatusBadRequest)
		return
	}
	if !g.enter() {
		http.Error(w, "unavailable: the events gateway is not running", http.StatusServiceUnavailable)
		return
	}
	defer g.wg.Done()
	// Before the upgrade, so a refused request costs no session and no
	// presence (joined below); released when the socket has ended,
	// however it ended (serve runs in this call).
	if !g.limit.Admit(who) {
		g.tenantRefusals.Add(1)
		http.Error(w, fmt.Sprintf("%s: %s has %d event sockets open, the most one user may (TenantConnections); close one or retry later", CodeTooManyConnections, who.Name, g.cfg.TenantConnections), http.StatusTooManyRequests)
		return
	}
	defer g.limit.Leave(who)
	// Before the upgrade too, so a user past events.MaxPresenceApps is
	// told why rather than served a socket that is not present. Every
	// Join has its Leave, a refused one's too (Presence counts it), and a
	// failed write's (Join counts it, Refresh writes the row later):
	// without it the user would stay present for good. serve, and so
	// ready, comes after Join returned.
	if p := g.cfg.Presence; p != nil {
		err := p.Join(g.base.Run(), who.Name, app)
		defer p.Leave(who.Name, app)
		switch {
		case errors.Is(err, events.ErrTooManyApps):
			http.Error(w, fmt.Sprintf("%s: %s has %d apps present in this region, the most one user may (events.MaxPresenceApps), and %q is not one of them; close another app's sockets and retry once it has left", CodeTooManyApps, who.Name, events.MaxPresenceApps, app), http.StatusTooManyRequests)
			return
		case err != nil:
			g.cfg.Logger.Warn("events: presence join", "user", who.Name, "app", app, "err", err)
		}
	}
	// The Origin was checked above against the server's hosts, not the
	// request's Host (which a rebinding page sets to its own).
	// Through the cork: a socket's waiting messages go out in one write.
	cw := &wscork.Writer{ResponseWriter: w, Timeout: g.cfg.WriteTimeout}
	ws, err := websocket.Accept(cw, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered
	}
	g.accepted.Add(1)
	g.open.Add(1)
	defer g.open.Add(-1)
	g.serve(ws, cw.Conn, who)
}

func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing || !g.base.Running() {
		return false
	}
	g.wg.Add(1)
	return true
}

func validApp(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
