package web

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestIdleConnectionsAreClosed: a kept-alive connection that sends no
// next request is closed after IdleTimeout. The server set no idle
// timeout, so such a connection (and its goroutine) stayed for good:
// anyone who reached the port could hold as many as they liked.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1:0")
	s.IdleTimeout = 50 * time.Millisecond
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The server closes the connection: the read ends with EOF, long
	// before this deadline.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("read on an idle kept-alive connection: %v, want EOF (closed by the server)", err)
	}
}

// takenOver starts s with a route whose handler takes its connection
// over, as a WebSocket's does, and returns both ends of one such
// connection: the client's (with its reader) and the handler's.
func takenOver(t *testing.T, s *Server) (client net.Conn, br *bufio.Reader, server net.Conn) {
	t.Helper()
	held := make(chan net.Conn, 1)
	s.Handle("GET /ws", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		held <- c
	}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br = bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	sc := <-held
	t.Cleanup(func() { _ = sc.Close() })
	return c, br, sc
}

// TestStopClosesTakenOverConnections: Stop closes the connections
// handlers took over (WebSockets) once its ctx ends. Shutdown neither
// waits for nor closes them, so they stayed open after Stop returned.
func TestStopClosesTakenOverConnections(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1:0")
	c, br, _ := takenOver(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Fatalf("read after Stop returned: %v, want the connection closed", err)
	}
}

// TestStopWaitsForTakenOverConnections: Stop without a deadline returns
// once the handler closes the connection it took over.
func TestStopWaitsForTakenOverConnections(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1:0")
	_, _, sc := takenOver(t, s)
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	_ = sc.Close()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// (Was: a Serve that ended on its own, its listener closed under it, went unheard: the process ran on with no HTTP side.)
func TestServeEndedOnItsOwn(t *testing.T) {
	t.Parallel()
	t.Run("listener closed from outside", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := New("127.0.0.1:0")
		s.Listener = ln
		s.Handle("GET /", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, s.URL()+"/"); code != http.StatusOK {
			t.Fatalf("GET / on the given listener: %d %q", code, body)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Err while serving: %v", err)
		}
		_ = ln.Close()
		select {
		case <-s.Done():
		case <-time.After(testwait.Timeout):
			t.Fatalf("Done still open %v after the listener was closed", testwait.Timeout)
		}
		if err := s.Err(); !errors.Is(err, net.ErrClosed) || !strings.Contains(err.Error(), "web: serve "+ln.Addr().String()) {
			t.Fatalf("Err: %v, want the closed listener, naming the address", err)
		}
		// Stop still stops what is left, and says why it ended.
		if err := s.Stop(context.Background()); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Stop: %v, want the serve error", err)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		s := New("127.0.0.1:0")
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("Done open after Stop returned")
		}
		if err := s.Err(); err != nil {
			t.Fatalf("Err after Stop: %v, want nil (stopped, not ended on its own)", err)
		}
	})
}
