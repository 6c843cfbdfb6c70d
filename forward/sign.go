package forward

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// ProtocolVersion is the version of the forward wire protocol this
// package speaks, sent in [HeaderVersion]. Version 3 signs the request's
// headers, the body's length and SHA-256 included, so a receiver
// authenticates a request before it reads a byte of its body, and the
// peer the request is for ([HeaderTo]), so a batch captured on its way
// to one peer is refused by every other peer that trusts the same
// sender. Version 2 signed the same headers but no destination; version
// 1 (no [HeaderVersion]) signed the body itself. A receiver refuses both
// with 400 and says so.
const ProtocolVersion = "3"

// The signing headers of a batch request.
const (
	// HeaderVersion is [ProtocolVersion]. It is part of the signed string.
	HeaderVersion = "Sy-Version"
	// HeaderPeer names the sending peer; the receiver looks its secret up
	// by it and acts on it, never on the body's "from".
	HeaderPeer = "Sy-Peer"
	// HeaderTo names the peer the request is for: a receiver takes only
	// requests signed for its own id (ReceiverConfig.Self).
	HeaderTo = "Sy-To"
	// HeaderTimestamp is the send time in unix seconds: 1 to 19 decimal
	// digits, no leading zero, at most 2^63-1.
	HeaderTimestamp = "Sy-Timestamp"
	// HeaderNonce is a uint64 that never repeats for one peer: 1 to 20
	// decimal digits, no leading zero, at most 2^64-1.
	HeaderNonce = "Sy-Nonce"
	// HeaderBodySHA256 is the SHA-256 of the body, 64 lowercase hex digits.
	HeaderBodySHA256 = "Sy-Body-SHA256"
	// HeaderSignature is the hex HMAC-SHA256, keyed with the sender's
	// secret, of the canonical string of the request's signed headers
	// (see [SignHeaders]).
	HeaderSignature = "Sy-Signature"
)

// Errors of header parsing. The receiver answers 403 for errNoPeer and
// errBadSignature, 400 for the others.
var (
	errNoPeer       = errors.New("missing peer id")
	errNoTo         = errors.New("missing destination peer id (" + HeaderTo + ")")
	errBadVersion   = errors.New("unsupported protocol version")
	errBadTimestamp = errors.New("malformed timestamp")
	errBadNonce     = errors.New("malformed nonce")
	errBadBodyHash  = errors.New("malformed body hash")
	errBadSignature = errors.New("malformed signature")
)

// auth is the parsed signing headers of one request.
type auth struct {
	peer    string
	to      string // the destination signed for
	version string
	ts      int64
	nonce   uint64
	sig     [sha256.Size]byte
	bodySum [sha256.Size]byte
	// tsText, nonceText and sumText are the header values as signed.
	tsText, nonceText, sumText string
}

// parseDecimal accepts 1 to 20 ASCII digits with no leading zero (but
// "0"), no sign and no spaces, whose value is at most limit: one value has
// exactly one spelling, the one that is signed.
func parseDecimal(s string, limit uint64) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	// ParseUint refuses what overflows a uint64 (a 20-digit value above
	// 18446744073709551615).
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && v <= limit
}

// parseLowerHex decodes exactly len(out) bytes from lowercase hex.
func parseLowerHex(out []byte, s string) bool {
	if len(s) != 2*len(out) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(out, []byte(s))
	return err == nil
}

// parseAuth reads the signing headers. The signature is only checked for
// shape here; whether it matches is the receiver's business. Without
// needSig (InsecureSkipSignature) neither the signature nor the body hash
// is read.
func parseAuth(h http.Header, needSig bool) (auth, error) {
	a := auth{peer: h.Get(HeaderPeer)}
	if a.peer == "" {
		return a, errNoPeer
	}
	a.version = h.Get(HeaderVersion)
	if a.version != ProtocolVersion {
		return a, errBadVersion
	}
	if a.to = h.Get(HeaderTo); a.to == "" && needSig {
		return a, errNoTo
	}
	a.tsText = h.Get(HeaderTimestamp)
	ts, ok := parseDecimal(a.tsText, math.MaxInt64)
	if !ok {
		return a, errBadTimestamp
	}
	a.ts = int64(ts)
	a.nonceText = h.Get(HeaderNonce)
	if a.nonce, ok = parseDecimal(a.nonceText, math.MaxUint64); !ok {
		return a, errBadNonce
	}
	if needSig {
		a.sumText = h.Get(HeaderBodySHA256)
		if !parseLowerHex(a.bodySum[:], a.sumText) {
			return a, errBadBodyHash
		}
		s := h.Get(HeaderSignature)
		if len(s) != 2*sha256.Size {
			return a, errBadSignature
		}
		if _, err := hex.Decode(a.sig[:], []byte(s)); err != nil {
			return a, errBadSignature
		}
	}
	return a, nil
}

// canonical appends the string a version 3 signature covers:
//
//	"sy-forward/3\n" + peer + "\n" + to + "\n" + timestamp + "\n" + nonce + "\n" + content length + "\n" + body SHA-256
//
// with the header values as sent and the length in decimal. No header
// value can hold a newline (net/http refuses one), and every field after
// the two peer ids is digits or hex, so the string has one reading.
func canonical(b []byte, peer, to, ts, nonce string, length int64, sum string) []byte {
	b = append(b, "sy-forward/"+ProtocolVersion+"\n"...)
	b = append(b, peer...)
	b = append(b, '\n')
	b = append(b, to...)
	b = append(b, '\n')
	b = append(b, ts...)
	b = append(b, '\n')
	b = append(b, nonce...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, length, 10)
	b = append(b, '\n')
	return append(b, sum...)
}

// signer computes signatures with one secret, reusing HMAC states.
type signer struct{ pool sync.Pool }

func newSigner(secret []byte) *signer {
	key := append([]byte(nil), secret...)
	return &signer{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// sum writes the signature of the canonical string of the given header
// values into out.
func (s *signer) sum(out *[sha256.Size]byte, peer, to, ts, nonce string, length int64, bodySum string) {
	var buf [256]byte
	msg := canonical(buf[:0], peer, to, ts, nonce, length, bodySum)
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(msg)
	h.Sum(out[:0])
	s.pool.Put(h)
}

// sign sets the signing headers of a request from peer to the peer to
// carrying body on h; a nil signer (InsecureSkipSignature) sets no body
// hash and no signature.
func (s *signer) sign(h http.Header, peer, to string, ts int64, nonce uint64, body []byte) {
	tsText, nonceText := strconv.FormatInt(ts, 10), strconv.FormatUint(nonce, 10)
	h.Set(HeaderVersion, ProtocolVersion)
	h.Set(HeaderPeer, peer)
	h.Set(HeaderTo, to)
	h.Set(HeaderTimestamp, tsText)
	h.Set(HeaderNonce, nonceText)
	if s == nil {
		return
	}
	bodySum := sha256.Sum256(body)
	sumText := hex.EncodeToString(bodySum[:])
	var sig [sha256.Size]byte
	s.sum(&sig, peer, to, tsText, nonceText, int64(len(body)), sumText)
	h.Set(HeaderBodySHA256, sumText)
	h.Set(HeaderSignature, hex.EncodeToString(sig[:]))
}

// SignHeaders returns the headers a [Sender] signs a request from peer to
// the peer to carrying body with: [HeaderVersion], [HeaderPeer],
// [HeaderTo], [HeaderTimestamp], [HeaderNonce], [HeaderBodySHA256] and
// [HeaderSignature]. The signature covers len(body) as the request's
// Content-Length, so the request must send body with that length (not
// chunked).
func SignHeaders(secret []byte, peer, to string, ts int64, nonce uint64, body []byte) http.Header {
	h := http.Header{}
	newSigner(secret).sign(h, peer, to, ts, nonce, body)
	return h
}

// NonceSource hands out nonces for one sending peer id.
type NonceSource interface {
	// Next returns a nonce never returned before for this peer id, by this
	// process or an earlier one.
	Next() uint64
}

// ClockNonces is the default [NonceSource]: a hybrid clock. Each nonce is
// the current unix time in nanoseconds, or the previous nonce plus one if
// that is not larger. Nonces only ever grow within a process, and a
// restarted sender starts above every nonce its predecessor used, because
// those never ran ahead of the wall clock (that would take more than one
// send per nanosecond). A wall clock stepped back across a restart is the
// one way to repeat; the receiver's window then rejects the overlap as
// replays until the clock passes it, which is loud, not silent.
//
// Processes sharing one peer id need a shared source instead.
type ClockNonces struct {
	Clock Clock // nil means the wall clock
	last  atomic.Uint64
}

// Next implements [NonceSource].
func (c *ClockNonces) Next() uint64 {
	clk := c.Clock
	if clk == nil {
		clk = WallClock
	}
	for {
		last := c.last.Load()
		n := uint64(clk.Now().UnixNano())
		if n <= last {
			n = last + 1
		}
		if c.last.CompareAndSwap(last, n) {
			return n
		}
	}
}

// nonceWindow remembers the last size nonces of one peer. A nonce is
// admitted once, and only if above floor, the largest nonce evicted so far:
// memory stays fixed however long the peer talks, and an old nonce cannot
// come back after its entry was evicted.
type nonceWindow struct {
	mu    sync.Mutex
	floor uint64
	seen  map[uint64]struct{}
	order []uint64 // ring in arrival order
	head  int
	n     int
}

func newNonceWindow(size int) *nonceWindow {
	return &nonceWindow{seen: make(map[uint64]struct{}, size), order: make([]uint64, size)}
}

// admit records nonce and reports whether it was new.
func (w *nonceWindow) admit(nonce uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if nonce <= w.floor {
		return false
	}
	if _, dup := w.seen[nonce]; dup {
		return false
	}
	if w.n == len(w.order) {
		old := w.order[w.head]
		delete(w.seen, old)
		w.floor = max(w.floor, old)
		w.head = (w.head + 1) % len(w.order)
		w.n--
		if nonce <= w.floor {
			return false
		}
	}
	w.order[(w.head+w.n)%len(w.order)] = nonce
	w.n++
	w.seen[nonce] = struct{}{}
	return true
}
