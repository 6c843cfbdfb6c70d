package nntp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/flate"
)

// Defaults of Config.
const (
	// DialTimeoutDefault bounds connecting, the greeting and the setup
	// commands of Dial when ctx has no earlier deadline.
	DialTimeoutDefault = 15 * time.Second
	// CommandTimeoutDefault bounds one command, its whole response included.
	CommandTimeoutDefault = 60 * time.Second
	// MaxLineDefault is the longest response line accepted, in bytes.
	MaxLineDefault = 64 << 10
	// PipelineDepthDefault is how many OVER commands OverPipelined keeps in
	// flight on one connection.
	PipelineDepthDefault = 4
	// readBufSize is the size of the read buffers; lines longer than it are
	// assembled in a scratch buffer up to MaxLine.
	readBufSize = 64 << 10
	// maxHeld bounds the multi-line answers kept whole in memory
	// (CAPABILITIES, LIST OVERVIEW.FMT, HEAD), line ends included. Real
	// ones are a few KiB; without a bound a server that never ends one
	// grows memory at the speed of the link until the deadline.
	maxHeld = 1 << 20
)

// Compression selects how a Conn compresses traffic after login.
type Compression int

const (
	// CompressOff sends and receives plain text (the zero value).
	CompressOff Compression = iota
	// CompressAuto uses RFC 8054 COMPRESS DEFLATE when CAPABILITIES lists
	// it, else tries XFEATURE COMPRESS GZIP, and stays plain if the server
	// refuses both.
	CompressAuto
	// CompressDeflate requires RFC 8054 COMPRESS DEFLATE (both directions).
	// Responses ended with a sync flush or with Z_PARTIAL_FLUSH (INN) are
	// both read as soon as they arrive: see inflate.go.
	CompressDeflate
	// CompressGzip requires XFEATURE COMPRESS GZIP (overview responses).
	CompressGzip
)

func (c Compression) String() string {
	switch c {
	case CompressOff:
		return "off"
	case CompressAuto:
		return "auto"
	case CompressDeflate:
		return "deflate"
	case CompressGzip:
		return "gzip"
	}
	return "compression(" + strconv.Itoa(int(c)) + ")"
}

// Config says how to reach and talk to a server.
type Config struct {
	// Addr is host:port. Required.
	Addr string
	// TLS, when set, secures the connection: from the first byte when
	// ImplicitTLS (port 563), otherwise by STARTTLS after the greeting.
	TLS         *tls.Config
	ImplicitTLS bool
	// User and Pass, when User is set, log in with AUTHINFO USER/PASS.
	User, Pass string
	// SkipModeReader leaves out MODE READER, which is sent by default:
	// servers such as INN hand readers to their reader process only after it.
	SkipModeReader bool
	// Compress: zero means CompressOff.
	Compress Compression
	// DialTimeout: zero means DialTimeoutDefault.
	DialTimeout time.Duration
	// CommandTimeout: zero means CommandTimeoutDefault. A context deadline
	// that comes earlier wins.
	CommandTimeout time.Duration
	// MaxLine: zero means MaxLineDefault.
	MaxLine int
	// PipelineDepth: zero means PipelineDepthDefault.
	PipelineDepth int
	// DialContext, when set, replaces net.Dialer (tests, proxies).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// counters, set by a Pool for its connections, count commands and
	// bytes (PoolStats); nil for a lone connection.
	counters *ioCounters
}

func (c Config) withDefaults() Config {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DialTimeoutDefault
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = CommandTimeoutDefault
	}
	if c.MaxLine <= 0 {
		c.MaxLine = MaxLineDefault
	}
	if c.PipelineDepth <= 0 {
		c.PipelineDepth = PipelineDepthDefault
	}
	return c
}

func (c Config) validate() error {
	if c.Addr == "" {
		return errors.New("nntp: config: Addr is required")
	}
	if c.ImplicitTLS && c.TLS == nil {
		return errors.New("nntp: config: ImplicitTLS needs TLS")
	}
	if c.Compress < CompressOff || c.Compress > CompressGzip {
		return fmt.Errorf("nntp: config: unknown compression %d", c.Compress)
	}
	return nil
}

// Conn is one connection to a news server. It runs one command at a time
// and is not safe for concurrent use; share connections through a Pool.
// After an I/O or protocol error the Conn is broken: Err reports why and
// every later command fails with ErrClosed. A command answered 480
// (authentication required) mid-session logs in again, with the configured
// credentials, and is run once more; when that cannot help, the Conn is
// retired (broken) the same way.
type Conn struct {
	cfg Config
	nc  net.Conn
	raw *bufio.Reader // reads nc
	r   lineReader    // reads raw, or the inflater over it
	w   *bufio.Writer
	fw  *flate.Writer // set while COMPRESS DEFLATE is active

	zr   io.ReadCloser // zlib reader reused across XFEATURE GZIP responses
	zbr  *bufio.Reader
	gzip bool // XFEATURE COMPRESS GZIP active

	posting  bool         // greeting was 200
	caps     []string     // CAPABILITIES lines, nil until asked
	overVerb string       // "OVER", or "XOVER" when OVER is unknown or gzip is on
	denied   *StatusError // the last 480 status read (relogin)
	err      error        // sticky: why the connection is broken

	counters *ioCounters // the pool's, nil for a connection of no pool
}

// Dial connects, reads the greeting and runs the setup the config asks for
// (STARTTLS, MODE READER, AUTHINFO, compression). A refusing greeting
// returns a *StatusError matching ErrUnavailable or ErrTooManyConnections.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("nntp: dial %s: %w", cfg.Addr, err)
	}
	if cfg.ImplicitTLS {
		tc := tls.Client(nc, tlsConfigFor(cfg))
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("nntp: tls handshake %s: %w", cfg.Addr, err)
		}
		nc = tc
	}
	c := newConn(cfg, nc)
	if err := c.setup(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func tlsConfigFor(cfg Config) *tls.Config {
	tc := cfg.TLS.Clone()
	if tc.ServerName == "" {
		if host, _, err := net.SplitHostPort(cfg.Addr); err == nil {
			tc.ServerName = host
		}
	}
	return tc
}

func newConn(cfg Config, nc net.Conn) *Conn {
	c := &Conn{cfg: cfg, overVerb: "OVER", counters: cfg.counters}
	c.attach(nc)
	return c
}

// attach (re)builds the buffered layers over nc, after dialing or STARTTLS.
func (c *Conn) attach(nc net.Conn) {
	c.nc = nc
	var r io.Reader = nc
	if c.counters != nil {
		// Counted below the inflater: the bytes the provider sent (after
		// TLS, before decompression).
		r = countingConn{nc, &c.counters.bytesRead}
	}
	c.raw = bufio.NewReaderSize(r, readBufSize)
	c.r = lineReader{br: c.raw, max: c.cfg.MaxLine}
	c.w = bufio.NewWriterSize(nc, 4<<10)
}

func (c *Conn) setup(ctx context.Context) error {
	if err := c.greeting(ctx); err != nil {
		return err
	}
	if c.cfg.TLS != nil && !c.cfg.ImplicitTLS {
		if err := c.startTLS(ctx); err != nil {
			return err
		}
	}
	if err := c.login(ctx); err != nil {
		return err
	}
	switch c.cfg.Compress {
	case CompressDeflate:
		return c.CompressDeflate(ctx)
	case CompressGzip:
		return c.CompressGzip(ctx)
	case CompressAuto:
		return c.compressAuto(ctx)
	}
	return nil
}

// login sends MODE READER, then AUTHINFO. In that order: RFC 4643
// section 2.2 forbids MODE READER after a login, and a mode-switching
// server (INN's innd, towards a host it feeds) starts a new session on
// MODE READER (innd hands the connection to nnrpd), which forgets a login
// made before it; innd may also refuse AUTHINFO outright in transit mode.
// A server that answers MODE READER with 480 wants the login first: it gets
// the login, then MODE READER again.
func (c *Conn) login(ctx context.Context) error {
	modeAfterLogin := false
	if !c.cfg.SkipModeReader {
		err := c.ModeReader(ctx)
		var se *StatusError
		switch {
		case err == nil:
		case c.cfg.User != "" && errors.As(err, &se) && se.Code == 480 && c.Err() == nil:
			modeAfterLogin = true
		default:
			return err
		}
	}
	if c.cfg.User == "" {
		return nil
	}
	if err := c.Auth(ctx, c.cfg.User, c.cfg.Pass); err != nil {
		return err
	}
	if modeAfterLogin {
		return c.ModeReader(ctx)
	}
	return nil
}

// compressAuto picks COMPRESS DEFLATE when advertised, else XFEATURE
// COMPRESS GZIP; a refusal of either leaves the connection plain.
func (c *Conn) compressAuto(ctx context.Context) error {
	caps, err := c.Capabilities(ctx)
	if err != nil && !c.refused(err) {
		return err
	}
	if hasCap(caps, "COMPRESS", "DEFLATE") {
		// RFC 8054: 403 (cannot activate) and 502 (not permitted now, e.g.
		// TLS compression is on) leave the connection usable and plain.
		if err := c.CompressDeflate(ctx); err == nil || !c.refused(err) {
			return err
		}
	}
	if err := c.CompressGzip(ctx); err != nil && !errors.Is(err, ErrNotSupported) {
		return err
	}
	return nil
}

// refused reports whether err is a well-formed refusal after which the
// connection is still usable: a status the server answered, and the
// connection not broken by it (readStatus breaks it on any 400, a "too
// many connections" one included, which matches ErrTooManyConnections and
// not ErrUnavailable).
func (c *Conn) refused(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && c.Err() == nil
}

func (c *Conn) greeting(ctx context.Context) error {
	end, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	code, msg, err := c.readStatus(ctx, "greeting")
	if err != nil {
		return err
	}
	switch code {
	case 200:
		c.posting = true
		return nil
	case 201:
		return nil
	}
	c.fail(ErrUnavailable)
	return &StatusError{Cmd: "greeting", Code: code, Msg: msg}
}

// Err reports why the connection is broken, or nil while it is usable.
func (c *Conn) Err() error { return c.err }

// PostingAllowed reports whether the greeting said posting is allowed (200).
func (c *Conn) PostingAllowed() bool { return c.posting }

// Compression reports the compression in effect.
func (c *Conn) Compression() Compression {
	switch {
	case c.fw != nil:
		return CompressDeflate
	case c.gzip:
		return CompressGzip
	}
	return CompressOff
}

// Close sends QUIT when the connection is healthy and closes it.
func (c *Conn) Close() error {
	if c.nc == nil {
		return nil
	}
	if c.err == nil {
		c.nc.SetDeadline(time.Now().Add(time.Second))
		if c.writeLine("QUIT") == nil {
			c.flush()
		}
	}
	if c.err == nil {
		c.err = ErrClosed
	}
	return c.nc.Close()
}

// Quit ends the session politely: it sends QUIT, reads the server's 205,
// waits for the server to close its end, and closes the connection. Unlike
// Close, once Quit returns nil the server has let the connection go, which
// is what a provider counting an account's connections counts (the pool
// closes with it). The wait is bounded by ctx and CommandTimeout; a broken
// connection is only closed.
func (c *Conn) Quit(ctx context.Context) error {
	if c.nc == nil || c.err != nil {
		return c.Close()
	}
	end, err := c.begin(ctx)
	if err != nil {
		c.Close()
		return err
	}
	err = c.send(ctx, "QUIT", "QUIT")
	if err == nil {
		_, _, err = c.status(ctx, "QUIT", 205)
	}
	if err == nil {
		// RFC 3977: the server closes the connection after its 205. Any
		// end of the stream will do, only running out of time is an error.
		_, rerr := c.r.readLine()
		var ne net.Error
		switch {
		case rerr == nil:
			err = protoErr("QUIT", nil, "data after 205", nil)
		case ctx.Err() != nil:
			err = fmt.Errorf("nntp: QUIT: waiting for the server to close: %w", ctx.Err())
		case errors.As(rerr, &ne) && ne.Timeout():
			err = fmt.Errorf("nntp: QUIT: waiting for the server to close: %w", rerr)
		}
	}
	end()
	if c.err == nil {
		c.err = ErrClosed
	}
	c.nc.Close()
	return err
}

// fail marks the connection broken and closes the socket.
// errAbandoned breaks a connection whose multi-line answer was left
// half-read: its callback panicked.
var errAbandoned = errors.New("nntp: a response was left half-read (its callback panicked)")

func (c *Conn) fail(err error) {
	if c.err == nil {
		c.err = err
		c.nc.Close()
	}
}

// begin starts a command: it refuses on a broken connection and arms the
// deadline (the earlier of ctx's and CommandTimeout) and ctx cancellation.
// end disarms both.
func (c *Conn) begin(ctx context.Context) (end func(), err error) {
	if c.err != nil {
		return nil, fmt.Errorf("nntp: connection unusable: %w (%w)", ErrClosed, c.err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.counters != nil {
		c.counters.commands.Add(1)
	}
	nc := c.nc
	nc.SetDeadline(c.deadline(ctx))
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		// Unblocks a read or write in progress; the command then fails and
		// the connection is marked broken (it is mid-response).
		nc.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	return func() {
		// ctx ended while the command ran, yet it may have finished from
		// buffered data: wait for the expired deadline to be set now, so it
		// cannot land after the next command armed its own.
		if !stop() {
			<-fired
		}
	}, nil
}

// deadline is a command's: the earlier of ctx's and CommandTimeout from now.
func (c *Conn) deadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(c.cfg.CommandTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return deadline
}

// rearm gives the next command of a pipelined train its own deadline,
// inside begin's arming. A ctx that ended meanwhile has already set (or is
// setting) the expired deadline: it is reported rather than overwritten.
func (c *Conn) rearm(ctx context.Context) error {
	c.nc.SetDeadline(c.deadline(ctx))
	return ctx.Err()
}

// ioErr turns a read/write failure into the error returned to the caller and
// breaks the connection. Context cancellation is reported as such.
func (c *Conn) ioErr(ctx context.Context, cmd string, err error) error {
	c.fail(err)
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("nntp: %s: %w", cmd, cerr)
	}
	if errors.Is(err, ErrLineTooLong) {
		return protoErr(cmd, nil, "line too long", err)
	}
	if errors.Is(err, errCorruptDeflate) {
		return protoErr(cmd, nil, "bad compressed data", err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return protoErr(cmd, nil, "connection closed mid-response", err)
	}
	return fmt.Errorf("nntp: %s: %w", cmd, err)
}

func (c *Conn) writeLine(line string) error {
	if _, err := c.w.WriteString(line); err != nil {
		return err
	}
	_, err := c.w.WriteString("\r\n")
	return err
}

func (c *Conn) flush() error {
	if err := c.w.Flush(); err != nil {
		return err
	}
	if c.fw != nil {
		return c.fw.Flush()
	}
	return nil
}

// send writes one command line and flushes it.
func (c *Conn) send(ctx context.Context, cmd, line string) error {
	if strings.ContainsAny(line, "\r\n") {
		return fmt.Errorf("nntp: %s: command contains a line break", cmd)
	}
	if err := c.writeLine(line); err != nil {
		return c.ioErr(ctx, cmd, err)
	}
	if err := c.flush(); err != nil {
		return c.ioErr(ctx, cmd, err)
	}
	return nil
}

// readStatus reads and parses one status line; a malformed one breaks the
// connection. A 400 means the server is closing: it breaks it too.
func (c *Conn) readStatus(ctx context.Context, cmd string) (int, string, error) {
	line, err := c.r.readLine()
	if err != nil {
		return 0, "", c.ioErr(ctx, cmd, err)
	}
	code, msg, perr := ParseStatus(line)
	if perr != nil {
		err := protoErr(cmd, line, "malformed status line", perr)
		c.fail(err)
		return 0, "", err
	}
	if code == 400 {
		c.fail(ErrUnavailable)
	}
	return code, msg, nil
}

// expect runs a single-line command and checks the answer is one of want.
func (c *Conn) expect(ctx context.Context, cmd, line string, want ...int) (int, string, error) {
	end, err := c.begin(ctx)
	if err != nil {
		return 0, "", err
	}
	defer end()
	if err := c.send(ctx, cmd, line); err != nil {
		return 0, "", err
	}
	return c.status(ctx, cmd, want...)
}

// relogin runs a command, and handles a 480 ("authentication required")
// answered to it: the server's login expired, or what the command asks
// for needs one. With credentials configured it logs in again and runs the
// command once more; without, when that login fails, or when the command
// is refused again, the connection is retired (marked broken: a pool closes
// it rather than hand it to the next caller, who would get the same 480)
// and the error, matching ErrAuth, says so. run must not have passed any
// data to the caller when it returns a 480, and must be safe to run again.
func (c *Conn) relogin(ctx context.Context, run func() error) error {
	err := run()
	if !c.authRequired(err) {
		return err
	}
	if c.cfg.User == "" {
		c.fail(err)
		return fmt.Errorf("%w (no login configured; connection retired)", err)
	}
	if aerr := c.Auth(ctx, c.cfg.User, c.cfg.Pass); aerr != nil {
		c.fail(err)
		return fmt.Errorf("%w; logging in again failed (connection retired): %w", err, aerr)
	}
	err = run()
	if c.authRequired(err) {
		c.fail(err)
		return fmt.Errorf("%w (again after logging in again; connection retired)", err)
	}
	return err
}

// authRequired: err is the server's latest 480 to a command, on a
// connection still usable; not a 480 a caller's callback returned (from
// another connection), after which running the command again would hand
// the caller its data twice.
func (c *Conn) authRequired(err error) bool {
	se, ok := err.(*StatusError)
	return ok && se == c.denied && c.Err() == nil
}

// status reads a status line and checks its code against want.
func (c *Conn) status(ctx context.Context, cmd string, want ...int) (int, string, error) {
	code, msg, err := c.readStatus(ctx, cmd)
	if err != nil {
		return 0, "", err
	}
	for _, w := range want {
		if code == w {
			return code, msg, nil
		}
	}
	se := &StatusError{Cmd: cmd, Code: code, Msg: msg}
	if code == 480 {
		c.denied = se
	}
	return code, msg, se
}

// block streams the body of a multi-line response to fn. An I/O or
// protocol error breaks the connection; an error from fn does not (the rest
// of the block is read and dropped) and is returned as is.
func (c *Conn) block(ctx context.Context, cmd string, fn func([]byte) error) error {
	// A callback that panics leaves the answer half-read: a program that
	// recovers must not get the connection back usable, out of step with
	// its server, nor a pool keep it.
	read := false
	defer func() {
		if !read {
			c.fail(errAbandoned)
		}
	}()
	cbErr, err := readBlock(&c.r, fn)
	read = true
	if err != nil {
		if errors.Is(cbErr, errTooLarge) {
			// held closed the connection to stop the read: the read
			// error that followed is its doing, not the cause.
			return cbErr
		}
		return c.ioErr(ctx, cmd, err)
	}
	return cbErr
}

// errTooLarge: an answer kept whole went past maxHeld.
var errTooLarge = errors.New("nntp: response too large")

// held wraps the callback of a multi-line answer kept whole in memory:
// past maxHeld bytes it breaks the connection and fails, instead of
// holding more or reading on to a "." that may never come.
func (c *Conn) held(cmd string, fn func([]byte) error) func([]byte) error {
	n := 0
	return func(l []byte) error {
		if n += len(l) + 2; n > maxHeld {
			err := protoErr(cmd, nil, fmt.Sprintf("response longer than %d bytes", maxHeld), errTooLarge)
			c.fail(err)
			return err
		}
		return fn(l)
	}
}

func hasCap(caps []string, words ...string) bool {
	for _, line := range caps {
		f := strings.Fields(strings.ToUpper(line))
		if len(f) == 0 || f[0] != words[0] {
			continue
		}
		if len(words) == 1 {
			return true
		}
		for _, arg := range f[1:] {
			if arg == words[1] {
				return true
			}
		}
	}
	return false
}

// Capabilities returns the CAPABILITIES lines (e.g. "VERSION 2", "READER",
// "COMPRESS DEFLATE"). The answer is cached until the state changes
// (MODE READER, login, STARTTLS).
func (c *Conn) Capabilities(ctx context.Context) ([]string, error) {
	if c.caps != nil {
		return c.caps, nil
	}
	end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if err := c.send(ctx, "CAPABILITIES", "CAPABILITIES"); err != nil {
		return nil, err
	}
	if _, _, err := c.status(ctx, "CAPABILITIES", 101); err != nil {
		return nil, err
	}
	var caps []string
	if err := c.block(ctx, "CAPABILITIES", c.held("CAPABILITIES", func(l []byte) error {
		caps = append(caps, string(l))
		return nil
	})); err != nil {
		return nil, err
	}
	if caps == nil {
		caps = []string{}
	}
	c.caps = caps
	return caps, nil
}

// ModeReader sends MODE READER (200/201).
func (c *Conn) ModeReader(ctx context.Context) error {
	code, _, err := c.expect(ctx, "MODE READER", "MODE READER", 200, 201)
	if err != nil {
		return err
	}
	c.posting = code == 200
	c.caps = nil
	return nil
}

// Auth logs in with AUTHINFO USER/PASS (RFC 4643).
func (c *Conn) Auth(ctx context.Context, user, pass string) error {
	code, _, err := c.expect(ctx, "AUTHINFO USER", "AUTHINFO USER "+user, 281, 381)
	if err != nil {
		return err
	}
	if code == 381 {
		if _, _, err := c.expect(ctx, "AUTHINFO PASS", "AUTHINFO PASS "+pass, 281); err != nil {
			return err
		}
	}
	c.caps = nil
	return nil
}

func (c *Conn) startTLS(ctx context.Context) error {
	if _, _, err := c.expect(ctx, "STARTTLS", "STARTTLS", 382); err != nil {
		return err
	}
	if c.raw.Buffered() > 0 {
		err := protoErr("STARTTLS", nil, "data after 382 before the handshake", nil)
		c.fail(err)
		return err
	}
	tc := tls.Client(c.nc, tlsConfigFor(c.cfg))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.fail(err)
		return fmt.Errorf("nntp: starttls handshake: %w", err)
	}
	c.attach(tc)
	c.caps = nil
	return nil
}

// CompressDeflate turns on RFC 8054 compression for the rest of the
// connection (206). Only the server can refuse; then the connection stays
// plain and the error matches ErrNotSupported.
func (c *Conn) CompressDeflate(ctx context.Context) error {
	if c.fw != nil {
		return nil
	}
	if _, _, err := c.expect(ctx, "COMPRESS", "COMPRESS DEFLATE", 206); err != nil {
		return err
	}
	// Our inflater, not compress/flate: it hands out every byte as soon as
	// it is decoded and never waits for input past it, so a response ended
	// with Z_PARTIAL_FLUSH (whose last bits the server sends only with the
	// next response) is read at once.
	c.r.br = bufio.NewReaderSize(newInflater(c.raw), readBufSize)
	fw, err := flate.NewWriter(c.nc, flate.BestSpeed)
	if err != nil {
		return err
	}
	c.fw = fw
	c.w = bufio.NewWriterSize(fw, 4<<10)
	c.caps = nil // RFC 8054: COMPRESS is no longer advertised
	return nil
}

// CompressGzip asks for XFEATURE COMPRESS GZIP with terminator: overview
// responses then come zlib-compressed, followed by a plain "." line.
func (c *Conn) CompressGzip(ctx context.Context) error {
	if c.gzip {
		return nil
	}
	code, msg, err := c.expect(ctx, "XFEATURE", "XFEATURE COMPRESS GZIP TERMINATOR", 290)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Code < 500 && c.Err() == nil {
			// Servers answer unknown XFEATUREs with assorted codes. A 400
			// is no such answer: it broke the connection (readStatus).
			return fmt.Errorf("nntp: XFEATURE: %d %s: %w", code, msg, ErrNotSupported)
		}
		return err
	}
	c.gzip = true
	c.overVerb = "XOVER"
	return nil
}

// Date runs DATE (111) and returns the server's clock; the pool uses it
// as a cheap health check.
func (c *Conn) Date(ctx context.Context) (time.Time, error) {
	var msg string
	err := c.relogin(ctx, func() (err error) {
		_, msg, err = c.expect(ctx, "DATE", "DATE", 111)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	t, perr := parseDate(msg)
	if perr != nil {
		return time.Time{}, protoErr("DATE", []byte(msg), "bad timestamp", perr)
	}
	return t, nil
}
