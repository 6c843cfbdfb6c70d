package forward

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [ReceiverConfig].
const (
	// MaxReadingDefault is how many bodies are read at once, all peers
	// together: with MaxBodyBytesDefault, at most about 24 MiB of bodies
	// in memory before their hashes have been checked.
	MaxReadingDefault = 64
	// MaxReadingPerPeerDefault is how many bodies are read at once under
	// one peer id: as many batches as a queue with the default bounds
	// keeps in flight (MaxInFlightDefault), so a peer is never refused for
	// its own load.
	MaxReadingPerPeerDefault = MaxInFlightDefault
	// BodyReadTimeoutDefault bounds reading one whole body. A full body
	// (about 385 KiB) takes about 3 s at 1 Mbit/s.
	BodyReadTimeoutDefault = 5 * time.Second
	// retryAfterSeconds is the Retry-After of a 503 for a full reading
	// limit: bodies are read within BodyReadTimeout, so slots free soon.
	retryAfterSeconds = "1"
	// MaxAgeDefault is how old a request's timestamp may be.
	MaxAgeDefault = 300 * time.Second
	// MaxFutureDefault is how far ahead of our clock it may be.
	MaxFutureDefault = 60 * time.Second
	// ReplayWindowDefault is how many nonces are remembered per peer.
	ReplayWindowDefault = 4096
	// AckConcurrencyDefault is how many acks are handed to the sink at once.
	AckConcurrencyDefault = 16
	// OrderWaitDefault is how long a numbered batch waits for a missing
	// earlier one before that one is given up (and refused if it comes).
	OrderWaitDefault = 2 * time.Second
)

// Sink receives a batch's items. The receiver calls it in a fixed order:
// deliveries in batch order, then watches, bumps and events in order, then
// acks, up to AckConcurrency at once (so Ack must be safe for concurrent
// use). Peer is the peer id the signature proved. Calls should not block
// for long: the sender is waiting for the reply.
type Sink interface {
	// Deliver hands one delivery to the local socket holding it and reports
	// true when there is no socket for (d.UserID, d.AppUID).
	Deliver(ctx context.Context, peer string, d *Delivery) (noSocket bool)
	Watch(ctx context.Context, peer string, w *Watch)
	Bump(ctx context.Context, peer string, b *Bump)
	// Event replays a change against local session rows and returns the
	// anchor tokens no local session row watches.
	Event(ctx context.Context, peer string, e *Event) (noWatch []string)
	Ack(ctx context.Context, peer string, a *Ack)
}

// SinkFuncs is a [Sink] made of optional functions; a nil one ignores its
// items.
type SinkFuncs struct {
	DeliverFunc func(ctx context.Context, peer string, d *Delivery) bool
	WatchFunc   func(ctx context.Context, peer string, w *Watch)
	BumpFunc    func(ctx context.Context, peer string, b *Bump)
	EventFunc   func(ctx context.Context, peer string, e *Event) []string
	AckFunc     func(ctx context.Context, peer string, a *Ack)
}

var _ Sink = SinkFuncs{}

// Deliver implements [Sink].
func (s SinkFuncs) Deliver(ctx context.Context, peer string, d *Delivery) bool {
	if s.DeliverFunc == nil {
		return false
	}
	return s.DeliverFunc(ctx, peer, d)
}

// Watch implements [Sink].
func (s SinkFuncs) Watch(ctx context.Context, peer string, w *Watch) {
	if s.WatchFunc != nil {
		s.WatchFunc(ctx, peer, w)
	}
}

// Bump implements [Sink].
func (s SinkFuncs) Bump(ctx context.Context, peer string, b *Bump) {
	if s.BumpFunc != nil {
		s.BumpFunc(ctx, peer, b)
	}
}

// Event implements [Sink].
func (s SinkFuncs) Event(ctx context.Context, peer string, e *Event) []string {
	if s.EventFunc == nil {
		return nil
	}
	return s.EventFunc(ctx, peer, e)
}

// Ack implements [Sink].
func (s SinkFuncs) Ack(ctx context.Context, peer string, a *Ack) {
	if s.AckFunc != nil {
		s.AckFunc(ctx, peer, a)
	}
}

// ReceiverConfig configures a [Receiver].
type ReceiverConfig struct {
	// Self is this region's own peer id. A signed batch is taken only if
	// it was signed for Self ([HeaderTo]): a batch captured on its way to
	// another peer of the same sender is refused. Batches signed as sent
	// by Self are answered and ignored. Required unless
	// InsecureSkipSignature.
	Self string
	// Peers maps each peer id allowed to send to the secret it signs with.
	// Required.
	Peers map[string][]byte
	// Sink receives the items. Required.
	Sink Sink
	// MaxBodyBytes caps a body by its Content-Length, before any of it is
	// read; larger ones get 413. It must be at least the sending queue's
	// BodyLimit. Zero means MaxBodyBytesDefault (393,798 bytes), what a
	// queue with the default bounds produces.
	MaxBodyBytes int64
	// MaxReading is how many bodies are read at once, all peers together;
	// a request over it gets 503 with Retry-After. Zero means 64.
	MaxReading int
	// MaxReadingPerPeer is how many bodies are read at once under one
	// peer id; a request over it gets 503 with Retry-After. It must be at
	// least the sender's MaxInFlight, or the peer is refused for its own
	// load. Zero means 25 (MaxInFlightDefault).
	MaxReadingPerPeer int
	// BodyReadTimeout bounds reading one whole body, from the end of its
	// headers; a body not read in time gets 408 and its connection is
	// closed. It needs the handler to be served by net/http's server
	// (which supports read deadlines). Zero means 5s.
	BodyReadTimeout time.Duration
	// MaxAge is the oldest timestamp accepted. Zero means 300s.
	MaxAge time.Duration
	// MaxFuture is the furthest-ahead timestamp accepted. Zero means 60s.
	MaxFuture time.Duration
	// ReplayWindow is how many nonces are remembered per peer. Zero means
	// 4096.
	ReplayWindow int
	// AckConcurrency is how many acks the sink gets at once. Zero means 16.
	AckConcurrency int
	// OrderWait is how long a numbered batch waits for a lower-numbered one
	// of its peer that has not arrived; after that the missing one is
	// stale. Zero means 2s.
	OrderWait time.Duration
	// Clock checks timestamps. Nil means the wall clock.
	Clock Clock
	// Logger receives rejections, and replies cut to their bound (see
	// [Reply]), at debug level. Nil means slog.Default().
	Logger *slog.Logger
	// InsecureSkipSignature accepts unsigned batches from known peers. It
	// exists to measure what signing costs and nothing else.
	InsecureSkipSignature bool
}

// ReceiverStats counts a receiver's answers by cause.
type ReceiverStats struct {
	Accepted     uint64 // batches handed to the sink
	Items        uint64 // items in them, unknown kinds included
	Ignored      uint64 // batches signed as Self
	BadRequest   uint64 // 400: body, shape, protocol version, timestamp, nonce or body hash
	TooLarge     uint64 // 413
	Forbidden    uint64 // 403: missing or unknown peer, bad signature, body not the one signed
	Replayed     uint64 // 403: nonce seen before or below the window
	MethodDenied uint64 // 405
	Stale        uint64 // 409: a later batch of the peer was applied first
	Skipped      uint64 // batches applied after OrderWait gave up on earlier ones
	Abandoned    uint64 // 503: the sender went away while its batch waited its turn
	// LengthRequired counts 411: a body without Content-Length (chunked).
	LengthRequired uint64
	// BusyPeer and BusyTotal count 503s refused before reading, because
	// MaxReadingPerPeer bodies of the named peer, or MaxReading in all,
	// were being read.
	BusyPeer, BusyTotal uint64
	// ReadTimeout counts 408: a body not read within BodyReadTimeout.
	ReadTimeout uint64
	// Reading is how many bodies are being read now.
	Reading int64
}

// Receiver is the http.Handler peers post batches to.
type Receiver struct {
	cfg   ReceiverConfig
	peers map[string]*receiverPeer
	// started is the receiver's start, unix seconds: the nonces a
	// predecessor admitted are forgotten, so nothing signed in an earlier
	// second is taken (a batch captured before a restart would pass the
	// timestamp window and the new, empty nonce window). Batches signed
	// in the start's own second stay open to a replay: refusing them too
	// would refuse every genuine batch of that second.
	started int64

	accepted, items, ignored, badRequest, tooLarge, forbidden, replayed, method, stale, skipped, abandoned atomic.Uint64

	lengthRequired, busyPeer, busyTotal, readTimeout atomic.Uint64

	reading atomic.Int64 // bodies being read now, bounded by MaxReading

	// selfWarned is when a batch signed as Self was last logged, unix
	// seconds: at most one warning a minute.
	selfWarned atomic.Int64
}

type receiverPeer struct {
	signer *signer
	window *nonceWindow
	order  *linkOrder
	// reading counts the bodies being read under this peer id, bounded
	// by MaxReadingPerPeer. Only requests whose headers this peer signed
	// take one, so this bounds what the peer itself (a slow link, or its
	// secret in the wrong hands) can hold of MaxReading.
	reading atomic.Int64
}

var _ http.Handler = (*Receiver)(nil)

// NewReceiver returns a receiver for the configured peers.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	switch {
	case len(cfg.Peers) == 0:
		return nil, errors.New("forward receiver: peers are required")
	case cfg.Sink == nil:
		return nil, errors.New("forward receiver: sink is required")
	case cfg.Self == "" && !cfg.InsecureSkipSignature:
		// Without its own id it could not tell a batch signed for it from
		// one captured on its way to another peer.
		return nil, errors.New("forward receiver: self is required")
	case cfg.MaxBodyBytes < 0, cfg.MaxAge < 0, cfg.MaxFuture < 0, cfg.ReplayWindow < 0, cfg.AckConcurrency < 0, cfg.OrderWait < 0,
		cfg.MaxReading < 0, cfg.MaxReadingPerPeer < 0, cfg.BodyReadTimeout < 0:
		return nil, errors.New("forward receiver: bounds must not be negative")
	}
	if cfg.MaxReading == 0 {
		cfg.MaxReading = MaxReadingDefault
	}
	if cfg.MaxReadingPerPeer == 0 {
		cfg.MaxReadingPerPeer = MaxReadingPerPeerDefault
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = BodyReadTimeoutDefault
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = MaxBodyBytesDefault
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = MaxAgeDefault
	}
	if cfg.MaxFuture == 0 {
		cfg.MaxFuture = MaxFutureDefault
	}
	if cfg.ReplayWindow == 0 {
		cfg.ReplayWindow = ReplayWindowDefault
	}
	if cfg.AckConcurrency == 0 {
		cfg.AckConcurrency = AckConcurrencyDefault
	}
	if cfg.OrderWait == 0 {
		cfg.OrderWait = OrderWaitDefault
	}
	if cfg.Clock == nil {
		cfg.Clock = WallClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Receiver{cfg: cfg, peers: make(map[string]*receiverPeer, len(cfg.Peers)), started: cfg.Clock.Now().Unix()}
	for id, secret := range cfg.Peers {
		if len(secret) == 0 && !cfg.InsecureSkipSignature {
			return nil, fmt.Errorf("forward receiver: peer %q has no secret", id)
		}
		r.peers[id] = &receiverPeer{signer: newSigner(secret), window: newNonceWindow(cfg.ReplayWindow), order: newLinkOrder()}
	}
	return r, nil
}

// Stats returns the receiver's counters.
func (r *Receiver) Stats() ReceiverStats {
	return ReceiverStats{
		Accepted: r.accepted.Load(), Items: r.items.Load(), Ignored: r.ignored.Load(),
		BadRequest: r.badRequest.Load(), TooLarge: r.tooLarge.Load(), Forbidden: r.forbidden.Load(),
		Replayed: r.replayed.Load(), MethodDenied: r.method.Load(),
		Stale: r.stale.Load(), Skipped: r.skipped.Load(), Abandoned: r.abandoned.Load(),
		LengthRequired: r.lengthRequired.Load(), BusyPeer: r.busyPeer.Load(), BusyTotal: r.busyTotal.Load(),
		ReadTimeout: r.readTimeout.Load(), Reading: r.reading.Load(),
	}
}

// acquireReading takes a reading slot of p and one of the total, or
// reports which limit is full. Slots are never waited for: a request
// over a limit is refused at once, so a flood cannot queue up memory.
func (r *Receiver) acquireReading(p *receiverPeer) (ok bool, counter *atomic.Uint64) {
	if !tryAcquire(&p.reading, int64(r.cfg.MaxReadingPerPeer)) {
		return false, &r.busyPeer
	}
	if !tryAcquire(&r.reading, int64(r.cfg.MaxReading)) {
		p.reading.Add(-1)
		return false, &r.busyTotal
	}
	return true, nil
}

func (r *Receiver) releaseReading(p *receiverPeer) {
	r.reading.Add(-1)
	p.reading.Add(-1)
}

// tryAcquire adds one to n unless that takes it past limit. It never
// overshoots, even for a moment, so Stats.Reading never shows more than
// MaxReading.
func tryAcquire(n *atomic.Int64, limit int64) bool {
	for {
		v := n.Load()
		if v >= limit {
			return false
		}
		if n.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// readBody reads exactly req.ContentLength bytes (at most MaxBodyBytes,
// checked by the caller) within BodyReadTimeout, holding a reading slot
// meanwhile. It answers and counts every failure itself.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, p *receiverPeer, peer string) ([]byte, bool) {
	if ok, counter := r.acquireReading(p); !ok {
		w.Header().Set("Retry-After", retryAfterSeconds)
		r.reject(w, http.StatusServiceUnavailable, counter, "too many bodies being read", peer)
		return nil, false
	}
	defer r.releaseReading(p)
	rc := http.NewResponseController(w)
	// A connection deadline is wall-clock time, whatever cfg.Clock says.
	// Without support for it (not net/http's server) only the caller's
	// own server timeouts bound the read.
	deadline := rc.SetReadDeadline(time.Now().Add(r.cfg.BodyReadTimeout)) == nil
	// One allocation of the declared size, after the slot is taken: the
	// memory of bodies being read is at most MaxReading x MaxBodyBytes.
	body := make([]byte, req.ContentLength)
	_, err := io.ReadFull(req.Body, body)
	if deadline {
		// Cleared at once: net/http keeps reading the connection in the
		// background once the body is done, and a deadline passing then
		// would cancel the request's context while the batch waits its
		// turn or is in the sink.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			r.reject(w, http.StatusRequestTimeout, &r.readTimeout, "body not read in time", peer)
			return nil, false
		}
		r.reject(w, http.StatusBadRequest, &r.badRequest, "unreadable body", peer)
		return nil, false
	}
	return body, true
}

// versionRefusal says why a request of another protocol version is
// refused, naming the version it had.
func versionRefusal(got string) string {
	if got == "" {
		return "no " + HeaderVersion + " header: forward protocol version 1 (a signed body) is not accepted; this receiver speaks version " + ProtocolVersion + " (signed headers)"
	}
	return fmt.Sprintf("forward protocol version %q is not accepted; this receiver speaks version %s", got, ProtocolVersion)
}

func (r *Receiver) reject(w http.ResponseWriter, code int, counter *atomic.Uint64, why string, peer string) {
	counter.Add(1)
	r.cfg.Logger.Debug("forward: batch rejected", "code", code, "why", why, "peer", peer)
	http.Error(w, why, code)
}

// ServeHTTP checks, in this order: the peer is named and known (403), the
// protocol version is ours (400), the destination, timestamp, nonce and
// body hash are well formed (400), the signature is well formed (403), the
// timestamp is within [now-MaxAge, now+MaxFuture] (400), the body has a
// Content-Length (411) of at most MaxBodyBytes (413), the signature over
// the headers matches (403), the destination signed for is Self (403), and
// the nonce is new (403). Only then is a reading slot
// taken for the peer and in all (503) and the body read, within
// BodyReadTimeout (408); its SHA-256 must be the signed one (403), and
// then it is parsed (400). No body byte is read before the request is
// authenticated from its headers alone, and nothing is decoded before the
// body is proved to be the one signed.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Every answer given before the body is read closes the connection,
	// and the read deadline passes as the handler returns: net/http would
	// otherwise drain up to 256 KiB of the unread body when it closes it,
	// with no deadline, which a client that never sends it stretches out
	// forever.
	w.Header().Set("Connection", "close")
	// Every answer says it comes from a receiver, so that a sender whose
	// URL reaches some other server can say so (see [StatusError]).
	w.Header().Set(HeaderVersion, ProtocolVersion)
	bodyRead := false
	defer func() {
		if !bodyRead && req.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	}()
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.reject(w, http.StatusMethodNotAllowed, &r.method, "method not allowed", "")
		return
	}
	needSig := !r.cfg.InsecureSkipSignature
	a, err := parseAuth(req.Header, needSig)
	if errors.Is(err, errNoPeer) {
		r.reject(w, http.StatusForbidden, &r.forbidden, "missing peer id", "")
		return
	}
	if a.peer == r.cfg.Self {
		r.ignored.Add(1)
		// Answered like any accepted batch (a region's own items are not
		// for it), but said: a region running under another's name, or a
		// peer URL that points back here, loses every batch that way with
		// nothing else to show it. Unauthenticated, so at most once a
		// minute.
		if now, last := r.cfg.Clock.Now().Unix(), r.selfWarned.Load(); now-last >= 60 && r.selfWarned.CompareAndSwap(last, now) {
			r.cfg.Logger.Warn("forward: a batch signed as this region itself was ignored: another region runs with the same --region name, or a --peer URL points back to this receiver", "region", r.cfg.Self, "remote", req.RemoteAddr)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	p := r.peers[a.peer]
	if p == nil {
		r.reject(w, http.StatusForbidden, &r.forbidden, fmt.Sprintf("unknown peer %q: this receiver holds no secret for it (it is not one of its peers)", a.peer), a.peer)
		return
	}
	switch {
	case errors.Is(err, errBadVersion):
		r.reject(w, http.StatusBadRequest, &r.badRequest, versionRefusal(a.version), a.peer)
		return
	case errors.Is(err, errNoTo), errors.Is(err, errBadTimestamp), errors.Is(err, errBadNonce), errors.Is(err, errBadBodyHash):
		r.reject(w, http.StatusBadRequest, &r.badRequest, err.Error(), a.peer)
		return
	case errors.Is(err, errBadSignature):
		r.reject(w, http.StatusForbidden, &r.forbidden, "missing or malformed signature", a.peer)
		return
	}
	now := r.cfg.Clock.Now().Unix()
	if a.ts < now-int64(r.cfg.MaxAge/time.Second) || a.ts > now+int64(r.cfg.MaxFuture/time.Second) {
		r.reject(w, http.StatusBadRequest, &r.badRequest, fmt.Sprintf("timestamp %d is outside the window: this receiver's clock says %d and takes from %d s before it to %d s after it; the two clocks differ (keep them in sync, as with NTP)",
			a.ts, now, int64(r.cfg.MaxAge/time.Second), int64(r.cfg.MaxFuture/time.Second)), a.peer)
		return
	}
	switch {
	case req.ContentLength < 0:
		// Chunked: the size is not known before reading, and our sender
		// always sends a length.
		r.reject(w, http.StatusLengthRequired, &r.lengthRequired, "content-length required", a.peer)
		return
	case req.ContentLength > r.cfg.MaxBodyBytes:
		r.reject(w, http.StatusRequestEntityTooLarge, &r.tooLarge, "body too large", a.peer)
		return
	}
	if needSig {
		// The headers alone prove the peer: the signature covers its id,
		// the timestamp, the nonce, the length net/http will read and the
		// body's SHA-256. Whoever fails here never takes a reading slot,
		// so a claim of a peer's id costs that peer nothing.
		var want [sha256.Size]byte
		p.signer.sum(&want, a.peer, a.to, a.tsText, a.nonceText, req.ContentLength, a.sumText)
		if !hmac.Equal(want[:], a.sig[:]) {
			r.reject(w, http.StatusForbidden, &r.forbidden, fmt.Sprintf("bad signature: the secret this receiver holds for %q is not the one the request was signed with", a.peer), a.peer)
			return
		}
		// Genuine, but perhaps not for us: every peer of a sender checks
		// its signature with the same secret, so one captured on its way
		// to another peer would pass the check above.
		if a.to != r.cfg.Self {
			r.reject(w, http.StatusForbidden, &r.forbidden, fmt.Sprintf("batch signed for another peer (%q; this receiver is %q): the sender's URL for %q reaches another peer's receiver", a.to, r.cfg.Self, a.to), a.peer)
			return
		}
	}
	// The nonce is consumed here, once the headers are authentic and
	// before the body is read, not after the body check: then each signed
	// header set gets at most one reading slot, ever, so copies of a
	// captured set (sent while the original is still being read, or after
	// it was cut off) are refused unread instead of each holding a slot
	// for BodyReadTimeout. A replayed header set with another body fails
	// here if the original came first, or at the body hash if it came
	// first itself; the genuine request is then refused as a replay, a
	// lost batch the sender reports. The sender never reuses a nonce, so
	// a genuine request whose body then fails loses nothing by it.
	if a.ts < r.started {
		// Signed before this receiver started, when a predecessor may
		// have taken it: its nonce window is gone. A genuine batch
		// signed then and delayed past the restart is lost, and its
		// sender reports it.
		r.reject(w, http.StatusForbidden, &r.replayed, "signed before the receiver started", a.peer)
		return
	}
	if !p.window.admit(a.nonce) {
		r.reject(w, http.StatusForbidden, &r.replayed, "replayed nonce", a.peer)
		return
	}
	body, ok := r.readBody(w, req, p, a.peer)
	if !ok {
		return
	}
	bodyRead = true
	w.Header().Del("Connection")
	if needSig {
		// Exactly ContentLength bytes were read, the length signed; the
		// bytes must be the ones signed too, or this is a forgery.
		if got := sha256.Sum256(body); !hmac.Equal(got[:], a.bodySum[:]) {
			r.reject(w, http.StatusForbidden, &r.forbidden, "body does not match its signed hash", a.peer)
			return
		}
	}
	batch, err := DecodeBatch(body)
	if err != nil {
		r.reject(w, http.StatusBadRequest, &r.badRequest, "malformed batch", a.peer)
		return
	}
	if batch.Seq != 0 {
		// Batches of one peer reach the sink one at a time, in the order
		// the sender took them.
		skipped, err := p.order.enter(req.Context(), &batch, r.cfg.Clock, r.cfg.OrderWait)
		switch {
		case errors.Is(err, errStale):
			r.reject(w, http.StatusConflict, &r.stale, "stale batch: a later one was applied", a.peer)
			return
		case err != nil:
			// The sender gave up on this request; it counts the batch lost.
			r.reject(w, http.StatusServiceUnavailable, &r.abandoned, "sender went away", a.peer)
			return
		}
		if skipped {
			r.skipped.Add(1)
		}
	}
	r.accepted.Add(1)
	// Batch.Items lacks the items of unknown kinds, which count too.
	r.items.Add(uint64(len(batch.Items) + batch.Unknown))
	reply := func() Reply {
		if batch.Seq != 0 {
			// The next batch may go as soon as the sink is done with this
			// one, while its reply is written; deferred, so a panicking
			// sink cannot wedge the peer's order.
			defer p.order.leave(&batch)
		}
		return r.dispatch(req.Context(), a.peer, batch.Items)
	}()
	// Bounded to what the sender reads: a reply cut short there would be
	// undecodable, and the batch is applied whatever the reply says.
	out, omitted := reply.appendJSON(nil, maxReplyBytes)
	if omitted > 0 {
		r.cfg.Logger.Debug("forward: reply entries left out", "peer", a.peer, "omitted", omitted)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// dispatch hands the items to the sink in the receive order and gathers
// the reply.
func (r *Receiver) dispatch(ctx context.Context, peer string, items []Item) Reply {
	var reply Reply
	seenSocket := map[SocketRef]bool{}
	for _, it := range items {
		if d, ok := it.(*Delivery); ok && r.cfg.Sink.Deliver(ctx, peer, d) {
			ref := SocketRef{UserID: d.UserID, AppUID: d.AppUID}
			if !seenSocket[ref] {
				seenSocket[ref] = true
				reply.NoSocket = append(reply.NoSocket, ref)
			}
		}
	}
	for _, it := range items {
		if v, ok := it.(*Watch); ok {
			r.cfg.Sink.Watch(ctx, peer, v)
		}
	}
	for _, it := range items {
		if v, ok := it.(*Bump); ok {
			r.cfg.Sink.Bump(ctx, peer, v)
		}
	}
	seenWatch := map[WatchRef]bool{}
	for _, it := range items {
		if v, ok := it.(*Event); ok {
			for _, tok := range r.cfg.Sink.Event(ctx, peer, v) {
				ref := WatchRef{UserID: v.OwnerUserID, Token: tok}
				if !seenWatch[ref] {
					seenWatch[ref] = true
					reply.NoWatch = append(reply.NoWatch, ref)
				}
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.cfg.AckConcurrency)
	for _, it := range items {
		if v, ok := it.(*Ack); ok {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				r.cfg.Sink.Ack(ctx, peer, v)
			}()
		}
	}
	wg.Wait()
	return reply
}
