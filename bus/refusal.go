package bus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrForbidden means the NATS server refused a publish or subscription
// because the connection's user lacks the permission.
var ErrForbidden = errors.New("forbidden")

// PermissionError is a refusal by the NATS server's subject permissions.
// It matches ErrForbidden.
type PermissionError struct {
	Op      string // "publish" or "subscribe"
	Subject string
	Queue   string // the queue group of a refused subscription, or ""
}

func (e *PermissionError) Error() string {
	if e.Queue != "" {
		return fmt.Sprintf("NATS refused to %s on %q in queue group %q: this user has no permission for it", e.Op, e.Subject, e.Queue)
	}
	return fmt.Sprintf("NATS refused to %s on %q: this user has no permission for it", e.Op, e.Subject)
}

// key is what the refusal is of, to find who waits on it.
func (e *PermissionError) key() refusalKey { return refusalKey{e.Op, e.Subject, e.Queue} }

// Is makes errors.Is(err, ErrForbidden) hold.
func (e *PermissionError) Is(target error) bool { return target == ErrForbidden }

// NATS reports a refused publish or subscription only asynchronously
// ("-ERR Permissions Violation for Publish to ..."), and a request to a
// refused subject would otherwise just time out, a refused subscription
// just receive nothing. Connections made by Connect route these errors to
// the requests and subscriptions waiting on them, which then fail at once
// with a PermissionError. The server writes the subject and queue group
// with Go's %q: a '"' or '\' in them (valid subject bytes) comes escaped,
// so the pattern takes a whole Go string, which strconv.Unquote reads.
var permissionRe = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to ("(?:[^"\\]|\\.)*")(?: using queue ("(?:[^"\\]|\\.)*"))?`)

// refusalKey is what a refusal is of: a publish on a subject, or a
// subscription to one in a queue group ("" for none).
type refusalKey struct{ op, subject, queue string }

// refusals holds the waiting requests and subscriptions of one connection,
// by what a refusal would be of.
type refusals struct {
	mu      sync.Mutex // protects waiting, next and replies
	waiting map[refusalKey]map[uint64]context.CancelCauseFunc
	next    uint64
	// replies is the NATS server's refusal of the subscription nats.go
	// makes once, at the first request, for the replies of every request
	// (refusals.replySubject): until a reconnect sends it again, no reply reaches
	// the connection, and each request fails with it at once instead of
	// waiting out its deadline. A creds file whose inbox is missing or not
	// its user's gets it.
	replies *PermissionError

	replyOnce sync.Once // computes replySubj
	replySubj string
}

// trackers maps each *nats.Conn made by Connect to its *refusals; the
// entry goes when the connection closes.
var trackers sync.Map

// parsePermissionError returns the refusal err reports, or nil.
func parsePermissionError(err error) *PermissionError {
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	m := permissionRe.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	subject, serr := strconv.Unquote(m[2])
	queue, qerr := "", error(nil)
	if m[3] != "" {
		queue, qerr = strconv.Unquote(m[3])
	}
	if serr != nil || qerr != nil {
		return nil
	}
	op := "publish"
	if !strings.EqualFold(m[1], "publish") {
		op = "subscribe"
	}
	return &PermissionError{Op: op, Subject: subject, Queue: queue}
}

// refused cancels every request or subscription waiting on what pe
// refuses; replies says pe refuses the connection's reply subscription,
// which stays refused until reconnected.
func (r *refusals) refused(pe *PermissionError, replies bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if replies {
		r.replies = pe
	}
	for _, cancel := range r.waiting[pe.key()] {
		cancel(pe)
	}
}

// reconnected forgets the refusal of the reply subscription: nats.go sends
// it again on a reconnect (before it reports the reconnect), to a server
// whose permissions may have changed, which reports a refusal again.
func (r *refusals) reconnected() {
	r.mu.Lock()
	r.replies = nil
	r.mu.Unlock()
}

// replySubject is the wildcard subject nats.go subscribes to, once per
// connection nc, for the replies of all requests: a reply inbox
// ("{prefix}.{nuid}.{token}") with its last token a wildcard. It is the
// same for the connection's life, reconnects included.
func (r *refusals) replySubject(nc *nats.Conn) string {
	r.replyOnce.Do(func() {
		inbox := nc.NewRespInbox()
		r.replySubj = inbox[:strings.LastIndexByte(inbox, '.')+1] + "*"
	})
	return r.replySubj
}

// guard returns ctx, canceled with the *PermissionError as its cause as
// soon as the NATS server refuses k on nc's connection, or, with replies,
// its reply subscription (at once when it has been refused already); on a
// connection not made by Connect, only with ctx.
func guard(ctx context.Context, nc *nats.Conn, k refusalKey, replies bool) (context.Context, context.CancelFunc) {
	v, ok := trackers.Load(nc)
	if !ok {
		return context.WithCancel(ctx)
	}
	r := v.(*refusals)
	keys := []refusalKey{k}
	if replies {
		keys = append(keys, refusalKey{"subscribe", r.replySubject(nc), ""})
	}
	ctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	r.next++
	id := r.next
	if r.waiting == nil {
		r.waiting = map[refusalKey]map[uint64]context.CancelCauseFunc{}
	}
	for _, k := range keys {
		if r.waiting[k] == nil {
			r.waiting[k] = map[uint64]context.CancelCauseFunc{}
		}
		r.waiting[k][id] = cancel
	}
	if replies && r.replies != nil {
		cancel(r.replies)
	}
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		for _, k := range keys {
			delete(r.waiting[k], id)
			if len(r.waiting[k]) == 0 {
				delete(r.waiting, k)
			}
		}
		r.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Guard returns a context that is canceled, with a *PermissionError as its
// cause (context.Cause), as soon as the NATS server refuses a publish by nc
// on subject; call it before publishing, and the CancelFunc when done. On a
// connection not made by Connect it is context.WithCancel.
func Guard(ctx context.Context, nc *nats.Conn, subject string) (context.Context, context.CancelFunc) {
	return guard(ctx, nc, refusalKey{"publish", subject, ""}, false)
}

// SubscriptionGuard watches for the NATS server's refusal of one
// subscription: without it a refused subscription looks like one nobody
// publishes to, and a service that made it reports itself serving.
type SubscriptionGuard struct {
	nc     *nats.Conn
	key    refusalKey
	before error // nc.LastError() when the guard began
	ctx    context.Context
	cancel context.CancelFunc
}

// GuardSubscription begins watching for a refusal of the subscription by
// nc to subject, in queue group queue ("" for none), that the caller makes
// next: call it before subscribing, then Confirm, and Release once
// unsubscribed. Its Context derives from ctx.
func GuardSubscription(ctx context.Context, nc *nats.Conn, subject, queue string) *SubscriptionGuard {
	k := refusalKey{"subscribe", subject, queue}
	g := &SubscriptionGuard{nc: nc, key: k, before: nc.LastError()}
	g.ctx, g.cancel = guard(ctx, nc, k, false)
	return g
}

// Confirm waits, until ctx ends (5s when it has no deadline), for the NATS
// server to have the subscriptions made so far (a Flush), and returns its
// refusal of the guarded one: a *PermissionError, matching ErrForbidden.
// Otherwise it returns the Flush's error, or nil once the server has the
// subscription. It works on any connection, not only one made by Connect.
func (g *SubscriptionGuard) Confirm(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if err := g.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if pe := Refused(g.ctx); pe != nil {
		return pe
	}
	// The server sends its refusal before it answers the Flush, and
	// nats.go records it as the connection's last error before reading
	// that answer; it hands it to the error handler (which cancels the
	// Context) on another goroutine, which may not have run yet. A
	// refusal of the same subscription as the last error, other than the
	// one before the guard began, is then this one. (A refusal nats.go
	// reports is a wrapped error, a pointer: the comparison cannot panic.)
	last := g.nc.LastError()
	if pe := parsePermissionError(last); pe != nil && pe.key() == g.key && last != g.before {
		return pe
	}
	return nil
}

// Context is the context GuardSubscription derived from ctx, canceled
// with a *PermissionError as its cause (Refused) as soon as the NATS server
// refuses the subscription, also later: a reconnect sends it again, to a
// server whose permissions may have changed. Wait for the subscription's
// messages under it (Subscription.NextMsgWithContext). On a connection not
// made by Connect it ends only with ctx or Release.
func (g *SubscriptionGuard) Context() context.Context { return g.ctx }

// Release ends the watch, and Context.
func (g *SubscriptionGuard) Release() { g.cancel() }

// Refused returns the *PermissionError that ended a guarded ctx, or nil.
func Refused(ctx context.Context) error {
	var pe *PermissionError
	if errors.As(context.Cause(ctx), &pe) {
		return pe
	}
	return nil
}
