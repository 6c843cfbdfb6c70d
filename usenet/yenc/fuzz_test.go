package yenc

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds Decode arbitrary bodies: it must not panic, and what it
// accepts must be consistent with its header; re-encoding the accepted
// data must decode to the same bytes.
func FuzzDecode(f *testing.F) {
	file := allBytes()
	for _, p := range Split("seed.bin", file, 200) {
		var b bytes.Buffer
		if err := Encode(&b, p.Data(file, 200), p); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte("=ybegin line=128 size=2 name=x\n\x8b\x8c\n=yend size=2 crc32=9e83486d\n"))
	f.Add([]byte("=ybegin part=1 line=128 size=1 name=x\n=ypart begin=1 end=1\n==\n=yend size=1\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := Decode(bytes.NewReader(body))
		if err != nil {
			return
		}
		if d.End-d.Begin+1 != int64(len(d.Data)) || d.End > d.Size || d.Name == "" {
			t.Fatalf("accepted inconsistent %+v", d)
		}
		if d.Part == 0 || d.Total == 0 || d.Total < d.Part {
			return // Encode writes multipart bodies only
		}
		if d.Name != string(bytes.TrimSpace([]byte(d.Name))) || bytes.ContainsAny([]byte(d.Name), "\x00") {
			return
		}
		p := Part{Name: d.Name, Number: d.Part, Total: d.Total, Offset: d.Begin - 1, FileSize: d.Size, FileCRC32: d.FileCRC32}
		var b bytes.Buffer
		if err := Encode(&b, d.Data, p); err != nil {
			t.Fatalf("re-encode %+v: %v", p, err)
		}
		back, err := Decode(&b)
		if err != nil || !bytes.Equal(back.Data, d.Data) {
			t.Fatalf("re-encoded body decodes to %q, %v; want %q", back.Data, err, d.Data)
		}
	})
}

// FuzzReadHeader feeds ReadHeader arbitrary bodies: it must not panic, and
// on a body that Decode accepts it must read the header Decode read.
func FuzzReadHeader(f *testing.F) {
	file := allBytes()
	for _, p := range Split("seed.bin", file, 300) {
		var b bytes.Buffer
		if err := Encode(&b, p.Data(file, 300), p); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
		f.Add(b.Bytes()[:60])
	}
	f.Add([]byte("=ybegin line=128 size=2 name=x\n\x8b\x8c\n=yend size=2 crc32=9e83486d\n"))
	f.Add([]byte("junk\r\n=ybegin part=2 total=3 line=128 size=9 name=a b\r\n=ypart begin=4 end=6\r\n"))
	f.Add(windowEdgeBody())
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := ReadHeader(body)
		if err == nil && (h.Name == "" || h.Begin < 0 || h.End > h.Size || (h.Part > 0 && h.Total > 0 && h.Part > h.Total)) {
			t.Fatalf("accepted inconsistent %+v", h)
		}
		d, derr := Decode(bytes.NewReader(body))
		if derr != nil {
			return
		}
		if beginAt(body) >= maxHeaderSkip {
			return // Decode finds an =ybegin past what ReadHeader scans
		}
		want := Header{Name: d.Name, Part: d.Part, Total: d.Total, Line: d.Line, Size: d.Size, Begin: d.Begin, End: d.End}
		if d.Part == 0 {
			want.Begin, want.End = 1, d.Size
		}
		if err != nil || h != want {
			t.Fatalf("ReadHeader = %+v, %v; Decode read %+v", h, err, want)
		}
	})
}

// beginAt is where the first line starting "=ybegin " starts in b, the
// line Decode reads the header of, or len(b).
func beginAt(b []byte) int {
	for off := 0; off < len(b); {
		if bytes.HasPrefix(b[off:], []byte("=ybegin ")) {
			return off
		}
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	return len(b)
}
