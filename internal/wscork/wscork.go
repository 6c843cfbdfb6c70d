// Package wscork holds back a WebSocket server's writes so that a batch
// of messages goes to the socket in one system call.
//
// The websocket library (coder/websocket) flushes its buffer after every
// frame: one write system call per message. A gateway's writer drains
// every message waiting for a socket at once, so it corks the connection
// under the library (Conn.Cork), writes them — each still its own
// WebSocket message — into memory, and uncorks: one system call for the
// lot. Frames other goroutines write meanwhile (the library's pongs, a
// close) land in the same buffer, in their order, and go out with it.
//
// Every write to the socket runs under a write deadline, reset per write:
// that bounds a write to a peer that stopped reading without a timer and
// context per message.
package wscork

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Conn is a hijacked connection whose writes can be held back.
type Conn struct {
	net.Conn
	timeout time.Duration // 0: no deadline

	mu     sync.Mutex // protects corked and buf; held across socket writes, which keeps their order
	corked bool
	buf    *[]byte // from bufs while corked
}

// bufs are the buffers of the connections writing now: an idle
// connection holds none.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooled is the largest buffer put back in the pool; a burst's larger
// one goes to the collector.
const maxPooled = 64 << 10

// NewConn wraps nc; timeout bounds each write to it (0: none).
func NewConn(nc net.Conn, timeout time.Duration) *Conn {
	return &Conn{Conn: nc, timeout: timeout}
}

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	return c.write(p)
}

// Cork holds writes back in memory until Uncork.
func (c *Conn) Cork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		c.corked = true
		c.buf = bufs.Get().(*[]byte)
	}
}

// Uncork writes what was held back since Cork in one write and lets
// writes through again. Uncork of a connection not corked does nothing.
func (c *Conn) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return nil
	}
	c.corked = false
	buf := c.buf
	c.buf = nil
	var err error
	if len(*buf) > 0 {
		if _, err = c.write(*buf); err != nil {
			err = fmt.Errorf("wscork: write %d bytes: %w", len(*buf), err)
		}
	}
	if cap(*buf) <= maxPooled {
		*buf = (*buf)[:0]
		bufs.Put(buf)
	}
	return err
}

// write writes p to the socket under the deadline; c.mu is held.
func (c *Conn) write(p []byte) (int, error) {
	if c.timeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// Writer hands websocket.Accept a Conn when it hijacks the request's
// connection: pass it in place of the ResponseWriter.
type Writer struct {
	http.ResponseWriter
	// Timeout bounds each write to the connection (0: none).
	Timeout time.Duration
	// Conn is set by Hijack.
	Conn *Conn
}

func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.Conn = NewConn(nc, w.Timeout)
	// The library writes through brw.Writer: point it at the Conn, after
	// what it holds (the server sends its 101 before it hands over).
	if err := brw.Writer.Flush(); err != nil {
		_ = nc.Close()
		return nil, nil, fmt.Errorf("wscork: flush the upgrade: %w", err)
	}
	brw.Writer.Reset(w.Conn)
	return w.Conn, brw, nil
}

func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
