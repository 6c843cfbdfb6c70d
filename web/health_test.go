package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestHealth: /healthz is 200 always; /readyz is 503 listing the failing
// checks, and 200 once they pass.
func TestHealth(t *testing.T) {
	t.Parallel()
	var busDown atomic.Bool
	busDown.Store(true)
	var h Health
	h.Add("bus", func() error {
		if busDown.Load() {
			return errors.New("disconnected")
		}
		return nil
	})
	h.Add("roles", func() error { return nil })
	s := New("127.0.0.1:0")
	h.Mount(s)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	if code, body := get(t, s.URL()+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	code, body := get(t, s.URL()+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "bus: disconnected") || strings.Contains(body, "roles") {
		t.Fatalf("readyz with the bus down: %d %q", code, body)
	}
	busDown.Store(false)
	if code, body := get(t, s.URL()+"/readyz"); code != 200 {
		t.Fatalf("readyz with all up: %d %q", code, body)
	}
}

// TestServerLifecycle: Start twice is ErrStarted, Stop before Start and
// Stop twice are no-ops, and a stopped server does not start again.
func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	lifecycletest.Rules(t, func() lifecycle.Service { return New("127.0.0.1:0") })
}
