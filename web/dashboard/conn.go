package dashboard

import (
	"context"
	"errors"
	"net/http"

	"github.com/coder/websocket"
)

// conn is one connected dashboard: the tick goroutine offers snapshots to
// its queue, its handler goroutine writes them.
type conn struct {
	queue chan []byte // bounded by Config.Queue
}

// offer queues b, dropping the oldest queued snapshot when the queue is
// full: snapshots are whole, the newest is all a page needs. Only the tick
// goroutine offers (under Hub.mu), so after one receive there is room.
func (c *conn) offer(b []byte) {
	for {
		select {
		case c.queue <- b:
			return
		default:
		}
		select {
		case <-c.queue:
		default:
		}
	}
}

// serveWS upgrades to a WebSocket and writes the snapshots until the page
// goes, a write takes longer than WriteTimeout, or the hub stops.
func (h *Hub) serveWS(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.stopped || !h.started {
		h.mu.Unlock()
		http.Error(w, "dashboard not running", http.StatusServiceUnavailable)
		return
	}
	h.handler.Add(1)
	h.mu.Unlock()
	defer h.handler.Done()

	// Mount checked the Origin (checkOrigin), before the credentials.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered
	}
	defer ws.CloseNow()
	c := &conn{queue: make(chan []byte, h.cfg.Queue)}
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		_ = ws.Close(websocket.StatusGoingAway, "server stopping")
		return
	}
	if h.last != nil {
		c.offer(h.last)
	}
	h.conns[c] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
	}()

	// The page sends nothing; CloseRead answers pings and the close
	// handshake, and ends ctx when the page goes (or sends data).
	ctx := ws.CloseRead(context.WithoutCancel(r.Context()))
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.stop:
			_ = ws.Close(websocket.StatusGoingAway, "server stopping")
			return
		case b := <-c.queue:
			wctx, cancel := context.WithTimeout(ctx, h.cfg.WriteTimeout)
			err := ws.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					h.cfg.Logger.Debug("dashboard: drop connection", "remote", r.RemoteAddr, "err", err)
				}
				return
			}
		}
	}
}
