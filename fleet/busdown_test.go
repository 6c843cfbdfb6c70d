package fleet

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testnats"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/persist"
)

// readyzOf is the status and body of f's /readyz.
func readyzOf(t *testing.T, f *Fleet) (int, string) {
	t.Helper()
	resp, err := http.Get(f.HTTPURL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStopWithBusDown: roles on an external bus stop at once while NATS is
// down. The connections' stop flushed them, and a persist server drained
// its subscription, each waiting for a PONG that could not come until
// Stop's deadline, every later role then stopping with an expired ctx (a
// role command took its whole 30 s and exited 1).
func TestStopWithBusDown(t *testing.T) {
	t.Run("balancer", func(t *testing.T) {
		stopWithBusDown(t, PersistConfig{IDs: []string{"0"}}, "bus switchyard-balancer")
	})
	t.Run("persist server", func(t *testing.T) {
		stopWithBusDown(t, PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: t.TempDir()}, "bus switchyard-balancer")
	})
}

func stopWithBusDown(t *testing.T, pc PersistConfig, down string) {
	ctx := context.Background()
	hub, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Start(ctx, Config{
		NATS:     NATSConfig{URL: hub.ClientURL()},
		Persist:  pc,
		Balancer: true, // its Stop needs no bus: only the connection's stop is measured
		HTTP:     HTTPConfig{Addr: "127.0.0.1:0"},
	})
	if err != nil {
		hub.Shutdown()
		t.Fatal(err)
	}
	hub.Shutdown()
	testwait.Until(t, "the balancer's connection down (readyz 503)", func() (bool, string) {
		code, body := readyzOf(t, f)
		return code == http.StatusServiceUnavailable && strings.Contains(body, down), body
	})
	const deadline = 3 * time.Second
	sctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	err = f.Stop(sctx)
	took := time.Since(start)
	if sctx.Err() != nil {
		t.Fatalf("Stop with the bus down ran into its %v deadline (took %v, err %v): a stop waited for a flush or drain that cannot complete", deadline, took, err)
	}
}

// TestRegionsNeedAnHTTPSide: regions (Events.Peers) without an HTTP side
// are refused, as the Newznab API is. Start succeeded and ran no events
// layer and no forward receiver, and the peers' batches were refused.
func TestRegionsNeedAnHTTPSide(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	cfg := Config{
		NATS: NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		HTTP: HTTPConfig{Events: true}, // no Addr: no HTTP side
		Events: EventsConfig{
			Region: "a", Peers: map[string]string{"b": "http://127.0.0.1:1"}, ForwardListen: listen,
			Secrets: map[string][]byte{"a": []byte(strings.Repeat("a", 32)), "b": []byte(strings.Repeat("b", 32))},
		},
	}
	f, err := Start(context.Background(), cfg)
	if err == nil {
		defer f.Stop(context.Background())
		t.Fatalf("Start with Events.Peers and no HTTP side succeeded with roles %q: the region runs no events layer and no forward receiver on %s", f.Roles(), listen)
	}
}

// TestReadyzSaysStopping: from the start of Stop, before any role stops,
// /readyz answers 503 "roles: stopping" (the HTTP side answers until it
// stops, last). (Was: 200 "ready" until the HTTP side itself closed.)
func TestReadyzSaysStopping(t *testing.T) {
	ctx := context.Background()
	hub, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Shutdown)
	f, err := Start(ctx, Config{
		NATS:     NATSConfig{URL: hub.ClientURL()},
		Persist:  PersistConfig{IDs: []string{"0"}},
		Balancer: true,
		HTTP:     HTTPConfig{Addr: "127.0.0.1:0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "ready", func() (bool, string) {
		code, body := readyzOf(t, f)
		return code == http.StatusOK, body
	})
	var code int
	var body string
	f.beforeStop = func() { code, body = readyzOf(t, f) }
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "roles: stopping") {
		t.Fatalf("/readyz once Stop began: %d %q, want 503 naming roles: stopping", code, body)
	}
}

// TestRoleEndedOnItsOwn: a role that ends by itself after Start — its bus
// connection closed for good, the forward receiver's listener gone, the
// search index's follower failed — closes Done, Err names it, and /readyz
// says so; the other roles then still stop. (Was: nothing noticed: the
// process ran on without the role, and a supervisor never restarted it.)
func TestRoleEndedOnItsOwn(t *testing.T) {
	cases := []struct {
		name string
		role string // in Err and /readyz
		cfg  func(t *testing.T) (Config, func(*Fleet))
	}{
		{"bus connection closed for good", "conn switchyard-balancer", func(t *testing.T) (Config, func(*Fleet)) {
			url, revoke := testnats.PasswordBus(t)
			return Config{
				NATS:     NATSConfig{URL: url, Options: []nats.Option{nats.UserInfo("sy", "first")}},
				Persist:  PersistConfig{IDs: []string{"0"}},
				Balancer: true,
				HTTP:     HTTPConfig{Addr: "127.0.0.1:0"},
			}, func(*Fleet) { revoke() }
		}},
		{"forward receiver's listener closed", "forward receiver", func(t *testing.T) (Config, func(*Fleet)) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			listen := ln.Addr().String()
			ln.Close()
			return Config{
				NATS:    NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
				Persist: PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: t.TempDir()},
				HTTP:    HTTPConfig{Addr: "127.0.0.1:0", Events: true},
				Events: EventsConfig{
					Region: "a", Peers: map[string]string{"b": "http://127.0.0.1:1"}, ForwardListen: listen,
					Secrets: map[string][]byte{"a": []byte(strings.Repeat("a", 32)), "b": []byte(strings.Repeat("b", 32))},
				},
			}, func(f *Fleet) { f.forward.ln.Close() }
		}},
		{"search index follower failed", "newznab", func(t *testing.T) (Config, func(*Fleet)) {
			return webConfig(t), func(f *Fleet) {
				// The index's database gone, the next release cannot be
				// written into it.
				f.api.role.ix.Close()
				nc, err := f.NATS().ConnectInProcess(bus.ConnectConfig{Name: "test"})
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.Stream(f.api.scope, "releases").Set(context.Background(), []byte("{}"), persist.SetOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, kill := c.cfg(t)
			f, err := Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			t.Cleanup(func() {
				if !stopped {
					_ = f.Stop(ctx)
				}
			})
			testwait.Until(t, "ready", func() (bool, string) {
				code, body := readyzOf(t, f)
				return code == http.StatusOK, body
			})
			if err := f.Err(); err != nil {
				t.Fatalf("Err before any role ended: %v", err)
			}
			kill(f)
			select {
			case <-f.Done():
			case <-time.After(testwait.Timeout):
				code, body := readyzOf(t, f)
				t.Fatalf("Done not closed %v after the role ended; /readyz: %d %q", testwait.Timeout, code, body)
			}
			if err := f.Err(); err == nil || !strings.Contains(err.Error(), c.role) {
				t.Fatalf("Err: %v, want it to name %q", err, c.role)
			}
			code, body := readyzOf(t, f)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "roles: failed") || !strings.Contains(body, c.role) {
				t.Fatalf("/readyz once %s ended: %d %q, want 503 roles: failed naming it", c.role, code, body)
			}
			_ = f.Stop(ctx) // the ended role's own Stop may say why it ended
			stopped = true
			if got := f.Roles(); len(got) != 0 {
				t.Fatalf("members left after Stop: %q", got)
			}
		})
	}
}

// (Was: the HTTP side's Serve that ended on its own, its listener closed under it, closed no Done: up ran on with no HTTP side.)
func TestHTTPSideEndedOnItsOwn(t *testing.T) {
	start := func(t *testing.T) *Fleet {
		t.Helper()
		f, err := Start(context.Background(), Config{
			NATS:     NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
			Persist:  PersistConfig{IDs: []string{"0"}},
			Balancer: true,
			HTTP:     HTTPConfig{Addr: "127.0.0.1:0"},
		})
		if err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, "ready", func() (bool, string) {
			code, body := readyzOf(t, f)
			return code == http.StatusOK, body
		})
		return f
	}
	t.Run("listener closed from outside", func(t *testing.T) {
		f := start(t)
		stopped := false
		t.Cleanup(func() {
			if !stopped {
				_ = f.Stop(context.Background())
			}
		})
		addr := f.http.ln.Addr().String()
		_ = f.http.ln.Close()
		select {
		case <-f.Done():
		case <-time.After(testwait.Timeout):
			t.Fatalf("Done not closed %v after the HTTP side's listener was closed", testwait.Timeout)
		}
		if err := f.Err(); err == nil || !strings.HasPrefix(err.Error(), "role http ended: ") || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Err: %v, want the HTTP side's end (role http) naming %s", err, addr)
		}
		_ = f.Stop(context.Background()) // the HTTP side's Stop says again why it ended
		stopped = true
		if got := f.Roles(); len(got) != 0 {
			t.Fatalf("members left after Stop: %q", got)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		f := start(t)
		if err := f.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := f.Err(); err != nil {
			t.Fatalf("Err after Stop: %v, want nil (stopped, not ended on its own)", err)
		}
	})
}
