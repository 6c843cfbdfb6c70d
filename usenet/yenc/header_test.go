package yenc

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestReadHeader(t *testing.T) {
	t.Parallel()
	file := bytes.Repeat(allBytes(), 10)
	parts := Split("my file.part01.rar", file, 1000)
	var second bytes.Buffer
	if err := Encode(&second, parts[1].Data(file, 1000), parts[1]); err != nil {
		t.Fatal(err)
	}
	enc := second.Bytes()
	multi := Header{Name: "my file.part01.rar", Part: 2, Total: len(parts), Line: 128, Size: int64(len(file)), Begin: 1001, End: 2000}
	firstLine := bytes.IndexByte(enc, '\n') + 1
	tests := []struct {
		name string
		in   []byte
		want Header
		err  error
	}{
		{"our encoder's segment", enc, multi, nil},
		{"its first 200 bytes", enc[:200], multi, nil},
		{"cut after =ybegin", enc[:firstLine], Header{Name: multi.Name, Part: 2, Total: multi.Total, Line: 128, Size: multi.Size}, nil},
		{"cut inside =ybegin's name", enc[:firstLine-5], Header{}, ErrFormat},
		{"cut inside =ypart", enc[:firstLine+9], Header{Name: multi.Name, Part: 2, Total: multi.Total, Line: 128, Size: multi.Size}, nil},
		{"lines before", append([]byte("some text\r\n\r\n"), enc...), multi, nil},
		{"single part", []byte("=ybegin line=128 size=3 name=a.nfo\n..."), Header{Name: "a.nfo", Line: 128, Size: 3, Begin: 1, End: 3}, nil},
		{"no ybegin", []byte("just text\n"), Header{}, ErrFormat},
		{"no ypart", []byte("=ybegin part=1 line=128 size=3 name=a\nxyz\n"), Header{}, ErrFormat},
		{"range past size", []byte("=ybegin part=1 line=128 size=3 name=a\n=ypart begin=1 end=4\n"), Header{}, ErrFormat},
		{"bad size", []byte("=ybegin line=128 size=-1 name=a\n"), Header{}, ErrFormat},
		{"ybegin past 64 KiB", append([]byte(strings.Repeat("x\n", 40<<10)), enc...), Header{}, ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadHeader(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("ReadHeader = %+v, %v; want %+v, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// TestReadHeaderCutInsideYpartNumber: a prefix that ends inside the =ypart
// line's end= value is not read as a shorter range. The first part covers
// bytes 1..1000; the prefix ends after "end=10". ReadHeader gives either
// no range (Begin = End = 0, as for a prefix ending inside "=ypart ") or
// the whole one, never 1..10. (Was: a cut =ypart line was parsed, and a
// number it cut that still read as one was trusted: 1..10.)
func TestReadHeaderCutInsideYpartNumber(t *testing.T) {
	t.Parallel()
	file := bytes.Repeat(allBytes(), 10)
	parts := Split("movie.part01.rar", file, 1000)
	var buf bytes.Buffer
	if err := Encode(&buf, parts[0].Data(file, 1000), parts[0]); err != nil {
		t.Fatal(err)
	}
	enc := buf.Bytes()
	at := bytes.Index(enc, []byte("end=1000"))
	if at < 0 {
		t.Fatalf("no end=1000 in %q", enc[:100])
	}
	prefix := enc[:at+len("end=10")]
	h, err := ReadHeader(prefix)
	if err != nil {
		t.Fatalf("ReadHeader: %v", err)
	}
	if !(h.Begin == 0 && h.End == 0) && !(h.Begin == 1 && h.End == 1000) {
		t.Fatalf("ReadHeader(%q) range = %d..%d, want none or 1..1000", prefix, h.Begin, h.End)
	}
}

// TestReadHeaderBeginLineAcrossTheScanWindow: an =ybegin line that starts
// in the first maxHeaderSkip (64 KiB) bytes is read whole, as Decode reads
// it, wherever it ends. ReadHeader used to cut it at the end of that
// window, which gave a truncated name= without an error.
func TestReadHeaderBeginLineAcrossTheScanWindow(t *testing.T) {
	t.Parallel()
	body := windowEdgeBody()
	d, err := Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if idx := bytes.Index(body, []byte("=ybegin")); idx >= maxHeaderSkip || bytes.IndexByte(body[idx:], '\n')+idx < maxHeaderSkip {
		t.Fatalf("=ybegin at %d does not straddle %d", idx, maxHeaderSkip)
	}
	h, err := ReadHeader(body)
	if err != nil || h.Name != d.Name || h.Size != d.Size {
		t.Errorf("ReadHeader = %+v, %v; Decode read name %q size %d", h, err, d.Name, d.Size)
	}
}

// windowEdgeBody is a single-part body whose =ybegin line starts before
// maxHeaderSkip and ends after it, the window's end falling in name=.
func windowEdgeBody() []byte {
	begin := "=ybegin line=128 size=3 name=Some.Release.Name.nfo\r\n"
	preLen := maxHeaderSkip - len("=ybegin line=128 size=3 name=Some.R")
	pre := strings.Repeat("x\r\n", preLen/3-1)
	pre += strings.Repeat("y", preLen-len(pre)-2) + "\r\n"
	return []byte(pre + begin + "\x8b\x8c\x8d\r\n=yend size=3\r\n")
}
