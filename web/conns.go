package web

import (
	"context"
	"net"
	"sync"
	"time"
)

const (
	// readHeaderTimeout bounds the reading of a request's headers.
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds the reading of a whole request, headers and body.
	// The bodies sent here are small forms (the Newznab API's, the
	// releases page's key).
	readTimeout = 20 * time.Second
	// IdleTimeoutDefault is Server.IdleTimeout's default.
	IdleTimeoutDefault = 2 * time.Minute
)

// connSet is every connection the server accepted and has not closed,
// those a handler took over (a WebSocket's) among them: http.Server
// forgets a connection once it is hijacked, so Stop asks this set.
type connSet struct {
	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	changed chan struct{} // a token after each close
}

func newConnSet() *connSet {
	return &connSet{conns: map[*trackedConn]struct{}{}, changed: make(chan struct{}, 1)}
}

// listener wraps ln so that what it accepts joins the set.
func (cs *connSet) listener(ln net.Listener) net.Listener { return &trackedListener{ln, cs} }

// closeAfter waits until every connection closed or ctx ends, and then
// closes what is left.
func (cs *connSet) closeAfter(ctx context.Context) {
	for {
		cs.mu.Lock()
		n := len(cs.conns)
		cs.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-cs.changed:
		case <-ctx.Done():
			cs.mu.Lock()
			left := make([]*trackedConn, 0, len(cs.conns))
			for c := range cs.conns {
				left = append(left, c)
			}
			cs.mu.Unlock()
			for _, c := range left {
				_ = c.Close()
			}
			return
		}
	}
}

type trackedListener struct {
	net.Listener
	set *connSet
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, set: l.set}
	l.set.mu.Lock()
	l.set.conns[tc] = struct{}{}
	l.set.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
		select {
		case c.set.changed <- struct{}{}:
		default:
		}
	})
	return c.Conn.Close()
}

// CloseWrite passes a half-close through to a TCP connection, which
// net/http uses to end a connection gracefully after an error.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
