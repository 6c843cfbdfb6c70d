// Package bus is switchyard's connection to NATS: it connects (to an external
// server, or through bus/embedded to one in this process), builds subjects, and
// wraps request/reply with typed errors for the two failures every caller
// branches on (nobody listening, nobody answering in time).
package bus

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// EnvURL is the environment variable that names an external NATS server.
const EnvURL = "SWITCHYARD_NATS_URL"

// DefaultService is the first subject token of the persist service.
const DefaultService = "persist"

// ErrNoResponders means no subscriber was listening on the request subject.
var ErrNoResponders = errors.New("no responders")

// ErrTimeout means the request was delivered but no reply came in time.
var ErrTimeout = errors.New("request timed out")

// URL picks the NATS URL to use: the flag value when set, else $SWITCHYARD_NATS_URL,
// else "" (meaning: run or find an embedded server).
func URL(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(EnvURL)
}

// ConnectConfig configures Connect.
type ConnectConfig struct {
	// Name identifies the connection in server monitoring. Zero means "switchyard".
	Name string
	// Timeout bounds the initial connection. Zero means 5s.
	Timeout time.Duration
	// Logger receives disconnect/reconnect notices. Nil means slog.Default().
	Logger *slog.Logger
	// Options are extra nats.go options applied after switchyard's own (an
	// in-process dialer, credentials, TLS). Nil means none.
	Options []nats.Option
	// OnClosed, if set, runs when the connection is closed for good (after
	// a ClosedHandler among Options): nats.go gave up on it, or it was
	// closed.
	OnClosed func(*nats.Conn)
}

// Connect dials url and keeps reconnecting forever after a lost connection
// (with jittered waits), so long-lived services survive NATS restarts.
// Requests made while disconnected fail with ErrTimeout or ErrNoResponders.
func Connect(url string, cfg ConnectConfig) (*nats.Conn, error) {
	return connect(url, cfg)
}

func connect(url string, cfg ConnectConfig) (*nats.Conn, error) {
	if cfg.Name == "" {
		cfg.Name = "switchyard"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	// No publish happens before Connect returns, so no refusal can come
	// before track is registered.
	track := &refusals{}
	// Handlers given in cfg.Options still run, after switchyard's own:
	// read them here, since the options applied last would replace ours.
	var given nats.Options
	for _, o := range cfg.Options {
		_ = o(&given)
	}
	userErr, userClosed, userReconnected := given.AsyncErrorCB, given.ClosedCB, given.ReconnectedCB
	opts := append([]nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(cfg.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
	}, cfg.Options...)
	opts = append(opts,
		nats.ErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
			if userErr != nil {
				userErr(c, sub, err)
			}
			if pe := parsePermissionError(err); pe != nil {
				// Requests on that subject fail at once (see Guard);
				// the refusal is theirs to report. A refused reply
				// subscription fails every request (see Request).
				track.refused(pe, pe.Op == "subscribe" && pe.Queue == "" && pe.Subject == track.replySubject(c))
				log.Debug("nats refused", "op", pe.Op, "subject", pe.Subject)
				return
			}
			// Slow-consumer and similar notices: before this handler existed
			// nats.go dropped them silently; keep them out of command output.
			log.Debug("nats async error", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			track.reconnected()
			if userReconnected != nil {
				userReconnected(c)
				return
			}
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(c *nats.Conn) {
			trackers.Delete(c)
			if userClosed != nil {
				userClosed(c)
			}
			if cfg.OnClosed != nil {
				cfg.OnClosed(c)
			}
		}),
	)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", RedactURL(url), describeConnectError(err))
	}
	trackers.Store(nc, track)
	return nc, nil
}

// Request sends msg and waits for one reply until ctx ends. A missing
// deadline on ctx gets the default of 5s so a request never waits forever.
// Failures map to ErrNoResponders, ErrTimeout and, when the NATS server
// refuses the publish, or the subscription to the connection's replies,
// on a connection made by Connect, a *PermissionError (ErrForbidden) at
// once instead of a timeout; each wrapped with the subject.
func Request(ctx context.Context, nc *nats.Conn, msg *nats.Msg) (*nats.Msg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	// The replies' subscription is guarded too: refused (an inbox prefix
	// the user may not read), no reply would ever come.
	gctx, cancel := guard(ctx, nc, refusalKey{"publish", msg.Subject, ""}, true)
	defer cancel()
	reply, err := nc.RequestMsgWithContext(gctx, msg)
	if err != nil {
		var pe *PermissionError
		if errors.As(context.Cause(gctx), &pe) {
			if pe.Op == "subscribe" {
				return nil, fmt.Errorf("request %q: replies: %w (the inbox of the creds file must be its user's, %s_<user>)", msg.Subject, pe, InboxRoot)
			}
			return nil, fmt.Errorf("request %q: %w", msg.Subject, pe)
		}
		return nil, fmt.Errorf("request %q: %w", msg.Subject, MapError(err))
	}
	return reply, nil
}

// MapError turns the NATS client's request failures into ErrNoResponders and
// ErrTimeout; other errors pass through unchanged.
func MapError(err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return ErrNoResponders
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	}
	return err
}

// describeConnectError adds a hint to the failures a newcomer meets when
// the bus needs credentials or TLS.
func describeConnectError(err error) error {
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	switch {
	case errors.As(err, &uae), errors.As(err, &hne), errors.As(err, &cie):
		return fmt.Errorf("TLS certificate not trusted (give the CA that signed the server's certificate with --tls-ca or $SWITCHYARD_TLS_CA): %w", err)
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return fmt.Errorf("NATS refused the credentials (give a creds file with --creds or $SWITCHYARD_CREDS): %w", err)
	case errors.Is(err, nats.ErrNkeysNotSupported):
		// nats.go refuses before sending anything: the server's users log
		// in with passwords (or it has none), so an NKey is the wrong
		// credentials for it, not a server that cannot be reached.
		return fmt.Errorf("NATS takes no NKey logins (give the creds file of one of its users with --creds or $SWITCHYARD_CREDS): %w", err)
	case errors.Is(err, nats.ErrSecureConnRequired):
		return fmt.Errorf("the NATS server requires TLS: %w", err)
	}
	return err
}

// ScopeSubject builds "{service}.{scope}.{rest...}".
func ScopeSubject(service, scope string, rest ...string) string {
	var b strings.Builder
	b.WriteString(service)
	b.WriteByte('.')
	b.WriteString(scope)
	for _, r := range rest {
		b.WriteByte('.')
		b.WriteString(r)
	}
	return b.String()
}

// IDSubject is the balancer subject for scope: "{service}.{scope}.id".
func IDSubject(service, scope string) string { return ScopeSubject(service, scope, "id") }

// APISubject is the subject of server id's API for scope: "{service}.{scope}.api.{id}".
func APISubject(service, scope, id string) string {
	return ScopeSubject(service, scope, "api", id)
}

// SubjectToken returns the i-th (0-based) dot-separated token of subject, or "".
func SubjectToken(subject string, i int) string {
	for n := 0; ; n++ {
		dot := strings.IndexByte(subject, '.')
		if n == i {
			if dot < 0 {
				return subject
			}
			return subject[:dot]
		}
		if dot < 0 {
			return ""
		}
		subject = subject[dot+1:]
	}
}

// ValidScope reports whether s is a scope token: [a-z0-9][a-z0-9_-]{0,127}.
func ValidScope(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// RedactURL is the NATS URL (or comma-separated list of them) u with the
// secret of its user info replaced by "xxxxx", for errors and logs: the
// password of user:password, or the whole of a token (nats://TOKEN@host).
// A part that does not parse as a URL with user info is left as it is.
func RedactURL(u string) string {
	if !strings.Contains(u, "@") {
		return u
	}
	parts := strings.Split(u, ",")
	for i, p := range parts {
		pu, err := neturl.Parse(strings.TrimSpace(p))
		if err != nil || pu.User == nil {
			continue
		}
		if _, ok := pu.User.Password(); ok {
			pu.User = neturl.UserPassword(pu.User.Username(), "xxxxx")
		} else {
			pu.User = neturl.User("xxxxx")
		}
		parts[i] = pu.String()
	}
	return strings.Join(parts, ",")
}
