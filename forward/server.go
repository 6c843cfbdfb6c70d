package forward

import (
	"net/http"
	"time"
)

// Defaults of [ServerConfig].
const (
	// ReadHeaderTimeoutDefault bounds reading a request's headers.
	ReadHeaderTimeoutDefault = 5 * time.Second
	// IdleTimeoutDefault is how long a keep-alive connection may wait for
	// its next request: longer than a Sender keeps an idle connection
	// (90s), so the sender closes first and never writes a batch onto a
	// connection the server is closing (a lost batch).
	IdleTimeoutDefault = 120 * time.Second
	// MaxHeaderBytesDefault caps a request's headers; ours are four short
	// ones.
	MaxHeaderBytesDefault = 16 << 10
)

// ServerConfig configures the [http.Server] [NewServer] builds.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading the headers. Zero means 5s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds waiting for the next request on a keep-alive
	// connection. Zero means 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the headers. Zero means 16 KiB.
	MaxHeaderBytes int
}

// NewServer returns an http.Server for h (a [Receiver], or a handler that
// passes its ResponseWriter on to one) with every timeout a receiver
// facing the network needs. It sets no ReadTimeout: the receiver bounds
// each body itself (ReceiverConfig.BodyReadTimeout), and a connection read
// deadline that passes after the body is read makes net/http cancel the
// request's context, abandoning a batch that waits its turn. It sets no
// WriteTimeout either: that counts from the headers and would cut off a
// batch that waited OrderWait and then the sink; replies are small.
// Negative values are taken as zero.
func NewServer(h http.Handler, cfg ServerConfig) *http.Server {
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = ReadHeaderTimeoutDefault
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = IdleTimeoutDefault
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = MaxHeaderBytesDefault
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
	}
}
