package eventsws

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The WebSocket library flushes its buffer after every frame it writes:
// a system call per message. A socket's writer drains every message
// waiting for it at once, so it corks the connection under the library
// (corkConn), writes them — one frame each, as before — into memory, and
// uncorks: one system call for the lot. Frames other goroutines write
// meanwhile (the library's pongs, a close) land in the same buffer, in
// their order, and go out with it.

// corkConn is a hijacked connection whose writes can be held back.
type corkConn struct {
	net.Conn

	mu     sync.Mutex // held across the uncorking write, so later frames stay behind it
	corked bool
	buf    *[]byte
}

// corkBufs are the buffers of the connections writing now: an idle
// connection holds none.
var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledCork is the largest buffer put back in the pool; a burst's
// larger one goes to the collector.
const maxPooledCork = 64 << 10

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// cork holds writes back until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.buf = corkBufs.Get().(*[]byte)
	c.mu.Unlock()
}

// uncork writes what was held back in one write, within timeout, and
// lets writes through again.
func (c *corkConn) uncork(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	buf := c.buf
	c.buf = nil
	defer func() {
		if cap(*buf) <= maxPooledCork {
			*buf = (*buf)[:0]
			corkBufs.Put(buf)
		}
	}()
	if len(*buf) == 0 {
		return nil
	}
	if timeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
			return fmt.Errorf("eventsws: set write deadline: %w", err)
		}
		defer func() { _ = c.Conn.SetWriteDeadline(time.Time{}) }()
	}
	if _, err := c.Conn.Write(*buf); err != nil {
		return fmt.Errorf("eventsws: write %d bytes: %w", len(*buf), err)
	}
	return nil
}

// corkWriter hands the WebSocket library a corkConn when it hijacks the
// request's connection.
type corkWriter struct {
	http.ResponseWriter
	conn *corkConn // set by Hijack
}

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 { // the server flushes its 101 before it hands the connection over
		if err := brw.Writer.Flush(); err != nil {
			_ = nc.Close()
			return nil, nil, fmt.Errorf("eventsws: flush the upgrade: %w", err)
		}
	}
	w.conn = &corkConn{Conn: nc}
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}
