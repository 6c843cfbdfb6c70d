// Package testws is a hand-made WebSocket client for tests: unlike the
// library's it never answers a ping by itself, as a client whose pong is
// held up on a slow link (or that vanished) does not. Tests read and write
// its frames one by one.
package testws

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// WebSocket opcodes.
const (
	OpText  = 0x1
	OpClose = 0x8
	OpPing  = 0x9
	OpPong  = 0xa
)

// Conn is one raw WebSocket connection.
type Conn struct {
	t  testing.TB
	NC net.Conn
	br *bufio.Reader
}

// Dial upgrades a request for target (a path with its query, such as
// "/ws/events") on the server at serverURL; the connection is dropped when
// the test ends.
func Dial(t testing.TB, serverURL, target string) *Conn {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	req := "GET " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	return &Conn{t: t, NC: nc, br: br}
}

// Frame reads one frame (a server sends them unfragmented and unmasked)
// within deadline: its opcode and payload.
func (c *Conn) Frame(deadline time.Duration) (op byte, payload []byte, err error) {
	_ = c.NC.SetReadDeadline(time.Now().Add(deadline))
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, payload, nil
}

// Write sends one frame of op, masked (with a zero key), of under 126
// bytes.
func (c *Conn) Write(op byte, payload []byte) {
	c.t.Helper()
	if len(payload) > 125 {
		c.t.Fatalf("frame of %d bytes", len(payload))
	}
	fr := append([]byte{0x80 | op, 0x80 | byte(len(payload)), 0, 0, 0, 0}, payload...)
	if _, err := c.NC.Write(fr); err != nil {
		c.t.Fatal(err)
	}
}
