package par2

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"testing"
)

// FuzzFiles feeds Files arbitrary input: it must not panic, it hashes at
// most hashBudget of it, and every file it returns must come from a packet
// whose MD5 verifies, so its id is the one the packet's own fields give
// when the packet was built honestly; the list is sorted and has one entry
// per id.
func FuzzFiles(f *testing.F) {
	set := [16]byte{9}
	a := fileDescPacket(set, "a.rar", []byte("data"))
	b := fileDescPacket(set, "b.nfo", []byte("more data"))
	f.Add(a)
	f.Add(cat(a, b))
	f.Add(cat(b[:40], a))
	f.Add(packet(set, "PAR 2.0\x00Main\x00\x00\x00\x00\x00\x00\x00\x00", make([]byte, 28)))
	f.Add([]byte("PAR2\x00PKT"))
	f.Fuzz(func(t *testing.T, in []byte) {
		files, hashed, err := scan(in)
		if hashed > hashBudget(len(in)) {
			t.Fatalf("hashed %d bytes of a %d-byte input", hashed, len(in))
		}
		if err != nil {
			if files != nil {
				t.Fatalf("files %v with error %v", files, err)
			}
			return
		}
		for i := 1; i < len(files); i++ {
			if files[i-1].Name > files[i].Name {
				t.Fatalf("not sorted: %q before %q", files[i-1].Name, files[i].Name)
			}
		}
		ids := map[[16]byte]bool{}
		for _, f := range files {
			if ids[f.ID] {
				t.Fatalf("id %x twice", f.ID)
			}
			ids[f.ID] = true
			if f.Name == "" || f.Size < 0 || bytes.HasSuffix([]byte(f.Name), []byte{0}) {
				t.Fatalf("bad file %+v", f)
			}
			// The file's description must be in the input as a packet
			// body that verifies.
			var body bytes.Buffer
			body.Write(f.ID[:])
			body.Write(f.Hash[:])
			body.Write(f.Hash16k[:])
			binary.Write(&body, binary.LittleEndian, uint64(f.Size))
			body.WriteString(f.Name)
			if !verifiedBody(in, body.Bytes()) {
				t.Fatalf("%+v not read from a packet that verifies", f)
			}
		}
	})
}

// verifiedBody says whether body occurs in in as the start of a packet
// body whose packet's MD5 verifies.
func verifiedBody(in, body []byte) bool {
	for off := 0; ; off++ {
		i := bytes.Index(in[off:], body)
		if i < 0 {
			return false
		}
		off += i
		if off < headerLen {
			continue
		}
		p := in[off-headerLen:]
		n := binary.LittleEndian.Uint64(p[8:16])
		if n >= headerLen && n <= uint64(len(p)) && md5.Sum(p[32:n]) == [16]byte(p[16:32]) {
			return true
		}
	}
}
