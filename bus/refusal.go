package bus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

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
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("NATS refused to %s on %q: this user has no permission for it", e.Op, e.Subject)
}

// Is makes errors.Is(err, ErrForbidden) hold.
func (e *PermissionError) Is(target error) bool { return target == ErrForbidden }

// NATS reports a refused publish only asynchronously ("-ERR Permissions
// Violation for Publish to ..."), and a request to a refused subject would
// otherwise just time out. Connections made by Connect route these errors
// to the requests waiting on that subject, which then fail at once with a
// PermissionError.
var permissionRe = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "([^"]+)"`)

// refusals holds the waiting requests of one connection, by subject.
type refusals struct {
	mu      sync.Mutex // protects waiting and next
	waiting map[string]map[uint64]context.CancelCauseFunc
	next    uint64
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
	op := "publish"
	if m[1] != "publish" && m[1] != "Publish" {
		op = "subscribe"
	}
	return &PermissionError{Op: op, Subject: m[2]}
}

// refused cancels every request waiting on a refused publish subject.
func (r *refusals) refused(pe *PermissionError) {
	if pe.Op != "publish" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.waiting[pe.Subject] {
		cancel(pe)
	}
}

// Guard returns a context that is canceled, with a *PermissionError as its
// cause (context.Cause), as soon as the NATS server refuses a publish by nc
// on subject; call it before publishing, and the CancelFunc when done. On a
// connection not made by Connect it is context.WithCancel.
func Guard(ctx context.Context, nc *nats.Conn, subject string) (context.Context, context.CancelFunc) {
	v, ok := trackers.Load(nc)
	if !ok {
		return context.WithCancel(ctx)
	}
	r := v.(*refusals)
	ctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	r.next++
	id := r.next
	if r.waiting == nil {
		r.waiting = map[string]map[uint64]context.CancelCauseFunc{}
	}
	if r.waiting[subject] == nil {
		r.waiting[subject] = map[uint64]context.CancelCauseFunc{}
	}
	r.waiting[subject][id] = cancel
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		delete(r.waiting[subject], id)
		if len(r.waiting[subject]) == 0 {
			delete(r.waiting, subject)
		}
		r.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Refused returns the *PermissionError that ended a guarded ctx, or nil.
func Refused(ctx context.Context) error {
	var pe *PermissionError
	if errors.As(context.Cause(ctx), &pe) {
		return pe
	}
	return nil
}
