package server

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// request is a decoded API request: everything the server needs, checked
// against the wire rules, with no storage work done yet.
type request struct {
	scope     string
	stream    string
	cmd       string
	ephemeral bool
	// cold is Sy-Cold: the caller expects no more requests to the stream
	// soon, so the server closes it once idle (see handle.cold).
	cold bool
	// deadline is Sy-Deadline: when the caller stops waiting for the
	// answer. Zero means none (the header was absent).
	deadline time.Time

	// set / setMany
	ops []store.WriteOp

	// get
	seq    uint64
	key    string
	hasSeq bool

	// getAll
	start, end uint64
	limit      int

	// delete
	del  persist.Delete
	drop bool // remove the stream itself after deleting everything (Sy-Drop)

	// config: nil = read
	configPatch []byte
}

// gaveUp reports whether the caller stopped waiting for req by now: its
// deadline is at or before now, to the millisecond.
func (r *request) gaveUp(now time.Time) bool {
	return !r.deadline.IsZero() && !now.Before(r.deadline)
}

// isWrite reports whether req can share a group-commit transaction.
func (r *request) isWrite() bool { return r.cmd == persist.CmdSet || r.cmd == persist.CmdSetMany }

// decodeRequest turns an API message into a request. It is pure (no I/O, no
// server state) so that it can be fuzzed; any malformed input is an *Error
// with code bad-request or too-large.
func decodeRequest(m *nats.Msg) (*request, error) {
	r := &request{scope: bus.SubjectToken(m.Subject, 1)}
	if !bus.ValidScope(r.scope) {
		return nil, persist.Errorf(persist.CodeBadRequest, "invalid scope %q in subject", r.scope)
	}
	h := m.Header
	r.cmd = h.Get(persist.HdrCmd)
	r.stream = h.Get(persist.HdrStream)
	if r.cmd == "" {
		return nil, persist.Errorf(persist.CodeBadRequest, "missing %s", persist.HdrCmd)
	}
	if err := persist.ValidStreamName(r.stream); err != nil {
		return nil, err
	}
	var err error
	if r.ephemeral, err = boolHeader(h, persist.HdrEphemeral); err != nil {
		return nil, err
	}
	if r.cold, err = boolHeader(h, persist.HdrCold); err != nil {
		return nil, err
	}
	if r.deadline, err = deadlineHeader(h); err != nil {
		return nil, err
	}
	switch r.cmd {
	case persist.CmdSet:
		op, err := decodeSet(h, m.Data)
		if err != nil {
			return nil, err
		}
		r.ops = []store.WriteOp{op}
	case persist.CmdSetMany:
		if r.ops, err = decodeSetMany(m.Data); err != nil {
			return nil, err
		}
	case persist.CmdGet:
		if r.seq, r.hasSeq, err = uintHeader(h, persist.HdrSeq); err != nil {
			return nil, err
		}
		if r.key, err = textHeader(h, persist.HdrKey); err != nil {
			return nil, err
		}
		if r.hasSeq == (r.key != "") {
			return nil, persist.Errorf(persist.CodeBadRequest, "get needs exactly one of %s and %s", persist.HdrSeq, persist.HdrKey)
		}
		if err := persist.ValidKey(r.key); err != nil {
			return nil, err
		}
	case persist.CmdGetAll:
		if r.start, _, err = uintHeader(h, persist.HdrStartSeq); err != nil {
			return nil, err
		}
		if r.end, _, err = uintHeader(h, persist.HdrEndSeq); err != nil {
			return nil, err
		}
		lim, has, err := uintHeader(h, persist.HdrLimit)
		if err != nil {
			return nil, err
		}
		if has && (lim == 0 || lim > 1<<31-1) {
			return nil, persist.Errorf(persist.CodeBadRequest, "%s must be between 1 and %d", persist.HdrLimit, 1<<31-1)
		}
		r.limit = int(lim)
	case persist.CmdDelete:
		if r.del, err = decodeDelete(h); err != nil {
			return nil, err
		}
		if r.drop, err = boolHeader(h, persist.HdrDrop); err != nil {
			return nil, err
		}
		// Dropping removes the whole stream, so it only goes with a
		// selector that covers the whole stream.
		if r.drop && !r.del.All {
			return nil, persist.Errorf(persist.CodeBadRequest, "%s needs %s", persist.HdrDrop, persist.HdrAll)
		}
	case persist.CmdKeys, persist.CmdInventory:
	case persist.CmdConfig:
		if len(strings.TrimSpace(string(m.Data))) > 0 {
			// Checked here, before any storage work, not only when the
			// worker applies it: a config with a body creates its stream,
			// and a patch refused after that open left a new stream file
			// behind ("either way nothing changes"). A stream that does not
			// exist yet starts from the defaults, so this is the check its
			// worker would make; for one that exists the worker merges the
			// patch with the stream's own config and checks again.
			if _, err := store.MergeConfig(persist.DefaultConfig(), m.Data); err != nil {
				return nil, err
			}
			// JSON null is the one value besides an object that
			// encoding/json decodes into the patch without a word (as a
			// change of nothing, which would create the stream).
			if bytes.TrimLeft(m.Data, " \t\r\n")[0] != '{' {
				return nil, persist.Errorf(persist.CodeBadRequest, "config: the body is not a JSON object")
			}
			r.configPatch = m.Data
		}
	default:
		return nil, persist.Errorf(persist.CodeBadRequest, "unknown command %q", r.cmd)
	}
	return r, nil
}

// decodeSet reads a set's parameters from its headers; the body is the value.
func decodeSet(h nats.Header, body []byte) (store.WriteOp, error) {
	op := store.WriteOp{Value: body}
	var err error
	if op.Key, err = textHeader(h, persist.HdrKey); err != nil {
		return op, err
	}
	if op.MsgID, err = textHeader(h, persist.HdrMsgID); err != nil {
		return op, err
	}
	if err := persist.ValidKey(op.Key); err != nil {
		return op, err
	}
	if err := persist.CheckMsgID(op.MsgID); err != nil {
		return op, err
	}
	prev, has, err := uintHeader(h, persist.HdrPrevSeq)
	if err != nil {
		return op, err
	}
	if has {
		if op.Key == "" {
			return op, persist.Errorf(persist.CodeBadRequest, "%s needs %s: compare-and-set is on a key", persist.HdrPrevSeq, persist.HdrKey)
		}
		op.PrevSeq = &prev
	}
	ttl, has, err := uintHeader(h, persist.HdrTTL)
	if err != nil {
		return op, err
	}
	if has {
		if ttl == 0 || ttl > persist.MaxTTL {
			return op, persist.Errorf(persist.CodeBadRequest, "%s: %d is not between 1 and %d milliseconds", persist.HdrTTL, ttl, uint64(persist.MaxTTL))
		}
		op.TTL = int64(ttl)
	}
	for k, v := range h {
		if len(v) == 0 || persist.ReservedHeader(k) {
			continue
		}
		// The rule setMany applies to its frames' headers, before the
		// stream is opened: a name NATS cannot carry would make the message
		// unreadable by get, and a value with a control character, a
		// trailing space or bytes that are not UTF-8 (stored as JSON, which
		// turns them into U+FFFD) would read back otherwise, or not at all.
		// nats.go cleans some of these before sending; other clients do not.
		if err := persist.CheckHeader(k, v[0]); err != nil {
			return op, err
		}
		if op.Headers == nil {
			op.Headers = make(map[string]string, len(h))
		}
		op.Headers[k] = v[0]
	}
	return op, nil
}

// decodeSetMany reads a frames body into write ops.
func decodeSetMany(body []byte) ([]store.WriteOp, error) {
	// A frame is at least 2 bytes; guess ~160 per frame to size ops once for
	// the common batches of small values.
	ops := make([]store.WriteOp, 0, min(persist.MaxBatch, max(16, len(body)/160)))
	// The Frame is reused: only its fields are kept, in ops.
	err := persist.ScanFrames(body, persist.MaxBatch, func(m *persist.Frame) error {
		// Frames carry keys in JSON, which keeps what headers would mangle;
		// the rule is the same anyway, so a key valid here is valid in a set.
		if err := persist.ValidKey(m.Key); err != nil {
			var pe *persist.Error
			errors.As(err, &pe)
			return persist.Errorf(pe.Code, "message %d: %s", len(ops), pe.Message)
		}
		if err := persist.CheckMsgID(m.MsgID); err != nil {
			var pe *persist.Error
			errors.As(err, &pe)
			return persist.Errorf(pe.Code, "message %d: %s", len(ops), pe.Message)
		}
		if m.PrevSeq != nil && m.Key == "" {
			return persist.Errorf(persist.CodeBadRequest, "message %d: prevSeq needs a key", len(ops))
		}
		if m.TTL < 0 || m.TTL > persist.MaxTTL {
			return persist.Errorf(persist.CodeBadRequest, "message %d: ttl %d is not between 0 and %d milliseconds", len(ops), m.TTL, int64(persist.MaxTTL))
		}
		for k, v := range m.Headers {
			// A name NATS cannot carry would make the message unreadable
			// by get; a value the header encoding changes would read back
			// otherwise there.
			if err := persist.CheckHeader(k, v); err != nil {
				var pe *persist.Error
				errors.As(err, &pe)
				return persist.Errorf(persist.CodeBadRequest, "message %d: %s", len(ops), pe.Message)
			}
		}
		ops = append(ops, store.WriteOp{Key: m.Key, Headers: m.Headers, Value: m.Value, TTL: m.TTL, MsgID: m.MsgID, PrevSeq: m.PrevSeq})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ops, nil
}

// decodeDelete reads which messages a delete removes: exactly one selector.
func decodeDelete(h nats.Header) (persist.Delete, error) {
	var d persist.Delete
	n := 0
	seq, has, err := uintHeader(h, persist.HdrSeq)
	if err != nil {
		return d, err
	}
	if has {
		d.Seqs = []uint64{seq}
		n++
	}
	if list, has := header(h, persist.HdrSeqs); has {
		parts := strings.Split(list, ",")
		if len(parts) > persist.MaxBatch {
			return d, persist.Errorf(persist.CodeTooLarge, "%s lists more than %d seqs", persist.HdrSeqs, persist.MaxBatch)
		}
		for _, p := range parts {
			q, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return d, persist.Errorf(persist.CodeBadRequest, "bad seq %q in %s", p, persist.HdrSeqs)
			}
			d.Seqs = append(d.Seqs, q)
		}
		n++
	}
	if d.UpTo, has, err = uintHeader(h, persist.HdrUpTo); err != nil {
		return d, err
	}
	if has {
		n++
	}
	if d.All, err = boolHeader(h, persist.HdrAll); err != nil {
		return d, err
	}
	if d.All {
		n++
	}
	if n != 1 {
		return d, persist.Errorf(persist.CodeBadRequest, "delete needs exactly one of %s, %s, %s and %s", persist.HdrSeq, persist.HdrSeqs, persist.HdrUpTo, persist.HdrAll)
	}
	if d.MsgID, err = textHeader(h, persist.HdrMsgID); err != nil {
		return d, err
	}
	if err := persist.CheckMsgID(d.MsgID); err != nil {
		return d, err
	}
	return d, nil
}

// header returns the first value of header name and whether the request
// carries the header at all. Header.Get answers "" for both, but a header
// sent with an empty value ("Sy-Prev-Seq:", a script's unset variable; the
// header encoding makes a value of spaces empty too) is not an absent one:
// taken for absent, a compare-and-set was a plain write, a TTL was dropped,
// and a drop meant for an ephemeral stream dropped the persistent one.
func header(h nats.Header, name string) (string, bool) {
	if v := h[name]; len(v) > 0 {
		return v[0], true
	}
	return "", false
}

// textHeader is a text header's first value, "" when absent. Sent empty it
// is bad-request, as a number's is: "Sy-Key:" from a script's unset
// variable made an unkeyed write (no replace, no compare-and-set's key),
// and "Sy-Msg-Id:" one without the de-duplication its sender counted on.
func textHeader(h nats.Header, name string) (string, error) {
	v, has := header(h, name)
	if has && v == "" {
		return "", persist.Errorf(persist.CodeBadRequest, "%s is empty: leave the header out for none", name)
	}
	return v, nil
}

// uintHeader parses an optional unsigned decimal header; present, it must
// be one, even empty.
func uintHeader(h nats.Header, name string) (uint64, bool, error) {
	v, has := header(h, name)
	if !has {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, persist.Errorf(persist.CodeBadRequest, "%s: %q is not an unsigned integer", name, v)
	}
	return n, true, nil
}

// deadlineHeader parses the optional Sy-Deadline, unix milliseconds. Zero
// means the header was absent.
func deadlineHeader(h nats.Header) (time.Time, error) {
	ms, has, err := uintHeader(h, persist.HdrDeadline)
	if err != nil || !has {
		return time.Time{}, err
	}
	if ms > math.MaxInt64 {
		return time.Time{}, persist.Errorf(persist.CodeBadRequest, "%s: %d is past the largest unix millisecond", persist.HdrDeadline, ms)
	}
	return time.UnixMilli(int64(ms)), nil
}

// boolHeader parses an optional "true"/"false" header; present, it must be
// one of them, even empty (see header).
func boolHeader(h nats.Header, name string) (bool, error) {
	v, has := header(h, name)
	switch {
	case !has, v == "false":
		return false, nil
	case v == "true":
		return true, nil
	default:
		return false, persist.Errorf(persist.CodeBadRequest, "%s: %q is not true or false", name, v)
	}
}
