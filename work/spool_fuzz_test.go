package work

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/klauspost/compress/s2"
)

// FuzzDecodeChunk checks that DecodeChunk never panics on any spool value,
// that every line it hands out is one of the value's lines and starts with
// the number it reports, and that lines made valid (a positive number
// first, no line end inside) survive EncodeChunk then DecodeChunk.
func FuzzDecodeChunk(f *testing.F) {
	f.Add([]byte("1\tSubject\tfrom\tdate\t<id>\t\t100\t2\tXref: h g:1\n2\tb"), int64(1))
	f.Add([]byte("3"), int64(3))
	f.Add([]byte(""), int64(1))
	f.Add([]byte("\n\n"), int64(5))
	f.Add([]byte("0\tzero"), int64(9223372036854775807))
	f.Add([]byte("-4\tneg\n+5\tplus"), int64(-1))
	f.Add([]byte("99999999999999999999\tbig"), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, start int64) {
		var got [][]byte
		err := DecodeChunk(b, func(a int64, line []byte) error {
			if a <= 0 {
				t.Fatalf("article %d handed out", a)
			}
			if !bytes.Contains(b, line) || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line %q is not a line of the value", line)
			}
			if n, ok := lineArticle(line); ok && n != a {
				t.Fatalf("line %q reported as article %d", line, a)
			}
			got = append(got, line)
			return nil
		})
		if err == nil && len(b) > 0 && !bytes.Equal(EncodeChunk(got), bytes.TrimSuffix(b, []byte("\n"))) {
			t.Fatalf("decoded lines re-encode to %q, not %q", EncodeChunk(got), b)
		}
		// fn's error stops the walk and comes back as is.
		stop := errors.New("stop")
		calls := 0
		if err := DecodeChunk(b, func(int64, []byte) error { calls++; return stop }); calls > 0 && err != stop {
			t.Fatalf("fn's error came back as %v", err)
		}

		// Round trip: the fuzzed bytes, split at line ends, become the
		// bodies of lines numbered from start on.
		if start <= 0 || start > 1<<40 {
			start = 1
		}
		var lines [][]byte
		for i, body := range bytes.Split(b, []byte("\n")) {
			l := strconv.AppendInt(nil, start+int64(i), 10)
			if len(body) > 0 {
				l = append(append(l, '\t'), body...)
			}
			lines = append(lines, l)
		}
		i := 0
		if err := DecodeChunk(EncodeChunk(lines), func(a int64, line []byte) error {
			if i >= len(lines) || a != start+int64(i) || !bytes.Equal(line, lines[i]) {
				t.Fatalf("line %d: got %d %q", i, a, line)
			}
			i++
			return nil
		}); err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if i != len(lines) {
			t.Fatalf("round trip: %d lines of %d", i, len(lines))
		}
	})
}

// FuzzChunkValue checks that undoing a spool value's encoding never panics
// or allocates past maxChunkBytes on any input, and that s2 round-trips.
func FuzzChunkValue(f *testing.F) {
	f.Add([]byte("1\tSubject\tfrom"), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x7f}, false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, b []byte, encode bool) {
		if encode {
			out, err := chunkValue(encS2, s2.Encode(nil, b), nil)
			if err != nil || !bytes.Equal(out, b) {
				t.Fatalf("s2 round trip of %d bytes: %v", len(b), err)
			}
			return
		}
		if out, err := chunkValue(encS2, b, nil); err == nil && len(out) > maxChunkBytes {
			t.Fatalf("decoded %d bytes", len(out))
		}
	})
}
