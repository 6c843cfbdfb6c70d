package server

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/testnats"
)

// TestLifecycleRules: the server follows the one start/stop rule: Start on
// a running server is ErrStarted, Stop before Start and Stop twice are safe,
// and a stopped server does not start again.
func TestLifecycleRules(t *testing.T) {
	t.Parallel()
	e, _ := testnats.Start(t)
	newServer := func() *Server {
		srv, err := New(Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	ctx := context.Background()

	never := newServer()
	if err := never.Stop(ctx); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	if err := never.Stop(ctx); err != nil {
		t.Fatalf("second stop before start: %v", err)
	}
	if err := never.Start(ctx); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("start after stop = %v, want ErrStopped", err)
	}

	srv := newServer()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Ready(); err != nil {
		t.Fatalf("ready after start: %v", err)
	}
	if err := srv.Start(ctx); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second start = %v, want ErrStarted", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if !errors.Is(srv.Ready(), ErrNotServing) {
		t.Fatalf("ready after stop = %v, want ErrNotServing", srv.Ready())
	}
	if err := srv.Start(ctx); !errors.Is(err, lifecycle.ErrStopped) {
		t.Fatalf("start after stop = %v, want ErrStopped", err)
	}
}
