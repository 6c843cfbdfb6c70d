package watch

import (
	"context"
	"fmt"
	"sync"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/wscork"
	"github.com/switchyard-dev/switchyard/internal/wsping"
	"github.com/switchyard-dev/switchyard/persist"
)

// wsConn is one browser's connection: a bounded queue filled by the
// watch's callback and drained by the connection's goroutine, the only one
// that writes to the socket.
type wsConn struct {
	g         *Gateway
	ws        *websocket.Conn
	nc        *wscork.Conn       // ws's socket
	stopWatch context.CancelFunc // ends the watch once nothing more can be queued
	maxMsgs   int
	maxBytes  int
	wake      chan struct{} // capacity 1: the queue has something
	room      chan struct{} // capacity 1: the writer made room
	watchCtx  context.Context
	// catchingUp is owned by the watch's goroutine (onEvent): the watch is
	// reading history or re-reading, not following the feed.
	catchingUp bool
	batch      []qItem // owned by the writer: the items being written

	mu     sync.Mutex // protects q, qBytes, next and final
	q      []qItem
	qBytes int
	// next is the first seq not yet queued: what the browser must resume
	// from if it gets everything queued and nothing more.
	next uint64
	// final: the last message (resync or error) is queued; nothing more is.
	final bool
}

// qItem is one queued message; close, when set, ends the connection with
// that code once the message is written.
type qItem struct {
	b      []byte
	close  websocket.StatusCode
	reason string
}

// onEvent is the watch callback. While the watch catches up (its history
// read, and each re-read it makes after EventResynced, up to
// EventCaughtUp) it waits for room in the queue: a catch-up goes at the
// browser's pace, however long the stream. Live events never wait: one
// that does not fit ends the connection with a resync (see push).
func (c *wsConn) onEvent(ev persist.Event) {
	switch ev.Kind {
	case persist.EventSet:
		if c.catchingUp {
			// A history or re-read message is this watcher's own
			// object, which no other connection shares: caching it
			// would only hold its memory.
			c.push(encodeMsg(ev.Msg), ev.Msg.Seq+1)
			break
		}
		c.push(c.g.cache.encode(ev.Msg), ev.Msg.Seq+1)
	case persist.EventDelete:
		c.push(encodeCtl(wireCtl{Type: TypeDelete, Seqs: ev.Seqs}), 0)
	case persist.EventSkipped:
		c.push(encodeCtl(wireCtl{Type: TypeSkipped, Count: ev.Count, First: ev.First, Last: ev.Last}), ev.Last+1)
	case persist.EventResynced:
		c.catchingUp = true
		c.push(encodeCtl(wireCtl{Type: TypeResynced, Reason: ev.Reason}), 0)
	case persist.EventCaughtUp:
		c.push(encodeCtl(wireCtl{Type: TypeCaughtUp}), 0)
		c.catchingUp = false
	case persist.EventEnded:
		c.endWith(ev.Err)
	}
}

// push queues b; next, when not 0, is the first seq after what b accounts
// for. While catching up it waits for room. Live, a message that does not
// fit ends the stream of messages with a resync naming the first seq not
// queued, and stops the watch: the browser gets everything before it, then
// reconnects from there, so nothing is lost and memory stays bounded.
func (c *wsConn) push(b []byte, next uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.final && !c.fits(len(b)) && c.catchingUp {
		c.mu.Unlock()
		select {
		case <-c.room:
		case <-c.watchCtx.Done():
		}
		c.mu.Lock()
		if c.watchCtx.Err() != nil {
			return
		}
	}
	if c.final {
		return
	}
	if !c.fits(len(b)) {
		reason := fmt.Sprintf("slow consumer: %d messages, %d bytes waiting", len(c.q), c.qBytes)
		c.g.resyncs.Add(1)
		// The resync goes one small message past the bound: it must get
		// through.
		c.appendFinal(encodeCtl(wireCtl{Type: TypeResync, From: c.next, Reason: reason}), CloseResync, "resync")
		return
	}
	c.q = append(c.q, qItem{b: b})
	c.qBytes += len(b)
	c.next = max(c.next, next)
	storeMax(&c.g.highMsgs, int64(len(c.q)))
	storeMax(&c.g.highBytes, int64(c.qBytes))
	c.signal()
}

// fits reports whether n more bytes fit the queue's bounds; c.mu is held.
// An empty queue takes any one message.
func (c *wsConn) fits(n int) bool {
	return len(c.q) < c.maxMsgs && (len(c.q) == 0 || c.qBytes+n <= c.maxBytes)
}

// endWith queues the error a watch ended with and the close that follows.
func (c *wsConn) endWith(err error) {
	code := errorCode(err)
	status := CloseEnded
	if code == CodeUnavailable || code == CodeInternal {
		status = CloseUnavailable
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.final {
		c.appendFinal(encodeCtl(wireCtl{Type: TypeError, Code: code, Message: err.Error()}), status, code)
	}
}

// appendFinal queues the last message; c.mu is held.
func (c *wsConn) appendFinal(b []byte, status websocket.StatusCode, reason string) {
	c.final = true
	c.q = append(c.q, qItem{b: b, close: status, reason: reason})
	c.qBytes += len(b)
	c.stopWatch()
	c.signal()
}

func (c *wsConn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take copies the queued items into c.batch, leaving them counted in the
// queue until written (see written), so the queue's bound holds for what
// is in memory, not only for what waits.
func (c *wsConn) take() []qItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batch = append(c.batch[:0], c.q...)
	return c.batch
}

// written removes the first n items, written.
func (c *wsConn) written(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		select {
		case c.room <- struct{}{}:
		default:
		}
	}()
	for _, it := range c.q[:n] {
		c.qBytes -= len(it.b)
	}
	clear(c.q[:n])
	c.q = c.q[n:]
	if len(c.q) == 0 {
		c.q = nil // let a burst's backing array go
	}
	clear(c.batch)
}

// ending is how a connection ends.
type ending struct {
	status websocket.StatusCode
	reason string
	abrupt bool // no close handshake: the peer is gone or not reading
}

// readUntilGone reads the browser's side of ws in a goroutine until the
// socket ends (gone closes) or the browser sends a data message (sentData
// closes, and reading stops: the writer answers it with 1008).
func readUntilGone(ws *websocket.Conn) (gone, sentData <-chan struct{}) {
	g, d := make(chan struct{}), make(chan struct{})
	go func() {
		if _, _, err := ws.Reader(context.Background()); err != nil {
			close(g)
			return
		}
		close(d) // and not g: the writer is to answer it, not cut it
	}()
	return g, d
}

// keepAlive pings the browser every PingInterval until stop closes (see
// wsping.Run): a pong that does not come within WriteTimeout closes dead,
// and the writer drops the connection.
func (c *wsConn) keepAlive(stop <-chan struct{}, dead chan<- struct{}) {
	if wsping.Run(c.ws, c.g.cfg.PingInterval, c.g.cfg.WriteTimeout, stop) != nil {
		close(dead)
	}
}

// writeLoop writes what is queued until a final message, the gateway
// stopping (ctx), the browser leaving (gone), sending data (sentData) or
// not answering a ping (dead), or a write failing.
func (c *wsConn) writeLoop(ctx context.Context, gone, sentData, dead <-chan struct{}, watchDone <-chan struct{}) ending {
	for {
		select {
		case <-ctx.Done():
			return ending{status: websocket.StatusGoingAway, reason: "gateway stopping"}
		case <-sentData:
			return ending{status: websocket.StatusPolicyViolation, reason: "the browser sends nothing"}
		case <-gone:
			return ending{abrupt: true}
		case <-dead:
			// Counted as a write that timed out: the peer is gone or
			// does not read.
			return c.failed(ctx)
		case <-watchDone:
			// Ended without EventEnded (its client was closed), or stopped
			// by a final message already queued (then this is a no-op).
			watchDone = nil
			c.endWith(fmt.Errorf("%w: the gateway's persist client closed", persist.ErrUnavailable))
			continue
		case <-c.wake:
		}
		for ctx.Err() == nil { // stopping: 1001 after this batch
			items := c.take()
			if len(items) == 0 {
				break
			}
			if end, ok := c.writeBatch(ctx, items); !ok {
				return end
			}
			c.written(len(items))
		}
	}
}

// writeBatch writes items, one WebSocket message each, in one write to the
// socket (see wscork), under the socket's write deadline rather than a
// context per message. ok is false when the connection ends, as end says:
// a write failed, or the batch ended with a final message.
func (c *wsConn) writeBatch(ctx context.Context, items []qItem) (end ending, ok bool) {
	c.nc.Cork()
	for _, it := range items {
		if c.g.beforeWrite != nil {
			c.g.beforeWrite(ctx)
		}
		// Corked, this only copies; what could hold it is the library's
		// lock on the frame writer, whose other holders (a pong, a close)
		// write under the socket's deadline. So no context: the library
		// closes the socket when a write's context ends, and the gateway
		// stopping (ctx) mid-batch must still end with 1001, not a cut.
		if err := c.ws.Write(context.Background(), websocket.MessageText, it.b); err != nil {
			_ = c.nc.Uncork()
			return c.failed(ctx), false
		}
		if it.close != 0 {
			end = ending{status: it.close, reason: it.reason}
			break
		}
	}
	if err := c.nc.Uncork(); err != nil {
		return c.failed(ctx), false
	}
	c.g.sent.Add(uint64(len(items)))
	return end, end.status == 0
}

// failed is the ending after a failed write: the gateway stopping, or a
// browser that is gone or stopped reading (counted).
func (c *wsConn) failed(ctx context.Context) ending {
	if ctx.Err() != nil {
		return ending{status: websocket.StatusGoingAway, reason: "gateway stopping", abrupt: true}
	}
	c.g.failures.Add(1)
	return ending{abrupt: true}
}

// serve runs one upgraded connection to its end.
func (g *Gateway) serve(ws *websocket.Conn, nc *wscork.Conn, stream *persist.Stream, from uint64) {
	g.accepted.Add(1)
	g.open.Add(1)
	defer g.open.Add(-1)
	ctx, cancel := context.WithCancel(g.base.Run())
	defer cancel()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	c := &wsConn{
		g: g, ws: ws, nc: nc, watchCtx: watchCtx, stopWatch: stopWatch, next: from,
		maxMsgs: g.cfg.QueueMessages, maxBytes: g.cfg.QueueBytes,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		catchingUp: true,
	}
	g.mu.Lock()
	g.conns[c] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.conns, c)
		g.mu.Unlock()
	}()
	// Browsers send nothing; reading still answers pings and the close
	// handshake, and tells when the browser has gone. Its context is not
	// ctx: a canceled read closes the socket at once, and Stop wants to
	// send 1001 first. Closing ws ends the reader. (Not the library's
	// CloseRead: on a data message its goroutine closes the socket itself
	// and waits for its own end, 15 s, while the connection's watch and
	// writer go on.)
	gone, sentData := readUntilGone(ws)
	c.push(encodeCtl(wireCtl{Type: TypeReady, From: from}), 0)
	w, err := stream.Watch(watchCtx, persist.WatchOptions{From: from, Buffer: g.cfg.WatchBuffer}, c.onEvent)
	var watchDone <-chan struct{}
	if err != nil {
		c.endWith(fmt.Errorf("watch: %w", err))
	} else {
		watchDone = w.Done()
		g.watchMu.Lock()
		g.watchers[w] = struct{}{}
		g.watchMu.Unlock()
	}
	dead, stopPings := make(chan struct{}), make(chan struct{})
	var pinging sync.WaitGroup
	if g.cfg.PingInterval > 0 {
		pinging.Add(1)
		go func() {
			defer pinging.Done()
			c.keepAlive(stopPings, dead)
		}()
	}
	end := c.writeLoop(ctx, gone, sentData, dead, watchDone)
	close(stopPings)
	// Closing the socket (below, whichever way) ends a ping waiting for
	// its pong; the pinger is then waited for.
	defer pinging.Wait()
	g.cfg.Logger.Debug("watch connection ended", "scope", stream.Scope(), "stream", stream.Name(), "status", int(end.status), "reason", end.reason, "abrupt", end.abrupt)
	stopWatch()
	if w != nil {
		_ = w.Stop(context.Background())
		g.watchMu.Lock()
		delete(g.watchers, w)
		st := w.Stats()
		st.Lag = 0 // a gauge of running watchers
		addWatchStats(&g.endedWS, st)
		g.watchMu.Unlock()
	}
	if end.abrupt {
		_ = ws.CloseNow()
		return
	}
	_ = ws.Close(end.status, end.reason)
}

// storeMax raises v to n if n is larger.
func storeMax(v interface {
	Load() int64
	CompareAndSwap(old, new int64) bool
}, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}
