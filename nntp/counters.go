package nntp

import (
	"io"
	"net"
	"sync/atomic"
)

// ioCounters are a pool's command and byte counters, shared by its
// connections (see PoolStats.Commands and BytesRead). Atomic: one add per
// command and per read from the socket, never per line.
type ioCounters struct {
	commands  atomic.Int64
	bytesRead atomic.Int64
}

// countingConn counts what is read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

var _ io.Reader = countingConn{}
