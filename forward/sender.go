package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// Defaults of [SenderConfig].
const (
	// SendRequestTimeoutDefault bounds one request, dial to reply.
	SendRequestTimeoutDefault = 10 * time.Second
	// DialTimeoutDefault bounds connecting to a peer.
	DialTimeoutDefault = 5 * time.Second
	// maxReplyBytes caps the reply we read, and a receiver bounds what
	// it writes to it (see Reply).
	maxReplyBytes = 1 << 20
	// idleConnTimeout is how long an idle connection to a peer is kept;
	// below the receiver's IdleTimeoutDefault, so the sender closes first.
	idleConnTimeout = 90 * time.Second
)

// ErrUnknownPeer is returned for a batch to a peer the sender has no URL for.
var ErrUnknownPeer = errors.New("forward: unknown peer")

// ErrNotRunning is returned by Send before Start and after Stop.
var ErrNotRunning = errors.New("forward: sender not running")

// StatusError is a receiver's non-2xx answer.
type StatusError struct {
	Code int
	Body string // at most maxStatusBody bytes of the answer's body
	// NotReceiver is set when the answer lacks the HeaderVersion every
	// Receiver of this version sets: it came from some other server (a
	// peer URL naming the peer's web side, a proxy's error page) or a
	// receiver of an older version.
	NotReceiver bool
	// Location is a redirect's target. A receiver never redirects, and
	// the sender follows no redirect: a signed batch goes to its peer's
	// URL and nowhere else.
	Location string
}

// maxStatusBody is how much of a refusal's body a StatusError keeps: a
// receiver's reasons are one line; another server's page is cut.
const maxStatusBody = 512

func (e *StatusError) Error() string {
	if e.Location != "" {
		// A redirect's body is empty or a link to the same place.
		return fmt.Sprintf("forward: peer answered %d, a redirect to %s, which is not followed: check that the peer's URL is its receiver's",
			e.Code, e.Location)
	}
	if e.NotReceiver {
		return fmt.Sprintf("forward: peer answered %d, not as a forward receiver (no %s: %s in its answer): check that the peer's URL is its receiver's: %s",
			e.Code, HeaderVersion, ProtocolVersion, e.Body)
	}
	return fmt.Sprintf("forward: peer answered %d: %s", e.Code, e.Body)
}

// SenderConfig configures a [Sender].
type SenderConfig struct {
	// Self is this region's peer id, sent in [HeaderPeer]. Required.
	Self string
	// Secret signs every request's headers, the body's SHA-256 among them.
	// Required unless InsecureSkipSignature.
	Secret []byte
	// Peers maps a peer id to the URL its [Receiver] serves. Required.
	Peers map[string]string
	// Timeout bounds one request on top of the caller's context. Zero
	// means 10s.
	Timeout time.Duration
	// IdleConnsPerPeer is how many keep-alive connections are kept per
	// peer between sends. A queue keeps up to its MaxInFlight batches in
	// flight, each on a connection of its own (over HTTP/1.1), so fewer
	// would close and redial connections under load. Zero means 25
	// (MaxInFlightDefault).
	IdleConnsPerPeer int
	// Nonces hands out nonces. Nil means a [ClockNonces] on Clock.
	Nonces NonceSource
	// Clock stamps requests. Nil means the wall clock.
	Clock Clock
	// OnReply, if set, receives every peer's answer: the sockets and
	// watches it holds nothing for.
	OnReply func(peer string, r Reply)
	// Logger receives, at warn level, the replies to delivered batches
	// that could not be read or decoded. Nil means slog.Default().
	Logger *slog.Logger
	// InsecureSkipSignature sends no signature and no body hash. It exists
	// to measure what signing costs and nothing else; a receiver only takes
	// such batches with the same setting.
	InsecureSkipSignature bool
}

// Sender ships batches to peers over HTTP, signed, with one keep-alive
// connection pool per peer. Its Send is a [SendFunc], safe for concurrent
// use: a queue calls it for several batches of one peer at once. It sends
// between Start and Stop; stop it after the queue that sends through it,
// so the queue's drain still has a way out.
type Sender struct {
	cfg        SenderConfig
	signer     *signer // nil with InsecureSkipSignature
	clients    map[string]*peerClient
	base       lifecycle.Base
	running    atomic.Bool // Send's cheap check of the base's state
	badReplies atomic.Uint64
}

// SenderStats counts what a [Sender] noticed beside its sends' results.
type SenderStats struct {
	// BadReplies is the 2xx answers whose reply could not be read or
	// decoded. Their batches were delivered (Send returned nil); only the
	// reply was lost.
	BadReplies uint64
}

// Stats returns the sender's counters.
func (s *Sender) Stats() SenderStats {
	return SenderStats{BadReplies: s.badReplies.Load()}
}

type peerClient struct {
	url       string
	transport *http.Transport
	client    *http.Client
}

// NewSender returns a sender for the configured peers.
func NewSender(cfg SenderConfig) (*Sender, error) {
	switch {
	case cfg.Self == "":
		return nil, errors.New("forward sender: self is required")
	case len(cfg.Secret) == 0 && !cfg.InsecureSkipSignature:
		return nil, errors.New("forward sender: secret is required")
	case len(cfg.Peers) == 0:
		return nil, errors.New("forward sender: peers are required")
	case cfg.Timeout < 0, cfg.IdleConnsPerPeer < 0:
		return nil, errors.New("forward sender: timeout and idle connections must not be negative")
	}
	if cfg.IdleConnsPerPeer == 0 {
		cfg.IdleConnsPerPeer = MaxInFlightDefault
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = SendRequestTimeoutDefault
	}
	if cfg.Clock == nil {
		cfg.Clock = WallClock
	}
	if cfg.Nonces == nil {
		cfg.Nonces = &ClockNonces{Clock: cfg.Clock}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sender{cfg: cfg, clients: make(map[string]*peerClient, len(cfg.Peers))}
	if !cfg.InsecureSkipSignature {
		s.signer = newSigner(cfg.Secret)
	}
	for id, url := range cfg.Peers {
		// One transport per peer: its own pool, so a slow peer cannot
		// hold connections another needs.
		t := &http.Transport{
			DialContext:           (&net.Dialer{Timeout: DialTimeoutDefault, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          cfg.IdleConnsPerPeer,
			MaxIdleConnsPerHost:   cfg.IdleConnsPerPeer,
			IdleConnTimeout:       idleConnTimeout,
			ResponseHeaderTimeout: cfg.Timeout,
		}
		s.clients[id] = &peerClient{url: url, transport: t, client: &http.Client{Transport: t, Timeout: cfg.Timeout,
			// Followed, a redirect to a page that answers 200 made a lost
			// batch count as delivered (a 301, 302 or 303 turns the POST
			// into a GET without its body), and a 307 or 308 sent the
			// signed batch on to whatever host it named.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	}
	return s, nil
}

// Start lets Send ship. Start twice is lifecycle.ErrStarted; after Stop,
// lifecycle.ErrStopped.
func (s *Sender) Start(ctx context.Context) error {
	return s.base.Start(ctx, "forward sender", func(context.Context) error {
		s.running.Store(true)
		return nil
	})
}

// Stop makes later sends fail with ErrNotRunning and closes idle
// connections to every peer. Sends still in flight finish on their own
// connections. Stop before Start and Stop twice are no-ops.
func (s *Sender) Stop(ctx context.Context) error {
	return s.base.Stop(ctx, func(context.Context) error {
		s.running.Store(false)
		for _, pc := range s.clients {
			pc.transport.CloseIdleConnections()
		}
		return nil
	})
}

// Send ships one batch and hands the reply to OnReply. Any failure,
// including a non-2xx answer ([*StatusError]) and a send outside Start and
// Stop ([ErrNotRunning]), means the batch is lost. A 2xx answer means the
// receiver applied the batch, so Send returns nil for it even when its
// reply cannot be read or decoded: that is logged and counted
// ([SenderStats].BadReplies), and OnReply does not run.
func (s *Sender) Send(ctx context.Context, b *Outbound) error {
	if !s.running.Load() {
		return fmt.Errorf("send to %q: %w", b.Peer, ErrNotRunning)
	}
	pc := s.clients[b.Peer]
	if pc == nil {
		return fmt.Errorf("send to %q: %w", b.Peer, ErrUnknownPeer)
	}
	// The transport may read the body after Do returned, and the queue
	// reuses its bytes once Send returns: released on every return, the
	// body then fails the transport's reads instead of handing it the
	// next batch's bytes (see sendBody).
	sb := &sendBody{buf: b.Body}
	defer sb.release()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.url, sb.reader())
	if err != nil {
		return fmt.Errorf("send to %q: %w", b.Peer, err)
	}
	// The Content-Length the signature covers; GetBody lets the transport
	// send the request again on a fresh connection when a kept-alive one
	// turns out closed before anything was written.
	req.ContentLength = int64(len(b.Body))
	req.GetBody = func() (io.ReadCloser, error) { return sb.reader(), nil }
	if len(b.Body) == 0 {
		req.Body, req.GetBody = http.NoBody, nil
	}
	req.Header = http.Header{"Content-Type": {"application/json"}}
	s.signer.sign(req.Header, s.cfg.Self, b.Peer, s.cfg.Clock.Now().Unix(), s.cfg.Nonces.Next(), b.Body)
	resp, err := pc.client.Do(req)
	if err != nil {
		return fmt.Errorf("send to %q: %w", b.Peer, err)
	}
	defer resp.Body.Close()
	// One byte past the bound tells a reply too long. The rest is not
	// read: draining it kept the send reading for as long as the peer
	// wrote, up to Timeout. A reply read to its end has put the
	// connection back in the pool; closing the body of a longer one
	// drops the connection instead.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	tooLong := len(body) > maxReplyBytes
	if tooLong {
		body = body[:maxReplyBytes]
	}
	if resp.StatusCode/100 != 2 {
		body = bytes.TrimSpace(body)
		text := string(body)
		if len(text) > maxStatusBody {
			text = strings.ToValidUTF8(text[:maxStatusBody], "") + "…"
		}
		se := &StatusError{Code: resp.StatusCode, Body: text, NotReceiver: resp.Header.Get(HeaderVersion) != ProtocolVersion}
		if resp.StatusCode/100 == 3 {
			se.Location = resp.Header.Get("Location")
		}
		return fmt.Errorf("send to %q: %w", b.Peer, se)
	}
	// From here on the batch is delivered: a receiver answers 2xx only
	// once its sink had the items. A bad reply loses the reply, not the
	// batch; returned as an error, it would have the queue count the
	// batch lost and its gap policy report losses that did not happen.
	if err == nil && tooLong {
		err = fmt.Errorf("reply longer than %d bytes, the most a receiver writes", maxReplyBytes)
	}
	if err != nil {
		s.badReply(b.Peer, "read", err)
		return nil
	}
	if s.cfg.OnReply != nil && len(body) > 0 {
		var r Reply
		if err := json.Unmarshal(body, &r); err != nil {
			s.badReply(b.Peer, "decode", err)
			return nil
		}
		s.cfg.OnReply(b.Peer, r)
	}
	return nil
}

// errBodyReleased is what a transport reads from a batch's body once its
// Send has returned.
var errBodyReleased = errors.New("forward: batch body read after its send returned")

// sendBody is a batch's body as the transport reads it. A RoundTripper may
// keep reading a request's body after it returned the response, and close it
// later from another goroutine (see [http.RoundTripper]); net/http's
// transport does when a server answers before it read the whole body. The
// bytes belong to the queue, which builds its next batch in them once Send
// returns, so Send releases them before it returns: a read from then on
// fails (the request was answered, or given up, already) instead of copying
// another batch's bytes onto the wire, racing the queue's writes. Releasing
// never waits for the transport.
type sendBody struct {
	mu       sync.Mutex // held while a read copies from buf
	buf      []byte
	released bool
}

// reader returns a fresh reader of the whole body: the request's, and one
// per GetBody call.
func (b *sendBody) reader() io.ReadCloser { return &sendBodyReader{src: b} }

func (b *sendBody) release() {
	b.mu.Lock()
	b.buf, b.released = nil, true
	b.mu.Unlock()
}

type sendBodyReader struct {
	src *sendBody
	off int
}

func (r *sendBodyReader) Read(p []byte) (int, error) {
	r.src.mu.Lock()
	defer r.src.mu.Unlock()
	if r.src.released {
		return 0, errBodyReleased
	}
	if r.off >= len(r.src.buf) {
		return 0, io.EOF
	}
	n := copy(p, r.src.buf[r.off:])
	r.off += n
	return n, nil
}

// Close does nothing: the bytes are released by Send, not by the transport.
func (r *sendBodyReader) Close() error { return nil }

func (s *Sender) badReply(peer, what string, err error) {
	s.badReplies.Add(1)
	s.cfg.Logger.Warn("forward: reply to a delivered batch lost", "peer", peer, "failed", what, "err", err)
}
