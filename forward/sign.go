package forward

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// The signing headers of a batch request.
const (
	// HeaderPeer names the sending peer; the receiver looks its secret up
	// by it and acts on it, never on the body's "from".
	HeaderPeer = "Sy-Peer"
	// HeaderTimestamp is the send time in unix seconds, decimal.
	HeaderTimestamp = "Sy-Timestamp"
	// HeaderNonce is a decimal uint64 that never repeats for one peer.
	HeaderNonce = "Sy-Nonce"
	// HeaderSignature is the hex HMAC-SHA256, keyed with the sender's
	// secret, of timestamp + "." + nonce + "." + body.
	HeaderSignature = "Sy-Signature"
)

// Errors of header parsing. The receiver answers 403 for errNoPeer and
// errBadSignature, 400 for the others.
var (
	errNoPeer       = errors.New("missing peer id")
	errBadTimestamp = errors.New("malformed timestamp")
	errBadNonce     = errors.New("malformed nonce")
	errBadSignature = errors.New("malformed signature")
)

// auth is the parsed signing headers of one request.
type auth struct {
	peer  string
	ts    int64
	nonce uint64
	sig   [sha256.Size]byte
	// tsText and nonceText are the header values as signed.
	tsText, nonceText string
}

// parseDecimal accepts 1 to 19 ASCII digits: no sign, no spaces, no
// leading '+', so one value has exactly one spelling.
func parseDecimal(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// parseAuth reads the signing headers. The signature is only checked for
// shape here; whether it matches is the receiver's business.
func parseAuth(h http.Header, needSig bool) (auth, error) {
	a := auth{peer: h.Get(HeaderPeer)}
	if a.peer == "" {
		return a, errNoPeer
	}
	a.tsText = h.Get(HeaderTimestamp)
	ts, ok := parseDecimal(a.tsText)
	if !ok {
		return a, errBadTimestamp
	}
	a.ts = int64(ts)
	a.nonceText = h.Get(HeaderNonce)
	if a.nonce, ok = parseDecimal(a.nonceText); !ok {
		return a, errBadNonce
	}
	if needSig {
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

// signer computes signatures with one secret, reusing HMAC states.
type signer struct{ pool sync.Pool }

func newSigner(secret []byte) *signer {
	key := append([]byte(nil), secret...)
	return &signer{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

// sum writes the signature of (ts, nonce, body) into out.
func (s *signer) sum(out *[sha256.Size]byte, ts, nonce string, body []byte) {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write([]byte(nonce))
	h.Write([]byte{'.'})
	h.Write(body)
	h.Sum(out[:0])
	s.pool.Put(h)
}

// Sign returns the hex signature of a batch body, as [HeaderSignature]
// carries it.
func Sign(secret []byte, ts int64, nonce uint64, body []byte) string {
	var sum [sha256.Size]byte
	newSigner(secret).sum(&sum, strconv.FormatInt(ts, 10), strconv.FormatUint(nonce, 10), body)
	return hex.EncodeToString(sum[:])
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

// fresh reports whether admit would take nonce now, without recording it.
func (w *nonceWindow) fresh(nonce uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, dup := w.seen[nonce]
	return nonce > w.floor && !dup
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
