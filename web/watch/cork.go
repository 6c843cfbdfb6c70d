package watch

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// corkKeep is the largest write buffer a corked connection keeps between
// batches; a larger one (a burst) is let go so an idle connection stays small.
const corkKeep = 16 << 10

// corkConn is a browser's hijacked connection. The websocket library
// flushes every message to the socket, one write system call each; while
// corked, the writes pile up in memory instead and uncork sends them in
// one. The writer loop corks around each batch it takes from the queue, so
// a browser that has fallen behind by several messages gets them in one
// write (and reads them in one), each still its own WebSocket message.
//
// Every write to the socket also runs under a write deadline, reset per
// write: that bounds a write to a browser that stopped reading without a
// timer and context per message.
type corkConn struct {
	net.Conn
	timeout time.Duration // 0: no deadline

	mu     sync.Mutex // protects corked and buf; held across socket writes, which keeps their order
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.write(p)
}

// cork holds writes in memory until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what piled up since cork and lets writes through again.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.write(c.buf)
	if cap(c.buf) > corkKeep {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// write writes p to the socket under the deadline; c.mu is held.
func (c *corkConn) write(p []byte) (int, error) {
	if c.timeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// corkWriter hands websocket.Accept a corkConn when it hijacks.
type corkWriter struct {
	http.ResponseWriter
	timeout time.Duration
	conn    *corkConn // set by Hijack
}

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: nc, timeout: w.timeout}
	// The library writes through brw.Writer: point it at the corkConn.
	if err := brw.Writer.Flush(); err != nil {
		_ = nc.Close()
		return nil, nil, err
	}
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}

func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
