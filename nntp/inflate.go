package nntp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// inflate.go is a streaming raw DEFLATE (RFC 1951) decoder for RFC 8054
// COMPRESS DEFLATE. Servers such as INN end each response with
// Z_PARTIAL_FLUSH: the block is closed and an empty fixed-Huffman block
// follows, but the stream is not byte-aligned, so the last bits of the
// response stay in the server's buffer until it writes the next one. A
// decoder that looks ahead (a table lookup of 9 or more bits, as
// compress/flate does) then waits for bytes that will not come before the
// client sends its next command: the response stalls.
//
// This decoder is eager instead:
//   - it takes a byte from its source only when the symbol it is decoding
//     cannot be told apart with the bits it already holds (a code is
//     accepted as soon as its own length of bits is there), and it drops
//     bits only once a whole unit (a symbol with its extra bits, a match with
//     its distance) is complete, so it can stop between any two bytes and
//     resume later;
//   - once it has decoded anything, it does not wait for input: when the
//     source has no more bytes buffered it returns what it has.
//
// It reads its source through a *bufio.Reader, whose buffered bytes it may
// load ahead into its bit buffer (that never waits), but between calls to
// Read it has consumed from the source exactly the bytes whose bits it has
// used: after the final block the source is positioned at the next byte.

const (
	windowSize = 1 << 15 // the DEFLATE window: distances reach 32 KiB back
	maxCodeLen = 15      // longest Huffman code RFC 1951 allows
	fastBits   = 10      // codes up to this length decode with one lookup
	fastMask   = 1<<fastBits - 1
	maxLitSyms = 288 // literal/length alphabet (286 and 287 never occur)
	numCLSyms  = 19  // code-length alphabet of a dynamic header
)

// errCorruptDeflate is matched by every error about malformed compressed
// data (as opposed to I/O errors of the source).
var errCorruptDeflate = errors.New("corrupt deflate data")

// errWouldBlock is internal: decoding stopped because the next input byte
// is not buffered and output is ready to be handed out first.
var errWouldBlock = errors.New("inflate: would block")

// Base values and extra bits of length symbols 257..285 and distance
// symbols 0..29 (RFC 1951 section 3.2.5).
var (
	lenBase = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
		35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lenExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
		3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
		257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
		7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	// clOrder is the order in which a dynamic header sends the lengths of
	// the code-length code.
	clOrder = [numCLSyms]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

// huffman is a canonical Huffman code: a lookup table for codes of up to
// fastBits bits, and per-length counts for the longer ones.
type huffman struct {
	// fast is indexed by the next fastBits input bits (first bit lowest):
	// sym<<4 | length, or 0 when the code is longer than fastBits or the
	// bits start no code.
	fast    [1 << fastBits]uint16
	count   [maxCodeLen + 1]uint16 // codes of each length
	first   [maxCodeLen + 1]int    // first code of each length (MSB first)
	offs    [maxCodeLen + 1]int    // index in symbols of that first code
	symbols [maxLitSyms]uint16     // symbols ordered by code
	n       int                    // number of codes
}

// build makes the code whose code lengths are lens (0 = symbol unused). The
// set must be complete, except that a single code of length 1 is allowed
// (RFC 1951 permits one distance code) and, when allowEmpty, no code at all
// (a block of literals only); using a code that does not exist is an error
// when decoding.
func (h *huffman) build(lens []uint8, allowEmpty bool) error {
	h.count = [maxCodeLen + 1]uint16{}
	for _, l := range lens {
		h.count[l]++
	}
	h.count[0] = 0
	left := 1
	h.n = 0
	for l := 1; l <= maxCodeLen; l++ {
		left <<= 1
		left -= int(h.count[l])
		if left < 0 {
			return errors.New("over-subscribed code")
		}
		h.n += int(h.count[l])
	}
	switch {
	case left == 0:
	case h.n == 0 && allowEmpty:
	case h.n == 1 && h.count[1] == 1:
	case h.n == 0:
		return errors.New("empty code")
	default:
		return errors.New("incomplete code")
	}
	code, idx := 0, 0
	for l := 1; l <= maxCodeLen; l++ {
		h.first[l], h.offs[l] = code, idx
		idx += int(h.count[l])
		code = (code + int(h.count[l])) << 1
	}
	next := h.offs
	for sym, l := range lens {
		if l != 0 {
			h.symbols[next[l]] = uint16(sym)
			next[l]++
		}
	}
	h.fast = [1 << fastBits]uint16{}
	for l := 1; l <= fastBits; l++ {
		for i := 0; i < int(h.count[l]); i++ {
			sym := h.symbols[h.offs[l]+i]
			rev := int(bits.Reverse16(uint16(h.first[l]+i)) >> (16 - l))
			for j := rev; j < 1<<fastBits; j += 1 << l {
				h.fast[j] = sym<<4 | uint16(l)
			}
		}
	}
	return nil
}

// fixedLit and fixedDist are the codes of fixed-Huffman blocks. The
// distance code has 32 symbols of 5 bits; 30 and 31 are invalid in data.
var fixedLit, fixedDist = func() (*huffman, *huffman) {
	var lens [maxLitSyms]uint8
	for i := range lens {
		switch {
		case i < 144:
			lens[i] = 8
		case i < 256:
			lens[i] = 9
		case i < 280:
			lens[i] = 7
		default:
			lens[i] = 8
		}
	}
	lit, dist := new(huffman), new(huffman)
	if err := lit.build(lens[:], false); err != nil {
		panic("nntp: fixed literal code: " + err.Error())
	}
	var dl [32]uint8
	for i := range dl {
		dl[i] = 5
	}
	if err := dist.build(dl[:], false); err != nil {
		panic("nntp: fixed distance code: " + err.Error())
	}
	return lit, dist
}()

type inflateState uint8

const (
	stHeader      inflateState = iota // next: 3 bits of block header
	stStoredLen                       // LEN and NLEN of a stored block
	stStored                          // copying a stored block
	stDynHeader                       // HLIT, HDIST, HCLEN
	stCodeLenLens                     // lengths of the code-length code
	stCodeLens                        // literal/length and distance code lengths
	stData                            // symbols of a Huffman block
	stDone                            // after the final block
)

// inflater decodes a raw DEFLATE stream from src. Read returns decoded
// bytes as soon as they are decoded. Not safe for concurrent use.
type inflater struct {
	src *bufio.Reader
	in  []byte // peeked from src; in[:ip] is in the bit buffer or used, not yet discarded
	ip  int
	// ahead counts the bytes at the head of src, after a release, that are
	// already in the bit buffer (whole bytes it had not used yet).
	ahead int
	pos   int64  // bytes discarded from src so far, for error messages
	acc   uint64 // bit buffer, next bit lowest; bits above nb are zero
	nb    uint   // bits held in acc

	state  inflateState
	final  bool // the current block is the last one
	stored int  // bytes left in a stored block

	lit, dist       *huffman // codes of the current block
	dynLit, dynDist huffman
	clCode          huffman
	nlit, ndist     int
	nclen, have     int // progress through a dynamic header
	clLens          [numCLSyms]uint8
	lens            [maxLitSyms + 32]uint8

	// hist is the window and the output buffer: hist[rd:wr] is decoded but
	// not yet read. When wr reaches the end and everything is read, writing
	// starts over at 0 and the whole of hist is history (full).
	hist              []byte
	wr, rd            int
	full              bool
	copyLen, copyDist int // a match not yet copied out (the window filled)

	err error // sticky: io.EOF after the final block, or the failure
}

func newInflater(src *bufio.Reader) *inflater {
	return &inflater{src: src, hist: make([]byte, windowSize)}
}

// Read implements io.Reader. It blocks on the source only while it has
// nothing decoded to return.
func (f *inflater) Read(p []byte) (int, error) {
	for {
		if f.rd < f.wr {
			n := copy(p, f.hist[f.rd:f.wr])
			f.rd += n
			return n, nil
		}
		if f.err != nil {
			return 0, f.err
		}
		if len(p) == 0 {
			return 0, nil
		}
		if f.wr == len(f.hist) {
			f.wr, f.rd, f.full = 0, 0, true
		}
		err := f.run()
		f.release()
		if err != nil && err != errWouldBlock {
			f.err = err
		}
	}
}

// release discards the input used so far from src, except whole bytes
// still in the bit buffer: src stays at the first byte not fully used.
func (f *inflater) release() {
	if f.in == nil {
		return // nothing peeked since the last release
	}
	keep := int(f.nb / 8)
	f.src.Discard(f.ip - keep)
	f.pos += int64(f.ip - keep)
	f.in, f.ip, f.ahead = nil, 0, keep
}

// pull moves one input byte into the bit buffer. With output decoded and
// no byte buffered in src it returns errWouldBlock instead of waiting.
func (f *inflater) pull() error {
	if f.ip == len(f.in) {
		f.release()
		// The first f.ahead bytes of src are in the bit buffer already.
		if f.src.Buffered() <= f.ahead {
			if f.wr > f.rd {
				return errWouldBlock
			}
			if _, err := f.src.Peek(f.ahead + 1); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		f.in, _ = f.src.Peek(f.src.Buffered())
		f.ip = f.ahead
	}
	f.acc |= uint64(f.in[f.ip]) << f.nb
	f.ip++
	f.nb += 8
	return nil
}

// fill tops the bit buffer up with bytes already peeked, never waiting:
// the hot loop then decodes whole symbols without calling pull.
func (f *inflater) fill() {
	if len(f.in)-f.ip >= 8 {
		k := (63 - f.nb) / 8
		v := binary.LittleEndian.Uint64(f.in[f.ip:])
		f.acc |= (v & (1<<(8*k) - 1)) << f.nb
		f.ip += int(k)
		f.nb += 8 * k
	}
}

// need makes sure the bit buffer holds n bits.
func (f *inflater) need(n uint) error {
	for f.nb < n {
		if err := f.pull(); err != nil {
			return err
		}
	}
	return nil
}

func (f *inflater) drop(n uint) {
	f.acc >>= n
	f.nb -= n
}

func (f *inflater) corrupt(what string) error {
	return fmt.Errorf("inflate: %w: %s (input byte %d)", errCorruptDeflate, what, f.pos+int64(f.ip)-int64(f.nb/8))
}

// decode reads the symbol of code h that starts off bits into the bit
// buffer and returns it with its length, without dropping any bits.
func (f *inflater) decode(h *huffman, off uint) (sym int, n uint, err error) {
	if h.n == 0 {
		return 0, 0, f.corrupt("symbol of an empty code")
	}
	for {
		e := h.fast[(f.acc>>off)&fastMask]
		l := uint(e & 15)
		if l != 0 && l <= f.nb-off {
			// The bits above nb are zero, but an entry whose length fits
			// in what we hold depends only on bits we hold.
			return int(e >> 4), l, nil
		}
		if l == 0 && f.nb-off >= fastBits {
			break
		}
		if err := f.pull(); err != nil {
			return 0, 0, err
		}
	}
	// Longer than fastBits: walk the canonical code one bit at a time.
	code := int(bits.Reverse16(uint16((f.acc>>off)&fastMask)) >> (16 - fastBits))
	for l := uint(fastBits + 1); l <= maxCodeLen; l++ {
		if err := f.need(off + l); err != nil {
			return 0, 0, err
		}
		code = code<<1 | int(f.acc>>(off+l-1)&1)
		if c := code - h.first[l]; c >= 0 && c < int(h.count[l]) {
			return int(h.symbols[h.offs[l]+c]), l, nil
		}
	}
	return 0, 0, f.corrupt("invalid Huffman code")
}

// run decodes until the window is full (nil), the stream ends (io.EOF), it
// would block with output ready (errWouldBlock), or an error.
func (f *inflater) run() error {
	for {
		switch f.state {
		case stHeader:
			if err := f.need(3); err != nil {
				return err
			}
			f.final = f.acc&1 == 1
			typ := f.acc >> 1 & 3
			f.drop(3)
			switch typ {
			case 0:
				f.drop(f.nb % 8) // stored blocks start on a byte boundary
				f.state = stStoredLen
			case 1:
				f.lit, f.dist = fixedLit, fixedDist
				f.state = stData
			case 2:
				f.state = stDynHeader
			default:
				return f.corrupt("invalid block type")
			}
		case stStoredLen:
			if err := f.need(32); err != nil {
				return err
			}
			n, nn := f.acc&0xffff, f.acc>>16&0xffff
			if n != ^nn&0xffff {
				return f.corrupt("stored block length does not match its complement")
			}
			f.drop(32)
			f.stored = int(n)
			f.state = stStored
		case stStored:
			for f.stored > 0 {
				if f.wr == len(f.hist) {
					return nil
				}
				if f.nb > 0 || f.ip == len(f.in) {
					// Whole bytes left in the bit buffer go first; an
					// empty window is refilled one byte at a time.
					if err := f.need(8); err != nil {
						return err
					}
					f.hist[f.wr] = byte(f.acc)
					f.drop(8)
					f.wr++
					f.stored--
					continue
				}
				n := copy(f.hist[f.wr:min(len(f.hist), f.wr+f.stored)], f.in[f.ip:])
				f.wr += n
				f.ip += n
				f.stored -= n
			}
			f.endBlock()
		case stDynHeader:
			if err := f.need(14); err != nil {
				return err
			}
			f.nlit = int(f.acc&31) + 257
			f.ndist = int(f.acc>>5&31) + 1
			f.nclen = int(f.acc>>10&15) + 4
			f.drop(14)
			if f.nlit > 286 || f.ndist > 30 {
				return f.corrupt("too many length or distance symbols")
			}
			f.clLens = [numCLSyms]uint8{}
			f.have = 0
			f.state = stCodeLenLens
		case stCodeLenLens:
			for f.have < f.nclen {
				if err := f.need(3); err != nil {
					return err
				}
				f.clLens[clOrder[f.have]] = uint8(f.acc & 7)
				f.drop(3)
				f.have++
			}
			if err := f.clCode.build(f.clLens[:], false); err != nil {
				return f.corrupt("code-length code: " + err.Error())
			}
			f.have = 0
			f.state = stCodeLens
		case stCodeLens:
			if err := f.codeLens(); err != nil {
				return err
			}
			f.state = stData
		case stData:
			if err := f.data(); err != nil {
				return err
			}
			if f.state == stData {
				return nil // window full
			}
		case stDone:
			return io.EOF
		}
	}
}

func (f *inflater) endBlock() {
	if f.final {
		f.state = stDone
	} else {
		f.state = stHeader
	}
}

// codeLens reads the literal/length and distance code lengths of a
// dynamic block and builds its codes.
func (f *inflater) codeLens() error {
	total := f.nlit + f.ndist
	for f.have < total {
		sym, n, err := f.decode(&f.clCode, 0)
		if err != nil {
			return err
		}
		if sym < 16 {
			f.drop(n)
			f.lens[f.have] = uint8(sym)
			f.have++
			continue
		}
		var rep int
		var val uint8
		switch sym {
		case 16:
			if f.have == 0 {
				return f.corrupt("repeated length with no first length")
			}
			if err := f.need(n + 2); err != nil {
				return err
			}
			rep, val = 3+int(f.acc>>n&3), f.lens[f.have-1]
			n += 2
		case 17:
			if err := f.need(n + 3); err != nil {
				return err
			}
			rep = 3 + int(f.acc>>n&7)
			n += 3
		default:
			if err := f.need(n + 7); err != nil {
				return err
			}
			rep = 11 + int(f.acc>>n&127)
			n += 7
		}
		if f.have+rep > total {
			return f.corrupt("repeated lengths past the end")
		}
		f.drop(n)
		for range rep {
			f.lens[f.have] = val
			f.have++
		}
	}
	if f.lens[256] == 0 {
		return f.corrupt("no end-of-block code")
	}
	if err := f.dynLit.build(f.lens[:f.nlit], false); err != nil {
		return f.corrupt("literal/length code: " + err.Error())
	}
	if err := f.dynDist.build(f.lens[f.nlit:total], true); err != nil {
		return f.corrupt("distance code: " + err.Error())
	}
	f.lit, f.dist = &f.dynLit, &f.dynDist
	return nil
}

// data decodes the symbols of a Huffman block until its end (the state
// moves on) or until the window is full.
func (f *inflater) data() error {
	for {
		if f.copyLen > 0 {
			f.copyMatch()
		}
		if f.wr == len(f.hist) {
			return nil
		}
		if f.nb < 48 { // a whole length/distance pair
			f.fill()
		}
		var sym int
		var n uint
		if e := f.lit.fast[f.acc&fastMask]; e&15 != 0 && uint(e&15) <= f.nb {
			sym, n = int(e>>4), uint(e&15)
		} else {
			var err error
			if sym, n, err = f.decode(f.lit, 0); err != nil {
				return err
			}
		}
		if sym < 256 {
			f.drop(n)
			f.hist[f.wr] = byte(sym)
			f.wr++
			continue
		}
		if sym == 256 {
			f.drop(n)
			f.endBlock()
			return nil
		}
		sym -= 257
		if sym >= len(lenBase) {
			return f.corrupt("invalid length symbol")
		}
		eb := uint(lenExtra[sym])
		if err := f.need(n + eb); err != nil {
			return err
		}
		length := int(lenBase[sym]) + int(f.acc>>n&(1<<eb-1))
		off := n + eb
		var dsym int
		var dn uint
		if e := f.dist.fast[f.acc>>off&fastMask]; e&15 != 0 && uint(e&15) <= f.nb-off {
			dsym, dn = int(e>>4), uint(e&15)
		} else {
			var err error
			if dsym, dn, err = f.decode(f.dist, off); err != nil {
				return err
			}
		}
		if dsym >= len(distBase) {
			return f.corrupt("invalid distance symbol")
		}
		de := uint(distExtra[dsym])
		if err := f.need(off + dn + de); err != nil {
			return err
		}
		dist := int(distBase[dsym]) + int(f.acc>>(off+dn)&(1<<de-1))
		have := f.wr
		if f.full {
			have = len(f.hist)
		}
		if dist > have {
			return f.corrupt("distance too far back")
		}
		f.drop(off + dn + de)
		f.copyLen, f.copyDist = length, dist
	}
}

// copyMatch copies as much of the pending match as the window holds.
func (f *inflater) copyMatch() {
	for f.copyLen > 0 && f.wr < len(f.hist) {
		src := f.wr - f.copyDist
		if src < 0 {
			// The source is at the end of the ring, ahead of wr: a forward
			// copy reads every byte before it is overwritten.
			src += len(f.hist)
			n := min(f.copyLen, len(f.hist)-f.wr, len(f.hist)-src)
			copy(f.hist[f.wr:f.wr+n], f.hist[src:src+n])
			f.wr += n
			f.copyLen -= n
			continue
		}
		// Overlapping copies repeat the last copyDist bytes: copy what is
		// there, then twice as much, and so on.
		start, end := f.wr, min(f.wr+f.copyLen, len(f.hist))
		for f.wr < end {
			f.wr += copy(f.hist[f.wr:end], f.hist[src:f.wr])
		}
		f.copyLen -= f.wr - start
	}
}
