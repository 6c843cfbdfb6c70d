package nntp

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on. Errors returned by this package wrap
// them; test with errors.Is.
var (
	// ErrUnavailable: the server refused service (400 greeting, or 400 to a
	// command, which means it is closing the connection).
	ErrUnavailable = errors.New("nntp: service unavailable")
	// ErrTooManyConnections: the server refused the connection because the
	// account or host has too many open (502 greeting, or a refusal whose
	// text says so). A pool reacts by lowering its size for a while.
	ErrTooManyConnections = errors.New("nntp: too many connections")
	// ErrAuth: the credentials were rejected (481), or the server wants
	// authentication (480) the caller did not configure, or that logging
	// in again did not satisfy; after such a 480 the connection is retired
	// (broken).
	ErrAuth = errors.New("nntp: authentication failed")
	// ErrNoSuchGroup: 411.
	ErrNoSuchGroup = errors.New("nntp: no such group")
	// ErrNoSuchArticle: 420, 423 or 430.
	ErrNoSuchArticle = errors.New("nntp: no such article")
	// ErrNotSupported: 500/501/503, or a capability the server lacks.
	ErrNotSupported = errors.New("nntp: not supported")
	// ErrPostingNotAllowed: 440 or 441.
	ErrPostingNotAllowed = errors.New("nntp: posting failed")
	// ErrLineTooLong: a response line exceeded Config.MaxLine.
	ErrLineTooLong = errors.New("nntp: line too long")
	// ErrClosed: the connection or pool was closed, or is broken after an
	// earlier I/O or protocol error.
	ErrClosed = errors.New("nntp: closed")
)

// StatusError is a well-formed response whose code is not the one the
// command expects. Is matches the sentinel its code stands for.
type StatusError struct {
	Cmd  string // the command verb, e.g. "GROUP"
	Code int
	Msg  string // the text after the code
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("nntp: %s: %d %s", e.Cmd, e.Code, e.Msg)
}

// Is reports whether the code maps to target.
func (e *StatusError) Is(target error) bool {
	return target != nil && target == e.kind()
}

func (e *StatusError) kind() error {
	if tooManyText(e.Msg) && (e.Code == 400 || e.Code == 502 || e.Code == 481 || e.Code == 482) {
		return ErrTooManyConnections
	}
	switch e.Code {
	case 400:
		return ErrUnavailable
	case 502:
		// As a greeting 502 is how providers say "no more connections"; on a
		// command it means the command is not permitted.
		if e.Cmd == "greeting" {
			return ErrTooManyConnections
		}
		return ErrNotSupported
	case 480, 481, 482:
		return ErrAuth
	case 411:
		return ErrNoSuchGroup
	case 420, 423, 430:
		return ErrNoSuchArticle
	case 500, 501, 503:
		return ErrNotSupported
	case 440, 441:
		return ErrPostingNotAllowed
	}
	return nil
}

func tooManyText(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "too many") || strings.Contains(m, "connection limit") ||
		strings.Contains(m, "max connections") || strings.Contains(m, "maximum connections")
}

// ProtocolError is a response that does not follow the protocol: a status
// line without a code, an overview line with a bad field, a response cut
// off, an overlong line. The connection is unusable afterwards.
type ProtocolError struct {
	Cmd    string // the command verb whose response was malformed
	Line   string // the offending line (truncated to 200 bytes)
	Reason string
	Err    error // an underlying cause, if any
}

func (e *ProtocolError) Error() string {
	s := fmt.Sprintf("nntp: %s: %s", e.Cmd, e.Reason)
	if e.Line != "" {
		s += fmt.Sprintf(" in line %q", e.Line)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ProtocolError) Unwrap() error { return e.Err }

const maxErrLine = 200

func protoErr(cmd string, line []byte, reason string, err error) *ProtocolError {
	if len(line) > maxErrLine {
		line = line[:maxErrLine]
	}
	return &ProtocolError{Cmd: cmd, Line: string(line), Reason: reason, Err: err}
}
