// Package embedded runs a nats-server inside this process: the bus of
// "switchyard up" and of the tests. Only programs that host the bus link the
// NATS server; clients and roles use package bus alone.
package embedded

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
)

// MaxPayloadDefault is the embedded server's largest message: 8 MiB, room
// for a persist getAll chunk or setMany far beyond NATS's 1 MiB default.
const MaxPayloadDefault = 8 << 20

// RandomPort asks the embedded server to listen on a free port.
const RandomPort = -1

// Config configures an in-process nats-server.
type Config struct {
	// Host to listen on. Zero means "127.0.0.1".
	Host string
	// Port to listen on. Zero means 4222 (the NATS default); RandomPort picks a free one.
	Port int
	// JetStream turns JetStream on (off by default: switchyard does not need it;
	// benchmarks use it as the anchor).
	JetStream bool
	// StoreDir holds JetStream data. Required when JetStream is on.
	StoreDir string
	// JetStreamSyncAlways makes JetStream fsync every write before its
	// acknowledgement (the sync_interval: always of a server config); by
	// default it fsyncs every 2 minutes.
	JetStreamSyncAlways bool
	// ReadyTimeout bounds the wait for the server to accept connections. Zero means 10s.
	ReadyTimeout time.Duration
	// MaxPayload bounds one message. Zero means MaxPayloadDefault.
	MaxPayload int32
	// AuthConf is a nats-server configuration file (as written by
	// `switchyard auth init`) whose accounts, users, NKey users and
	// permissions the server enforces; its other settings are ignored. Empty means no
	// authentication: anyone who reaches the port may do anything.
	AuthConf string
	// TLS, when set, makes TCP clients use TLS with this configuration (its
	// certificate). In-process connections skip TLS: there is no network.
	TLS *tls.Config
}

// Server is a running in-process nats-server.
type Server struct {
	srv *server.Server
}

// Start starts a nats-server in this process and waits until it
// accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = MaxPayloadDefault
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
		MaxPayload: cfg.MaxPayload,
		SyncAlways: cfg.JetStreamSyncAlways,
	}
	if cfg.AuthConf != "" {
		ac, err := server.ProcessConfigFile(cfg.AuthConf)
		if err != nil {
			return nil, fmt.Errorf("start nats: auth configuration: %w", err)
		}
		if len(ac.Users) == 0 && len(ac.Nkeys) == 0 {
			return nil, fmt.Errorf("start nats: auth configuration %s defines no users", cfg.AuthConf)
		}
		// The users belong to the file's accounts (auth.Account, with
		// JetStream disabled): the accounts come along, or the users
		// would point at accounts the server does not know.
		opts.Accounts, opts.Users, opts.Nkeys = ac.Accounts, ac.Users, ac.Nkeys
	}
	if cfg.TLS != nil {
		opts.TLSConfig = cfg.TLS
		opts.TLS = true
		opts.TLSTimeout = 2
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
	return &Server{srv: srv}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (e *Server) ClientURL() string { return e.srv.ClientURL() }

// Shutdown stops the server and waits for it to finish.
func (e *Server) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// Port is the TCP port the server listens on.
func (e *Server) Port() int {
	return e.srv.Addr().(*net.TCPAddr).Port
}

// ConnectInProcess connects to the embedded server over an in-memory pipe
// instead of TCP: same protocol and semantics, without the loopback socket.
// Roles that run inside the server's process (switchyard up) use it.
func (e *Server) ConnectInProcess(cfg bus.ConnectConfig) (*nats.Conn, error) {
	cfg.Options = append(append([]nats.Option(nil), cfg.Options...), nats.InProcessServer(e.srv))
	// The server skips TLS for in-process connections, but a tls:// URL
	// (ClientURL when TLS is on) would make the client insist on it.
	url := "nats://" + strings.TrimPrefix(e.ClientURL(), "tls://")
	return bus.Connect(url, cfg)
}

// Interest returns a function counting the subscriptions this server holds
// for a subject (plain and queue, internal ones such as a JetStream stream's
// included) in the account of nc, a connection to this server: a persist
// server's FeedInterest, so that its feed skips the bus when only watchers
// of its own process listen. The count is every listener there is because
// the server is standalone: a gateway would forward to interest it does not
// list (Config has no routes, gateways or leaf nodes).
func (e *Server) Interest(nc *nats.Conn) (func(subject string) int, error) {
	if nc.ConnectedServerId() != e.srv.ID() {
		return nil, errors.New("interest: the connection is not to this server")
	}
	cid, err := nc.GetClientID()
	if err != nil {
		return nil, fmt.Errorf("interest: %w", err)
	}
	cz, err := e.srv.Connz(&server.ConnzOptions{CID: cid, Username: true})
	if err != nil {
		return nil, fmt.Errorf("interest: %w", err)
	}
	if len(cz.Conns) != 1 {
		return nil, fmt.Errorf("interest: connection %d not found", cid)
	}
	acc := e.srv.GlobalAccount() // Connz names no account for the global one
	if name := cz.Conns[0].Account; name != "" {
		if acc, err = e.srv.LookupAccount(name); err != nil {
			return nil, fmt.Errorf("interest: account %s: %w", name, err)
		}
	}
	return acc.Interest, nil
}
