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
