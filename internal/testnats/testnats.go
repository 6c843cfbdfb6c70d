// Package testnats starts an embedded nats-server on a random port for one
// test and connects to it; both are closed when the test ends.
package testnats

import (
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/embedded"
)

// Options tune Start.
type Options struct {
	// JetStream turns JetStream on, storing under t.TempDir().
	JetStream bool
	// MaxPayload bounds one message. Zero means the embedded default.
	MaxPayload int32
}

// Server starts an embedded server for t and returns it.
func Server(t testing.TB, opts Options) *embedded.Server {
	t.Helper()
	cfg := embedded.Config{Port: embedded.RandomPort, JetStream: opts.JetStream, MaxPayload: opts.MaxPayload}
	if opts.JetStream {
		cfg.StoreDir = t.TempDir()
	}
	e, err := embedded.Start(cfg)
	if err != nil {
		t.Fatalf("embedded nats: %v", err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

// Conn connects a new client to e; it is closed when the test ends.
func Conn(t testing.TB, e *embedded.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(e.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Start is Server plus Conn: one embedded server and one connection to it.
func Start(t testing.TB) (*embedded.Server, *nats.Conn) {
	t.Helper()
	e := Server(t, Options{})
	return e, Conn(t, e)
}

// PasswordBus starts a nats-server on loopback whose one user is sy with
// password "first", and returns its URL (without the credentials) and
// revoke, which changes the password as revoking the user would: the
// server drops the user's connections, and nats.go, refused twice on
// reconnecting, closes them for good.
func PasswordBus(t testing.TB) (url string, revoke func()) {
	t.Helper()
	opts := &natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, Username: "sy", Password: "first"}
	srv, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL(), func() {
		o := opts.Clone()
		o.Port = srv.Addr().(*net.TCPAddr).Port
		o.Password = "second"
		if err := srv.ReloadOptions(o); err != nil {
			t.Fatal(err)
		}
	}
}
