package server

import (
	"errors"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
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

	lifecycletest.Stop(t, newServer()) // before Start

	srv := newServer()
	lifecycletest.Start(t, srv)
	if err := srv.Ready(); err != nil {
		t.Fatalf("ready after start: %v", err)
	}
	lifecycletest.Stop(t, srv)
	if !errors.Is(srv.Ready(), ErrNotServing) {
		t.Fatalf("ready after stop = %v, want ErrNotServing", srv.Ready())
	}
}
