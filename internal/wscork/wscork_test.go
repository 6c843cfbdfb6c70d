package wscork

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// countConn counts the writes that reach the connection.
type countConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// recordConn keeps the writes that reach it.
type recordConn struct {
	net.Conn
	writes [][]byte
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

// TestConnOneWritePerBatch: corked writes reach the socket as one write,
// in order, at Uncork; uncorked writes go straight through; an Uncork
// without a Cork writes nothing.
func TestConnOneWritePerBatch(t *testing.T) {
	rc := &recordConn{}
	c := NewConn(rc, 0)
	c.Cork()
	for _, s := range []string{"a", "bc", "d"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if len(rc.writes) != 0 {
		t.Fatalf("corked: %d writes reached the socket", len(rc.writes))
	}
	if err := c.Uncork(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("e")); err != nil {
		t.Fatal(err)
	}
	if len(rc.writes) != 2 || string(rc.writes[0]) != "abcd" || string(rc.writes[1]) != "e" {
		t.Fatalf("writes %q, want [abcd e]", rc.writes)
	}
	if err := c.Uncork(); err != nil || len(rc.writes) != 2 {
		t.Fatalf("an Uncork without a Cork wrote: %q, %v", rc.writes, err)
	}
	c.Cork()
	if err := c.Uncork(); err != nil || len(rc.writes) != 2 {
		t.Fatalf("an empty batch wrote: %q, %v", rc.writes, err)
	}
}

// corkPair is a server socket accepted through a Writer, with the writes
// under its Conn counted, and the client's end.
func corkPair(t testing.TB) (server *websocket.Conn, cork *Conn, counted *countConn, client *websocket.Conn) {
	t.Helper()
	type accepted struct {
		ws *websocket.Conn
		cw *Writer
	}
	got := make(chan accepted, 1)
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &Writer{ResponseWriter: w, Timeout: time.Minute}
		ws, err := websocket.Accept(cw, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		got <- accepted{ws, cw}
		<-release
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout)
	defer cancel()
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CloseNow() })
	var a accepted
	select {
	case a = <-got:
	case <-ctx.Done():
		t.Fatal("the server never accepted")
	}
	if a.cw.Conn == nil {
		t.Fatal("Accept did not hijack through the Writer")
	}
	t.Cleanup(func() { _ = a.ws.CloseNow() })
	counted = &countConn{Conn: a.cw.Conn.Conn}
	a.cw.Conn.Conn = counted // nothing was written since the upgrade
	return a.ws, a.cw.Conn, counted, client
}

// TestWebSocketOneWritePerBatch: messages written while corked — from the
// writer and from another goroutine — reach the socket in one write at
// uncork, and the client reads each as its own message, in order.
func TestWebSocketOneWritePerBatch(t *testing.T) {
	server, cork, counted, client := corkPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout)
	defer cancel()
	cork.Cork()
	for i := range 5 {
		if err := server.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	other := make(chan error, 1)
	go func() { other <- server.Write(ctx, websocket.MessageText, []byte("from another goroutine")) }()
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	if n := counted.writes.Load(); n != 0 {
		t.Fatalf("%d writes reached the socket while corked", n)
	}
	if err := cork.Uncork(); err != nil {
		t.Fatal(err)
	}
	if n := counted.writes.Load(); n != 1 {
		t.Fatalf("uncork made %d writes, want 1", n)
	}
	for _, want := range []string{"m0", "m1", "m2", "m3", "m4", "from another goroutine"} {
		_, b, err := client.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Fatalf("read %q, want %q", b, want)
		}
	}
	// Uncorked, a write goes straight through.
	if err := server.Write(ctx, websocket.MessageText, []byte("direct")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := client.Read(ctx); err != nil || string(b) != "direct" {
		t.Fatalf("read %q, %v", b, err)
	}
	if n := counted.writes.Load(); n != 2 {
		t.Fatalf("%d writes, want 2", n)
	}
}

// BenchmarkWriteBatch: 16 waiting messages of 300 bytes written to one
// socket over loopback TCP, a write each (the anchor) or corked.
func BenchmarkWriteBatch(b *testing.B) {
	msg := []byte(strings.Repeat("x", 300))
	for _, corked := range []bool{false, true} {
		name := "write-each"
		if corked {
			name = "corked"
		}
		b.Run(name, func(b *testing.B) {
			server, cork, _, client := corkPair(b)
			ctx := context.Background()
			go func() {
				for {
					if _, _, err := client.Read(ctx); err != nil {
						return
					}
				}
			}()
			for b.Loop() {
				if corked {
					cork.Cork()
				}
				for range 16 {
					if err := server.Write(ctx, websocket.MessageText, msg); err != nil {
						b.Fatal(err)
					}
				}
				if corked {
					if err := cork.Uncork(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
