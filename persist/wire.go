// Package persist is the client side of switchyard's per-scope streams and
// key-value data: the wire format and its error codes, and the client library
// (Client, Stream, KV, Watch, LiveKV, LocalStream). The server that stores
// the streams is package persist/server, its storage package persist/store;
// a program that only uses the client links neither.
//
// Wire format (see docs/wire.md): a request is a NATS message on
// "{service}.{scope}.api.{serverId}" whose headers carry the command and its
// small parameters and whose body is the raw value. Replies are the raw value
// (get), JSON (set, delete, keys, inventory, config) or numbered binary
// chunks (getAll). Errors carry "Sy-Error: <code>" and a message body.
package persist

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/internal/jsonstr"
)

// Header names of the wire protocol.
const (
	HdrCmd       = "Sy-Cmd"       // command name, required
	HdrStream    = "Sy-Stream"    // stream name, required
	HdrKey       = "Sy-Key"       // key of a keyed message (set, get)
	HdrSeq       = "Sy-Seq"       // sequence number (get, delete; in replies)
	HdrSeqs      = "Sy-Seqs"      // comma-separated seqs (delete)
	HdrUpTo      = "Sy-Up-To"     // delete every seq <= this (delete)
	HdrAll       = "Sy-All"       // "true": delete everything (delete)
	HdrDrop      = "Sy-Drop"      // "true", with Sy-All: remove the stream itself, file included (delete)
	HdrMsgID     = "Sy-Msg-Id"    // de-duplication id (set, delete)
	HdrPrevSeq   = "Sy-Prev-Seq"  // compare-and-set on the key's seq; 0 = must not exist (set)
	HdrTTL       = "Sy-Ttl"       // per-message time to live in milliseconds (set)
	HdrTime      = "Sy-Time"      // unix milliseconds (replies)
	HdrStartSeq  = "Sy-Start-Seq" // first seq, inclusive (getAll); default 1
	HdrEndSeq    = "Sy-End-Seq"   // last seq, inclusive (getAll); default: the end
	HdrLimit     = "Sy-Limit"     // at most this many messages (getAll page)
	HdrChunk     = "Sy-Chunk"     // chunk number, from 0 (getAll replies)
	HdrEOF       = "Sy-Eof"       // "true" on the last chunk (getAll replies)
	HdrNextSeq   = "Sy-Next-Seq"  // where the next page starts when Sy-Limit cut it (last chunk)
	HdrEphemeral = "Sy-Ephemeral" // "true": the stream lives in memory only (on any request)
	HdrCold      = "Sy-Cold"      // "true": no more requests soon; the server closes the stream once idle (any request)
	HdrError     = bus.HdrError   // error code (error replies)
	HdrDup       = "Sy-Duplicate" // "true" when a set or delete was answered from the de-duplication window
	HdrDeadline  = "Sy-Deadline"  // unix milliseconds after which the caller no longer waits: not applied later (any request)
	hdrPrefix    = "Sy-"          // headers with this prefix are the protocol's; others are user headers
	natsPrefix   = "Nats-"        // NATS's own headers are never stored
	// NATS's status headers, as nats.go reads them on a reply.
	natsStatusHdr      = "Status"
	natsDescriptionHdr = "Description"
)

// Commands.
const (
	CmdSet       = "set"
	CmdSetMany   = "setMany"
	CmdGet       = "get"
	CmdGetAll    = "getAll"
	CmdDelete    = "delete"
	CmdKeys      = "keys"
	CmdInventory = "inventory"
	CmdConfig    = "config"
	// CmdStats asks a server for its own figures (ServerStats), on the
	// subject {service}.{ServerScope}.api.{id}.
	CmdStats = "stats"
)

// ServerScope stands in the scope token of the subject of requests to a
// server itself rather than to a stream (CmdStats). It is not a valid
// scope (scopes start with a letter or digit), so no stream has it and a
// tenant, whose permissions name its scopes, cannot send there; the
// trusted client's {service}.*.api.* can.
const ServerScope = "_server"

// ServerStats is a persist server's answer to CmdStats: its open streams
// against its cap and its streams on disk, as Stats of package server has
// them.
type ServerStats struct {
	ID string `json:"id"`
	// Streams is the persistent streams the server holds on disk, open or
	// closed; -1 while the server is still counting them (a walk of its
	// data directory at start), -2 when it cannot (the walk failed, or its
	// storage does not list its streams).
	Streams int64 `json:"streams"`
	// OpenStorage is the streams whose storage is open (or opening or
	// closing), ephemeral ones included; at most MaxOpenStreams. OpenStoragePeak is the most there have been.
	OpenStorage     int64 `json:"open_storage"`
	OpenStoragePeak int64 `json:"open_storage_peak"`
	MaxOpenStreams  int   `json:"max_open_streams"`
	// Descriptors is the file descriptors the open persistent streams
	// hold (ephemeral ones hold none; 2 each with --exclusive-files).
	Descriptors int64 `json:"descriptors"`
	// OpenStreams is the entries of the open-stream cache (ephemeral
	// streams included), OpenBytes the bytes they store.
	OpenStreams int   `json:"open_streams"`
	OpenBytes   int64 `json:"open_bytes"`
	// The cache's counters since the server started (see package server's
	// Stats).
	StreamsRescued   uint64 `json:"streams_rescued"`
	OpenWaitCloses   uint64 `json:"open_wait_closes"`
	StreamsCompacted uint64 `json:"streams_compacted"`
	// CompactBacklog is the streams waiting for a compaction now (the
	// closer leaves them while requests are being served).
	CompactBacklog int `json:"compact_backlog"`
	// MaxQueue and MaxQueueBytes are the server's queue bounds (requests
	// waiting on one stream; bytes of requests held over all streams),
	// QueuedBytes what it holds now, QueueRefused the requests refused
	// unavailable since it started because of either.
	MaxQueue      int    `json:"max_queue"`
	MaxQueueBytes int64  `json:"max_queue_bytes"`
	QueuedBytes   int64  `json:"queued_bytes"`
	QueueRefused  uint64 `json:"queue_refused"`
}

// Wire limits.
const (
	// MaxKeyBytes bounds a key; longer keys are too-large.
	MaxKeyBytes = 4096
	// MaxMsgIDBytes bounds a msgID (Sy-Msg-Id, setMany's msgId); longer
	// ids are too-large. Every id is held for the de-duplication window
	// (two minutes) in the stream's file and in the server's memory, so an
	// unbounded one is memory a client can take; 1,024 bytes is more than
	// any UUID, ULID or content hash needs.
	MaxMsgIDBytes = 1024
	// MaxStreamNameBytes bounds a stream name; longer names are bad-request.
	MaxStreamNameBytes = 4000
	// MaxDescBytes bounds a stream's desc: a config request setting a
	// longer one is too-large and changes nothing. Config and inventory
	// replies carry desc, so it must leave them far under a NATS payload.
	MaxDescBytes = 4096
	// ChunkBytes is the target size of one getAll reply chunk.
	ChunkBytes = 256 << 10
)

// MaxTTL bounds a message TTL in milliseconds (Sy-Ttl and setMany's ttl),
// so that now + ttl, the stored expiry time, cannot overflow into the past.
const MaxTTL = 1 << 62

// ReservedHeader reports whether a header name belongs to the protocol
// ("Sy-...") or to NATS ("Nats-...", and its status headers "Status" and
// "Description"), ignoring ASCII case: such headers are never stored as
// user headers, and a client refuses to send them as one. A get's reply
// carrying a stored "Status: 503" would read as "no responders".
func ReservedHeader(name string) bool {
	return hasPrefixFold(name, hdrPrefix) || hasPrefixFold(name, natsPrefix) ||
		strings.EqualFold(name, natsStatusHdr) || strings.EqualFold(name, natsDescriptionHdr)
}

// CheckHeader refuses, as bad-request, a user header that cannot travel
// as it is: a reserved name; a name NATS headers cannot carry (printable
// ASCII without space and the separators "(),/:;<=>?@[\]{}), which
// nats.go refuses to send or to read back (a message stored so by setMany
// could never be read with get); or a value breaking the naming rule,
// which the header encoding changes on the way (it trims the ends and turns
// CR and LF into spaces: " v\n" was stored as "v") or which is not valid
// UTF-8. An empty value is kept.
func CheckHeader(name, value string) error {
	if ReservedHeader(name) {
		return Errorf(CodeBadRequest, "user header %q is reserved", name)
	}
	if !headerNameOK(name) {
		return Errorf(CodeBadRequest, "user header %q: a name is printable ASCII without space or any of %s", name, headerNameSeparators)
	}
	if value != "" {
		if why := validName(value); why != "" {
			return Errorf(CodeBadRequest, "user header %q: its value %s", name, why)
		}
	}
	return nil
}

// headerNameSeparators are the characters nats.go refuses in a header name.
const headerNameSeparators = `"()/,:;<=>?@[\]{}`

func headerNameOK(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 33 || c > 126 || strings.IndexByte(headerNameSeparators, c) >= 0 {
			return false
		}
	}
	return true
}

// CheckMsgID refuses, as bad-request, a msgID that breaks the naming rule:
// in Sy-Msg-Id the header encoding would change it (" order-1" arrives as
// "order-1", the msgID of another write, and is taken for its retry), and
// text that is not valid UTF-8 would be converted in a setMany frame. One
// longer than MaxMsgIDBytes is too-large. The client checks before sending
// and the server on arrival (other clients send what they like).
func CheckMsgID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) > MaxMsgIDBytes {
		return Errorf(CodeTooLarge, "msgId is %d bytes, over %d", len(id), MaxMsgIDBytes)
	}
	if why := validName(id); why != "" {
		return Errorf(CodeBadRequest, "msgId %q %s", id, why)
	}
	return nil
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case, so "sy-cmd" cannot
// sneak in as a user header.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// ValidStreamName reports why name cannot name a stream (a bad-request
// *Error), or nil. A name is 1 to MaxStreamNameBytes bytes of valid UTF-8
// with no control character (U+0000-U+001F, U+007F-U+009F) and no
// whitespace at either end: see validName for why.
func ValidStreamName(name string) error {
	if name == "" {
		return Errorf(CodeBadRequest, "missing stream name (%s)", HdrStream)
	}
	if len(name) > MaxStreamNameBytes {
		return Errorf(CodeBadRequest, "stream name is %d bytes, over the limit of %d", len(name), MaxStreamNameBytes)
	}
	if why := validName(name); why != "" {
		return Errorf(CodeBadRequest, "stream name %q %s", name, why)
	}
	return nil
}

// ValidKey reports why key cannot be a message key, or nil. The empty key
// means "no key" and is valid here. A key longer than MaxKeyBytes is a
// too-large *Error; one that breaks the naming rule of ValidStreamName is a
// bad-request *Error.
func ValidKey(key string) error {
	if len(key) > MaxKeyBytes {
		return Errorf(CodeTooLarge, "key is %d bytes, over %d", len(key), MaxKeyBytes)
	}
	if key == "" {
		return nil
	}
	if why := validName(key); why != "" {
		return Errorf(CodeBadRequest, "key %q %s", key, why)
	}
	return nil
}

// validName says what is wrong with a stream name or key, or "". Names and
// keys travel in NATS headers, whose encoding does not round-trip every
// string: nats.go trims spaces, tabs, CR and LF from both ends of a header
// value and turns CR and LF inside it into spaces, and readers drop the
// leading spaces of a value. Keys also travel in JSON (setMany and getAll
// frames, the change feed), where encoding/json would turn invalid UTF-8
// and lone surrogate escapes into U+FFFD (the frame decoders refuse them on
// the raw bytes first: see jsonstr.CheckText). Any of
// these would store a name other than the one asked for, so that two names
// would silently share one stream or key; refusing them is the rule. The
// C1 controls and Unicode spaces are refused too, though the encodings keep
// them, so that the rule reads "no control character, no whitespace at
// either end" with no exceptions to remember.
func validName(s string) string {
	// ASCII, the common case, in one pass over bytes.
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if c < 0x20 || c == 0x7f {
			return fmt.Sprintf("contains the control character %U", rune(c))
		}
	}
	if ascii {
		if s != "" && (isASCIISpace(s[0]) || isASCIISpace(s[len(s)-1])) {
			return "starts or ends with whitespace"
		}
		return ""
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("contains the control character %U", r)
		}
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "starts or ends with whitespace"
	}
	return ""
}

// isASCIISpace is unicode.IsSpace for an ASCII byte that is no control
// character: the space.
func isASCIISpace(c byte) bool { return c == ' ' }

// Code is a stable error code that crosses the wire. The set is closed.
type Code string

// The error codes.
const (
	CodeBadRequest        Code = bus.CodeBadRequest    // malformed request, unknown command, bad name
	CodeNotFound          Code = "not-found"           // no such message
	CodeWrongOwner        Code = "wrong-owner"         // this server does not own the scope; ask the balancer again
	CodeWrongLastSequence Code = "wrong-last-sequence" // compare-and-set failed
	CodeReject            Code = "reject"              // a limit refused the write (discard new, rate)
	CodeTooLarge          Code = "too-large"           // over max_msg_size or a wire limit
	CodeForbidden         Code = "forbidden"           // not allowed for this scope
	CodeUnavailable       Code = "unavailable"         // shutting down, overloaded, or its disk is full or read-only; retry
	CodeInternal          Code = "internal"            // a bug or storage failure
)

// Codes lists every code, in documentation order.
var Codes = []Code{CodeBadRequest, CodeNotFound, CodeWrongOwner, CodeWrongLastSequence, CodeReject, CodeTooLarge, CodeForbidden, CodeUnavailable, CodeInternal}

// Error is an error with a wire code. errors.Is(err, persist.ErrWrongOwner)
// matches any *Error with that code, whatever its message.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Is matches another *Error by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels to compare against with errors.Is.
var (
	ErrBadRequest        = &Error{Code: CodeBadRequest}
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrWrongOwner        = &Error{Code: CodeWrongOwner}
	ErrWrongLastSequence = &Error{Code: CodeWrongLastSequence}
	ErrReject            = &Error{Code: CodeReject}
	ErrTooLarge          = &Error{Code: CodeTooLarge}
	ErrForbidden         = &Error{Code: CodeForbidden}
	ErrUnavailable       = &Error{Code: CodeUnavailable}
	ErrInternal          = &Error{Code: CodeInternal}
)

// Errorf builds an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the wire code of err: its own when it is (or wraps) an
// *Error; unavailable for a request that timed out or found no server
// (bus.ErrTimeout, bus.ErrNoResponders, a context's deadline), which a
// retry may get through; else internal, which says a bug or a storage
// failure, not a slow or absent peer.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, bus.ErrTimeout) || errors.Is(err, bus.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) {
		return CodeUnavailable
	}
	return CodeInternal
}

// ValidCode reports whether c is one of the documented codes.
func ValidCode(c Code) bool {
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}

// SetResult is the reply to a set: where the message landed.
type SetResult struct {
	Seq  uint64 `json:"seq"`
	Time int64  `json:"time"` // unix milliseconds
	// Dup: the set carried a msgID the stream saw within the
	// de-duplication window, and the answer is the first write's; nothing
	// was written now (Sy-Duplicate on the wire, not in the body).
	Dup bool `json:"-"`
}

// SetManyResult is the outcome of one message of a setMany: where it landed,
// or (Err) why it alone was refused.
type SetManyResult struct {
	Seq  uint64
	Time int64  // unix milliseconds
	Err  *Error // nil on success
}

// setManyWire is SetManyResult on the wire: {"seq":1,"time":2} or
// {"error":"message","code":"reject"}.
type setManyWire struct {
	Seq   uint64 `json:"seq,omitempty"`
	Time  int64  `json:"time,omitempty"`
	Error string `json:"error,omitempty"`
	Code  Code   `json:"code,omitempty"`
}

// MarshalJSON writes the wire form.
func (r SetManyResult) MarshalJSON() ([]byte, error) {
	w := setManyWire{Seq: r.Seq, Time: r.Time}
	if r.Err != nil {
		w = setManyWire{Error: r.Err.Message, Code: r.Err.Code}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the wire form; an unknown code becomes internal.
func (r *SetManyResult) UnmarshalJSON(b []byte) error {
	var w setManyWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = SetManyResult{Seq: w.Seq, Time: w.Time}
	switch {
	case w.Code == "" && w.Error == "":
	case !ValidCode(w.Code):
		r.Err = &Error{Code: CodeInternal, Message: fmt.Sprintf("server sent unknown code %q: %q", w.Code, w.Error)}
	default:
		r.Err = &Error{Code: w.Code, Message: w.Error}
	}
	return nil
}

// DeleteResult is the reply to delete: the seqs actually removed, ascending.
// On the wire they are {"seqs":[...]} or, when that list would not fit in a
// reply, {"runs":[[first,last],...]}: the same seqs as inclusive runs, which
// a delete of everything or of a prefix keeps to a few bytes.
type DeleteResult struct {
	Seqs []uint64 `json:"seqs"`
}

// deleteWire is DeleteResult on the wire.
type deleteWire struct {
	Seqs []uint64    `json:"seqs,omitempty"`
	Runs [][2]uint64 `json:"runs,omitempty"`
}

// maxDeleteRunSeqs bounds the seqs a runs answer may expand to, so a
// malformed or hostile answer cannot make the client allocate without limit.
const maxDeleteRunSeqs = 1 << 26

// UnmarshalJSON reads either wire form.
func (r *DeleteResult) UnmarshalJSON(b []byte) error {
	var w deleteWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	r.Seqs = w.Seqs
	if len(w.Runs) == 0 {
		if r.Seqs == nil {
			r.Seqs = []uint64{}
		}
		return nil
	}
	var n uint64
	for _, run := range w.Runs {
		if run[1] < run[0] || run[1]-run[0] >= maxDeleteRunSeqs-n {
			return fmt.Errorf("delete answer: run %v is reversed or expands past %d seqs", run, maxDeleteRunSeqs)
		}
		n += run[1] - run[0] + 1
	}
	r.Seqs = make([]uint64, 0, n)
	for _, run := range w.Runs {
		for q := run[0]; ; q++ {
			r.Seqs = append(r.Seqs, q)
			if q == run[1] {
				break
			}
		}
	}
	return nil
}

// AppendDeleteRuns appends the runs wire form of seqs (ascending) to dst:
// {"runs":[[first,last],...]}.
func AppendDeleteRuns(dst []byte, seqs []uint64) []byte {
	dst = append(dst, `{"runs":[`...)
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = strconv.AppendUint(dst, seqs[i], 10)
		dst = append(dst, ',')
		dst = strconv.AppendUint(dst, seqs[j], 10)
		dst = append(dst, ']')
		i = j + 1
	}
	return append(dst, "]}"...)
}

// Inventory summarises a stream.
type Inventory struct {
	Count  int64   `json:"count"`
	Bytes  int64   `json:"bytes"`
	Seq    uint64  `json:"seq"`              // highest seq ever assigned
	Limits *Config `json:"limits,omitempty"` // only the fields that differ from the defaults
}

// Discard policies.
const (
	DiscardOld = "old" // delete the oldest messages to make room
	DiscardNew = "new" // reject the new message
)

// Config holds a stream's limits. -1 means unlimited for counts, bytes and
// rates; 0 means no age limit. On the wire (and in storage) it is JSON with
// max_age in whole milliseconds.
type Config struct {
	MaxMsgs           int64         // max_msgs; default -1
	MaxAge            time.Duration // max_age; default 0 (forever); whole milliseconds on the wire
	MaxBytes          int64         // max_bytes; default -1
	MaxMsgSize        int64         // max_msg_size; default -1
	MaxMsgsPerSecond  int64         // max_msgs_per_second; default -1
	MaxBytesPerSecond int64         // max_bytes_per_second; default -1
	DiscardPolicy     string        // discard_policy: "old" (default) or "new"
	AllowMsgTTL       bool          // allow_msg_ttl; default false: Sy-Ttl is rejected
	Sync              bool          // sync: synchronous=FULL for this stream; default NORMAL
	Desc              string        // desc: free text
}

// configWire is Config's JSON form.
type configWire struct {
	MaxMsgs           int64  `json:"max_msgs"`
	MaxAge            int64  `json:"max_age"` // milliseconds
	MaxBytes          int64  `json:"max_bytes"`
	MaxMsgSize        int64  `json:"max_msg_size"`
	MaxMsgsPerSecond  int64  `json:"max_msgs_per_second"`
	MaxBytesPerSecond int64  `json:"max_bytes_per_second"`
	DiscardPolicy     string `json:"discard_policy"`
	AllowMsgTTL       bool   `json:"allow_msg_ttl"`
	Sync              bool   `json:"sync"`
	Desc              string `json:"desc,omitempty"`
}

// maxAgeMillisMax is the largest max_age a time.Duration holds (~292 years).
const maxAgeMillisMax = math.MaxInt64 / int64(time.Millisecond)

func (c Config) wire() configWire {
	return configWire{MaxMsgs: c.MaxMsgs, MaxAge: ttlMillis(c.MaxAge), MaxBytes: c.MaxBytes, MaxMsgSize: c.MaxMsgSize,
		MaxMsgsPerSecond: c.MaxMsgsPerSecond, MaxBytesPerSecond: c.MaxBytesPerSecond, DiscardPolicy: c.DiscardPolicy,
		AllowMsgTTL: c.AllowMsgTTL, Sync: c.Sync, Desc: c.Desc}
}

func (w configWire) config() (Config, error) {
	if w.MaxAge > maxAgeMillisMax || w.MaxAge < -maxAgeMillisMax {
		return Config{}, Errorf(CodeBadRequest, "max_age %d ms is out of range", w.MaxAge)
	}
	return Config{MaxMsgs: w.MaxMsgs, MaxAge: time.Duration(w.MaxAge) * time.Millisecond, MaxBytes: w.MaxBytes, MaxMsgSize: w.MaxMsgSize,
		MaxMsgsPerSecond: w.MaxMsgsPerSecond, MaxBytesPerSecond: w.MaxBytesPerSecond, DiscardPolicy: w.DiscardPolicy,
		AllowMsgTTL: w.AllowMsgTTL, Sync: w.Sync, Desc: w.Desc}, nil
}

// MarshalJSON writes the wire form (max_age in milliseconds, rounded up).
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.wire()) }

// UnmarshalJSON reads the wire form; fields absent from b keep their values.
func (c *Config) UnmarshalJSON(b []byte) error {
	w := c.wire()
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	next, err := w.config()
	if err != nil {
		return err
	}
	*c = next
	return nil
}

// ConfigUpdate changes the fields of a stream's Config that it sets; nil
// fields keep their value. Its JSON (the body of a config request) holds
// only the set fields, in Config's wire form.
type ConfigUpdate struct {
	MaxMsgs           *int64
	MaxAge            *time.Duration
	MaxBytes          *int64
	MaxMsgSize        *int64
	MaxMsgsPerSecond  *int64
	MaxBytesPerSecond *int64
	DiscardPolicy     *string
	AllowMsgTTL       *bool
	Sync              *bool
	Desc              *string
}

// configUpdateWire is ConfigUpdate's JSON form.
type configUpdateWire struct {
	MaxMsgs           *int64  `json:"max_msgs,omitempty"`
	MaxAge            *int64  `json:"max_age,omitempty"` // milliseconds
	MaxBytes          *int64  `json:"max_bytes,omitempty"`
	MaxMsgSize        *int64  `json:"max_msg_size,omitempty"`
	MaxMsgsPerSecond  *int64  `json:"max_msgs_per_second,omitempty"`
	MaxBytesPerSecond *int64  `json:"max_bytes_per_second,omitempty"`
	DiscardPolicy     *string `json:"discard_policy,omitempty"`
	AllowMsgTTL       *bool   `json:"allow_msg_ttl,omitempty"`
	Sync              *bool   `json:"sync,omitempty"`
	Desc              *string `json:"desc,omitempty"`
}

// IsZero reports whether u changes nothing.
func (u ConfigUpdate) IsZero() bool { return u == ConfigUpdate{} }

// MarshalJSON writes the set fields in the wire form.
func (u ConfigUpdate) MarshalJSON() ([]byte, error) {
	w := configUpdateWire{MaxMsgs: u.MaxMsgs, MaxBytes: u.MaxBytes, MaxMsgSize: u.MaxMsgSize, MaxMsgsPerSecond: u.MaxMsgsPerSecond,
		MaxBytesPerSecond: u.MaxBytesPerSecond, DiscardPolicy: u.DiscardPolicy, AllowMsgTTL: u.AllowMsgTTL, Sync: u.Sync, Desc: u.Desc}
	if u.MaxAge != nil {
		ms := ttlMillis(*u.MaxAge)
		if *u.MaxAge < 0 {
			// Sent as it is, for the server to refuse: ttlMillis makes
			// it 0, which is "no limit".
			ms = min(int64(*u.MaxAge/time.Millisecond), -1)
		}
		w.MaxAge = &ms
	}
	return json.Marshal(w)
}

// ParseConfigUpdate reads the body of a config request strictly: unknown
// fields, field names in another case than the documented one ("MAX_MSGS"
// for "max_msgs"), text that is not valid UTF-8, trailing data and
// out-of-range values are bad-request. It does not bound desc
// (MaxDescBytes): the server does, for requests only, so that a stream
// stored with a longer desc by an older version still opens.
func ParseConfigUpdate(b []byte) (ConfigUpdate, error) {
	if err := jsonstr.CheckText(b); err != nil {
		return ConfigUpdate{}, Errorf(CodeBadRequest, "config: %v", err)
	}
	var w configUpdateWire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return ConfigUpdate{}, Errorf(CodeBadRequest, "config: %v", err)
	}
	if dec.More() {
		return ConfigUpdate{}, Errorf(CodeBadRequest, "config: trailing data after the JSON object")
	}
	if err := exactFields(b); err != nil {
		return ConfigUpdate{}, err
	}
	u := ConfigUpdate{MaxMsgs: w.MaxMsgs, MaxBytes: w.MaxBytes, MaxMsgSize: w.MaxMsgSize, MaxMsgsPerSecond: w.MaxMsgsPerSecond,
		MaxBytesPerSecond: w.MaxBytesPerSecond, DiscardPolicy: w.DiscardPolicy, AllowMsgTTL: w.AllowMsgTTL, Sync: w.Sync, Desc: w.Desc}
	if w.MaxAge != nil {
		if *w.MaxAge > maxAgeMillisMax || *w.MaxAge < -maxAgeMillisMax {
			return ConfigUpdate{}, Errorf(CodeBadRequest, "config: max_age %d ms is out of range", *w.MaxAge)
		}
		d := time.Duration(*w.MaxAge) * time.Millisecond
		u.MaxAge = &d
	}
	return u, nil
}

// configFields are the JSON field names of a config request, exactly as
// documented. encoding/json matches field names ignoring case, so
// ParseConfigUpdate checks them against this set itself.
var configFields = jsonFields(reflect.TypeFor[configUpdateWire]())

// jsonFields returns the JSON names of struct type t's fields.
func jsonFields(t reflect.Type) map[string]bool {
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names[name] = true
	}
	return names
}

// exactFields refuses a config request whose object has a field name that
// is not one of configFields byte for byte. It runs after the strict decode,
// so b is known to be one JSON object (or null).
func exactFields(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return Errorf(CodeBadRequest, "config: %v", err)
	}
	for name := range fields {
		if configFields[name] {
			continue
		}
		for known := range configFields {
			if strings.EqualFold(name, known) {
				return Errorf(CodeBadRequest, "config: unknown field %q (field names are exact: %q)", name, known)
			}
		}
		return Errorf(CodeBadRequest, "config: unknown field %q", name)
	}
	return nil
}

// Apply returns c with u's set fields changed.
func (u ConfigUpdate) Apply(c Config) Config {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&c.MaxMsgs, u.MaxMsgs)
	set(&c.MaxBytes, u.MaxBytes)
	set(&c.MaxMsgSize, u.MaxMsgSize)
	set(&c.MaxMsgsPerSecond, u.MaxMsgsPerSecond)
	set(&c.MaxBytesPerSecond, u.MaxBytesPerSecond)
	if u.MaxAge != nil {
		c.MaxAge = *u.MaxAge
	}
	if u.DiscardPolicy != nil {
		c.DiscardPolicy = *u.DiscardPolicy
	}
	if u.AllowMsgTTL != nil {
		c.AllowMsgTTL = *u.AllowMsgTTL
	}
	if u.Sync != nil {
		c.Sync = *u.Sync
	}
	if u.Desc != nil {
		c.Desc = *u.Desc
	}
	return c
}

// DefaultConfig is the configuration of a new stream.
func DefaultConfig() Config {
	return Config{MaxMsgs: -1, MaxBytes: -1, MaxMsgSize: -1, MaxMsgsPerSecond: -1, MaxBytesPerSecond: -1, DiscardPolicy: DiscardOld}
}

// Validate reports a config that cannot be applied.
func (c Config) Validate() error {
	for name, v := range map[string]int64{"max_msgs": c.MaxMsgs, "max_bytes": c.MaxBytes, "max_msg_size": c.MaxMsgSize, "max_msgs_per_second": c.MaxMsgsPerSecond, "max_bytes_per_second": c.MaxBytesPerSecond} {
		if v < -1 {
			return Errorf(CodeBadRequest, "%s must be -1 (unlimited) or >= 0, got %d", name, v)
		}
	}
	if c.MaxAge < 0 {
		return Errorf(CodeBadRequest, "max_age must be >= 0, got %s", c.MaxAge)
	}
	if c.DiscardPolicy != DiscardOld && c.DiscardPolicy != DiscardNew {
		return Errorf(CodeBadRequest, "discard_policy must be %q or %q, got %q", DiscardOld, DiscardNew, c.DiscardPolicy)
	}
	return nil
}

// Message is one stored message as the client API shows it.
type Message struct {
	Seq     uint64
	Time    int64 // unix milliseconds of the write
	Key     string
	Headers map[string]string
	TTL     time.Duration // 0 = none; the wire carries whole milliseconds
	Value   []byte
}

// Entry is one message to write with Stream.SetMany.
type Entry struct {
	Key     string
	Headers map[string]string
	Value   []byte
	// TTL expires the message after this long (rounded up to whole
	// milliseconds); the stream must allow_msg_ttl. 0 = none.
	TTL time.Duration
	// MsgID de-duplicates retries, as SetOptions.MsgID.
	MsgID string
	// PrevSeq is a compare-and-set on Key, as SetOptions.PrevSeq.
	PrevSeq *uint64
}

// Frame is the wire form of a message in getAll chunks, setMany bodies and
// change-feed messages: metadata as JSON, the value as raw bytes. Its
// durations are whole milliseconds, as on the wire. Applications see Message
// and write Entry; servers and storage work with Frame.
type Frame struct {
	Seq     uint64            `json:"seq,omitempty"`
	Time    int64             `json:"time,omitempty"` // unix milliseconds
	Key     string            `json:"key,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	TTL     int64             `json:"ttl,omitempty"` // milliseconds
	// Set-only fields (setMany requests).
	MsgID   string  `json:"msgId,omitempty"`
	PrevSeq *uint64 `json:"prevSeq,omitempty"`
	// Feed-only fields (change feed frames, see feed.go): Op is FeedOpSet
	// (or empty), FeedOpDelete with the removed Seqs, or FeedOpRef for a set
	// too large to travel on the feed (fetch it by Seq).
	Op   string   `json:"op,omitempty"`
	Seqs []uint64 `json:"seqs,omitempty"`

	Value []byte `json:"-"`
}

// Message is f as the client API shows it; Value still aliases f's.
func (f *Frame) Message() Message {
	return Message{Seq: f.Seq, Time: f.Time, Key: f.Key, Headers: f.Headers, TTL: time.Duration(f.TTL) * time.Millisecond, Value: f.Value}
}

// frame is the setMany frame of e.
func (e *Entry) frame() Frame {
	return Frame{Key: e.Key, Headers: e.Headers, Value: e.Value, TTL: ttlMillis(e.TTL), MsgID: e.MsgID, PrevSeq: e.PrevSeq}
}

// Frame format, used by getAll chunks and setMany bodies: a sequence of
// frames, each uvarint(len(meta)) meta uvarint(len(value)) value, where meta
// is the JSON of Frame without its value. Values travel raw.

// AppendFrame appends m as one frame to dst.
func AppendFrame(dst []byte, m *Frame) ([]byte, error) {
	var meta []byte
	var scratch [128]byte
	if b, ok := appendMetaFast(scratch[:0], m); ok {
		meta = b
	} else {
		var err error
		if meta, err = json.Marshal(m); err != nil {
			return dst, fmt.Errorf("encode frame: %w", err)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(meta)))
	dst = append(dst, meta...)
	dst = binary.AppendUvarint(dst, uint64(len(m.Value)))
	return append(dst, m.Value...), nil
}

// appendMetaFast writes the same JSON as json.Marshal(m) without reflection
// for the common frames (no headers, no seqs, strings that need no
// escaping); ok is false for the others, which take json.Marshal. Frames
// are written per message by setMany, getAll and the change feed.
func appendMetaFast(b []byte, m *Frame) ([]byte, bool) {
	if len(m.Headers) > 0 || len(m.Seqs) > 0 || !plainJSON(m.Key) || !plainJSON(m.MsgID) || !plainJSON(m.Op) {
		return b, false
	}
	b = append(b, '{')
	start := len(b)
	if m.Seq != 0 {
		b = strconv.AppendUint(append(b, `"seq":`...), m.Seq, 10)
	}
	if m.Time != 0 {
		b = comma(b, start)
		b = strconv.AppendInt(append(b, `"time":`...), m.Time, 10)
	}
	if m.Key != "" {
		b = comma(b, start)
		b = append(append(append(b, `"key":"`...), m.Key...), '"')
	}
	if m.TTL != 0 {
		b = comma(b, start)
		b = strconv.AppendInt(append(b, `"ttl":`...), m.TTL, 10)
	}
	if m.MsgID != "" {
		b = comma(b, start)
		b = append(append(append(b, `"msgId":"`...), m.MsgID...), '"')
	}
	if m.PrevSeq != nil {
		b = comma(b, start)
		b = strconv.AppendUint(append(b, `"prevSeq":`...), *m.PrevSeq, 10)
	}
	if m.Op != "" {
		b = comma(b, start)
		b = append(append(append(b, `"op":"`...), m.Op...), '"')
	}
	return append(b, '}'), true
}

// comma separates a field from the previous one, if any since start.
func comma(b []byte, start int) []byte {
	if len(b) > start {
		return append(b, ',')
	}
	return b
}

// plainJSON reports whether s is printable ASCII that encoding/json writes
// verbatim inside quotes (it escapes '"', '\\' and, for HTML, '<', '>', '&').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// errFrame is returned for malformed frame data.
var errFrame = Errorf(CodeBadRequest, "malformed frame")

// DecodeFrames decodes every frame in b, calling fn with a new *Frame for
// each. Values alias b. At most maxFrames frames are accepted (0 means no
// limit); more is too-large.
func DecodeFrames(b []byte, maxFrames int, fn func(*Frame) error) error {
	return walkFrames(b, maxFrames, false, fn)
}

// ScanFrames is DecodeFrames with one *Frame reused for every frame, which
// saves an allocation per frame: fn must not keep the pointer.
func ScanFrames(b []byte, maxFrames int, fn func(*Frame) error) error {
	return walkFrames(b, maxFrames, true, fn)
}

func walkFrames(b []byte, maxFrames int, reuse bool, fn func(*Frame) error) error {
	var scratch Frame
	for n := 0; len(b) > 0; n++ {
		if maxFrames > 0 && n >= maxFrames {
			return Errorf(CodeTooLarge, "more than %d frames", maxFrames)
		}
		meta, value, rest, err := nextFrame(b)
		if err != nil {
			return err
		}
		b = rest
		m := &scratch
		if reuse {
			scratch = Frame{}
		} else {
			m = new(Frame)
		}
		// "{}" (a plain append in setMany) needs no JSON decoder.
		if len(meta) != 2 || meta[0] != '{' || meta[1] != '}' {
			if err := jsonstr.CheckText(meta); err != nil {
				return Errorf(CodeBadRequest, "malformed frame metadata: %v", err)
			}
			if err := json.Unmarshal(meta, m); err != nil {
				return Errorf(CodeBadRequest, "malformed frame metadata: %v", err)
			}
		}
		m.Value = value
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// nextFrame splits the first frame off b: its metadata JSON, its value
// (capacity clipped, so appending to it cannot overwrite the next frame) and
// the rest of b. It is the one place that reads the frame layout.
func nextFrame(b []byte) (meta, value, rest []byte, err error) {
	ml, k := binary.Uvarint(b)
	if k <= 0 || ml > uint64(len(b)-k) {
		return nil, nil, nil, errFrame
	}
	b = b[k:]
	meta, b = b[:ml], b[ml:]
	vl, k := binary.Uvarint(b)
	if k <= 0 || vl > uint64(len(b)-k) {
		return nil, nil, nil, errFrame
	}
	b = b[k:]
	return meta, b[:vl:vl], b[vl:], nil
}

// MaxBatch bounds the messages of one setMany request; more is too-large.
const MaxBatch = 10000

// MarshalJSON writes limits with only the fields that differ from
// DefaultConfig, and leaves "limits" out when none do.
func (inv Inventory) MarshalJSON() ([]byte, error) {
	out := struct {
		Count  int64                      `json:"count"`
		Bytes  int64                      `json:"bytes"`
		Seq    uint64                     `json:"seq"`
		Limits map[string]json.RawMessage `json:"limits,omitempty"`
	}{Count: inv.Count, Bytes: inv.Bytes, Seq: inv.Seq}
	if inv.Limits != nil {
		diff, err := configDiff(*inv.Limits)
		if err != nil {
			return nil, err
		}
		if len(diff) > 0 {
			out.Limits = diff
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes: absent limit fields take their
// DefaultConfig values, so Limits is a complete Config.
func (inv *Inventory) UnmarshalJSON(b []byte) error {
	var in struct {
		Count  int64           `json:"count"`
		Bytes  int64           `json:"bytes"`
		Seq    uint64          `json:"seq"`
		Limits json.RawMessage `json:"limits"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*inv = Inventory{Count: in.Count, Bytes: in.Bytes, Seq: in.Seq}
	if len(in.Limits) > 0 && string(in.Limits) != "null" {
		c := DefaultConfig()
		if err := json.Unmarshal(in.Limits, &c); err != nil {
			return err
		}
		inv.Limits = &c
	}
	return nil
}

// configDiff returns the JSON fields of c whose values differ from
// DefaultConfig's.
func configDiff(c Config) (map[string]json.RawMessage, error) {
	var cur, def map[string]json.RawMessage
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &cur); err != nil {
		return nil, err
	}
	b, err = json.Marshal(DefaultConfig())
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &def); err != nil {
		return nil, err
	}
	for k, v := range cur {
		if string(def[k]) == string(v) {
			delete(cur, k)
		}
	}
	return cur, nil
}
