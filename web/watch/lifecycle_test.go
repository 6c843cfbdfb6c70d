package watch

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
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
