package par2

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testci"
)

// par2Cmd returns the par2 program (Debian's par2cmdline), or skips (fails
// under CI, which installs it for the NZBGet tests).
func par2Cmd(t *testing.T) string {
	t.Helper()
	return testci.Require(t, func() (string, string) {
		p, err := exec.LookPath("par2")
		if err != nil {
			return "", "par2 (Debian package par2) is not installed"
		}
		return p, ""
	})
}

// TestFilesOfRealSets makes recovery sets with par2 create and checks
// that the index file, each volume and prefixes of them describe the files
// Go hashes itself.
func TestFilesOfRealSets(t *testing.T) {
	t.Parallel()
	bin := par2Cmd(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(21, 3))
	sizes := map[string]int{
		"movie.part01.rar":    100_000,
		"movie.part02.rar":    70_001,
		"small.nfo":           999,
		"exactly16k.bin":      16 << 10,
		"naïve – ünïcode.mkv": 20_000,
	}
	var want []File
	var names []string
	for name, n := range sizes {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, File{Name: name, Size: int64(n), Hash: md5.Sum(data), Hash16k: md5.Sum(data[:min(n, 16<<10)])})
		names = append(names, name)
	}
	sort.Slice(want, func(a, b int) bool { return want[a].Name < want[b].Name })
	sort.Strings(names)
	args := append([]string{"create", "-q", "-q", "-s4096", "-r10", "-n3", "set.par2"}, names...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("par2 create: %v\n%s", err, out)
	}
	pars, err := filepath.Glob(filepath.Join(dir, "set*.par2"))
	if err != nil || len(pars) < 2 {
		t.Fatalf("par2 create made %v (%v), want an index and volumes", pars, err)
	}
	var ids [][16]byte
	for _, p := range pars {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Files(b)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		check(t, filepath.Base(p), got, want)
		if ids == nil {
			for _, f := range got {
				ids = append(ids, f.ID)
			}
		}
		for i, f := range got {
			if f.ID != ids[i] {
				t.Errorf("%s: %s has id %x, another file of the set says %x", filepath.Base(p), f.Name, f.ID, ids[i])
			}
			// The file id is the MD5 of the 16k hash, the length and
			// the name (PAR 2.0 specification): a check that the
			// fields were read from the right offsets.
			var buf bytes.Buffer
			buf.Write(f.Hash16k[:])
			binary.Write(&buf, binary.LittleEndian, uint64(f.Size))
			buf.WriteString(f.Name)
			if id := md5.Sum(buf.Bytes()); id != f.ID {
				t.Errorf("%s: %s: id %x, MD5 of its fields %x", filepath.Base(p), f.Name, f.ID, id)
			}
		}
	}

	// The index file cut anywhere gives a subset of the files (those whose
	// packets are whole), never a wrong one.
	idx, err := os.ReadFile(filepath.Join(dir, "set.par2"))
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut <= len(idx); cut += 37 {
		got, err := Files(idx[:cut])
		if err != nil {
			if !errors.Is(err, ErrNotPar2) {
				t.Fatalf("cut at %d: %v", cut, err)
			}
			continue
		}
		for _, f := range got {
			i := sort.Search(len(want), func(i int) bool { return want[i].Name >= f.Name })
			if i == len(want) || !same(want[i], f) {
				t.Fatalf("cut at %d: read %+v, not a file of the set", cut, f)
			}
		}
	}
}

func same(w, f File) bool {
	return w.Name == f.Name && w.Size == f.Size && w.Hash == f.Hash && w.Hash16k == f.Hash16k
}

func check(t *testing.T, what string, got, want []File) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d files, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range want {
		if !same(want[i], got[i]) {
			t.Errorf("%s: file %d is %q size %d md5 %x 16k %x; want %q size %d md5 %x 16k %x", what, i,
				got[i].Name, got[i].Size, got[i].Hash, got[i].Hash16k,
				want[i].Name, want[i].Size, want[i].Hash, want[i].Hash16k)
		}
	}
}

// packet builds one PAR2 packet of the given type and body.
func packet(set [16]byte, typ string, body []byte) []byte {
	p := make([]byte, headerLen, headerLen+len(body)+3)
	copy(p, magic)
	copy(p[32:48], set[:])
	copy(p[48:64], typ)
	p = append(p, body...)
	for len(p)%4 != 0 {
		p = append(p, 0)
	}
	binary.LittleEndian.PutUint64(p[8:16], uint64(len(p)))
	sum := md5.Sum(p[32:])
	copy(p[16:32], sum[:])
	return p
}

// fileDescPacket builds a file description packet for name and data.
func fileDescPacket(set [16]byte, name string, data []byte) []byte {
	var body bytes.Buffer
	h16 := md5.Sum(data[:min(len(data), 16<<10)])
	var id bytes.Buffer
	id.Write(h16[:])
	binary.Write(&id, binary.LittleEndian, uint64(len(data)))
	id.WriteString(name)
	fid := md5.Sum(id.Bytes())
	h := md5.Sum(data)
	body.Write(fid[:])
	body.Write(h[:])
	body.Write(h16[:])
	binary.Write(&body, binary.LittleEndian, uint64(len(data)))
	body.WriteString(name)
	return packet(set, string(typeFileDesc), body.Bytes())
}

func TestFilesBuilt(t *testing.T) {
	t.Parallel()
	set := [16]byte{1, 2, 3}
	a := fileDescPacket(set, "b.bin", []byte("hello"))
	b := fileDescPacket(set, "a.bin", bytes.Repeat([]byte{7}, 20000))
	bad := fileDescPacket(set, "evil.exe", []byte("x"))
	bad[len(bad)-1] ^= 1 // the name's padding changes: the MD5 no longer verifies
	main := packet(set, "PAR 2.0\x00Main\x00\x00\x00\x00\x00\x00\x00\x00", make([]byte, 12))
	huge := fileDescPacket(set, "c.bin", []byte("c"))
	binary.LittleEndian.PutUint64(huge[8:16], 1<<62) // a length far past the input

	tests := []struct {
		name  string
		in    []byte
		want  []string
		noPar bool
	}{
		{"empty", nil, nil, true},
		{"garbage", []byte("PAR2\x00PKT but not a packet"), nil, true},
		{"main only", main, []string{}, false},
		{"two files sorted, repeats merged", cat(a, main, b, a, b), []string{"a.bin", "b.bin"}, false},
		{"bad md5 skipped", cat(bad, a), []string{"b.bin"}, false},
		{"only a bad packet", bad, nil, true},
		{"huge length skipped", cat(huge, b), []string{"a.bin"}, false},
		{"garbage between packets", cat([]byte("junk"), a, []byte("PAR2\x00PKTjunk"), b), []string{"a.bin", "b.bin"}, false},
		{"truncated trailing packet", cat(a, b[:len(b)-1]), []string{"b.bin"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Files(tt.in)
			if tt.noPar {
				if !errors.Is(err, ErrNotPar2) {
					t.Fatalf("got %v, %v; want ErrNotPar2", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, f := range got {
				names = append(names, f.Name)
			}
			if !equal(names, tt.want) {
				t.Fatalf("names %q, want %q", names, tt.want)
			}
		})
	}
}

// TestFilesHashesLinearly: an input of overlapping packet headers, a magic
// every 16 bytes each claiming a packet that runs to the input's end, costs
// Files at most hashBudget of MD5, and a packet that verifies before them
// is still read.
// (Was: every header's MD5 covered the rest of the input, so the hashing
// grew with the square of the input: 2 GiB of MD5, seconds of CPU, for one
// 250 KiB article.)
func TestFilesHashesLinearly(t *testing.T) {
	t.Parallel()
	a := fileDescPacket([16]byte{4}, "a.rar", []byte("data"))
	crafted := make([]byte, 32<<10)
	for off := 0; off+headerLen <= len(crafted); off += 16 {
		copy(crafted[off:], magic)
		binary.LittleEndian.PutUint64(crafted[off+8:], uint64(len(crafted)-off))
	}
	in := cat(a, crafted)
	files, hashed, err := scan(in)
	if err != nil || len(files) != 1 || files[0].Name != "a.rar" {
		t.Fatalf("files %+v, %v; want a.rar", files, err)
	}
	if hashed > hashBudget(len(in)) {
		t.Fatalf("hashed %d bytes of a %d-byte input; want at most %d", hashed, len(in), hashBudget(len(in)))
	}
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
