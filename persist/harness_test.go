package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// harness is the client tests' environment: a testpersist.Env of one
// persist server (id "0") and a balancer, plus the scope the helpers
// below write to. Raw wire tests of the server are in package server.
type harness struct {
	*testpersist.Env
	t     *testing.T
	scope string

	client *persist.Client // of stream(), made on first use
}

func newHarness(t *testing.T, tune func(*server.Config)) *harness {
	t.Helper()
	return newHarnessHook(t, tune, nil)
}

func newHarnessHook(t *testing.T, tune func(*server.Config), onNew func(*server.Server), opts ...testpersist.Option) *harness {
	t.Helper()
	opts = append(opts, testpersist.Tune(tune), testpersist.OnNewServer(onNew))
	return &harness{Env: testpersist.Start(t, 1, opts...), t: t, scope: "hub"}
}

// stop stops the server, failing the test on an error.
func (h *harness) stop() { h.t.Helper(); h.StopServer("0") }

// start starts a new server on the data directory, after stop.
func (h *harness) start() { h.t.Helper(); h.StartServer("0") }

// stream is a handle on stream name of the harness's scope, through a
// client of its own with persist's default timeout.
func (h *harness) stream(name string) *persist.Stream {
	h.t.Helper()
	if h.client == nil {
		c, err := persist.NewClient(persist.ClientConfig{Conn: h.Conn()})
		if err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = c.Close() })
		h.client = c
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

// newClientHarness is a harness and a client on a connection of its own
// with the given request timeout (zero: persist's default).
func newClientHarness(t *testing.T, tune func(*server.Config), onNew func(*server.Server), timeout time.Duration) (*harness, *persist.Client) {
	t.Helper()
	h := newHarnessHook(t, tune, onNew, testpersist.ClientTimeout(timeout))
	return h, h.Client()
}

func ptr[T any](v T) *T { return &v }
