package eventsws

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/internal/testws"
)

// rawDial opens /ws/events with a client that never answers a ping by
// itself (testws).
func rawDial(t *testing.T, serverURL string) *testws.Conn {
	return testws.Dial(t, serverURL, "/ws/events")
}

// TestUnansweredPingClosesSocket: when a ping's pong does not come within
// WriteTimeout, the gateway closes the socket. The library's Ping leaves
// it open, and the writer used to return without closing it: the reader
// went on taking requests whose answers nobody wrote, and the socket's
// subscriptions and presence stayed until TCP itself gave up (found by an
// audit).
func TestUnansweredPingClosesSocket(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) {
		c.PingInterval = 50 * time.Millisecond
		c.WriteTimeout = 200 * time.Millisecond
	})
	c := rawDial(t, e.ts.URL)
	op, p, err := c.Frame(10 * time.Second)
	if err != nil || op != 0x1 {
		t.Fatalf("first frame: op %d %q %v, want ready", op, p, err)
	}
	var m testMsg
	if json.Unmarshal(p, &m) != nil || m.Type != TypeReady {
		t.Fatalf("first message %s, want ready", p)
	}
	// The gateway pings; this client never answers. The socket must end
	// (a close frame, or the connection closed).
	for {
		op, _, err := c.Frame(time.Minute)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatalf("a minute after an unanswered ping the socket is still open; gateway stats %+v", e.g.Stats())
		case err != nil, op == 0x8:
			testwait.For(t, "the socket's session gone", func() bool { return e.g.cfg.Router.Stats().Sessions == 0 })
			return
		}
	}
}

// TestPingAnsweredWhileRequestWaits: a client that answers every ping
// keeps its socket while one of its requests waits (a subscribe whose
// stream cannot be read, up to SubscribeTimeout, past WriteTimeout), and
// gets the request's answer. The library reads a pong only inside Read,
// and the reader handled each request before reading again, so the
// writer took the ping sent meanwhile for unanswered and cut the socket.
func TestPingAnsweredWhileRequestWaits(t *testing.T) {
	t.Parallel()
	e, pe := startRouter(t, events.RouterConfig{}, func(c *Config) {
		// Pings well inside the wait, each with a second for its pong:
		// room for a loaded machine, none for a reader that is not reading.
		c.PingInterval = 100 * time.Millisecond
		c.WriteTimeout = time.Second
		c.SubscribeTimeout = 3 * time.Second
	})
	c := e.dial("", nil) // the library's client: its Read answers pings
	pe.StopServer("0")   // the stream's watcher cannot read it: the subscribe waits SubscribeTimeout
	c.send(map[string]any{"type": "subscribe", "id": "a", "anchor": "project-1/slow"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		t.Fatalf("the socket ended while its subscribe waited (the client answered every ping): %v; want the subscribe's unavailable answer", err)
	}
	if !strings.Contains(string(b), `"code":"unavailable"`) {
		t.Fatalf("answer %s, want unavailable", b)
	}
}

// TestEventNotHeldBehindPing: an event delivered while a ping waits for
// its pong reaches the client at once; a client that never answers is
// still cut off once the pong is WriteTimeout late, and its session ends.
// (Was: the writer sent each ping and waited for its pong before writing anything else.)
func TestEventNotHeldBehindPing(t *testing.T) {
	t.Parallel()
	e := start(t, func(c *Config) {
		// A ping soon after the connection, and a pong deadline long
		// enough for a loaded machine to write and deliver one event
		// before it passes. No timing is asserted.
		c.PingInterval = 20 * time.Millisecond
		c.WriteTimeout = 5 * time.Second
	})
	c := rawDial(t, e.ts.URL)
	c.Write(0x1, []byte(`{"type":"subscribe","id":"files","anchor":"project-1/files"}`))
	var pinged, subscribed, wrote bool
event:
	for {
		op, p, err := c.Frame(time.Minute)
		if err != nil {
			t.Fatalf("the socket ended (%v) before the event set while a ping waited for its pong (pinged %v, subscribed %v, event set %v); stats %+v", err, pinged, subscribed, wrote, e.g.Stats())
		}
		switch op {
		case 0x9:
			pinged = true
		case 0x1:
			var m testMsg
			if err := json.Unmarshal(p, &m); err != nil {
				t.Fatal(err)
			}
			subscribed = subscribed || m.Type == TypeSubscribed
			if m.Type == TypeEvent && m.Subject == "project-1/files/a" {
				break event
			}
		case 0x8:
			t.Fatalf("close frame %q before the event", p)
		}
		if pinged && subscribed && !wrote {
			// The ping is out and will never be answered.
			e.set("project-1", "files", "a", []byte("hello"))
			wrote = true
		}
	}
	for {
		op, _, err := c.Frame(time.Minute)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("a minute after an unanswered ping the socket is still open; gateway stats %+v", e.g.Stats())
		}
		if err != nil {
			break
		}
		if op == 0x8 {
			t.Fatal("a client that answers no ping got a close frame, want the socket cut")
		}
	}
	testwait.For(t, "the socket's session gone", func() bool {
		return e.g.cfg.Router.Stats().Sessions == 0 && e.g.Stats().Open == 0
	})
}
