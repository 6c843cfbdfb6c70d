package persist

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
)

// request is a decoded API request: everything the server needs, checked
// against the wire rules, with no storage work done yet.
type request struct {
	scope     string
	stream    string
	cmd       string
	ephemeral bool

	// set / setMany
	ops []WriteOp

	// get
	seq    uint64
	key    string
	hasSeq bool

	// getAll
	start, end uint64
	limit      int

	// delete
	del DeleteSpec

	// config: nil = read
	configPatch []byte
}

// maxTTL bounds a message TTL in milliseconds (Sy-Ttl and setMany's ttl),
// so that now + ttl, the stored expiry time, cannot overflow into the past.
const maxTTL = 1 << 62

// isWrite reports whether req can share a group-commit transaction.
func (r *request) isWrite() bool { return r.cmd == CmdSet || r.cmd == CmdSetMany }

// decodeRequest turns an API message into a request. It is pure (no I/O, no
// server state) so that it can be fuzzed; any malformed input is an *Error
// with code bad-request or too-large.
func decodeRequest(m *nats.Msg) (*request, error) {
	r := &request{scope: bus.SubjectToken(m.Subject, 1)}
	if !bus.ValidScope(r.scope) {
		return nil, Errorf(CodeBadRequest, "invalid scope %q in subject", r.scope)
	}
	h := m.Header
	r.cmd = h.Get(HdrCmd)
	r.stream = h.Get(HdrStream)
	if r.cmd == "" {
		return nil, Errorf(CodeBadRequest, "missing %s", HdrCmd)
	}
	if err := validStreamName(r.stream); err != nil {
		return nil, err
	}
	var err error
	if r.ephemeral, err = boolHeader(h, HdrEphemeral); err != nil {
		return nil, err
	}
	switch r.cmd {
	case CmdSet:
		op, err := decodeSet(h, m.Data)
		if err != nil {
			return nil, err
		}
		r.ops = []WriteOp{op}
	case CmdSetMany:
		if r.ops, err = decodeSetMany(m.Data); err != nil {
			return nil, err
		}
	case CmdGet:
		if r.seq, r.hasSeq, err = uintHeader(h, HdrSeq); err != nil {
			return nil, err
		}
		r.key = h.Get(HdrKey)
		if r.hasSeq == (r.key != "") {
			return nil, Errorf(CodeBadRequest, "get needs exactly one of %s and %s", HdrSeq, HdrKey)
		}
		if len(r.key) > MaxKeyBytes {
			return nil, Errorf(CodeTooLarge, "key is %d bytes, over %d", len(r.key), MaxKeyBytes)
		}
	case CmdGetAll:
		if r.start, _, err = uintHeader(h, HdrStartSeq); err != nil {
			return nil, err
		}
		if r.end, _, err = uintHeader(h, HdrEndSeq); err != nil {
			return nil, err
		}
		lim, has, err := uintHeader(h, HdrLimit)
		if err != nil {
			return nil, err
		}
		if has && (lim == 0 || lim > 1<<31-1) {
			return nil, Errorf(CodeBadRequest, "%s must be between 1 and %d", HdrLimit, 1<<31-1)
		}
		r.limit = int(lim)
	case CmdDelete:
		if r.del, err = decodeDelete(h); err != nil {
			return nil, err
		}
	case CmdKeys, CmdInventory:
	case CmdConfig:
		if len(strings.TrimSpace(string(m.Data))) > 0 {
			r.configPatch = m.Data
		}
	default:
		return nil, Errorf(CodeBadRequest, "unknown command %q", r.cmd)
	}
	return r, nil
}

// decodeSet reads a set's parameters from its headers; the body is the value.
func decodeSet(h nats.Header, body []byte) (WriteOp, error) {
	op := WriteOp{Key: h.Get(HdrKey), MsgID: h.Get(HdrMsgID), Value: body}
	if len(op.Key) > MaxKeyBytes {
		return op, Errorf(CodeTooLarge, "key is %d bytes, over %d", len(op.Key), MaxKeyBytes)
	}
	prev, has, err := uintHeader(h, HdrPrevSeq)
	if err != nil {
		return op, err
	}
	if has {
		if op.Key == "" {
			return op, Errorf(CodeBadRequest, "%s needs %s: compare-and-set is on a key", HdrPrevSeq, HdrKey)
		}
		op.PrevSeq = &prev
	}
	ttl, has, err := uintHeader(h, HdrTTL)
	if err != nil {
		return op, err
	}
	if has {
		if ttl == 0 || ttl > maxTTL {
			return op, Errorf(CodeBadRequest, "%s must be a positive number of milliseconds", HdrTTL)
		}
		op.TTL = int64(ttl)
	}
	for k, v := range h {
		if len(v) == 0 || hasPrefixFold(k, hdrPrefix) || hasPrefixFold(k, natsPrefix) {
			continue
		}
		if op.Headers == nil {
			op.Headers = make(map[string]string, len(h))
		}
		op.Headers[k] = v[0]
	}
	return op, nil
}

// decodeSetMany reads a frames body into write ops.
func decodeSetMany(body []byte) ([]WriteOp, error) {
	// A frame is at least 2 bytes; guess ~160 per frame to size ops once for
	// the common batches of small values.
	ops := make([]WriteOp, 0, min(MaxBatch, max(16, len(body)/160)))
	// The frame's Message is reused: only its fields are kept, in ops.
	err := decodeFrames(body, MaxBatch, true, func(m *Message) error {
		if len(m.Key) > MaxKeyBytes {
			return Errorf(CodeTooLarge, "message %d: key is %d bytes, over %d", len(ops), len(m.Key), MaxKeyBytes)
		}
		if m.PrevSeq != nil && m.Key == "" {
			return Errorf(CodeBadRequest, "message %d: prevSeq needs a key", len(ops))
		}
		if m.TTL < 0 || m.TTL > maxTTL {
			return Errorf(CodeBadRequest, "message %d: ttl %d is not between 0 and %d milliseconds", len(ops), m.TTL, int64(maxTTL))
		}
		for k := range m.Headers {
			if hasPrefixFold(k, hdrPrefix) || hasPrefixFold(k, natsPrefix) {
				return Errorf(CodeBadRequest, "message %d: header %q uses a reserved prefix", len(ops), k)
			}
		}
		ops = append(ops, WriteOp{Key: m.Key, Headers: m.Headers, Value: m.Value, TTL: m.TTL, MsgID: m.MsgID, PrevSeq: m.PrevSeq})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ops, nil
}

// decodeDelete reads which messages a delete removes: exactly one selector.
func decodeDelete(h nats.Header) (DeleteSpec, error) {
	var d DeleteSpec
	n := 0
	seq, has, err := uintHeader(h, HdrSeq)
	if err != nil {
		return d, err
	}
	if has {
		d.Seqs = []uint64{seq}
		n++
	}
	if list := h.Get(HdrSeqs); list != "" {
		parts := strings.Split(list, ",")
		if len(parts) > MaxBatch {
			return d, Errorf(CodeTooLarge, "%s lists more than %d seqs", HdrSeqs, MaxBatch)
		}
		for _, p := range parts {
			q, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return d, Errorf(CodeBadRequest, "bad seq %q in %s", p, HdrSeqs)
			}
			d.Seqs = append(d.Seqs, q)
		}
		n++
	}
	if d.UpTo, has, err = uintHeader(h, HdrUpTo); err != nil {
		return d, err
	}
	if has {
		n++
	}
	if d.All, err = boolHeader(h, HdrAll); err != nil {
		return d, err
	}
	if d.All {
		n++
	}
	if n != 1 {
		return d, Errorf(CodeBadRequest, "delete needs exactly one of %s, %s, %s and %s", HdrSeq, HdrSeqs, HdrUpTo, HdrAll)
	}
	return d, nil
}

// uintHeader parses an optional unsigned decimal header.
func uintHeader(h nats.Header, name string) (uint64, bool, error) {
	v := h.Get(name)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, Errorf(CodeBadRequest, "%s: %q is not an unsigned integer", name, v)
	}
	return n, true, nil
}

// boolHeader parses an optional "true"/"false" header.
func boolHeader(h nats.Header, name string) (bool, error) {
	switch v := h.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, Errorf(CodeBadRequest, "%s: %q is not true or false", name, v)
	}
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case, so "sy-cmd" cannot
// sneak in as a user header.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
