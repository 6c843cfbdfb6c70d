package server

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// replyError answers m with err's code and message.
func (s *Server) replyError(m *nats.Msg, err error) {
	if m == nil || m.Reply == "" {
		return
	}
	code, msg := persist.CodeOf(err), err.Error()
	var e *persist.Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	msg = shortMessage(msg, min(errorMessageMax, int(s.cfg.Conn.MaxPayload())-answerRoom))
	out := &nats.Msg{Subject: m.Reply, Header: nats.Header{persist.HdrError: []string{string(code)}}, Data: []byte(msg)}
	s.respond(m, out)
}

// errorMessageMax bounds the message of an error answer, in bytes. A
// message quotes what it refuses (a header's value, a config field's
// name), which a client that does not check before sending can make
// megabytes long: over the max payload the answer could not be sent, and
// its caller waited out its timeout instead of hearing bad-request.
const errorMessageMax = 1024

// shortMessage is msg cut to at most n bytes, ending in "…" when cut, and
// never inside a UTF-8 sequence.
func shortMessage(msg string, n int) string {
	if len(msg) <= n {
		return msg
	}
	const ellipsis = "…"
	cut := max(0, n-len(ellipsis))
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + ellipsis
}

// respond publishes out, the reply to m. A reply over the connection's max
// payload (a keys list, a delete's seqs, a get of a value near the limit) is
// replaced by a too-large error reply, so the caller hears why instead of
// timing out and retrying. Every answer passes here (getAll's last chunk
// aside, see serveGetAll), so this is where the Observer hears of it.
func (s *Server) respond(m *nats.Msg, out *nats.Msg) {
	err := s.cfg.Conn.PublishMsg(out)
	code := persist.Code(out.Header.Get(persist.HdrError))
	if errors.Is(err, nats.ErrMaxPayload) && code == "" {
		msg := fmt.Sprintf("the reply (%d bytes) is over the connection's max payload of %d bytes", len(out.Data), s.cfg.Conn.MaxPayload())
		code = persist.CodeTooLarge
		err = s.cfg.Conn.PublishMsg(&nats.Msg{Subject: out.Subject, Header: nats.Header{persist.HdrError: []string{string(code)}}, Data: []byte(msg)})
	}
	s.answered(m, code)
	if err != nil {
		s.log.Warn("persist: reply", "subject", out.Subject, "err", err)
	}
}

// answerRoom is what a get reply or a getAll chunk adds around a stored
// message's value, key and user headers: the chunk or reply headers (Sy-Seq,
// Sy-Time, Sy-Ttl, Sy-Chunk, Sy-Eof) and the frame's JSON fields and lengths.
// It is generous; the exact size is only computed for values near the limit.
const answerRoom = 256

// checkAnswerRoom refuses (too-large) a message that could be stored but not
// read back: its get reply or getAll frame would be over the connection's
// max payload, which its write request (without those additions) was not.
// Without it the write succeeds and every later getAll over it, and so every
// watcher of the stream, fails.
func (s *Server) checkAnswerRoom(ops []store.WriteOp) error {
	limit := int(s.cfg.Conn.MaxPayload()) - answerRoom
	for i := range ops {
		op := &ops[i]
		// A cheap upper bound first: JSON escaping at most sextuples a byte.
		bound := len(op.Value) + 6*len(op.Key)
		for k, v := range op.Headers {
			bound += 6*(len(k)+len(v)) + 6
		}
		if bound <= limit {
			continue
		}
		frame, err := persist.AppendFrame(nil, &persist.Frame{Seq: math.MaxUint64, Time: math.MaxInt64, Key: op.Key, Headers: op.Headers, TTL: op.TTL})
		if err != nil {
			return persist.Errorf(persist.CodeBadRequest, "message %d: %v", i, err)
		}
		if n := len(frame) + binary.MaxVarintLen64 + len(op.Value); n > limit {
			return persist.Errorf(persist.CodeTooLarge, "message %d: %d bytes with its metadata, over the %d its answers can carry (the NATS max payload less %d)", i, n, limit, answerRoom)
		}
	}
	return nil
}

// replySet answers a set with {"seq":N,"time":T}, built without reflection
// because it is the hot path.
func (s *Server) replySet(m *nats.Msg, r store.WriteResult) {
	if m.Reply == "" {
		return
	}
	if r.Err != nil {
		s.replyError(m, r.Err)
		return
	}
	b := make([]byte, 0, 48)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, r.Time, 10)
	b = append(b, '}')
	out := &nats.Msg{Subject: m.Reply, Data: b}
	if r.Dup {
		out.Header = nats.Header{persist.HdrDup: []string{"true"}}
	}
	s.respond(m, out)
}

// setManyEntryMax is the most one success entry of a setMany answer takes,
// its separating comma included: a seq and a time of 20 characters each.
// It is every entry's budget: checkSetManyAnswer refuses a setMany whose
// answer could be longer than its messages times this, and replySetMany
// shortens the messages of error entries to it when the full answer does
// not fit.
const setManyEntryMax = len(`{"seq":18446744073709551615,"time":-9223372036854775808},`)

// checkSetManyAnswer refuses (too-large) a setMany of n messages whose
// answer could be over the connection's max payload, before anything is
// applied. The request alone does not tell: an empty message is a 4-byte
// frame and its answer entry up to setManyEntryMax bytes. Without the check
// such a batch was committed and then answered too-large (respond): a
// refusal its caller believes, so that writing the messages again (without
// msgIDs) stored them twice.
func (s *Server) checkSetManyAnswer(n int) error {
	limit := int(s.cfg.Conn.MaxPayload()) - answerRoom
	if size := 1 + n*setManyEntryMax; size > limit {
		return persist.Errorf(persist.CodeTooLarge, "%d messages: their answer can take %d bytes (%d each), over the %d it can carry (the NATS max payload less %d); send at most %d per setMany",
			n, size, setManyEntryMax, limit, answerRoom, max(0, (limit-1)/setManyEntryMax))
	}
	return nil
}

// replySetMany answers a setMany with one SetManyResult per message. An
// answer over the max payload has its error messages shortened, so that it
// fits (checkSetManyAnswer): its writes are committed, they must be told.
func (s *Server) replySetMany(m *nats.Msg, rs []store.WriteResult) {
	if m.Reply == "" {
		return
	}
	b, err := appendSetManyAnswer(make([]byte, 0, 2+len(rs)*36), rs, false)
	if err == nil && len(b) > int(s.cfg.Conn.MaxPayload())-answerRoom {
		b, err = appendSetManyAnswer(b[:0], rs, true)
	}
	if err != nil {
		s.replyError(m, persist.Errorf(persist.CodeInternal, "encode reply: %v", err))
		return
	}
	s.respond(m, &nats.Msg{Subject: m.Reply, Data: b})
}

// appendSetManyAnswer appends the JSON of []SetManyResult for rs, built
// without reflection: a batch's reply has one entry per message. Errors are
// rare and take json.Marshal for their free text; short cuts their messages
// so that no entry is over setManyEntryMax.
func appendSetManyAnswer(b []byte, rs []store.WriteResult, short bool) ([]byte, error) {
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		if r.Err != nil {
			var err error
			if b, err = appendSetManyError(b, r.Err, short); err != nil {
				return b, err
			}
			continue
		}
		b = append(b, '{')
		if r.Seq != 0 {
			b = strconv.AppendUint(append(b, `"seq":`...), r.Seq, 10)
		}
		if r.Time != 0 {
			if r.Seq != 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(append(b, `"time":`...), r.Time, 10)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendSetManyError appends the answer entry of a refused message. With
// short, its message is cut (ending in "…") until the entry fits
// setManyEntryMax less its comma; the code, what a caller acts on, stays.
func appendSetManyError(b []byte, e *persist.Error, short bool) ([]byte, error) {
	const budget, ellipsis = setManyEntryMax - 1, "…"
	prefix, msg := e.Message, e.Message
	for {
		j, err := json.Marshal(persist.SetManyResult{Err: &persist.Error{Code: e.Code, Message: msg}})
		if err != nil {
			return b, err
		}
		over := len(j) - budget
		if !short || over <= 0 || msg == "" {
			return append(b, j...), nil
		}
		// Keep at most what leaves over bytes fewer with the ellipsis:
		// escapes make some bytes longer in JSON, so it may take a few
		// rounds.
		n := len(msg) - over - len(ellipsis)
		for n > 0 && !utf8.RuneStart(prefix[n]) {
			n--
		}
		if n <= 0 {
			msg = ""
			continue
		}
		prefix = prefix[:n]
		msg = prefix + ellipsis
	}
}

// replyGet answers a get: the raw value, metadata and user headers in headers.
func (s *Server) replyGet(m *nats.Msg, msg *persist.Frame) {
	if m.Reply == "" {
		return
	}
	h := make(nats.Header, len(msg.Headers)+4)
	for k, v := range msg.Headers {
		h[k] = []string{v}
	}
	h[persist.HdrSeq] = []string{itoa(msg.Seq)}
	h[persist.HdrTime] = []string{strconv.FormatInt(msg.Time, 10)}
	if msg.Key != "" {
		h[persist.HdrKey] = []string{msg.Key}
	}
	if msg.TTL > 0 {
		h[persist.HdrTTL] = []string{strconv.FormatInt(msg.TTL, 10)}
	}
	s.respond(m, &nats.Msg{Subject: m.Reply, Header: h, Data: msg.Value})
}

// replyDelete answers a delete with {"seqs":[...]}, marked Sy-Duplicate when
// it repeats the answer of an earlier delete with the same id.
func (s *Server) replyDelete(m *nats.Msg, r store.DeleteResult) {
	if m.Reply == "" {
		return
	}
	b, err := json.Marshal(persist.DeleteResult{Seqs: r.Seqs})
	if err != nil {
		s.replyError(m, persist.Errorf(persist.CodeInternal, "encode reply: %v", err))
		return
	}
	if len(b) > int(s.cfg.Conn.MaxPayload())-answerRoom {
		// A delete of everything (or up to a seq) of a large stream removes
		// more seqs than one reply holds as a list; as runs they are a few
		// bytes. The delete is committed either way: it must be told.
		b = persist.AppendDeleteRuns(nil, r.Seqs)
	}
	out := &nats.Msg{Subject: m.Reply, Data: b}
	if r.Dup {
		out.Header = nats.Header{persist.HdrDup: []string{"true"}}
	}
	s.respond(m, out)
}

func (s *Server) replyJSON(m *nats.Msg, v any) {
	if m.Reply == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.replyError(m, persist.Errorf(persist.CodeInternal, "encode reply: %v", err))
		return
	}
	s.respond(m, &nats.Msg{Subject: m.Reply, Data: b})
}
