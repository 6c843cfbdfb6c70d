package fleet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
)

// NATSConfig says where the bus is.
type NATSConfig struct {
	// Embedded, when non-nil, runs a NATS server in this process (up):
	// the roles reach it over in-memory pipes, not loopback TCP. With
	// AuthDir set and Embedded.AuthConf empty, AuthConf is
	// AuthDir/nats-server.conf.
	Embedded *embedded.Config

	// URL of the external NATS server when Embedded is nil. "" means
	// bus.URL(""): $SWITCHYARD_NATS, else nats://127.0.0.1:4222.
	URL string

	// AuthDir, written by `switchyard auth init`, holds a credentials file
	// per role: each role logs in as its own user (server-ID, balancer,
	// client). "" means the roles connect with Options alone.
	AuthDir string

	// AnyCredsMode loads AuthDir's credentials files whatever their
	// permission bits (auth.AnyMode; --insecure-creds): for a file system
	// without modes. False means a file that group or others may read or
	// write is refused (auth.ModeError).
	AnyCredsMode bool

	// Options are added to every role's connection: the credentials and
	// TLS CA of a role command's --creds and --tls-ca.
	Options []nats.Option
}

// UnreachableError is Start's error when a role's connection to the
// external NATS server at URL fails: nothing answered there, or the server
// answered and refused the role (its credentials, TLS; Err says which). A
// command adds how to point it elsewhere, or what to give.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return "connect to NATS at " + bus.RedactURL(e.URL) + ": " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// DefaultLocalURL is where an embedded bus listens by default, and where
// the commands look for it with no flags.
const DefaultLocalURL = "nats://127.0.0.1:4222"

func (f *Fleet) startBus(ctx context.Context) error {
	ecfg := f.cfg.NATS.Embedded
	if ecfg == nil {
		f.busURL = bus.URL(f.cfg.NATS.URL)
		if f.busURL == "" {
			f.busURL = DefaultLocalURL
		}
		return nil
	}
	c := *ecfg
	if c.AuthConf == "" && f.cfg.NATS.AuthDir != "" {
		c.AuthConf = filepath.Join(f.cfg.NATS.AuthDir, auth.ConfFile)
	}
	srv, err := embedded.Start(c)
	if err != nil {
		return err
	}
	f.nats = srv
	f.busURL = srv.ClientURL()
	return f.start(ctx, "nats", lifecycle.Funcs("nats", nil, func(context.Context) error {
		srv.Shutdown()
		return nil
	}))
}

// connect opens the connection of one role, as user (a credentials file
// name in NATS.AuthDir). It is a member: closed (after a flush bounded by
// the stop deadline) once the roles started after it have stopped. The
// HTTP side's readiness watches it.
func (f *Fleet) connect(ctx context.Context, name, user string) (*nats.Conn, error) {
	opts := append([]nats.Option(nil), f.cfg.NATS.Options...)
	if dir := f.cfg.NATS.AuthDir; dir != "" {
		var load []auth.LoadOption
		if f.cfg.NATS.AnyCredsMode {
			load = append(load, auth.AnyMode())
		}
		c, err := auth.LoadCreds(auth.CredsFile(dir, user), load...)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w (does the auth directory hold credentials for %s? see switchyard auth init --ids)", name, err, user)
		}
		if err != nil {
			// A *auth.ModeError ends with its chmod; a command adds its
			// flag to use the file anyway.
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		copts, err := c.Options()
		if err != nil {
			return nil, err
		}
		opts = append(opts, copts...)
	}
	// Closed for good (nats.go gives up after the server refused its
	// credentials twice, or someone closed it), the connection takes the
	// role on it down for ever: the fleet hears of it. Its own Stop closes
	// it too, which then counts for nothing.
	onClosed := func(nc *nats.Conn) {
		err := nc.LastError()
		if err == nil {
			err = errors.New("closed")
		}
		f.roleEnded("conn "+name, fmt.Errorf("NATS connection closed for good: %w", err))
	}
	cfg := bus.ConnectConfig{Name: name, Options: opts, Logger: f.log, OnClosed: onClosed}
	var nc *nats.Conn
	var err error
	if f.nats != nil {
		nc, err = f.nats.ConnectInProcess(cfg)
	} else {
		nc, err = bus.Connect(f.busURL, cfg)
		if err != nil {
			err = &UnreachableError{URL: f.busURL, Err: err}
		}
	}
	if err != nil {
		return nil, err
	}
	if f.nats == nil {
		f.busURL = nc.ConnectedUrlRedacted()
	}
	if err := f.start(ctx, "conn "+name, lifecycle.OnStop(name, func(ctx context.Context) error {
		// Answers a role queued on its way out go before the close. A
		// connection that is down has nothing to flush, and a flush would
		// wait for a PONG that cannot come, to the end of Stop's deadline
		// (every later role then stopping with an expired ctx).
		if nc.IsConnected() {
			_ = nc.FlushWithContext(ctx)
		}
		nc.Close()
		return nil
	})); err != nil {
		nc.Close()
		return nil, err
	}
	f.http.checkBus(name, nc)
	return nc, nil
}

// persistClient is a persist client on nc, closed (its watchers and
// caches ended) before nc is.
func (f *Fleet) persistClient(ctx context.Context, nc *nats.Conn) (*persist.Client, error) {
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Service: f.cfg.Service, IDs: f.cfg.Persist.IDs})
	if err != nil {
		return nil, err
	}
	if err := f.start(ctx, "client "+nc.Opts.Name, lifecycle.OnStop("persist client", func(context.Context) error { return c.Close() })); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
