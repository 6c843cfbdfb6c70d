package watch

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/persist"
)

// Message types the gateway sends, the "type" field of each JSON message.
const (
	TypeReady    = "ready"     // first message: {"type":"ready","from":N}
	TypeMsg      = "msg"       // a set (persist.EventSet)
	TypeDelete   = "delete"    // persist.EventDelete: {"seqs":[...]}
	TypeSkipped  = "skipped"   // persist.EventSkipped: {"count","first","last"}
	TypeResynced = "resynced"  // persist.EventResynced: the gateway re-read the stream; informational
	TypeCaughtUp = "caught-up" // persist.EventCaughtUp: history delivered, live changes follow
	TypeResync   = "resync"    // last message: reconnect with from = its "from"
	TypeError    = "error"     // last message: {"code","message"}
)

// Error codes of an "error" message: the persist codes a watch can end
// with, and unavailable when the gateway's own bus connection is gone.
const (
	CodeBadRequest  = string(persist.CodeBadRequest)
	CodeForbidden   = string(persist.CodeForbidden)
	CodeTooLarge    = string(persist.CodeTooLarge)
	CodeUnavailable = string(persist.CodeUnavailable)
	CodeInternal    = string(persist.CodeInternal)
)

// CodeTooManyConnections starts the body of a 429 refusal: the principal
// has Config.TenantConnections open already. It is never an "error"
// message's code (the refusal comes before the upgrade).
const CodeTooManyConnections = "too-many-connections"

// wireMsg is a "msg" message.
type wireMsg struct {
	Type    string            `json:"type"`
	Seq     uint64            `json:"seq"`
	Key     string            `json:"key,omitempty"`
	Time    int64             `json:"time"`
	Value   string            `json:"value"`
	Enc     string            `json:"enc,omitempty"` // "base64" when the value is not UTF-8
	Headers map[string]string `json:"headers,omitempty"`
}

// wireCtl is every other message; each type uses its own fields.
type wireCtl struct {
	Type    string   `json:"type"`
	From    uint64   `json:"from,omitempty"`
	Seqs    []uint64 `json:"seqs,omitempty"`
	Count   uint64   `json:"count,omitempty"`
	First   uint64   `json:"first,omitempty"`
	Last    uint64   `json:"last,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Code    string   `json:"code,omitempty"`
	Message string   `json:"message,omitempty"`
}

func encodeMsg(m *persist.Message) []byte {
	w := wireMsg{Type: TypeMsg, Seq: m.Seq, Key: m.Key, Time: m.Time, Headers: m.Headers}
	if utf8.Valid(m.Value) {
		w.Value = string(m.Value)
	} else {
		w.Value, w.Enc = base64.StdEncoding.EncodeToString(m.Value), "base64"
	}
	b, err := json.Marshal(w)
	if err != nil {
		// Strings, numbers and a string map always encode.
		panic("watch: encode msg: " + err.Error())
	}
	return b
}

func encodeCtl(c wireCtl) []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic("watch: encode " + c.Type + ": " + err.Error())
	}
	return b
}

// errorCode is the code of the error a watch ended with. The gateway's
// bus connection or persist client closed is unavailable whether the watch
// was running (ErrWatchConnClosed) or could not start (ErrClosed, or the
// feed subscription refused on a closed connection).
func errorCode(err error) string {
	if errors.Is(err, persist.ErrWatchConnClosed) || errors.Is(err, persist.ErrClosed) || errors.Is(err, nats.ErrConnectionClosed) {
		return CodeUnavailable
	}
	return string(persist.CodeOf(err))
}

// encodeCache shares one encoding of a message among the connections that
// watch its stream: the watchers of one persist.Client share each feed
// message's *persist.Message, so with N browsers on a stream a change is
// encoded once, not N times. The map holds its keys, so a pointer cannot
// be freed and reused for another message while it is cached. It holds at
// most n messages and maxBytes of values and encodings, the oldest going
// first: what is cached is live changes, seen by every connection within
// moments, and only their memory counts against the process.
type encodeCache struct {
	mu       sync.Mutex // protects the rest
	m        map[*persist.Message][]byte
	fifo     []*persist.Message // a ring: the oldest at head
	head, n  int
	bytes    int
	maxBytes int
}

func newEncodeCache(n, maxBytes int) *encodeCache {
	return &encodeCache{m: make(map[*persist.Message][]byte, n), fifo: make([]*persist.Message, n), maxBytes: maxBytes}
}

func cost(m *persist.Message, b []byte) int { return len(m.Value) + len(b) }

func (c *encodeCache) encode(m *persist.Message) []byte {
	c.mu.Lock()
	b, ok := c.m[m]
	c.mu.Unlock()
	if ok {
		return b
	}
	b = encodeMsg(m)
	if cost(m, b) > c.maxBytes {
		return b // it would push out everything else
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[m]; ok {
		return b
	}
	for c.n == len(c.fifo) || c.bytes+cost(m, b) > c.maxBytes {
		old := c.fifo[c.head]
		c.bytes -= cost(old, c.m[old])
		delete(c.m, old)
		c.fifo[c.head] = nil
		c.head = (c.head + 1) % len(c.fifo)
		c.n--
	}
	c.fifo[(c.head+c.n)%len(c.fifo)] = m
	c.n++
	c.bytes += cost(m, b)
	c.m[m] = b
	return b
}
