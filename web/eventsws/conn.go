package eventsws

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/wscork"
	"github.com/switchyard-dev/switchyard/internal/wsping"
	"github.com/switchyard-dev/switchyard/web"
)

// conn is one socket: its session's deliveries queue here, a writer
// drains the queue, and the reader answers the client's requests.
type conn struct {
	g    *Gateway
	ws   *websocket.Conn
	cork *wscork.Conn // under ws; nil when the connection came otherwise
	who  web.Principal
	sess *events.Session

	mu   sync.Mutex
	q    [][]byte       // messages to write, in order
	qLen int            // their bytes
	lost map[string]int // per subscription: deliveries dropped while the queue was full
	wake chan struct{}  // capacity 1: the queue has something
}

// serve runs one socket to its end: ready, then requests and deliveries
// until the client goes, the gateway stops, or a write fails.
func (g *Gateway) serve(ws *websocket.Conn, cork *wscork.Conn, who web.Principal) {
	ws.SetReadLimit(MaxMessageBytes)
	c := &conn{g: g, ws: ws, cork: cork, who: who, lost: map[string]int{}, wake: make(chan struct{}, 1)}
	// ready is the first message: queued before the session opens, since
	// Open hands the user's waiting `single` deliveries out at once.
	c.push(mustJSON(wireCtl{Type: TypeReady, User: who.Name, MaxSubs: g.cfg.Router.MaxSessionSubs()}))
	c.sess = g.cfg.Router.Open(who.Name, c.deliver)
	run := g.base.Run()

	// The gateway's stop closes the socket with going-away, which ends
	// the reader; a cancelled context would end it with no close frame.
	stopping := context.AfterFunc(run, func() { _ = ws.Close(websocket.StatusGoingAway, "the server is stopping") })
	defer stopping()
	wctx, stopWriter := context.WithCancel(context.Background())
	wrote := make(chan error, 1)
	go func() { wrote <- c.writeLoop(wctx) }()
	stopPings := make(chan struct{})
	var pinging sync.WaitGroup
	if g.cfg.PingInterval > 0 {
		pinging.Add(1)
		go func() { defer pinging.Done(); c.keepAlive(stopPings) }()
	}
	// The reader reads ahead of the requests' handling (see readAhead);
	// whatever ends the socket below ends its Read.
	frames := make(chan frame, readAhead)
	rctx, stopReader := context.WithCancel(context.Background())
	read := make(chan struct{}) // closed when the reader is done
	go func() { defer close(read); c.readLoop(rctx, frames) }()
	handleErr := c.handleLoop(run, frames, read)
	stopReader()   // it may be waiting for room in frames
	c.sess.Close() // no delivery is queued after this, but one in flight
	stopWriter()
	<-wrote
	close(stopPings)

	switch {
	case run.Err() != nil:
		// Closed by stopping.
	case errors.Is(handleErr, errTooSlow):
		_ = ws.Close(websocket.StatusPolicyViolation, errTooSlow.Error())
	default:
		_ = ws.CloseNow()
	}
	<-read
	// The socket is closed or closing: a ping waiting for its pong ends
	// with it, or at WriteTimeout.
	pinging.Wait()
}

// errTooSlow ends a client that sends requests faster than it reads the
// answers: answers are never dropped, so their queue must stay bounded.
var errTooSlow = errors.New("requests faster than their answers are read")

// deliver queues one delivery; it runs on the router's loop and never
// blocks. Past the queue's bounds (its messages, or its bytes unless it is
// empty) the delivery is dropped and counted for its subscription, which
// gets one gap for all it lost once there is room.
func (c *conn) deliver(d events.Delivery) {
	n := 1
	switch {
	case d.Event != nil:
		n = max(d.Event.Coalesced, 1)
	case d.Gap != nil:
		n = max(d.Gap.Count, 1)
	}
	b := encodeDelivery(d, c.g.cfg.PresenceScope, &c.g.enc)
	c.mu.Lock()
	if len(c.q) >= c.g.cfg.QueueMessages || len(c.q) > 0 && c.qLen+len(b) > c.g.cfg.QueueBytes {
		c.lost[d.Sub] += n
		c.mu.Unlock()
		c.g.dropped.Add(uint64(n))
		return
	}
	c.q = append(c.q, b)
	c.qLen += len(b)
	c.mu.Unlock()
	c.signal()
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// push queues an answer to a request (or the ready message). Answers are
// never dropped: they go in past the deliveries' bounds, up to twice
// QueueMessages, and beyond that push reports false and the client is cut
// off.
func (c *conn) push(b []byte) bool {
	c.mu.Lock()
	if len(c.q) >= 2*c.g.cfg.QueueMessages {
		c.mu.Unlock()
		return false
	}
	c.q = append(c.q, b)
	c.qLen += len(b)
	c.mu.Unlock()
	c.signal()
	return true
}

// take empties the queue and, after its messages, turns what was lost
// into one queue_overflow gap per subscription.
func (c *conn) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.q
	c.q, c.qLen = nil, 0
	if len(c.lost) > 0 {
		subs := make([]string, 0, len(c.lost))
		for s := range c.lost {
			subs = append(subs, s)
		}
		sort.Strings(subs)
		for _, s := range subs {
			out = append(out, mustJSON(wireCtl{Type: TypeGap, Sub: s, Reason: string(events.ReasonQueueOverflow), Count: c.lost[s]}))
			delete(c.lost, s)
			c.g.gaps.Add(1)
		}
	}
	return out
}

// keepAlive pings the client every PingInterval until stop closes (see
// wsping.Run). A pong that does not come within WriteTimeout closes the
// socket, which ends the reader and so the connection: the library's Ping
// leaves the socket open, which would hold its subscriptions and presence
// with nothing ever sent.
func (c *conn) keepAlive(stop <-chan struct{}) {
	if wsping.Run(c.ws, c.g.cfg.PingInterval, c.g.cfg.WriteTimeout, stop) != nil {
		_ = c.ws.CloseNow() // ends the reader, and so the connection
	}
}

func (c *conn) writeLoop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
			if err := c.writeAll(ctx, c.take()); err != nil {
				_ = c.ws.CloseNow() // ends the reader too
				return err
			}
		}
	}
}

// writeAll writes msgs, a message a frame, in one system call when the
// connection came through the cork (see wscork), under the socket's write
// deadline rather than a context per message.
func (c *conn) writeAll(ctx context.Context, msgs [][]byte) error {
	if c.cork == nil {
		for _, b := range msgs {
			if err := c.timed(ctx, func(ctx context.Context) error { return c.ws.Write(ctx, websocket.MessageText, b) }); err != nil {
				return err
			}
			c.g.sent.Add(1)
		}
		return nil
	}
	c.cork.Cork()
	var err error
	n := 0
	for _, b := range msgs {
		// Corked, a write only fills memory; what could hold it is the
		// library's lock on the frame writer, whose other holders (a ping,
		// a pong, a close) are bounded by their own timeouts and a closed
		// connection releases. So no context: one per message would cost
		// a timer each.
		if err = c.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
			break
		}
		n++
	}
	if uerr := c.cork.Uncork(); err == nil {
		err = uerr
	}
	if err == nil {
		c.g.sent.Add(uint64(n))
	}
	return err
}

func (c *conn) timed(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.g.cfg.WriteTimeout)
	defer cancel()
	return f(ctx)
}

// readAhead bounds the messages read but not yet handled. The library
// reads a ping's pong only inside Read, so reading goes on while a request
// waits (a subscribe, up to SubscribeTimeout for its stream, past
// WriteTimeout). The reader used to handle each request before reading
// the next frame: the writer took a ping sent meanwhile for unanswered and
// cut a healthy socket. Past readAhead the reader waits for the handler, as
// a client that sends faster than its requests are handled must. 64 holds
// what the browser client sends on a reconnect (its subscriptions, up to
// max_subs, and its acks), and bounds a socket's read-ahead to 512 KiB.
const readAhead = 64

// frame is one message the client sent.
type frame struct {
	text bool
	b    []byte
}

// readLoop reads the client's messages into frames, in order, until the
// socket ends or ctx does.
func (c *conn) readLoop(ctx context.Context, frames chan<- frame) {
	for {
		// Not ctx: whatever ends the socket (see serve) ends Read.
		typ, b, err := c.ws.Read(context.Background())
		if err != nil {
			return
		}
		select {
		case frames <- frame{text: typ == websocket.MessageText, b: b}:
		case <-ctx.Done():
			return
		}
	}
}

// handleLoop answers the client's requests, one at a time and in order,
// until the socket ends (read is closed), the gateway stops (ctx) or an
// answer cannot be queued (errTooSlow). Requests still waiting when the
// socket ends are not handled: nobody would read their answers.
func (c *conn) handleLoop(ctx context.Context, frames <-chan frame, read <-chan struct{}) error {
	for {
		select { // the socket's end first, when frames also has some
		case <-read:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		var f frame
		select {
		case f = <-frames:
		case <-read:
			return nil
		case <-ctx.Done():
			return nil
		}
		var ok bool
		if f.text {
			ok = c.handle(ctx, f.b)
		} else {
			// Refused whatever it holds, but named when it holds a
			// request: a client library may send bytes as binary.
			req, _ := decodeRequest(f.b)
			ok = c.answerErr(req.id, CodeBadRequest, "messages are JSON text, not binary frames")
		}
		if !ok {
			return errTooSlow
		}
	}
}

// handle answers one request; false when the answer could not be queued.
func (c *conn) handle(ctx context.Context, b []byte) bool {
	req, err := decodeRequest(b)
	if err != nil {
		return c.answerErr(req.id, CodeBadRequest, err.Error())
	}
	switch req.typ {
	case TypeSubscribe:
		if !c.who.CanRead(req.anchor.Scope) {
			return c.answerErr(req.id, CodeForbidden, c.who.Name+" may not read scope "+req.anchor.Scope)
		}
		if req.mode != "" {
			return c.durableSubscribe(ctx, req)
		}
		sctx, cancel := context.WithTimeout(ctx, c.g.cfg.SubscribeTimeout)
		err := c.sess.Subscribe(sctx, req.id, req.anchor, req.filter)
		cancel()
		switch {
		case errors.Is(err, events.ErrTooManySubs):
			return c.answerErr(req.id, CodeTooMany, err.Error())
		case err != nil:
			return c.answerErr(req.id, CodeUnavailable, err.Error())
		}
		return c.push(mustJSON(wireCtl{Type: TypeSubscribed, ID: req.id}))
	case TypeUnsubscribe:
		if req.mode != "" {
			return c.durableUnsubscribe(ctx, req)
		}
		if !c.sess.Unsubscribe(req.id) {
			return c.answerErr(req.id, CodeNotFound, "no subscription "+clip(req.id)+" on this socket")
		}
		return c.push(mustJSON(wireCtl{Type: TypeUnsubscribed, ID: req.id}))
	default: // TypeAck
		actx, cancel := context.WithTimeout(ctx, c.g.cfg.SubscribeTimeout)
		err := c.sess.Ack(actx, req.sub, req.id)
		cancel()
		switch {
		case errors.Is(err, events.ErrUnknownEntry):
			return c.answerErr(req.id, CodeUnknownEntry, "no delivery "+clip(req.id)+" of subscription "+clip(req.sub)+" is in flight here")
		case err != nil:
			return c.answerErr(req.id, CodeUnavailable, err.Error())
		}
		return c.push(mustJSON(wireCtl{Type: TypeAcked, ID: req.id, Sub: req.sub}))
	}
}

// durableSubscribe stores a durable subscription of the socket's user;
// the routers following the rows make it live.
func (c *conn) durableSubscribe(ctx context.Context, req request) bool {
	store := c.g.cfg.Router.Durables()
	if store == nil {
		return c.answerErr(req.id, CodeBadRequest, "this server keeps no durable subscriptions")
	}
	row := events.DurableRow{User: c.who.Name, ID: req.id, Anchor: req.anchor.String(), Ops: req.ops, Glob: req.glob, Mode: req.mode}
	sctx, cancel := context.WithTimeout(ctx, c.g.cfg.SubscribeTimeout)
	err := store.Put(sctx, row)
	cancel()
	switch {
	case errors.Is(err, events.ErrQuota):
		return c.answerErr(req.id, CodeQuota, err.Error())
	case errors.Is(err, events.ErrBadRow):
		return c.answerErr(req.id, CodeBadRequest, err.Error())
	case err != nil:
		return c.answerErr(req.id, CodeUnavailable, err.Error())
	}
	return c.push(mustJSON(wireCtl{Type: TypeSubscribed, ID: req.id, Mode: req.mode}))
}

// durableUnsubscribe deletes the user's durable subscription.
func (c *conn) durableUnsubscribe(ctx context.Context, req request) bool {
	store := c.g.cfg.Router.Durables()
	if store == nil {
		return c.answerErr(req.id, CodeNotFound, "this server keeps no durable subscriptions")
	}
	sctx, cancel := context.WithTimeout(ctx, c.g.cfg.SubscribeTimeout)
	ok, err := store.Delete(sctx, c.who.Name, req.id)
	cancel()
	switch {
	case err != nil:
		return c.answerErr(req.id, CodeUnavailable, err.Error())
	case !ok:
		return c.answerErr(req.id, CodeNotFound, "no durable subscription "+clip(req.id)+" of "+c.who.Name)
	}
	return c.push(mustJSON(wireCtl{Type: TypeUnsubscribed, ID: req.id, Mode: req.mode}))
}

func (c *conn) answerErr(id, code, msg string) bool {
	c.g.errs.Add(1)
	return c.push(mustJSON(wireCtl{Type: TypeError, ID: id, Code: code, Message: msg}))
}
