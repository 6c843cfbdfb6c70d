package bus

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// RandomPort asks the embedded server to listen on a free port.
const RandomPort = -1

// EmbeddedConfig configures an in-process nats-server.
type EmbeddedConfig struct {
	// Host to listen on. Zero means "127.0.0.1".
	Host string
	// Port to listen on. Zero means 4222 (the NATS default); RandomPort picks a free one.
	Port int
	// JetStream turns JetStream on (off by default: switchyard does not need it;
	// benchmarks use it as the anchor).
	JetStream bool
	// StoreDir holds JetStream data. Required when JetStream is on.
	StoreDir string
	// ReadyTimeout bounds the wait for the server to accept connections. Zero means 10s.
	ReadyTimeout time.Duration
}

// Embedded is a running in-process nats-server.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a nats-server in this process and waits until it
// accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	if cfg.JetStream && cfg.StoreDir == "" {
		return nil, errors.New("start nats: JetStream needs a store directory")
	}
	if cfg.Port != RandomPort {
		// Fail fast with a clear message; the server itself would only time out.
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
		if err != nil {
			return nil, fmt.Errorf("start nats: port %d is not free: %w", cfg.Port, err)
		}
		ln.Close()
	}
	opts := &server.Options{
		Host:       cfg.Host,
		Port:       cfg.Port,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  cfg.JetStream,
		StoreDir:   cfg.StoreDir,
		MaxPayload: 8 << 20,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("start nats on %s:%d: not ready after %s (port in use?)", cfg.Host, cfg.Port, cfg.ReadyTimeout)
	}
	return &Embedded{srv: srv}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Shutdown stops the server and waits for it to finish.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// Port is the TCP port the server listens on.
func (e *Embedded) Port() int {
	return e.srv.Addr().(*net.TCPAddr).Port
}

// ConnectInProcess connects to the embedded server over an in-memory pipe
// instead of TCP: same protocol and semantics, without the loopback socket.
// Roles that run inside the server's process (switchyard up) use it.
func (e *Embedded) ConnectInProcess(cfg ConnectConfig) (*nats.Conn, error) {
	return connect(e.ClientURL(), cfg, nats.InProcessServer(e.srv))
}
