package testpersist

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// TestServersRestartAsNewProcesses: each server is hooked when made,
// StopServer stops it, StartServer and Restart start a new one on the same
// data directory, and a client reaches the servers through the balancer
// throughout.
func TestServersRestartAsNewProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var made []*server.Server
	var tuned int
	env := Start(t, 2,
		Tune(func(*server.Config) { tuned++ }),
		OnNewServer(func(srv *server.Server) { made = append(made, srv) }))
	if len(made) != 2 || tuned != 2 || made[0] != env.Server("0") || made[1] != env.Server("1") {
		t.Fatalf("made %d servers, tuned %d", len(made), tuned)
	}
	for _, id := range env.IDs {
		if err := env.Server(id).Ready(); err != nil {
			t.Fatalf("server %s: %v", id, err)
		}
	}
	kv := env.Client().KV("env", "doc")
	if _, err := kv.Set(ctx, "k", []byte("v1"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, id := range env.IDs {
		old := env.Server(id)
		env.StopServer(id)
		if err := env.Server(id).Ready(); !errors.Is(err, server.ErrNotServing) {
			t.Fatalf("server %s after StopServer: Ready %v", id, err)
		}
		if srv := env.StartServer(id); srv == old || srv != env.Server(id) || srv.Ready() != nil {
			t.Fatalf("StartServer %s: the old server, or not serving", id)
		}
		if srv := env.Restart(id); srv != made[len(made)-1] || old.Ready() == nil {
			t.Fatalf("Restart %s: not the server last made", id)
		}
	}
	if len(made) != 6 {
		t.Fatalf("made %d servers, want 6", len(made))
	}
	msg, err := kv.Get(ctx, "k")
	if err != nil {
		t.Fatalf("get after the restarts: %v", err)
	}
	if msg == nil || string(msg.Value) != "v1" {
		t.Fatalf("get after the restarts: %+v, want v1", msg)
	}
}
