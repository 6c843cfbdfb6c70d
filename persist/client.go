package persist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/placement"
)

// Client defaults.
const (
	// ClientTimeoutDefault bounds one request attempt.
	ClientTimeoutDefault = 5 * time.Second
	// ClientAttemptsDefault is how many times a request is tried when the owner
	// moved or did not answer.
	ClientAttemptsDefault = 4
	// OwnerCacheDefault bounds the scopes whose owner a client remembers.
	OwnerCacheDefault = 10000
)

// ClientRetryDefault spaces a request's attempts: 20ms, 40ms, 80ms... up to
// 1s, ±25%.
var ClientRetryDefault = bus.Retry{Min: 20 * time.Millisecond, Max: time.Second}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Conn is the NATS connection. Required.
	Conn *nats.Conn
	// Service is the first subject token. Zero means bus.DefaultService.
	Service string
	// Timeout bounds one attempt of one request when the caller's context has
	// no earlier deadline. The attempt's end travels with it (Sy-Deadline):
	// a server that reaches the request only later drops it unapplied.
	// Zero means ClientTimeoutDefault.
	Timeout time.Duration
	// Attempts is the number of tries for a request that met wrong-owner, no
	// responders or (when safe to repeat) a timeout. Zero means ClientAttemptsDefault.
	Attempts int
	// Retry spaces the attempts of one request. Zero fields mean
	// ClientRetryDefault's.
	Retry bus.Retry
	// OwnerCache bounds the scopes whose owner is remembered; past it an
	// arbitrary entry is forgotten (and asked again when next used). Zero
	// means OwnerCacheDefault.
	OwnerCache int
	// IDs are the fleet's persist server ids, when the caller knows them
	// (a process that runs the servers or the balancer): an owner the
	// balancer names that is not one of them fails the request. Nil means
	// any id the balancer names that is a subject token.
	IDs []string
}

// Client talks to persist servers: it asks the balancer which server owns a
// scope, and asks again on wrong-owner, timeout or no responders. The
// balancer's answer states its placement rule too (bus.HdrPlacement and
// bus.HdrIDs); once the client has one it places every scope itself, so a
// client writing to many scopes pays no balancer round trip per scope.
// Against a balancer that states no rule it caches each scope's answer. It
// is safe for concurrent use.
type Client struct {
	cfg ClientConfig

	// rule is the balancer's placement, learned from an answer; nil until
	// then and after a wrong owner, when the next scope's answer brings it
	// again (learnRule, forget).
	rule atomic.Pointer[placementRule]

	mu     sync.RWMutex      // protects owners
	owners map[string]string // scope -> server id, at most cfg.OwnerCache; unused while rule is set

	// ctx ends at Close: it ends the client's watchers (and so its LiveKVs)
	// and refuses new requests. watchers counts the running watchers.
	ctx      context.Context
	cancel   context.CancelFunc
	watchers sync.WaitGroup
	// closeMu orders Close's cancel before its Wait against Watch's check
	// of ctx and watchers.Add: a watcher is either counted before Close
	// waits or refused with ErrClosed.
	closeMu sync.Mutex

	watchGate watchGate // bounds the client's concurrent watcher re-reads (client_watch.go)
}

// NewClient returns a client over cfg.Conn.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Conn == nil {
		return nil, errors.New("persist client: no NATS connection")
	}
	if cfg.Service == "" {
		cfg.Service = bus.DefaultService
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = ClientTimeoutDefault
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = ClientAttemptsDefault
	}
	if cfg.Retry.Min == 0 {
		cfg.Retry.Min = ClientRetryDefault.Min
	}
	if cfg.Retry.Max == 0 {
		cfg.Retry.Max = ClientRetryDefault.Max
	}
	if err := bus.ValidService(cfg.Service); err != nil {
		return nil, fmt.Errorf("persist client: service: %w", err)
	}
	if cfg.OwnerCache <= 0 {
		cfg.OwnerCache = OwnerCacheDefault
	}
	cfg.IDs = slices.Clone(cfg.IDs)
	c := &Client{cfg: cfg, owners: map[string]string{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close ends the client's watchers (LiveKVs built on them stop following the
// stream) and waits for their callbacks to return; later requests fail with
// ErrClosed, Pipeline sets included, and so do requests waiting to retry
// (one already sent gets its answer first). It does not close the NATS
// connection, which the caller owns, nor LocalStreams, which have their own
// Close (theirs stop saving: their Close returns at once with what is left
// unsaved). It is idempotent and must not be called from a watcher's
// callback.
func (c *Client) Close() error {
	c.closeMu.Lock()
	c.cancel()
	c.closeMu.Unlock()
	c.watchers.Wait()
	return nil
}

// placementRule is a balancer's placement: the owner of any scope is
// fn(ids, scope).
type placementRule struct {
	fn  placement.Func
	ids []string
}

// Owner returns the id of the server that owns scope: from the balancer's
// rule when the client has learnt it, else from the scope's cached answer,
// else by asking the balancer.
func (c *Client) Owner(ctx context.Context, scope string) (string, error) {
	if id, ok := c.cachedOwner(scope); ok {
		return id, nil
	}
	if !bus.ValidScope(scope) {
		return "", Errorf(CodeBadRequest, "invalid scope %q: want [a-z0-9][a-z0-9_-]{0,127}", scope)
	}
	actx, cancel := c.attemptContext(ctx)
	defer cancel()
	reply, err := bus.Request(actx, c.cfg.Conn, nats.NewMsg(bus.IDSubject(c.cfg.Service, scope)))
	if err != nil {
		return "", fmt.Errorf("ask balancer: %w", err)
	}
	// The balancer refuses in the servers' error form (bad-request for
	// a scope it will not place); its answer is used as a subject token,
	// so anything but one of the fleet's ids is refused here.
	if err := replyError(reply); err != nil {
		return "", fmt.Errorf("ask balancer: %w", err)
	}
	id := string(reply.Data)
	if id == "" {
		return "", fmt.Errorf("ask balancer: empty answer for scope %q", scope)
	}
	if err := bus.ValidToken(id); err != nil {
		return "", fmt.Errorf("ask balancer: owner of scope %q: %w", scope, err)
	}
	if len(c.cfg.IDs) > 0 && !slices.Contains(c.cfg.IDs, id) {
		return "", fmt.Errorf("ask balancer: it names %q as the owner of scope %q, which is not one of the servers %q (do the balancer and this process have the same --ids?)", id, scope, c.cfg.IDs)
	}
	if c.learnRule(reply.Header, scope, id) {
		return id, nil
	}
	c.mu.Lock()
	if len(c.owners) >= c.cfg.OwnerCache {
		for k := range c.owners { // an arbitrary entry: O(1), no bookkeeping per hit
			delete(c.owners, k)
			break
		}
	}
	c.owners[scope] = id
	c.mu.Unlock()
	return id, nil
}

// learnRule keeps the placement rule a balancer's answer states, and
// reports whether it did. A rule is kept only when it gives the answer's
// owner for the scope asked (else the balancer places by something else
// than it says, and its answers per scope are what count), its ids are
// valid, and they are the client's IDs when it has them.
func (c *Client) learnRule(h nats.Header, scope, owner string) bool {
	name := h.Get(bus.HdrPlacement)
	if name == "" {
		return false
	}
	fn, err := placement.ByName(name)
	if err != nil {
		return false // a rule of a newer balancer: per scope, as before
	}
	ids := strings.Split(h.Get(bus.HdrIDs), ",")
	if bus.ValidIDs(ids) != nil || len(c.cfg.IDs) > 0 && !slices.Equal(ids, c.cfg.IDs) || fn(ids, scope) != owner {
		return false
	}
	c.rule.Store(&placementRule{fn: fn, ids: ids})
	c.mu.Lock()
	clear(c.owners) // the rule answers for them now
	c.mu.Unlock()
	return true
}

// cachedOwner is the owner of scope when the client knows it without
// asking: by the rule, or remembered.
func (c *Client) cachedOwner(scope string) (string, bool) {
	if r := c.rule.Load(); r != nil {
		if !bus.ValidScope(scope) {
			return "", false
		}
		return r.fn(r.ids, scope), true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.owners[scope]
	return id, ok
}

// forget drops what named id as the owner of scope: the scope's cached
// answer, or the rule (it placed scope at id, which said it is not the
// owner, or did not answer), so that the next request asks the balancer,
// whose answer brings the rule as it is now.
func (c *Client) forget(scope, id string) {
	if r := c.rule.Load(); r != nil && r.fn(r.ids, scope) == id {
		c.rule.CompareAndSwap(r, nil)
	}
	c.mu.Lock()
	if c.owners[scope] == id {
		delete(c.owners, scope)
	}
	c.mu.Unlock()
}

// attemptContext bounds one attempt: by Timeout, or ctx's deadline when
// that is earlier. Its deadline is always set.
func (c *Client) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < c.cfg.Timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

// attemptDeadline is when an attempt starting now under ctx gives up, as
// attemptContext would bound it.
func (c *Client) attemptDeadline(ctx context.Context) time.Time {
	d := time.Now().Add(c.cfg.Timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// setDeadline puts d on m as Sy-Deadline, so that a server whose queue held
// m past the moment this attempt gives up drops it instead of applying it:
// the retry of the next attempt may be applied elsewhere meanwhile. The
// value is truncated to the millisecond, which can only make it earlier
// than d, never let a server apply m after the client stopped waiting.
func setDeadline(m *nats.Msg, d time.Time) {
	m.Header.Set(HdrDeadline, strconv.FormatInt(d.UnixMilli(), 10))
}

// retryable says whether err means "ask the balancer again and retry":
// the owner moved, nobody listened, or (for requests safe to repeat) nobody
// answered in time.
func retryable(err error, idempotent bool) bool {
	switch {
	case errors.Is(err, ErrWrongOwner), errors.Is(err, bus.ErrNoResponders), errors.Is(err, ErrUnavailable):
		return true
	case errors.Is(err, bus.ErrTimeout):
		return idempotent
	}
	return false
}

// call sends one request to the owner of scope and returns its reply,
// retrying as retryable allows. Replies carrying Sy-Error become *Error.
func (c *Client) call(ctx context.Context, scope string, msg *nats.Msg, idempotent bool) (*nats.Msg, error) {
	if err := checkNames(msg.Header); err != nil {
		return nil, err
	}
	// Every attempt carries its own deadline; this one is a stand-in of the
	// same length (13 digits until the year 2286), so that checkPayload
	// counts the header.
	setDeadline(msg, c.attemptDeadline(ctx))
	if err := c.checkPayload(msg); err != nil {
		return nil, err
	}
	var reply *nats.Msg
	err := c.retry(ctx, scope, func(id string) (bool, error) {
		msg.Subject = bus.APISubject(c.cfg.Service, scope, id)
		actx, cancel := c.attemptContext(ctx)
		d, _ := actx.Deadline()
		setDeadline(msg, d)
		r, err := bus.Request(actx, c.cfg.Conn, msg)
		cancel()
		if errors.Is(err, nats.ErrMaxPayload) {
			// checkPayload's count missed (a reconnect to a server with a
			// smaller limit): the same answer, and final.
			err = Errorf(CodeTooLarge, "the request is over the NATS server's max payload of %d bytes", c.cfg.Conn.MaxPayload())
		}
		if err == nil {
			err = replyError(r)
		}
		reply = r
		return idempotent, err
	})
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// retry is the client's one request-retry loop. It runs attempt against the
// owner of scope (asking the balancer when it is not cached) until attempt
// succeeds, fails for good, or Attempts run out, waiting between tries under
// the client's Retry policy. attempt reports whether a timeout may be retried
// (the request is safe to repeat and nothing of it reached the caller); a
// wrong-owner, no-responders or unavailable answer is always retried after
// forgetting the cached owner. Close ends the wait between two attempts
// with ErrClosed; an attempt already sent runs to its answer, which is
// the truth about a request the server may have applied.
func (c *Client) retry(ctx context.Context, scope string, attempt func(id string) (repeatable bool, err error)) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	var last error
	// answered is the last refusal a server answered on the way
	// (unavailable, wrong-owner): when the call ends on a timeout it says
	// why the attempts before it failed (such as a stream file another
	// server holds locked), which the timeout alone hides.
	var answered *Error
	b := c.cfg.Retry.Start()
	var wait context.Context // ctx, ended by Close too; made at the first retry
	for n := 0; n < c.cfg.Attempts; n++ {
		if n > 0 {
			if wait == nil {
				var stop func()
				wait, stop = c.untilClosed(ctx)
				defer stop()
			}
			if err := b.Wait(wait); err != nil {
				if ctx.Err() == nil {
					// Only Close ends wait otherwise: the call fails as
					// one made after Close does.
					err = ErrClosed
				}
				// Both stay testable: why the call stopped (the caller's
				// context or Close), and what the attempts met
				// (errors.Is, CodeOf).
				return withAnswer(fmt.Errorf("%w (last error: %w)", err, last), answered)
			}
		}
		id, err := c.Owner(ctx, scope)
		if err != nil {
			if errors.Is(err, bus.ErrForbidden) {
				return forbidden(err)
			}
			// A balancer that is away or slow is worth another try.
			if errors.Is(err, bus.ErrNoResponders) || errors.Is(err, bus.ErrTimeout) {
				last = err
				continue
			}
			return err
		}
		repeatable, err := attempt(id)
		if err == nil {
			return nil
		}
		if f, ok := err.(finalError); ok {
			return withContext(ctx, f.err)
		}
		if errors.Is(err, bus.ErrForbidden) {
			return forbidden(err)
		}
		if !retryable(err, repeatable) || ctx.Err() != nil {
			return withAnswer(withContext(ctx, err), answered)
		}
		if pe := (*Error)(nil); errors.As(err, &pe) {
			answered = pe
		}
		c.forget(scope, id)
		last = err
	}
	return withAnswer(last, answered)
}

// withAnswer is err, the end of a call, followed by the refusal a server
// answered before it (answered, nil for none) when err is not itself a
// server's answer: a call whose last attempt timed out says what the
// server said to the ones before. The answer is text only: errors.Is and
// CodeOf see err as it was.
func withAnswer(err error, answered *Error) error {
	if answered == nil || err == nil {
		return err
	}
	if pe := (*Error)(nil); errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%w (before that the server answered %s)", err, answered)
}

// untilClosed returns a context that ends with ctx or at Close, whichever
// comes first, and the func that releases it.
func (c *Client) untilClosed(ctx context.Context) (context.Context, func()) {
	wait, cancel := context.WithCancel(ctx)
	stopAfter := context.AfterFunc(c.ctx, cancel)
	return wait, func() {
		stopAfter()
		cancel()
	}
}

// withContext is err, an attempt's failure, made to match ctx's error too
// when the caller's context ended meanwhile: an attempt cut short by the
// caller's deadline fails as a timeout (bus.ErrTimeout), which
// errors.Is(err, context.DeadlineExceeded) would not see, while the same
// deadline met between attempts gives the context's error.
func withContext(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, cerr)
}

// forbidden turns the NATS server's refusal of a subject (bus.ErrForbidden)
// into the wire code callers branch on; it is permanent, never retried.
func forbidden(err error) error {
	return &Error{Code: CodeForbidden, Message: err.Error()}
}

// checkNames refuses a request whose stream name or key breaks the naming
// rule (ValidStreamName, ValidKey) before it is sent. The client must check:
// the header encoding rewrites exactly the names the rule refuses (trimming
// their ends, turning CR and LF into spaces), so the server would see, and
// store, a different valid name.
func checkNames(h nats.Header) error {
	if err := ValidStreamName(h.Get(HdrStream)); err != nil {
		return err
	}
	if err := CheckMsgID(h.Get(HdrMsgID)); err != nil {
		return err
	}
	return ValidKey(h.Get(HdrKey))
}

// checkPayload refuses, as too-large, a request the NATS connection would
// refuse with nats.ErrMaxPayload: the answer is the same as the server's to
// a value over its limits, and it comes before the balancer is asked.
func (c *Client) checkPayload(m *nats.Msg) error {
	limit := c.cfg.Conn.MaxPayload()
	if limit <= 0 {
		return nil // not connected yet: nats.go does not check either
	}
	if n := requestSize(m); int64(n) > limit {
		return Errorf(CodeTooLarge, "the request is %d bytes (body %d, headers %d), over the NATS server's max payload of %d bytes", n, len(m.Data), n-len(m.Data), limit)
	}
	return nil
}

// requestSize is what nats.go counts against the server's max payload for
// m: its data and its header block, "NATS/1.0\r\n", a "name: value\r\n" line
// per value (trimmed, as nats.go sends it) and a closing "\r\n".
func requestSize(m *nats.Msg) int {
	n := len(m.Data)
	if len(m.Header) == 0 {
		return n
	}
	n += len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(": ") + len(textproto.TrimString(v)) + len("\r\n")
		}
	}
	return n
}

// replyError returns the *Error an error reply carries, or nil.
func replyError(m *nats.Msg) error {
	if m.Header == nil {
		return nil
	}
	code := Code(m.Header.Get(HdrError))
	if code == "" {
		if m.Header.Get("Status") == "503" {
			return bus.ErrNoResponders
		}
		return nil
	}
	if !ValidCode(code) {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("server sent unknown code %q: %q", code, m.Data)}
	}
	return &Error{Code: code, Message: string(m.Data)}
}

// newMsg is a request of cmd about s.
func (s *Stream) newMsg(cmd string) *nats.Msg {
	m := nats.NewMsg("")
	m.Header.Set(HdrCmd, cmd)
	m.Header.Set(HdrStream, s.name)
	if s.ephemeral {
		m.Header.Set(HdrEphemeral, "true")
	}
	if s.cold {
		m.Header.Set(HdrCold, "true")
	}
	return m
}

// Stream returns a handle on the stream name in scope. Handles are cheap.
func (c *Client) Stream(scope, name string, opts ...StreamOption) *Stream {
	s := &Stream{c: c, scope: scope, name: name}
	for _, o := range opts {
		o(s)
	}
	return s
}

// StreamOption configures a Stream handle.
type StreamOption func(*Stream)

// Ephemeral makes the stream live in the server's memory only (byte-capped,
// lost on restart).
func Ephemeral() StreamOption { return func(s *Stream) { s.ephemeral = true } }

// Cold says that the stream is used rarely: each request tells its server
// (Sy-Cold) to close the stream as soon as nothing more waits on it,
// instead of keeping it open for IdleClose. An open stream holds a file
// and about 200 KiB of the server's memory, which a stream written once
// in a while (a presence row when a user connects) would hold for
// minutes; the price is an open at its next request. A hint only: a
// request without it keeps the stream open as usual, and it does nothing
// to an ephemeral stream, which closing would remove.
func Cold() StreamOption { return func(s *Stream) { s.cold = true } }

// Stream is a handle on one stream of one scope.
type Stream struct {
	c         *Client
	scope     string
	name      string
	ephemeral bool
	cold      bool // Cold: every request says Sy-Cold
}

// Scope is the stream's scope.
func (s *Stream) Scope() string { return s.scope }

// Name is the stream's name.
func (s *Stream) Name() string { return s.name }

// SetOptions are the optional parts of a write.
type SetOptions struct {
	// Key makes the message keyed: it replaces the older message with this key.
	Key string
	// MsgID de-duplicates retries: a second write with the same id within two
	// minutes returns the first write's result and writes nothing.
	MsgID string
	// PrevSeq, when set, is a compare-and-set on Key: the key's current seq must
	// equal *PrevSeq (0 means the key must not exist), else ErrWrongLastSequence.
	PrevSeq *uint64
	// TTL expires the message after this long (the stream must allow_msg_ttl).
	TTL time.Duration
	// Headers are user headers stored with the message.
	Headers map[string]string
}

// Set appends value to the stream (replacing the older message of opts.Key if
// given) and returns where it landed, after the server committed it.
func (s *Stream) Set(ctx context.Context, value []byte, opts SetOptions) (SetResult, error) {
	m, err := s.setMsg(value, opts)
	if err != nil {
		return SetResult{}, err
	}
	// Only a write carrying a msgID is safe to repeat after a timeout.
	reply, err := s.c.call(ctx, s.scope, m, opts.MsgID != "")
	if err != nil {
		return SetResult{}, fmt.Errorf("set %q/%q: %w", s.scope, s.name, err)
	}
	return s.setResult(reply)
}

// setMsg is the request of a set of value under opts, without its subject
// and deadline.
func (s *Stream) setMsg(value []byte, opts SetOptions) (*nats.Msg, error) {
	m := s.newMsg(CmdSet)
	if opts.Key != "" {
		m.Header.Set(HdrKey, opts.Key)
	}
	if opts.MsgID != "" {
		m.Header.Set(HdrMsgID, opts.MsgID)
	}
	if opts.PrevSeq != nil {
		m.Header.Set(HdrPrevSeq, strconv.FormatUint(*opts.PrevSeq, 10))
	}
	switch {
	case opts.TTL < 0:
		// ttlMillis would make it 0, "no TTL": a message kept for good.
		return nil, Errorf(CodeBadRequest, "ttl %v is negative", opts.TTL)
	case opts.TTL > 0:
		m.Header.Set(HdrTTL, strconv.FormatInt(ttlMillis(opts.TTL), 10))
	}
	for k, v := range opts.Headers {
		if err := CheckHeader(k, v); err != nil {
			return nil, err
		}
		m.Header.Set(k, v)
	}
	m.Data = value
	return m, nil
}

// setResult reads a set's successful reply.
func (s *Stream) setResult(reply *nats.Msg) (SetResult, error) {
	res, ok := parseSetResult(reply.Data)
	if !ok {
		if err := json.Unmarshal(reply.Data, &res); err != nil {
			return SetResult{}, fmt.Errorf("set %q/%q: bad reply: %w", s.scope, s.name, err)
		}
	}
	res.Dup = reply.Header.Get(HdrDup) == "true"
	return res, nil
}

// parseSetResult reads a set reply in the exact form the server writes,
// {"seq":N,"time":T}, without reflection: it is on every set's path. Any
// other form reports false, for encoding/json to read.
func parseSetResult(b []byte) (SetResult, bool) {
	const pre, mid = `{"seq":`, `,"time":`
	if !bytes.HasPrefix(b, []byte(pre)) || len(b) == 0 || b[len(b)-1] != '}' {
		return SetResult{}, false
	}
	rest := b[len(pre) : len(b)-1]
	i := bytes.Index(rest, []byte(mid))
	if i < 0 {
		return SetResult{}, false
	}
	ns, nt := rest[:i], rest[i+len(mid):]
	if !jsonInt(ns) || !jsonInt(nt) {
		return SetResult{}, false
	}
	seq, err := strconv.ParseUint(string(ns), 10, 64)
	if err != nil {
		return SetResult{}, false
	}
	t, err := strconv.ParseInt(string(nt), 10, 64)
	if err != nil {
		return SetResult{}, false
	}
	return SetResult{Seq: seq, Time: t}, true
}

// parseSetManyResults reads a setMany reply of n successes in the exact
// form the server writes, [{"seq":N,"time":T},...], without reflection: a
// pipelined client reads one per batch of sets. Any other form (an error
// among the results, another spacing) reports false, for encoding/json.
func parseSetManyResults(b []byte, n int) ([]SetManyResult, bool) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	b = b[1 : len(b)-1]
	res := make([]SetManyResult, 0, n)
	for len(b) > 0 {
		end := bytes.IndexByte(b, '}')
		if end < 0 {
			return nil, false
		}
		r, ok := parseSetResult(b[:end+1])
		if !ok {
			return nil, false
		}
		res = append(res, SetManyResult{Seq: r.Seq, Time: r.Time})
		b = b[end+1:]
		if len(b) > 0 {
			if b[0] != ',' || len(b) == 1 {
				return nil, false
			}
			b = b[1:]
		}
	}
	return res, len(res) == n
}

// jsonInt reports whether b is a JSON integer: an optional minus, then 0 or
// digits without a leading zero.
func jsonInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ttlMillis is d in the wire's whole milliseconds, rounded up so that a
// positive TTL under a millisecond stays a TTL (0 means none on the wire).
func ttlMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// SetMany writes msgs in one request (one transaction on the server) and
// returns one result per message, in order; a message's own failure is in its
// result's Code, not in the error.
func (s *Stream) SetMany(ctx context.Context, msgs []Entry) ([]SetManyResult, error) {
	m, idempotent, err := s.setManyMsg(msgs)
	if err != nil {
		return nil, err
	}
	reply, err := s.c.call(ctx, s.scope, m, idempotent)
	if err != nil {
		return nil, fmt.Errorf("setMany %q/%q: %w", s.scope, s.name, err)
	}
	return s.setManyResults(reply, len(msgs))
}

// checkEntry refuses what would fail a whole setMany request for one of
// its messages: a reserved user header or an invalid key.
func (s *Stream) checkEntry(i int, e *Entry) error {
	for k, v := range e.Headers {
		if err := CheckHeader(k, v); err != nil {
			return fmt.Errorf("setMany %q/%q: message %d: %w", s.scope, s.name, i, err)
		}
	}
	if err := ValidKey(e.Key); err != nil {
		return fmt.Errorf("setMany %q/%q: message %d: %w", s.scope, s.name, i, err)
	}
	// As Set's: the same msgID must mean the same write both ways.
	if err := CheckMsgID(e.MsgID); err != nil {
		return fmt.Errorf("setMany %q/%q: message %d: %w", s.scope, s.name, i, err)
	}
	if e.TTL < 0 {
		return Errorf(CodeBadRequest, "setMany %q/%q: message %d: ttl %v is negative", s.scope, s.name, i, e.TTL)
	}
	if e.PrevSeq != nil && e.Key == "" {
		return Errorf(CodeBadRequest, "setMany %q/%q: message %d: a previous seq needs a key", s.scope, s.name, i)
	}
	return nil
}

// setManyMsg is the request of a setMany of msgs, without its subject and
// deadline; idempotent says whether every message carries a MsgID, which
// makes the request safe to repeat.
func (s *Stream) setManyMsg(msgs []Entry) (m *nats.Msg, idempotent bool, err error) {
	m = s.newMsg(CmdSetMany)
	var body []byte
	idempotent = true
	for i := range msgs {
		if err := s.checkEntry(i, &msgs[i]); err != nil {
			return nil, false, err
		}
		f := msgs[i].frame()
		if body, err = AppendFrame(body, &f); err != nil {
			return nil, false, err
		}
		if msgs[i].MsgID == "" {
			idempotent = false
		}
	}
	m.Data = body
	return m, idempotent, nil
}

// setManyResults reads the results of a setMany of n messages from its
// successful reply.
func (s *Stream) setManyResults(reply *nats.Msg, n int) ([]SetManyResult, error) {
	if res, ok := parseSetManyResults(reply.Data, n); ok {
		return res, nil
	}
	var res []SetManyResult
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		return nil, fmt.Errorf("setMany %q/%q: bad reply: %w", s.scope, s.name, err)
	}
	if len(res) != n {
		return nil, fmt.Errorf("setMany %q/%q: %d results for %d messages", s.scope, s.name, len(res), n)
	}
	return res, nil
}

// Get returns the message with seq.
func (s *Stream) Get(ctx context.Context, seq uint64) (*Message, error) {
	m := s.newMsg(CmdGet)
	m.Header.Set(HdrSeq, strconv.FormatUint(seq, 10))
	return s.get(ctx, m)
}

// GetKey returns the current message with key.
func (s *Stream) GetKey(ctx context.Context, key string) (*Message, error) {
	m := s.newMsg(CmdGet)
	m.Header.Set(HdrKey, key)
	return s.get(ctx, m)
}

func (s *Stream) get(ctx context.Context, m *nats.Msg) (*Message, error) {
	reply, err := s.c.call(ctx, s.scope, m, true)
	if err != nil {
		return nil, fmt.Errorf("get %q/%q: %w", s.scope, s.name, err)
	}
	return messageFromReply(reply)
}

// messageFromReply reads a get reply: raw value plus metadata headers.
func messageFromReply(r *nats.Msg) (*Message, error) {
	msg := &Message{Value: r.Data, Key: r.Header.Get(HdrKey)}
	var err error
	if msg.Seq, err = strconv.ParseUint(r.Header.Get(HdrSeq), 10, 64); err != nil {
		return nil, fmt.Errorf("get: reply without a valid %s: %w", HdrSeq, err)
	}
	if t := r.Header.Get(HdrTime); t != "" {
		if msg.Time, err = strconv.ParseInt(t, 10, 64); err != nil {
			return nil, fmt.Errorf("get: bad %s: %w", HdrTime, err)
		}
	}
	if t := r.Header.Get(HdrTTL); t != "" {
		ms, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("get: bad %s: %w", HdrTTL, err)
		}
		msg.TTL = time.Duration(ms) * time.Millisecond
	}
	for k, v := range r.Header {
		if ReservedHeader(k) || len(v) == 0 {
			continue
		}
		if msg.Headers == nil {
			msg.Headers = map[string]string{}
		}
		msg.Headers[k] = v[0]
	}
	return msg, nil
}

// Range selects messages for GetAll. Zero values mean from the first seq, to
// the last, with no page limit.
type Range struct {
	Start, End uint64 // inclusive
	Limit      int    // at most this many messages in one page
}

// GetAll returns the messages in r (one page when r.Limit is set) and the seq
// the next page starts at, 0 when there is nothing more. The server streams
// the answer in numbered chunks; a lost chunk is an error, never a short answer.
func (s *Stream) GetAll(ctx context.Context, r Range) ([]Message, uint64, error) {
	var out []Message
	next, err := s.Scan(ctx, r, func(m *Message) error {
		out = append(out, *m)
		return nil
	})
	return out, next, err
}

// Scan is GetAll with a callback per message (called in seq order), so
// large ranges need not be held in memory. The callback's error stops the scan.
func (s *Stream) Scan(ctx context.Context, r Range, fn func(*Message) error) (uint64, error) {
	next, err := s.scan(ctx, r, fn)
	if err != nil {
		return 0, fmt.Errorf("getAll %q/%q: %w", s.scope, s.name, err)
	}
	return next, nil
}

func (s *Stream) scan(ctx context.Context, r Range, fn func(*Message) error) (uint64, error) {
	if err := ValidStreamName(s.name); err != nil {
		return 0, err
	}
	var next uint64
	err := s.c.retry(ctx, s.scope, func(id string) (bool, error) {
		delivered := 0
		var err error
		next, err = s.scanOnce(ctx, id, r, func(m *Message) error {
			delivered++
			return fn(m)
		})
		if err != nil && delivered > 0 {
			// Retrying after messages reached fn would hand them out
			// twice, whatever the error (an unavailable part-way, fn's
			// own): it is the scan's.
			return false, finalError{err}
		}
		return true, err
	})
	if err != nil {
		return 0, err
	}
	return next, nil
}

// finalError is an attempt's error that retry returns as it is, whatever
// its code.
type finalError struct{ err error }

func (f finalError) Error() string { return f.err.Error() }
func (f finalError) Unwrap() error { return f.err }

// chunkQueue is how many chunks of one answer may wait to be read. The
// server sends an answer's chunks without waiting, each of up to
// ChunkBytes (or the max payload, when lower), so a reader slower than the
// stream (a WebSocket behind it) lets them pile up. nats.go's SubscribeSync
// would queue them in a channel of 65,536 slots, allocated (512 KiB) for
// every read however small, and refuse them past 64 MiB pending; this
// queue holds the same 64 MiB of full chunks in a channel sized for it:
// 257 slots (2 KiB) at NATS's default payload. A chunk that finds it full
// is dropped by nats.go and the read fails at once, a slow consumer (as
// past the pending limit before), or "lost chunk" when a later chunk came.
func chunkQueue(maxPayload int64) int {
	const pending = 64 << 20
	chunk := min(int64(ChunkBytes), maxPayload)
	if chunk <= 0 {
		return 1 << 16
	}
	return int(min(max(pending/chunk+1, 16), 1<<16))
}

func (s *Stream) scanOnce(ctx context.Context, id string, r Range, fn func(*Message) error) (uint64, error) {
	nc := s.c.cfg.Conn
	inbox := nc.NewRespInbox()
	chunks := make(chan *nats.Msg, chunkQueue(nc.MaxPayload()))
	sub, err := nc.ChanSubscribe(inbox, chunks)
	if err != nil {
		return 0, fmt.Errorf("subscribe reply inbox: %w", err)
	}
	// A chunk dropped for a full queue, or the connection closing, is said
	// here, not on chunks: without it a read whose last chunk was dropped
	// would wait out its timeout.
	status := sub.StatusChanged(nats.SubscriptionSlowConsumer, nats.SubscriptionClosed)
	var gone error // why no more chunks will come, once status said so
	defer sub.Unsubscribe()
	m := s.newMsg(CmdGetAll)
	m.Subject = bus.APISubject(s.c.cfg.Service, s.scope, id)
	m.Reply = inbox
	if r.Start > 0 {
		m.Header.Set(HdrStartSeq, strconv.FormatUint(r.Start, 10))
	}
	if r.End > 0 {
		m.Header.Set(HdrEndSeq, strconv.FormatUint(r.End, 10))
	}
	if r.Limit > 0 {
		m.Header.Set(HdrLimit, strconv.Itoa(r.Limit))
	}
	// The server must start the answer before the first chunk's wait
	// (below, a moment later) gives up.
	setDeadline(m, s.c.attemptDeadline(ctx))
	// A publish the NATS server refuses would otherwise wait out the timeout.
	gctx, unguard := bus.Guard(ctx, nc, m.Subject)
	defer unguard()
	if err := nc.PublishMsg(m); err != nil {
		return 0, fmt.Errorf("send: %w", err)
	}
	for chunk := 0; ; chunk++ {
		// Each chunk gets a fresh attempt timeout: a long answer is fine as
		// long as it keeps coming.
		actx, cancel := s.c.attemptContext(gctx)
		var reply *nats.Msg
		if gone == nil {
			select {
			case reply = <-chunks:
			case st := <-status:
				gone = nats.ErrConnectionClosed
				if st == nats.SubscriptionSlowConsumer {
					gone = nats.ErrSlowConsumer
				}
			case <-actx.Done():
				err = actx.Err()
			}
		}
		if gone != nil && reply == nil {
			// What arrived before stays readable; then the read ends.
			select {
			case reply = <-chunks:
			default:
				err = gone
			}
		}
		cancel()
		if err != nil {
			if pe := bus.Refused(gctx); pe != nil {
				return 0, fmt.Errorf("getAll %q: %w", m.Subject, pe)
			}
			return 0, fmt.Errorf("chunk %d: %w", chunk, bus.MapError(err))
		}
		if err := replyError(reply); err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(reply.Header.Get(HdrChunk))
		if err != nil || n != chunk {
			return 0, fmt.Errorf("lost chunk: expected %d, got %q", chunk, reply.Header.Get(HdrChunk))
		}
		if err := ScanFrames(reply.Data, 0, func(f *Frame) error {
			m := f.Message()
			return fn(&m)
		}); err != nil {
			return 0, err
		}
		if reply.Header.Get(HdrEOF) == "true" {
			next := reply.Header.Get(HdrNextSeq)
			if next == "" {
				return 0, nil
			}
			return strconv.ParseUint(next, 10, 64)
		}
	}
}

// Delete selects what Delete removes; exactly one of Seqs, UpTo and All
// must be set.
type Delete struct {
	Seqs []uint64 // these seqs
	UpTo uint64   // every seq <= UpTo
	All  bool     // everything
	// MsgID identifies the delete for de-duplication: a second delete with
	// the same id within two minutes removes nothing and returns the first
	// one's seqs. Empty means Stream.Delete picks a random one, used for every
	// attempt of that call.
	MsgID string
}

// Delete removes messages and returns the seqs actually removed. Every
// attempt of one call carries the same request id (d.MsgID or a random one),
// so the answer after a retry is what the first attempt removed.
func (s *Stream) Delete(ctx context.Context, d Delete) ([]uint64, error) {
	return s.delete(ctx, d, false)
}

// Drop removes the stream itself: everything in it (the seqs returned,
// reported on the change feed as a delete) and then its file and archive
// copy, so that it stops taking room. Afterwards the stream does not exist:
// reads answer as for a missing stream, and a later write creates it afresh,
// with seqs from 1 and an empty de-duplication window. Drop of a stream that
// does not exist removes and creates nothing. A watcher does not follow a
// stream across its drop (the seqs start over below the ones it delivered):
// drop streams nobody watches.
//
// Its attempts carry one request id, as Delete's do, but the id is
// remembered in the stream, which a drop removes: a retry after a lost
// answer of a drop that went through answers no seqs.
func (s *Stream) Drop(ctx context.Context) ([]uint64, error) {
	return s.delete(ctx, Delete{All: true}, true)
}

func (s *Stream) delete(ctx context.Context, d Delete, drop bool) ([]uint64, error) {
	op := "delete"
	m := s.newMsg(CmdDelete)
	if drop {
		op = "drop"
		m.Header.Set(HdrDrop, "true")
	}
	set := 0
	if len(d.Seqs) == 1 {
		m.Header.Set(HdrSeq, strconv.FormatUint(d.Seqs[0], 10))
		set++
	} else if len(d.Seqs) > 1 {
		parts := make([]string, len(d.Seqs))
		for i, q := range d.Seqs {
			parts[i] = strconv.FormatUint(q, 10)
		}
		m.Header.Set(HdrSeqs, strings.Join(parts, ","))
		set++
	}
	if d.UpTo > 0 {
		m.Header.Set(HdrUpTo, strconv.FormatUint(d.UpTo, 10))
		set++
	}
	if d.All {
		m.Header.Set(HdrAll, "true")
		set++
	}
	if set != 1 {
		return nil, Errorf(CodeBadRequest, "delete needs exactly one of seqs, up-to or all")
	}
	// One id for every attempt of this call: a retry after a lost reply is
	// answered with what the first attempt removed, not with what is left.
	id := d.MsgID
	if id == "" {
		id = newMsgID()
	}
	m.Header.Set(HdrMsgID, id)
	reply, err := s.c.call(ctx, s.scope, m, true)
	if err != nil {
		return nil, fmt.Errorf("%s %q/%q: %w", op, s.scope, s.name, err)
	}
	var res DeleteResult
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		return nil, fmt.Errorf("%s %q/%q: bad reply: %w", op, s.scope, s.name, err)
	}
	return res.Seqs, nil
}

// Keys returns every key in the stream.
func (s *Stream) Keys(ctx context.Context) ([]string, error) {
	var keys []string
	if err := s.jsonCall(ctx, CmdKeys, nil, &keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// Inventory returns the stream's count, bytes, last seq and non-default limits.
func (s *Stream) Inventory(ctx context.Context) (Inventory, error) {
	var inv Inventory
	err := s.jsonCall(ctx, CmdInventory, nil, &inv)
	return inv, err
}

// Config returns the stream's configuration.
func (s *Stream) Config(ctx context.Context) (Config, error) {
	var cfg Config
	err := s.jsonCall(ctx, CmdConfig, nil, &cfg)
	return cfg, err
}

// UpdateConfig changes the fields u sets, applies the new limits at once
// (removing what they no longer allow, as delete events) and returns the
// stream's new configuration. An update that changes nothing is a read.
func (s *Stream) UpdateConfig(ctx context.Context, u ConfigUpdate) (Config, error) {
	// What the server would refuse, refused here before encoding/json turns
	// bad bytes into U+FFFD on the way out.
	if u.Desc != nil {
		if len(*u.Desc) > MaxDescBytes {
			return Config{}, fmt.Errorf("config %q: %w", s.scope+"/"+s.name, Errorf(CodeTooLarge, "desc is %d bytes, over the limit of %d", len(*u.Desc), MaxDescBytes))
		}
		if !utf8.ValidString(*u.Desc) {
			return Config{}, fmt.Errorf("config %q: %w", s.scope+"/"+s.name, Errorf(CodeBadRequest, "desc is not valid UTF-8"))
		}
	}
	var body []byte
	if !u.IsZero() {
		var err error
		if body, err = json.Marshal(u); err != nil {
			return Config{}, fmt.Errorf("config %q/%q: %w", s.scope, s.name, err)
		}
	}
	var cfg Config
	err := s.jsonCall(ctx, CmdConfig, body, &cfg)
	return cfg, err
}

func (s *Stream) jsonCall(ctx context.Context, cmd string, body []byte, out any) error {
	m := s.newMsg(cmd)
	m.Data = body
	reply, err := s.c.call(ctx, s.scope, m, true)
	if err != nil {
		return fmt.Errorf("%s %q/%q: %w", cmd, s.scope, s.name, err)
	}
	if err := json.Unmarshal(reply.Data, out); err != nil {
		return fmt.Errorf("%s %q/%q: bad reply: %w", cmd, s.scope, s.name, err)
	}
	return nil
}

// ptr returns a pointer to v, for ConfigUpdate fields.
func ptr[T any](v T) *T { return &v }
