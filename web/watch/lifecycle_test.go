package watch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/web"
)

// TestGatewayLifecycle: the gateway answers 503 before Start and after
// Stop; Start twice is ErrStarted, Start after Stop is ErrStopped, Stop
// before Start and Stop twice are no-ops.
func TestGatewayLifecycle(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	g, err := New(Config{Client: env.Client(), Authorizer: web.Open()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	g.Mount(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	status := func() int {
		t.Helper()
		resp, err := http.Get(ts.URL + "/ws/watch?scope=s&stream=x&from=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(); got != http.StatusServiceUnavailable {
		t.Fatalf("before Start: HTTP %d, want 503", got)
	}
	lifecycletest.Start(t, g)
	// Started, a plain GET (no upgrade) gets past the 503 to the
	// WebSocket handshake, which refuses it.
	if got := status(); got == http.StatusServiceUnavailable {
		t.Fatalf("started: HTTP %d", got)
	}
	lifecycletest.Stop(t, g)
	if got := status(); got != http.StatusServiceUnavailable {
		t.Fatalf("after Stop: HTTP %d, want 503", got)
	}

	never, err := New(Config{Client: env.Client(), Authorizer: web.Open()})
	if err != nil {
		t.Fatal(err)
	}
	lifecycletest.Stop(t, never) // before Start
}

// TestStopHonoursItsDeadlineDuringInventory: a request without from makes
// the gateway read the stream's inventory before the upgrade. When the
// stream's server does not answer, Stop ends that read (the request gets
// 503) and returns by its deadline: nil once the read has ended, or an
// error wrapping the deadline. The 5 s bounds only catch a hang. (Was: the
// read ran under the request's context with its own 10 s timeout,
// counted among the connections Stop waits for, and nothing Stop cancels
// ended it, so Stop waited out the timeout whatever its deadline.)
func TestStopHonoursItsDeadlineDuringInventory(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 0, persistenv.WithoutBalancer())
	// A subscriber that never answers: every persist request hangs.
	hole := env.Conn()
	var heard atomic.Int64
	if _, err := hole.Subscribe(">", func(*nats.Msg) { heard.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := hole.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: env.Conn(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	g, ts := gateway(t, c, nil)

	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get(ts.URL + "/ws/watch?scope=hub&stream=log")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	testwait.For(t, "the inventory request on the bus", func() bool { return heard.Load() > 0 })

	const hang = 5 * time.Second // well short of the inventory's own timeout
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- g.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop: %v, want nil or an error wrapping the deadline", err)
		}
	case <-time.After(hang):
		t.Fatalf("Stop with a 200ms deadline was still waiting after %v for a pre-upgrade inventory read", hang)
	}
	select {
	case status := <-answered:
		if status != http.StatusServiceUnavailable {
			t.Fatalf("the request whose inventory read Stop ended was answered HTTP %d, want 503", status)
		}
	case <-time.After(hang):
		t.Fatalf("the request was still waiting for its inventory read %v after Stop", hang)
	}
}
