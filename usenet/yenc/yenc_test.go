package yenc

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

// allBytes holds every byte value, critical ones included, twice.
func allBytes() []byte {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300_000)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	// Bytes that encode to the characters escaped only at a line's ends
	// (TAB, SPACE, '.'), to exercise both ends of every line.
	edgy := bytes.Repeat([]byte{9 - 42 + 256, 32 - 42 + 256, '.' - 42}, 1000)
	tests := []struct {
		name     string
		file     []byte
		partSize int
		line     int
	}{
		{"empty", nil, 100, 0},
		{"one byte", []byte{0}, 100, 0},
		{"all bytes one part", allBytes(), 1000, 0},
		{"all bytes many parts", allBytes(), 100, 0},
		{"random", random, 64 << 10, 0},
		{"edge characters", edgy, 1000, 0},
		{"edge characters short lines", edgy, 700, 7},
		{"line of one", allBytes(), 256, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []byte
			parts := Split("file name.part01.rar", tt.file, tt.partSize)
			for _, p := range parts {
				p.Line = tt.line
				var body bytes.Buffer
				if err := Encode(&body, p.Data(tt.file, tt.partSize), p); err != nil {
					t.Fatal(err)
				}
				checkLines(t, body.String(), tt.line)
				d, err := Decode(&body)
				if err != nil {
					t.Fatalf("part %d: %v", p.Number, err)
				}
				if d.Name != p.Name || d.Part != p.Number || d.Total != len(parts) || d.Size != int64(len(tt.file)) || d.Begin != p.Offset+1 {
					t.Fatalf("part %d: decoded header %+v", p.Number, d)
				}
				if last := p.Number == p.Total; d.HasFileCRC != last || (last && d.FileCRC32 != crc32.ChecksumIEEE(tt.file)) {
					t.Fatalf("part %d: file crc %v %08x", p.Number, d.HasFileCRC, d.FileCRC32)
				}
				got = append(got, d.Data...)
			}
			if !bytes.Equal(got, tt.file) {
				t.Fatalf("round trip changed the data (%d bytes in, %d out)", len(tt.file), len(got))
			}
		})
	}
}

// checkLines checks what must hold of every encoded line: no critical
// character unescaped, no whitespace at either end, no leading '.', and a
// length of at most line+1.
func checkLines(t *testing.T, body string, line int) {
	t.Helper()
	if line == 0 {
		line = LineDefault
	}
	if !strings.HasSuffix(body, "\r\n") {
		t.Fatalf("body does not end in CRLF")
	}
	for _, l := range strings.Split(strings.TrimSuffix(body, "\r\n"), "\r\n") {
		if strings.HasPrefix(l, "=y") {
			continue
		}
		switch {
		case l == "":
			t.Fatalf("empty data line")
		case strings.ContainsAny(l, "\x00\r\n"):
			t.Fatalf("line %q holds NUL, CR or LF", l)
		case strings.ContainsAny(l[:1], " \t.") || strings.ContainsAny(l[len(l)-1:], " \t="):
			t.Fatalf("line %q starts with space, tab or dot, or ends in space, tab or =", l)
		case len(l) > line+1:
			t.Fatalf("line of %d characters, want at most %d", len(l), line+1)
		}
	}
}

func TestEncodeHeader(t *testing.T) {
	t.Parallel()
	file := []byte("hello, world")
	parts := Split("a b.bin", file, 5)
	var body bytes.Buffer
	if err := Encode(&body, parts[2].Data(file, 5), parts[2]); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(body.String(), "\r\n")
	want := []string{
		"=ybegin part=3 total=3 line=128 size=12 name=a b.bin",
		"=ypart begin=11 end=12",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
	trailer := lines[len(lines)-2]
	wantTrailer := "=yend size=2 part=3 pcrc32=" + hex8(crc32.ChecksumIEEE([]byte("ld"))) + " crc32=" + hex8(crc32.ChecksumIEEE(file))
	if trailer != wantTrailer {
		t.Errorf("trailer %q, want %q", trailer, wantTrailer)
	}
}

func hex8(v uint32) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b)
}

func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
		p    Part
	}{
		{"no name", nil, Part{Number: 1, Total: 1}},
		{"name with newline", nil, Part{Name: "a\nb", Number: 1, Total: 1}},
		{"part beyond total", nil, Part{Name: "a", Number: 2, Total: 1}},
		{"data beyond file", []byte("abc"), Part{Name: "a", Number: 1, Total: 1, FileSize: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Encode(&bytes.Buffer{}, tt.data, tt.p); err == nil {
				t.Fatal("Encode accepted it")
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	good := "=ybegin part=1 total=1 line=128 size=2 name=x\r\n=ypart begin=1 end=2\r\n\x8b\x8c\r\n=yend size=2 part=1 pcrc32=" +
		hex8(crc32.ChecksumIEEE([]byte("ab"))) + "\r\n"
	if d, err := Decode(strings.NewReader("header junk\r\n" + good)); err != nil || string(d.Data) != "ab" {
		t.Fatalf("good body: %q %v", d.Data, err)
	}
	tests := []struct {
		name string
		body string
		want error
	}{
		{"no ybegin", "just text\r\n", ErrFormat},
		{"no yend", strings.Split(good, "=yend")[0], ErrFormat},
		{"no ypart", strings.Replace(good, "=ypart begin=1 end=2\r\n", "", 1), ErrFormat},
		{"no name", strings.Replace(good, " name=x", "", 1), ErrFormat},
		{"bad crc", strings.Replace(good, "pcrc32=", "pcrc32=zz", 1), ErrFormat},
		{"wrong crc", strings.Replace(good, "\x8b\x8c", "\x8c\x8b", 1), ErrCRC},
		{"short data", strings.Replace(good, "\x8b\x8c", "\x8b", 1), ErrSize},
		{"range mismatch", strings.Replace(good, "end=2", "end=1", 1), ErrSize},
		{"range beyond size", strings.Replace(good, "end=2", "end=3", 1), ErrFormat},
		{"dangling escape", strings.Replace(good, "\x8b\x8c", "\x8b=", 1), ErrFormat},
		{"single part size", "=ybegin line=128 size=3 name=x\r\n\x8b\x8c\r\n=yend size=2\r\n", ErrSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeSinglePart(t *testing.T) {
	t.Parallel()
	body := "=ybegin line=128 size=2 name=x y\n\x8b\x8c\n=yend size=2 crc32=" + hex8(crc32.ChecksumIEEE([]byte("ab"))) + "\n"
	d, err := Decode(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "x y" || string(d.Data) != "ab" || d.Part != 0 || d.Begin != 1 || d.End != 2 || d.HasFileCRC {
		t.Fatalf("decoded %+v", d)
	}
}
