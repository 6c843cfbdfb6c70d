// Package testnet holds network helpers for tests of servers that must
// cope with slow peers.
package testnet

import "net"

// SmallSendBufferBytes is the send buffer SmallSendBuffers gives each
// accepted connection.
const SmallSendBufferBytes = 4096

// SmallSendBuffers wraps ln so that every TCP connection it accepts has a
// small send buffer: a peer that stops reading fills it after a few KiB
// rather than megabytes, so a test reaches the server's slow-peer path
// quickly. Set it as an httptest.Server's Listener before Start.
func SmallSendBuffers(ln net.Listener) net.Listener { return smallBuffers{ln} }

type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(SmallSendBufferBytes)
	}
	return c, err
}
