package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/placement"
)

// harness is one embedded NATS, one connection and one persist server
// (id "0") with a data directory; the client tests' server. Raw wire tests
// of the server have their own harness in package server.
type harness struct {
	t     *testing.T
	e     *embedded.Server
	nc    *nats.Conn
	srv   *server.Server
	dir   string
	cfg   server.Config
	scope string
	onNew func(*server.Server) // runs on each new server before Start

	client *persist.Client // of stream(), made on first use
}

func newHarness(t *testing.T, tune func(*server.Config)) *harness {
	t.Helper()
	return newHarnessHook(t, tune, nil)
}

func newHarnessHook(t *testing.T, tune func(*server.Config), onNew func(*server.Server)) *harness {
	t.Helper()
	e, nc := testnats.Start(t)
	h := &harness{t: t, e: e, nc: nc, dir: t.TempDir(), scope: "hub", onNew: onNew}
	h.cfg = server.Config{Conn: testnats.Conn(t, e), ID: "0", IDs: []string{"0"}, DataDir: h.dir}
	if tune != nil {
		tune(&h.cfg)
	}
	h.start()
	return h
}

func (h *harness) start() {
	h.t.Helper()
	srv, err := server.New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.onNew != nil {
		h.onNew(srv)
	}
	if err := srv.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.srv = srv
	h.t.Cleanup(func() { _ = srv.Stop(context.Background()) })
}

// stream is a handle on stream name of the harness's scope, through a
// client of the harness's balancer.
func (h *harness) stream(name string) *persist.Stream {
	h.t.Helper()
	if h.client == nil {
		b, err := placement.NewBalancer(placement.BalancerConfig{Conn: testnats.Conn(h.t, h.e), IDs: []string{"0"}})
		if err != nil {
			h.t.Fatal(err)
		}
		if err := b.Start(context.Background()); err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = b.Stop(context.Background()) })
		if h.client, err = persist.NewClient(persist.ClientConfig{Conn: h.nc}); err != nil {
			h.t.Fatal(err)
		}
	}
	return h.client.Stream(h.scope, name)
}

// set stores value in stream and fails the test on an error.
func (h *harness) set(stream, value string, headers map[string]string) persist.SetResult {
	h.t.Helper()
	res, err := h.stream(stream).Set(context.Background(), []byte(value), persist.SetOptions{Headers: headers})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// config applies a config patch to stream and fails the test on an error.
func (h *harness) config(stream, patch string) persist.Config {
	h.t.Helper()
	update, err := persist.ParseConfigUpdate([]byte(patch))
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := h.stream(stream).UpdateConfig(context.Background(), update)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// newClientHarness is a harness plus a balancer and a client on a
// connection of its own.
func newClientHarness(t *testing.T, tune func(*server.Config), onNew func(*server.Server), timeout time.Duration) (*harness, *persist.Client) {
	t.Helper()
	h := newHarnessHook(t, tune, onNew)
	h.stream("") // starts the balancer
	c, err := persist.NewClient(persist.ClientConfig{Conn: testnats.Conn(t, h.e), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an event
	}
}

func ptr[T any](v T) *T { return &v }
