// Package wsping keeps a WebSocket server's peers checked: a ping every
// interval, beside the connection's writer rather than in it, so that
// messages never wait behind a ping for its pong.
package wsping

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/coder/websocket"
)

// Run pings ws every interval until stop closes, each ping waiting up to
// timeout for its pong, and returns the error of a ping that failed: a
// peer that vanished or stopped reading. It returns nil when stop closes,
// also while a ping waits (the caller ends the connection its own way),
// and when the socket was closed under it (its owner knows why).
//
// A ping runs under a context of its own, not the connection's: the
// library closes the socket when a write's context ends, and a server
// stopping must end its connections with a close frame, not a cut.
func Run(ws *websocket.Conn, interval, timeout time.Duration, stop <-chan struct{}) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := ws.Ping(ctx)
		cancel()
		if err == nil {
			continue
		}
		select {
		case <-stop:
			return nil
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		return err
	}
}
