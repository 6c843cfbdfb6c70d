package nntp

import (
	"bufio"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	kflate "github.com/klauspost/compress/flate"
)

// overviewText returns n overview-like lines: what COMPRESS DEFLATE carries.
func overviewText(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"harbor", "meadow", "river", "stone", "copper", "lantern", "orchard", "signal"}
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		w1, w2 := words[r.IntN(len(words))], words[r.IntN(len(words))]
		part := r.IntN(50) + 1
		fmt.Fprintf(&b, "%d\t%s.%s.S%02dE%02d-%x - \"%s.%s.part%02d.rar\" yEnc (%d/50) 35840000\tposter%d <p%d@example.test>\tThu, %02d Jan 2026 %02d:%02d:%02d +0000\t<%x.%d@news.example.test>\t\t%d\t%d\tXref: news.example.test alt.binaries.test:%d\r\n",
			i, w1, w2, r.IntN(10), r.IntN(30), r.Uint32(), w1, w2, part, part, r.IntN(100), r.IntN(100),
			r.IntN(28)+1, r.IntN(24), r.IntN(60), r.IntN(60), r.Uint64(), i, 716800+r.IntN(9000), 5500+r.IntN(200), i)
	}
	return b.Bytes()
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// inflateAll decodes a whole raw DEFLATE stream with our inflater, reading
// through buffers of readSize bytes.
func inflateAll(stream []byte, readSize int) ([]byte, error) {
	f := newInflater(bufio.NewReader(bytes.NewReader(stream)))
	var out []byte
	buf := make([]byte, readSize)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(out) > 64<<20 {
			return out, errors.New("output over 64 MiB")
		}
	}
}

func TestInflateRoundTrip(t *testing.T) {
	t.Parallel()
	inputs := map[string][]byte{
		"empty":    nil,
		"one byte": {'x'},
		"overview": overviewText(3000, 1),
		"random":   randomBytes(100_000, 2),
		"zeros":    make([]byte, 200_000),
		"mixed":    append(append(overviewText(500, 3), randomBytes(40_000, 4)...), overviewText(500, 5)...),
	}
	levels := []int{flate.HuffmanOnly, flate.DefaultCompression, flate.NoCompression,
		flate.BestSpeed, 2, 3, 4, 5, 6, 7, 8, flate.BestCompression}
	for name, data := range inputs {
		for _, level := range levels {
			for _, flushEvery := range []int{0, 1000, 7919} {
				var comp bytes.Buffer
				w, err := flate.NewWriter(&comp, level)
				if err != nil {
					t.Fatal(err)
				}
				if flushEvery == 0 {
					w.Write(data)
				} else {
					for rest := data; len(rest) > 0; {
						n := min(flushEvery, len(rest))
						w.Write(rest[:n])
						w.Flush()
						rest = rest[n:]
					}
				}
				w.Close()
				for _, readSize := range []int{1, 4096, 100_000} {
					if readSize == 1 && len(data) > 50_000 {
						continue
					}
					got, err := inflateAll(comp.Bytes(), readSize)
					if err != nil {
						t.Fatalf("%s level %d flush %d read %d: %v", name, level, flushEvery, readSize, err)
					}
					if !bytes.Equal(got, data) {
						t.Fatalf("%s level %d flush %d read %d: got %d bytes, want %d (differ)", name, level, flushEvery, readSize, len(got), len(data))
					}
				}
			}
		}
	}
}

// TestInflateKlauspost decodes streams of the other encoder we meet,
// including its stateless and Huffman-only modes.
func TestInflateKlauspost(t *testing.T) {
	t.Parallel()
	data := append(overviewText(2000, 7), randomBytes(50_000, 8)...)
	for _, level := range []int{kflate.HuffmanOnly, kflate.ConstantCompression, kflate.BestSpeed, 5, kflate.BestCompression} {
		var comp bytes.Buffer
		w, err := kflate.NewWriter(&comp, level)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data[:30000])
		w.Flush()
		w.Write(data[30000:])
		w.Close()
		got, err := inflateAll(comp.Bytes(), 32<<10)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("level %d: %d bytes, %v", level, len(got), err)
		}
	}
}

// TestInflateStopsAtStreamEnd checks the inflater consumes exactly the
// stream's bytes: what follows the final block stays in the source.
func TestInflateStopsAtStreamEnd(t *testing.T) {
	t.Parallel()
	var comp bytes.Buffer
	w, _ := flate.NewWriter(&comp, flate.BestSpeed)
	w.Write(overviewText(50, 9))
	w.Close()
	src := bufio.NewReader(io.MultiReader(bytes.NewReader(comp.Bytes()), strings.NewReader(".\r\n")))
	got, err := io.ReadAll(newInflater(src))
	if err != nil || !bytes.Equal(got, overviewText(50, 9)) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	rest, _ := io.ReadAll(src)
	if string(rest) != ".\r\n" {
		t.Fatalf("after the stream: %q, want %q", rest, ".\r\n")
	}
}

// bitWriter is a test-only DEFLATE bit packer.
type bitWriter struct {
	out []byte
	acc uint64
	n   uint
}

// bits appends the n low bits of v, first bit lowest.
func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.n
	w.n += n
	for w.n >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

// code appends a Huffman code, which DEFLATE sends most significant bit first.
func (w *bitWriter) code(c uint16, n uint) {
	w.bits(uint64(bits.Reverse16(c)>>(16-n)), n)
}

// fixedSym appends a literal/length symbol of the fixed code.
func (w *bitWriter) fixedSym(sym int) {
	switch {
	case sym < 144:
		w.code(uint16(0x30+sym), 8)
	case sym < 256:
		w.code(uint16(0x190+sym-144), 9)
	case sym < 280:
		w.code(uint16(sym-256), 7)
	default:
		w.code(uint16(0xc0+sym-280), 8)
	}
}

// take returns the whole bytes written so far; the bits of an incomplete
// byte stay pending.
func (w *bitWriter) take() []byte {
	b := w.out
	w.out = nil
	return b
}

// partialFlush encodes one response the way zlib does with
// Z_PARTIAL_FLUSH (INN's COMPRESS DEFLATE): a fixed-Huffman block of
// literals, its end, an empty fixed block (header 010, end 0000000) and no
// byte alignment. Only whole bytes are returned; the rest waits for the
// next response.
func (w *bitWriter) partialFlush(data []byte) []byte {
	w.bits(0, 1) // not final
	w.bits(1, 2) // fixed Huffman
	for _, b := range data {
		w.fixedSym(int(b))
	}
	w.fixedSym(256)
	w.bits(0, 1)
	w.bits(1, 2)
	w.fixedSym(256)
	return w.take()
}

var nntpResponses = []string{
	"200 news.example.test ready\r\n",
	"211 3 1 3 alt.binaries.test\r\n",
	"224 overview follows\r\n1\ta\tb\tc\t<m1@x>\t\t10\t1\r\n2\ta\tb\tc\t<m2@x>\t\t10\t1\r\n.\r\n",
	"223 1 <m1@x>\r\n",
	"205 bye\r\n",
}

// TestInflatePartialFlushOverPipe sends responses through an io.Pipe one at
// a time, each ended like Z_PARTIAL_FLUSH (and, second case, with a sync
// flush); the next is sent only after the previous one has been read
// whole. A decoder that waits for bytes of the next response stalls here:
// the watchdog then closes the pipe and the test fails.
func TestInflatePartialFlushOverPipe(t *testing.T) {
	t.Parallel()
	encoders := map[string]func() func([]byte) []byte{
		"partial flush": func() func([]byte) []byte {
			w := &bitWriter{}
			return w.partialFlush
		},
		"sync flush": func() func([]byte) []byte {
			var buf bytes.Buffer
			fw, _ := flate.NewWriter(&buf, flate.BestSpeed)
			return func(p []byte) []byte {
				fw.Write(p)
				fw.Flush()
				out := bytes.Clone(buf.Bytes())
				buf.Reset()
				return out
			}
		},
	}
	for name, newEnc := range encoders {
		t.Run(name, func(t *testing.T) {
			enc := newEnc()
			pr, pw := io.Pipe()
			defer pr.Close()
			next := make(chan []byte)
			writerDone := make(chan struct{})
			go func() {
				defer close(writerDone)
				for chunk := range next {
					if _, err := pw.Write(chunk); err != nil {
						return
					}
				}
				pw.Close()
			}()
			defer func() { close(next); <-writerDone }()
			watchdog := time.AfterFunc(10*time.Second, func() {
				pw.CloseWithError(errors.New("stalled: a response was not readable before the next one was sent"))
			})
			defer watchdog.Stop()

			r := bufio.NewReader(newInflater(bufio.NewReader(pr)))
			for _, resp := range nntpResponses {
				next <- enc([]byte(resp))
				got := make([]byte, len(resp))
				if _, err := io.ReadFull(r, got); err != nil {
					t.Fatalf("reading %q: %v", resp, err)
				}
				if string(got) != resp {
					t.Fatalf("got %q, want %q", got, resp)
				}
				if r.Buffered() != 0 {
					t.Fatalf("%d bytes beyond the response", r.Buffered())
				}
			}
		})
	}
}

// stingyReader serves the bytes sent so far and records any read beyond
// them: over a socket that read would block until the next response.
type stingyReader struct {
	data    []byte
	overrun bool
}

var errNoMoreYet = errors.New("read past the bytes sent so far")

func (s *stingyReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		s.overrun = true
		return 0, errNoMoreYet
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

// TestPartialFlushNeedsEagerDecoder shows why we have our own decoder:
// compress/flate (and klauspost's) read past a partial-flushed response
// before handing it out, while ours does not.
func TestPartialFlushNeedsEagerDecoder(t *testing.T) {
	t.Parallel()
	decoders := map[string]struct {
		open  func(io.Reader) io.Reader
		eager bool
	}{
		"ours":           {func(r io.Reader) io.Reader { return newInflater(bufio.NewReader(r)) }, true},
		"compress/flate": {func(r io.Reader) io.Reader { return flate.NewReader(r) }, false},
		"klauspost":      {func(r io.Reader) io.Reader { return kflate.NewReader(r) }, false},
	}
	for name, d := range decoders {
		t.Run(name, func(t *testing.T) {
			w := &bitWriter{}
			src := &stingyReader{}
			r := d.open(src)
			overran := false
			for _, resp := range nntpResponses {
				src.data = append(src.data, w.partialFlush([]byte(resp))...)
				src.overrun = false
				got := make([]byte, len(resp))
				n, err := io.ReadFull(r, got)
				overran = overran || src.overrun
				if d.eager && (err != nil || string(got) != resp || src.overrun) {
					t.Fatalf("response %q: got %q, %v, read past it: %v", resp, got[:n], err, src.overrun)
				}
				if err != nil {
					break // the others' errors are sticky
				}
			}
			if !d.eager && !overran {
				t.Fatalf("%s did not read past a response: the partial-flush encoder no longer reproduces the stall", name)
			}
		})
	}
}

func TestInflateCorrupt(t *testing.T) {
	t.Parallel()
	fixed := func(final bool, syms ...func(w *bitWriter)) []byte {
		w := &bitWriter{}
		if final {
			w.bits(1, 1)
		} else {
			w.bits(0, 1)
		}
		w.bits(1, 2)
		for _, s := range syms {
			s(w)
		}
		w.bits(0, 7)
		return append(w.out, byte(w.acc))
	}
	lit := func(sym int) func(*bitWriter) { return func(w *bitWriter) { w.fixedSym(sym) } }
	dist := func(sym int) func(*bitWriter) { return func(w *bitWriter) { w.code(uint16(sym), 5) } }
	dyn := func(fn func(w *bitWriter)) []byte {
		w := &bitWriter{}
		w.bits(1, 1)
		w.bits(2, 2)
		fn(w)
		w.bits(0, 16)
		return append(w.out, byte(w.acc))
	}
	var truncated bytes.Buffer
	fw, _ := flate.NewWriter(&truncated, flate.DefaultCompression)
	fw.Write(overviewText(200, 11))
	fw.Close()

	for _, tc := range []struct {
		name    string
		want    string // in the corrupt-data error
		in      []byte
		corrupt bool // else: unexpected EOF
	}{
		{"empty input", "", nil, false},
		{"block type 3", "invalid block type", []byte{0x07}, true},
		{"stored length mismatch", "complement", []byte{0x01, 0x05, 0x00, 0x00, 0x00}, true},
		{"stored block cut short", "", []byte{0x01, 0x05, 0x00, 0xfa, 0xff, 'a'}, false},
		{"non-final block then nothing", "", []byte{0x00, 0x00, 0x00, 0xff, 0xff}, false},
		{"distance with no history", "too far back", fixed(true, lit(257), dist(0)), true},
		{"distance past history", "too far back", fixed(true, lit('a'), lit(257), dist(1)), true},
		{"length symbol 286", "invalid length symbol", fixed(true, lit(286)), true},
		{"length symbol 287", "invalid length symbol", fixed(true, lit(287)), true},
		{"distance symbol 30", "invalid distance symbol", fixed(true, lit('a'), lit(257), dist(30)), true},
		{"distance symbol 31", "invalid distance symbol", fixed(true, lit('a'), lit(257), dist(31)), true},
		{"too many length symbols", "too many length", dyn(func(w *bitWriter) { w.bits(30, 5); w.bits(0, 5); w.bits(15, 4) }), true},
		{"too many distance symbols", "too many length", dyn(func(w *bitWriter) { w.bits(0, 5); w.bits(30, 5); w.bits(15, 4) }), true},
		{"over-subscribed code-length code", "over-subscribed", dyn(func(w *bitWriter) {
			w.bits(0, 5)
			w.bits(0, 5)
			w.bits(0, 4) // 4 code-length lengths: 16, 17, 18, 0 all of 1 bit
			for range 4 {
				w.bits(1, 3)
			}
		}), true},
		{"incomplete code-length code", "incomplete code", dyn(func(w *bitWriter) {
			w.bits(0, 5)
			w.bits(0, 5)
			w.bits(0, 4)
			w.bits(2, 3) // only symbol 16, length 2
			w.bits(0, 9)
		}), true},
		{"repeat with no first length", "no first length", dyn(func(w *bitWriter) {
			w.bits(0, 5)
			w.bits(0, 5)
			w.bits(0, 4)
			w.bits(1, 3) // 16: length 1
			w.bits(1, 3) // 17: length 1
			w.bits(0, 6)
			w.code(0, 1) // symbol 16 first
			w.bits(0, 2)
		}), true},
		{"no end-of-block code", "no end-of-block", dyn(func(w *bitWriter) {
			w.bits(0, 5) // 257 literal/length codes
			w.bits(0, 5) // 1 distance code
			w.bits(0, 4)
			w.bits(1, 3) // 16: length 1 (repeat)
			w.bits(1, 3) // 17: length 1 (zeros)
			w.bits(0, 6)
			// 258 zero lengths: 17 (3..10) repeated.
			for left := 258; left > 0; {
				n := min(left, 10)
				if left-n != 0 && left-n < 3 {
					n = left - 3
				}
				w.code(1, 1)
				w.bits(uint64(n-3), 3)
				left -= n
			}
		}), true},
		{"truncated stream", "", truncated.Bytes()[:truncated.Len()/2], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inflateAll(tc.in, 4096)
			switch {
			case err == nil:
				t.Fatal("decoded without error")
			case tc.corrupt && !errors.Is(err, errCorruptDeflate):
				t.Fatalf("got %v, want a corrupt-data error", err)
			case tc.corrupt && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			case !tc.corrupt && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("got %v, want unexpected EOF", err)
			}
			// Errors are sticky.
			f := newInflater(bufio.NewReader(bytes.NewReader(tc.in)))
			io.ReadAll(f)
			if _, err2 := f.Read(make([]byte, 10)); err2 == nil || err2 == io.EOF {
				t.Fatalf("read after the error: %v", err2)
			}
		})
	}
}

// FuzzInflate decodes streams compress/flate made from the fuzzer's data
// and compares, then decodes the data itself as a stream: never a panic or
// a hang, and where both decoders accept it they agree.
func FuzzInflate(f *testing.F) {
	f.Add([]byte("224 overview follows\r\n1\ta\tb\r\n.\r\n"), uint8(1), uint16(7))
	f.Add(overviewText(20, 1), uint8(6), uint16(100))
	f.Add(randomBytes(300, 3), uint8(0), uint16(0))
	f.Add([]byte{0x01, 0x05, 0x00, 0xfa, 0xff, 'h', 'e', 'l', 'l', 'o'}, uint8(9), uint16(2))
	f.Add([]byte{0x03, 0x00}, uint8(2), uint16(0))
	w := &bitWriter{}
	f.Add(append(w.partialFlush([]byte("211 1 1 1 g\r\n")), 0x03, 0x00), uint8(11), uint16(3))
	// A new flate.Writer costs more than the rest of a run: reuse them.
	var writers [12]sync.Pool
	f.Fuzz(func(t *testing.T, data []byte, level uint8, flushAt uint16) {
		lvl := int(level%12) - 2 // -2 (Huffman only) .. 9
		var comp bytes.Buffer
		fw, _ := writers[lvl+2].Get().(*flate.Writer)
		if fw == nil {
			var err error
			if fw, err = flate.NewWriter(&comp, lvl); err != nil {
				t.Fatal(err)
			}
		}
		defer writers[lvl+2].Put(fw)
		fw.Reset(&comp)
		cut := int(flushAt) % (len(data) + 1)
		fw.Write(data[:cut])
		fw.Flush()
		flushed := comp.Len()
		fw.Write(data[cut:])
		fw.Close()
		got, err := inflateAll(comp.Bytes(), 1+int(flushAt)%5000)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("level %d: decoded %d bytes (%v), want %d", lvl, len(got), err, len(data))
		}
		// Eager: everything before the flush is readable from the bytes
		// before it, without a read past them.
		src := &stingyReader{data: comp.Bytes()[:flushed]}
		head := make([]byte, cut)
		if _, err := io.ReadFull(newInflater(bufio.NewReader(src)), head); err != nil || src.overrun || !bytes.Equal(head, data[:cut]) {
			t.Fatalf("level %d: the %d bytes before the flush: %v, read past the flush: %v", lvl, cut, err, src.overrun)
		}

		ours, oerr := inflateAll(data, 4096)
		theirs, terr := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(data)), 64<<20))
		if oerr == nil && terr == nil && !bytes.Equal(ours, theirs) {
			t.Fatalf("both accept the stream but decode %d vs %d bytes (differ)", len(ours), len(theirs))
		}
	})
}

func BenchmarkInflate(b *testing.B) {
	data := overviewText(20000, 42)
	for _, level := range []int{flate.BestSpeed, flate.DefaultCompression} {
		var comp bytes.Buffer
		fw, _ := flate.NewWriter(&comp, level)
		fw.Write(data)
		fw.Close()
		stream := comp.Bytes()
		out := make([]byte, 64<<10)
		decoders := []struct {
			name string
			run  func() (int64, error)
		}{
			{"ours", func() (int64, error) {
				return io.CopyBuffer(io.Discard, newInflater(bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)), out)
			}},
			{"compress-flate", func() (int64, error) {
				return io.CopyBuffer(io.Discard, flate.NewReader(bytes.NewReader(stream)), out)
			}},
			{"klauspost", func() (int64, error) {
				return io.CopyBuffer(io.Discard, kflate.NewReader(bytes.NewReader(stream)), out)
			}},
		}
		for _, d := range decoders {
			b.Run(fmt.Sprintf("level=%d/%s", level, d.name), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					n, err := d.run()
					if err != nil || n != int64(len(data)) {
						b.Fatalf("%d bytes, %v", n, err)
					}
				}
			})
		}
	}
}
