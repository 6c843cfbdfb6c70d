package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/placement"
)

// defaultLocalURL is where `switchyard up` listens by default, so client
// commands find it with no flags.
const defaultLocalURL = fleet.DefaultLocalURL

// natsFlags are the connection flags of the commands that talk to NATS.
type natsFlags struct {
	url     string
	service string
	timeout time.Duration
	creds   string // --creds, else $SWITCHYARD_CREDS
	tlsCA   string // --tls-ca, else $SWITCHYARD_TLS_CA
	// insecureCreds (--insecure-creds) uses a creds file whatever its mode.
	insecureCreds bool
}

// registerServer adds --nats and --service, for the long-running roles
// (persist serve, balancer): they reconnect for ever and run until a signal,
// so they have no --timeout to offer.
func (f *natsFlags) registerServer(cmd *cobra.Command) {
	// The backquoted word is pflag's value name: help shows "--nats URL".
	cmd.Flags().StringVar(&f.url, "nats", "", "NATS server `URL` (default $"+bus.EnvURL+", else "+defaultLocalURL+", where switchyard up listens)")
	cmd.Flags().StringVar(&f.service, "service", bus.DefaultService, "first subject token of the persist service")
	f.registerAuth(cmd)
}

// registerAuth adds --creds, --insecure-creds and --tls-ca, shared by every
// command that connects to a bus.
func (f *natsFlags) registerAuth(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.creds, "creds", "", "credentials `FILE` of this role's NATS user, as written by switchyard auth init (default $"+auth.EnvCreds+"; none: connect anonymously); refused if group or others may read it")
	cmd.Flags().BoolVar(&f.insecureCreds, "insecure-creds", false, "use --creds even if group or others may read it (a file system without modes)")
	cmd.Flags().StringVar(&f.tlsCA, "tls-ca", "", "PEM `FILE` of the CA that signed the NATS server's TLS certificate (default $"+auth.EnvTLSCA+")")
}

// authOptions are the nats.go options for the --creds and --tls-ca flags,
// falling back to their environment variables.
func (f *natsFlags) authOptions() ([]nats.Option, error) {
	creds, tlsCA := f.creds, f.tlsCA
	if creds == "" {
		creds = os.Getenv(auth.EnvCreds)
	}
	if tlsCA == "" {
		tlsCA = os.Getenv(auth.EnvTLSCA)
	}
	if tlsCA != "" {
		if err := checkTLSCA(tlsCA, f.tlsCA == ""); err != nil {
			return nil, err
		}
	}
	var load []auth.LoadOption
	if f.insecureCreds {
		load = append(load, auth.AnyMode())
	}
	opts, err := auth.ClientOptions(creds, tlsCA, load...)
	var me *auth.ModeError
	if errors.As(err, &me) {
		return nil, fmt.Errorf("%w (or --insecure-creds to use it anyway)", err)
	}
	return opts, err
}

// checkTLSCA checks that path, of --tls-ca (or $SWITCHYARD_TLS_CA when
// fromEnv), is a file holding a PEM certificate before anything dials:
// nats.go reads it only while connecting, and its failure then read as
// "cannot reach NATS ... is switchyard up running?" with the bus up and
// the CA file the one thing wrong.
func checkTLSCA(path string, fromEnv bool) error {
	name := "--tls-ca"
	if fromEnv {
		name = "$" + auth.EnvTLSCA
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s %q: %w", name, path, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Errorf("%s %q: no PEM certificate in it: give the file of the CA that signed the NATS server's certificate", name, path)
	}
	return nil
}

// connectRole dials NATS for a long-running role or a watch: it reconnects
// for ever (bus.Connect), with the role's credentials and TLS settings.
func (f *natsFlags) connectRole(name string, timeout time.Duration) (*nats.Conn, error) {
	opts, err := f.authOptions()
	if err != nil {
		return nil, err
	}
	url := f.resolvedURL()
	nc, err := bus.Connect(url, bus.ConnectConfig{Name: name, Timeout: timeout, Options: opts})
	if err != nil {
		return nil, unreachable(url, err)
	}
	return nc, nil
}

// unreachable is the error of a command whose connection to NATS at url
// failed: when the server answered but refused the client (its
// credentials, or TLS), what it refused and what to give; otherwise that
// nothing was reached, with how to point it elsewhere.
func unreachable(url string, err error) error {
	url = bus.RedactURL(url) // the messages name it; a password in it must not show
	if refused := refusedConnect(url, err); refused != nil {
		return refused
	}
	return fmt.Errorf("cannot reach NATS at %s (is `switchyard up` running? otherwise set --nats or %s): %w", url, bus.EnvURL, err)
}

// connectRefusedError is a connection that reached a NATS server which
// answered and refused it. Its text is msg; it wraps the nats.go error.
type connectRefusedError struct {
	msg string
	err error
}

func (e *connectRefusedError) Error() string { return e.msg }
func (e *connectRefusedError) Unwrap() error { return e.err }

// refusedConnect is the error of a connection to url that the server
// answered and refused (its credentials, a TLS certificate or handshake,
// TLS wanted on one side only), nil for any other failure.
func refusedConnect(url string, err error) error {
	var (
		uae x509.UnknownAuthorityError
		hne x509.HostnameError
		cie x509.CertificateInvalidError
		why string
	)
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		why = fmt.Sprintf("NATS at %s refused the credentials (give the creds file of one of its users with --creds or $%s)", url, auth.EnvCreds)
	case errors.Is(err, nats.ErrNkeysNotSupported):
		why = fmt.Sprintf("NATS at %s takes no NKey logins (give the creds file of one of its users with --creds or $%s)", url, auth.EnvCreds)
	case errors.As(err, &uae), errors.As(err, &hne), errors.As(err, &cie):
		why = fmt.Sprintf("NATS at %s answered with a TLS certificate this client does not trust (give the CA that signed it with --tls-ca or $%s)", url, auth.EnvTLSCA)
	case errors.Is(err, nats.ErrTLS):
		why = fmt.Sprintf("the TLS handshake with NATS at %s failed (check the CA of --tls-ca or $%s)", url, auth.EnvTLSCA)
	case errors.Is(err, nats.ErrSecureConnWanted):
		why = fmt.Sprintf("NATS at %s offers no TLS, and --tls-ca (or $%s) asks for it: nothing was sent (drop --tls-ca for a bus without TLS, or run the bus with TLS: up --tls-cert FILE --tls-key FILE)", url, auth.EnvTLSCA)
	case errors.Is(err, nats.ErrSecureConnRequired):
		why = fmt.Sprintf("NATS at %s requires TLS (give the CA that signed its certificate with --tls-ca or $%s)", url, auth.EnvTLSCA)
	default:
		return nil
	}
	return &connectRefusedError{msg: why + ": " + natsCause(err).Error(), err: err}
}

// natsCause is the end of err's chain of single wraps: the nats.go error
// (or its TLS error, which wraps two), without the hints and the
// "connect nats URL" that bus.Connect put before it and the refusal's
// message says again.
func natsCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// registerClient adds registerServer's flags and --timeout, for client
// commands that end on their own.
func (f *natsFlags) registerClient(cmd *cobra.Command) {
	f.registerServer(cmd)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Second, "time limit for the whole command")
}

func (f *natsFlags) resolvedURL() string {
	if u := bus.URL(f.url); u != "" {
		return u
	}
	return defaultLocalURL
}

// connect dials NATS for a short-lived client command (no endless reconnect),
// giving the connect at most timeout. It goes through bus.Connect so a
// refused subject fails as forbidden at once rather than as a timeout.
func (f *natsFlags) connect(timeout time.Duration) (*nats.Conn, error) {
	opts, err := f.authOptions()
	if err != nil {
		return nil, err
	}
	url := f.resolvedURL()
	// Quiet: a one-shot command has no use for reconnect notices.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nc, err := bus.Connect(url, bus.ConnectConfig{Name: "switchyard-cli", Timeout: timeout, Logger: quiet, Options: append(opts, nats.NoReconnect())})
	if err != nil {
		return nil, unreachable(url, err)
	}
	return nc, nil
}

// checkTimeout refuses a non-positive --timeout as a usage error, before
// anything connects.
func (f *natsFlags) checkTimeout() error {
	if f.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	return nil
}

// client connects and returns a persist client plus a context bounded by
// --timeout. The one deadline starts before connecting: the connect gets
// what remains of it and the requests what remains after, so a slow
// connect does not leave the requests a full --timeout of their own (the
// command would take up to twice its time limit).
func (f *natsFlags) client(cmd *cobra.Command) (*persist.Client, context.Context, func(), error) {
	if err := f.checkTimeout(); err != nil {
		return nil, nil, nil, err
	}
	if err := f.checkService(); err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	deadline, _ := ctx.Deadline()
	// The remainder is never zero, which bus.Connect would read as its
	// default: a command started past its deadline still gets a
	// moment to fail to connect.
	nc, err := f.connect(max(time.Until(deadline), time.Millisecond))
	if err != nil {
		cancel()
		if ctx.Err() == context.DeadlineExceeded && cmd.Context().Err() == nil {
			// The time limit, not the server, ended the connect: "is
			// switchyard up running?" would send the user looking for the
			// wrong thing.
			return nil, nil, nil, f.ranOut("connecting to NATS", err)
		}
		return nil, nil, nil, err
	}
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Service: f.service})
	if err != nil {
		cancel()
		nc.Close()
		return nil, nil, nil, err
	}
	return c, ctx, func() { cancel(); nc.Close() }, nil
}

// with connects, runs fn with a persist client and a context bounded by
// --timeout, and closes the connection.
func (f *natsFlags) with(cmd *cobra.Command, fn func(ctx context.Context, c *persist.Client) error) error {
	c, ctx, done, err := f.client(cmd)
	if err != nil {
		return err
	}
	defer done()
	err = fn(ctx, c)
	if err != nil && ctx.Err() == context.DeadlineExceeded && cmd.Context().Err() == nil && !errors.Is(err, persist.ErrNotFound) {
		return f.ranOut("waiting for the answer", err)
	}
	return err
}

// ranOut is the error of a command that --timeout ended while it was
// doing what: it names the flag and its value first, since the wrapped
// error alone ("context deadline exceeded", "no servers available")
// reads like a server that is down.
func (f *natsFlags) ranOut(what string, err error) error {
	return fmt.Errorf("--timeout %s ran out %s (give a longer --timeout for a slow or distant server): %w", f.timeout, what, err)
}

// parseIDs turns "0,1,2,3" into ids, rejecting empty and duplicate ids.
func parseIDs(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usagef("--ids is empty: give the server ids, for example --ids 0,1,2,3")
	}
	var ids []string
	for _, id := range strings.Split(s, ",") {
		ids = append(ids, strings.TrimSpace(id))
	}
	if err := bus.ValidIDs(ids); err != nil {
		return nil, usagef("--ids %q: %v", s, err)
	}
	return ids, nil
}

// parsePlacement maps the --placement flag to a function, as a usage error.
func parsePlacement(name string) (placement.Func, error) {
	fn, err := placement.ByName(name)
	if err != nil {
		return nil, usagef("--placement: %v", err)
	}
	return fn, nil
}

// checkScope rejects a scope that is not a subject token, as a usage error.
func checkScope(scope string) error {
	if !bus.ValidScope(scope) {
		return usagef("invalid scope %q: want lower-case letters, digits, '-' or '_' (first a letter or digit), at most 128", scope)
	}
	return nil
}

// checkKey rejects a KEY argument that is empty or breaks the naming rule
// (persist.ValidKey), as a usage error: the request would be refused anyway.
func checkKey(key string) error {
	if key == "" {
		return usagef("KEY is empty")
	}
	if err := persist.ValidKey(key); err != nil {
		return usagef("KEY %q: %v", key, err)
	}
	return nil
}

// checkStream rejects a STREAM argument that is empty or breaks the naming
// rule (persist.ValidStreamName), as a usage error: the request would be
// refused anyway.
func checkStream(stream string) error {
	if stream == "" {
		return usagef("STREAM is empty")
	}
	if err := persist.ValidStreamName(stream); err != nil {
		return usagef("STREAM %q: %v", stream, err)
	}
	return nil
}

// checkScopeStream checks the SCOPE and STREAM arguments of a stream command.
func checkScopeStream(scope, stream string) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	return checkStream(stream)
}

// checkScopeStreamKey checks the SCOPE, STREAM and KEY arguments of a kv command.
func checkScopeStreamKey(scope, stream, key string) error {
	if err := checkScopeStream(scope, stream); err != nil {
		return err
	}
	return checkKey(key)
}

// valueArg returns the bytes of a VALUE argument; "-" reads standard input.
func valueArg(cmd *cobra.Command, v string) ([]byte, error) {
	if v != "-" {
		return []byte(v), nil
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return nil, fmt.Errorf("read value from stdin: %w", err)
	}
	return b, nil
}

// stdout is where command output goes (tests swap it through cobra).
func stdout(cmd *cobra.Command) io.Writer { return cmd.OutOrStdout() }

// fleetNATS is the bus of a role command: the external server of --nats
// (else $SWITCHYARD_NATS_URL, else where up listens) with the role's
// --creds and --tls-ca.
func (f *natsFlags) fleetNATS() (fleet.NATSConfig, error) {
	if err := f.checkService(); err != nil {
		return fleet.NATSConfig{}, err
	}
	opts, err := f.authOptions()
	if err != nil {
		return fleet.NATSConfig{}, err
	}
	return fleet.NATSConfig{URL: f.resolvedURL(), Options: opts}, nil
}

// checkService refuses a --service that is not one subject token as a
// usage error, before anything dials (it was the persist client's
// run-time error, exit 1, after the connect).
func (f *natsFlags) checkService() error {
	if err := bus.ValidService(f.service); err != nil {
		return usagef("--service %q: %v", f.service, err)
	}
	return nil
}

// shownBusURL is f's NATS URL as a command prints it: with the secret of
// its user info (a password, a token) redacted.
func shownBusURL(f *fleet.Fleet) string { return bus.RedactURL(f.BusURL()) }
