package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/wscork"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/web"
)

// Watch gateway defaults.
const (
	// QueueMessagesDefault bounds the messages waiting to be written to
	// one browser; one more and it is sent a resync.
	QueueMessagesDefault = 1024
	// QueueBytesDefault bounds the bytes waiting to be written to one
	// browser. A single message larger than it still goes through an empty
	// queue, so a connection holds at most max(QueueBytes, one message).
	QueueBytesDefault = 256 << 10
	// WriteTimeoutDefault is how long one write to the socket (a batch of
	// queued messages, or a ping) may take before the browser is cut off:
	// a peer that stops reading fills the socket's buffers and then this
	// deadline ends it.
	WriteTimeoutDefault = 10 * time.Second
	// PingIntervalDefault is how often an idle connection is pinged, so
	// peers that vanished are noticed and proxies keep it open.
	PingIntervalDefault = 30 * time.Second
	// WatchBufferDefault is the persist.WatchOptions.Buffer of each
	// connection's watch. The gateway's callback never blocks, so the
	// watch's own buffer only bridges scheduling hiccups; small keeps an
	// idle connection small.
	WatchBufferDefault = 256
	// InventoryTimeoutDefault bounds the inventory read that resolves an
	// absent from before the upgrade.
	InventoryTimeoutDefault = 10 * time.Second
	// TenantConnectionsDefault bounds the connections one principal may
	// have open at once. A page holds one per stream it shows, so a user
	// with a few tabs of dashboards stays well below it, while one tenant
	// (a leaked key, a reconnect loop that never closes) holds at most
	// this many descriptors and of the gateway's heap about 100 × 35 KiB
	// idle, at most 100 × QueueBytesDefault (25 MiB) if none of them reads.
	TenantConnectionsDefault = 100
)

// Close codes the gateway ends a connection with (besides the standard
// 1001 going away when it stops, and 1008 when a browser sends data).
const (
	// CloseResync: the browser fell behind; the last message was a resync
	// naming the seq to reconnect from.
	CloseResync websocket.StatusCode = 4001
	// CloseEnded: the watch ended for good (the error message before says
	// why: bad-request, forbidden, too-large); reconnecting will not help.
	CloseEnded websocket.StatusCode = 4002
	// CloseUnavailable: the watch ended because the gateway lost its bus
	// (or hit an internal error); reconnect with backoff.
	CloseUnavailable websocket.StatusCode = 1013
)

// Config configures a Gateway.
type Config struct {
	// Client is the persist client the gateway watches with. Required.
	// The gateway never closes it.
	Client *persist.Client
	// Authorizer checks each request. Required: use web.Open() for an
	// open loopback bus, web.Accounts(web.AuthDirAccounts(dir, service))
	// for `up --auth`.
	Authorizer web.Authorizer
	// Hosts are the server's names: a browser page's Origin must be one
	// of them (or match OriginPatterns), whatever the request's Host says,
	// which keeps other sites (DNS rebinding among them) from reading
	// streams through a visitor's browser or its Basic auth. Nil means the
	// loopback names only.
	Hosts *web.Hosts
	// OriginPatterns are browser origins allowed besides Hosts
	// (websocket.AcceptOptions.OriginPatterns syntax). Nil means none.
	OriginPatterns []string
	// QueueMessages bounds one connection's outgoing queue in messages.
	// Zero means QueueMessagesDefault.
	QueueMessages int
	// QueueBytes bounds one connection's outgoing queue in bytes. Zero
	// means QueueBytesDefault.
	QueueBytes int
	// WriteTimeout bounds each write to a browser's socket (the messages
	// queued when the writer takes them, written together). Zero means
	// WriteTimeoutDefault.
	WriteTimeout time.Duration
	// PingInterval is how often a connection is pinged. Zero means
	// PingIntervalDefault; negative turns pings off.
	PingInterval time.Duration
	// WatchBuffer is each watch's persist.WatchOptions.Buffer. Zero means
	// WatchBufferDefault.
	WatchBuffer int
	// TenantConnections bounds the connections one principal (by its
	// web.Principal.Name: a user, whether it signs in with its password
	// or one of its API keys) may have open; a request past it is refused
	// 429 before the upgrade. The anonymous principal of web.Open is not
	// bounded: on an open bus everyone is it, so its bound would be the
	// whole gateway's. Zero means TenantConnectionsDefault; negative means
	// no bound.
	TenantConnections int
	// Logger receives one line per connection that ends abnormally. Nil
	// means slog.Default() (through lifecycle.Logger, as role watch).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
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
	if c.WatchBuffer == 0 {
		c.WatchBuffer = WatchBufferDefault
	}
	if c.TenantConnections == 0 {
		c.TenantConnections = TenantConnectionsDefault
	}
	c.Logger = lifecycle.Logger(c.Logger, "watch")
	return c
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("watch: Config.Client is required")
	case c.Authorizer == nil:
		return errors.New("watch: Config.Authorizer is required (web.Open() for an open loopback bus)")
	case c.QueueMessages < 1 || c.QueueBytes < 1 || c.WriteTimeout < 0 || c.WatchBuffer < 1:
		return errors.New("watch: Config queue bounds, write timeout and watch buffer must be positive")
	}
	return nil
}

// Stats counts what a gateway did; see Gateway.Stats.
type Stats struct {
	// Open is the number of connections open now.
	Open int64
	// Accepted counts upgraded connections.
	Accepted uint64
	// Resyncs counts connections cut off with a resync (queue full).
	Resyncs uint64
	// WriteFailures counts connections whose write failed or timed out.
	WriteFailures uint64
	// Sent counts messages written.
	Sent uint64
	// TenantRefusals counts requests refused (429) because their principal
	// had Config.TenantConnections open.
	TenantRefusals uint64
	// QueueHighBytes and QueueHighMessages are the most any one
	// connection ever had queued.
	QueueHighBytes    int64
	QueueHighMessages int64
}

// Gateway serves GET /ws/watch (see docs/websocket.md): one
// persist.Stream.Watch per WebSocket connection, its events as JSON text
// messages. It serves between Start and Stop (503 before and after).
// WebSocket connections are hijacked, so http.Server.Shutdown neither waits
// for nor closes them: Stop does.
type Gateway struct {
	base  lifecycle.Base // its run context ends every connection at Stop
	cfg   Config
	cache *encodeCache

	wg sync.WaitGroup // one per connection being served

	mu      sync.Mutex // protects conns and closing; held across enter's check and wg.Add
	conns   map[*wsConn]struct{}
	closing bool // Stop is waiting for the connections
	// limit counts each principal's requests past the check of
	// TenantConnections, upgraded or about to be.
	limit *web.ConnLimit

	watchMu  sync.Mutex // protects watchers and endedWS
	watchers map[*persist.Watcher]struct{}
	endedWS  persist.WatchStats // the counters of the watchers that ended, summed

	open, highBytes, highMsgs   atomic.Int64
	accepted, resyncs, failures atomic.Uint64
	sent, tenantRefusals        atomic.Uint64

	// beforeWrite, when set (tests), runs before each write to a browser:
	// a test blocks it to stand for a browser that does not read.
	beforeWrite func(ctx context.Context)
}

// The encode cache's bounds: messages, and bytes of values and encodings.
const (
	encodeCacheMessages = 4096
	encodeCacheBytes    = 4 << 20
)

// New checks cfg and returns a gateway; mount it with Mount or
// as an http.Handler on GET /ws/watch.
func New(cfg Config) (*Gateway, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Gateway{cfg: cfg, cache: newEncodeCache(encodeCacheMessages, encodeCacheBytes), conns: map[*wsConn]struct{}{}, limit: web.NewConnLimit(cfg.TenantConnections), watchers: map[*persist.Watcher]struct{}{}}, nil
}

// Start opens the gateway to connections. Started twice it returns
// lifecycle.ErrStarted; after Stop, lifecycle.ErrStopped.
func (g *Gateway) Start(ctx context.Context) error {
	return g.base.Start(ctx, "watch gateway", func(context.Context) error { return nil })
}

// Mount registers the gateway on mux (a *web.Server or *http.ServeMux):
// GET /ws/watch (the WebSocket), GET /ws/watch.js (the JS client) and
// GET /watch (the live page).
func (g *Gateway) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle(Patterns[0], g)
	mux.Handle(Patterns[1], staticFile("watch.js", "text/javascript; charset=utf-8"))
	mux.Handle(Patterns[2], staticFile("watch.html", "text/html; charset=utf-8"))
}

// Patterns are the routes Mount registers: the socket, the JS client and
// the page. A server that listens before the gateway is mounted can hold
// them (answering 503 until then) so that a reconnecting browser hears
// "not yet" rather than "not found".
var Patterns = []string{"GET /ws/watch", "GET /ws/watch.js", "GET /watch"}

// WatchStats is the gateway's stream watchers (one per open connection):
// how many run now and their stats summed, the counters of the watchers of
// closed connections included so that they never go down; Lag is the
// largest of the running ones'.
func (g *Gateway) WatchStats() (int, persist.WatchStats) {
	g.watchMu.Lock()
	defer g.watchMu.Unlock()
	sum := g.endedWS
	for w := range g.watchers {
		addWatchStats(&sum, w.Stats())
	}
	return len(g.watchers), sum
}

// addWatchStats adds st's counters to sum and keeps the larger lag.
func addWatchStats(sum *persist.WatchStats, st persist.WatchStats) {
	sum.Resyncs += st.Resyncs
	sum.Retries += st.Retries
	sum.Read += st.Read
	sum.Skipped += st.Skipped
	sum.Forged += st.Forged
	sum.IdleChecks += st.IdleChecks
	sum.Gaps += st.Gaps
	sum.Lag = max(sum.Lag, st.Lag)
}

// Stats returns the gateway's counters.
func (g *Gateway) Stats() Stats {
	return Stats{
		Open: g.open.Load(), Accepted: g.accepted.Load(), Resyncs: g.resyncs.Load(),
		WriteFailures: g.failures.Load(), Sent: g.sent.Load(), TenantRefusals: g.tenantRefusals.Load(),
		QueueHighBytes: g.highBytes.Load(), QueueHighMessages: g.highMsgs.Load(),
	}
}

// Stop refuses new connections, ends the inventory reads of requests not
// yet upgraded, closes the open connections with 1001 (going away;
// browsers reconnect and resume) and waits for their goroutines until ctx
// ends, then drops what is left without a close handshake and returns an
// error wrapping ctx.Err(). Stop before Start and Stop twice are no-ops.
func (g *Gateway) Stop(ctx context.Context) error {
	return g.base.Stop(ctx, func(ctx context.Context) error {
		// From here on enter adds nothing to wg, so Wait may begin.
		g.mu.Lock()
		g.closing = true
		g.mu.Unlock()
		done := make(chan struct{})
		go func() { g.wg.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
		}
		// The dropped connections end by themselves, and a request not
		// yet upgraded has its write deadline: waiting for them would
		// take Stop past ctx's end.
		g.mu.Lock()
		for c := range g.conns {
			_ = c.ws.CloseNow()
		}
		g.mu.Unlock()
		return fmt.Errorf("watch: stop gateway: %w", ctx.Err())
	})
}

// watchParams are a request's validated parameters.
type watchParams struct {
	scope, stream string
	from          uint64
	hasFrom       bool
}

func parseWatchParams(r *http.Request) (watchParams, error) {
	q := r.URL.Query()
	p := watchParams{scope: q.Get("scope"), stream: q.Get("stream")}
	if !bus.ValidScope(p.scope) {
		return p, fmt.Errorf("scope %q: want [a-z0-9][a-z0-9_-]{0,127}", p.scope)
	}
	if err := persist.ValidStreamName(p.stream); err != nil {
		return p, fmt.Errorf("stream: %w", err)
	}
	if s := q.Get("from"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return p, fmt.Errorf("from %q: want a seq (a whole number, 1 = everything)", s)
		}
		p.from, p.hasFrom = max(n, 1), true
	}
	return p, nil
}

// ServeHTTP answers one watch request: parameters (400), the browser
// page's Origin (403), credentials (401), scope (403), the gateway running
// (503), the principal's open connections (429), then the upgrade and the
// watch until either side ends it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := parseWatchParams(r)
	if err != nil {
		http.Error(w, "bad-request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := g.cfg.Hosts.CheckOrigin(r, g.cfg.OriginPatterns); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	who, ok := web.Authorize(w, r, g.cfg.Authorizer)
	if !ok {
		return
	}
	if !who.CanRead(p.scope) {
		http.Error(w, fmt.Sprintf("forbidden: %s may not read scope %s", who.Name, p.scope), http.StatusForbidden)
		return
	}
	if !g.enter() {
		http.Error(w, "unavailable: the gateway is not running", http.StatusServiceUnavailable)
		return
	}
	defer g.wg.Done()
	// Before the inventory read, which holds the request a while too;
	// released when the connection has ended, however it ended (serve
	// runs in this call).
	if !g.limit.Admit(who) {
		g.tenantRefusals.Add(1)
		http.Error(w, fmt.Sprintf("%s: %s has %d watch connections open, the most one user may (TenantConnections); close one or retry later", CodeTooManyConnections, who.Name, g.cfg.TenantConnections), http.StatusTooManyRequests)
		return
	}
	defer g.limit.Leave(who)
	stream := g.cfg.Client.Stream(p.scope, p.stream)
	if !p.hasFrom {
		// Only new changes: everything after the last seq assigned now.
		// The read is counted in wg, so Stop waits for it: the gateway's
		// stop ends it, or a stream's server that does not answer would
		// hold Stop for the whole timeout.
		ictx, cancel := context.WithTimeout(r.Context(), InventoryTimeoutDefault)
		stopping := context.AfterFunc(g.base.Run(), cancel)
		inv, err := stream.Inventory(ictx)
		stopping()
		cancel()
		if err != nil && g.base.Run().Err() != nil {
			http.Error(w, "unavailable: the gateway is stopping", http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			http.Error(w, string(refusalCode(err))+": "+err.Error(), httpStatus(err))
			return
		}
		p.from = inv.Seq + 1
	}
	cw := &wscork.Writer{ResponseWriter: w, Timeout: g.cfg.WriteTimeout}
	// The Origin was checked above, against the server's hosts rather
	// than the request's Host (which a rebinding page sets to its own).
	ws, err := websocket.Accept(cw, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered the request
	}
	g.serve(ws, cw.Conn, stream, p.from)
}

// enter counts a connection in, unless the gateway is not running.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing || !g.base.Running() {
		return false
	}
	g.wg.Add(1)
	return true
}

// refusalCode is the code a refusal's body starts with for a persist error
// met before the upgrade: the server's own code, or unavailable for a
// failure on the way there (no responders, a timeout, the gateway's client
// closed), which is what its 503 means; persist.CodeOf says unavailable
// for the first two but internal, a bug's code, for the last.
func refusalCode(err error) persist.Code {
	var e *persist.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return persist.CodeUnavailable
}

// httpStatus maps a persist error met before the upgrade to a status.
func httpStatus(err error) int {
	switch persist.CodeOf(err) {
	case persist.CodeBadRequest:
		return http.StatusBadRequest
	case persist.CodeForbidden:
		return http.StatusForbidden
	case persist.CodeNotFound:
		return http.StatusNotFound
	}
	// unavailable, wrong-owner, timeouts, no responders: the bus or the
	// stream's server is away for now.
	return http.StatusServiceUnavailable
}
