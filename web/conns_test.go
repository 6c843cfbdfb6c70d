package web

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

// (Was: a Serve that ended on its own, its listener closed under it, went
// unheard: the process ran on with no HTTP side.)
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

// (Was: a request that declared a body and sent none held its connection and
// goroutine for good, unanswered, on any route and any Host.)
func TestBodyThatNeverComesIsCutOff(t *testing.T) {
	t.Parallel()
	s := New("127.0.0.1:0")
	s.readTimeout = 50 * time.Millisecond
	var h Health
	h.Mount(s)
	read := make(chan error, 1)
	s.Handle("POST /form", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
		}
	}))
	// A handler that read its whole body keeps its context for as long as
	// it runs: net/http lifts the deadline once the body is read.
	kept := make(chan error, 1)
	s.Handle("POST /long", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			kept <- err
			return
		}
		select {
		case <-r.Context().Done():
			kept <- fmt.Errorf("context ended while the handler ran: %w", context.Cause(r.Context()))
		case <-time.After(20 * s.readTimeout): // well past the body's deadline
			kept <- nil
		}
	}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	// exchange sends req and returns the answer's status, then checks that
	// the server closed the connection.
	exchange := func(t *testing.T, req string) int {
		t.Helper()
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		// The answer and the close come once the body's deadline passed,
		// long before this one.
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a request whose body never came: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("read after the answer: %v, want EOF (closed by the server)", err)
		}
		return resp.StatusCode
	}
	for _, c := range []struct{ name, req string }{
		{"probe", "GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n"},
		{"refused Host", "GET /healthz/x HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 10\r\n\r\n"},
		{"chunked", "GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"},
	} {
		t.Run(c.name, func(t *testing.T) { exchange(t, c.req) })
	}
	t.Run("handler reading it", func(t *testing.T) {
		if code := exchange(t, "POST /form HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nabc"); code != http.StatusRequestTimeout {
			t.Errorf("status %d, want 408 from the handler", code)
		}
		if err := <-read; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("handler's read: %v, want a deadline", err)
		}
	})
	t.Run("body in time, long handler", func(t *testing.T) {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /long HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc"); err != nil {
			t.Fatal(err)
		}
		if err := <-kept; err != nil {
			t.Fatal(err)
		}
	})
}
