package watch

import (
	"context"
	"fmt"
	"time"

	"github.com/coder/websocket"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestEncodeCacheHoldsNoHistory: a history read's messages are this
// connection's own, so they are not cached: once its reader left, the
// gateway holds nothing of them. The cache kept every message it encoded,
// history included, up to 4,096 of any size (26 MB after one browser read
// 200 values of 64 KiB and left).
func TestEncodeCacheHoldsNoHistory(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	const n, size = 200, 64 << 10
	writeN(t, env.Client().Stream("hub", "log"), 1, n, size)
	g, ts := gateway(t, env.Client(), nil)
	ws := dial(t, ts, params("hub", "log", 1), nil)
	log := &seqLog{t: t, size: size}
	for log.last < n {
		if m := mustRead(t, ws); m.Type == TypeMsg {
			log.add(m)
		}
	}
	_ = ws.CloseNow()
	testwait.For(t, "the connection to end", func() bool { return g.Stats().Open == 0 })

	g.cache.mu.Lock()
	entries, held := len(g.cache.m), 0
	for m, b := range g.cache.m {
		held += len(m.Value) + len(b)
	}
	g.cache.mu.Unlock()
	if held > QueueBytesDefault {
		t.Fatalf("no connection open, yet the gateway's encode cache holds %d messages, %d bytes of values and encodings (a connection's queue is bounded by %d bytes)", entries, held, QueueBytesDefault)
	}
}

// TestDataMessageEndsTheConnection: a browser that sends a data message
// gets 1008, and its connection and watch end at once. The library's
// CloseRead closed the socket itself and waited 15 s for its own
// goroutine, while the watch ran on and the writer wrote after the close.
func TestDataMessageEndsTheConnection(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	writeN(t, env.Client().Stream("hub", "log"), 1, 3, 4)
	g, ts := gateway(t, env.Client(), nil)
	ws := dial(t, ts, params("hub", "log", 1), nil)
	for {
		if m := mustRead(t, ws); m.Type == TypeCaughtUp {
			break
		}
	}
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	var err error
	for err == nil {
		_, err = read(ws)
	}
	if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation {
		t.Fatalf("after a data message: %v, want close 1008", err)
	}
	testwait.UntilWithin(t, 5*time.Second, "the connection and its watch to end after 1008", func() (bool, string) {
		n, _ := g.WatchStats()
		st := g.Stats()
		return st.Open == 0 && n == 0, fmt.Sprintf("%d connections open, %d watches running", st.Open, n)
	})

	// Any data message is one: binary, or larger than the server's read
	// limit (it is not read, only seen).
	for name, msg := range map[string]struct {
		typ websocket.MessageType
		b   []byte
	}{
		"binary":   {websocket.MessageBinary, []byte{0, 1, 2}},
		"oversize": {websocket.MessageText, make([]byte, 1<<20)},
	} {
		ws := dial(t, ts, params("hub", "log", 1), nil)
		for {
			if m := mustRead(t, ws); m.Type == TypeCaughtUp {
				break
			}
		}
		if err := ws.Write(context.Background(), msg.typ, msg.b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var err error
		for err == nil {
			_, err = read(ws)
		}
		if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation {
			t.Fatalf("after a %s message: %v, want close 1008", name, err)
		}
	}
}
