package watch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coder/websocket"
)

// The floor under bench ws's latency: what one delivery costs over a
// loopback WebSocket (a frame written by the server, read by a client in
// the same process) against an in-process channel hand-off, the path of a
// Stream.Watch watcher. Run with -benchtime and compare the ns/op.

var frameMsg = []byte(`{"type":"msg","seq":123456,"key":"k123","time":1764626400000000000,"value":"` + string(make128()) + `"}`)

func make128() []byte {
	b := make([]byte, 128)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// loopbackPair is a server and a client end of one loopback WebSocket.
func loopbackPair(b *testing.B) (srv, cl *websocket.Conn) {
	ready := make(chan *websocket.Conn, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ready <- c // hijacked: it outlives the handler
	}))
	cl, _, err := websocket.Dial(context.Background(), "ws"+ts.URL[len("http"):], nil)
	if err != nil {
		b.Fatal(err)
	}
	srv = <-ready
	b.Cleanup(func() { _ = srv.CloseNow(); _ = cl.CloseNow(); ts.Close() })
	return srv, cl
}

func BenchmarkLoopbackFrame(b *testing.B) {
	srv, cl := loopbackPair(b)
	ctx := context.Background()
	for b.Loop() {
		if err := srv.Write(ctx, websocket.MessageText, frameMsg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := cl.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoopbackFramePingPong is the same with the reader on its own
// goroutine, woken per frame, as in the gateway and bench ws.
func BenchmarkLoopbackFramePingPong(b *testing.B) {
	srv, cl := loopbackPair(b)
	ctx := context.Background()
	got := make(chan struct{})
	go func() {
		for {
			if _, _, err := cl.Read(ctx); err != nil {
				close(got)
				return
			}
			got <- struct{}{}
		}
	}()
	b.ResetTimer()
	for b.Loop() {
		if err := srv.Write(ctx, websocket.MessageText, frameMsg); err != nil {
			b.Fatal(err)
		}
		<-got
	}
	b.StopTimer()
	_ = cl.CloseNow()
	<-got
}

func BenchmarkInProcessHandoff(b *testing.B) {
	ch := make(chan []byte, 1)
	done := make(chan struct{})
	go func() {
		for range ch {
			done <- struct{}{}
		}
		close(done)
	}()
	for b.Loop() {
		ch <- frameMsg
		<-done
	}
	close(ch)
	<-done
}
