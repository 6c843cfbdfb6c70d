// Package par2 reads the file list of a PAR2 recovery set: the names, sizes
// and MD5 hashes that its file description packets carry. It is pure (no
// I/O) and reads a whole .par2 file or a prefix of one, such as the first
// article of a posted index file.
//
// Only file description packets are used. Main, checksum (IFSC), recovery
// slice and creator packets are skipped by their lengths; nothing is
// repaired or verified against data.
package par2

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"sort"
)

// File is one file described by a PAR2 set.
type File struct {
	ID      [16]byte // file id
	Name    string   // as stored (UTF-8 or ASCII; trailing NULs removed)
	Size    int64
	Hash    [16]byte // MD5 of the whole file
	Hash16k [16]byte // MD5 of its first 16 KiB
}

// ErrNotPar2 says that the input holds no PAR2 packet whose MD5 verifies.
var ErrNotPar2 = errors.New("par2: no PAR2 packet in the input")

// Packet layout (PAR 2.0 specification): an 8-byte magic, the packet's
// length (header included, a multiple of 4), the MD5 of everything after
// the hash, the recovery set id and the packet type, then the body.
const (
	headerLen = 8 + 8 + 16 + 16 + 16
	// fileDescMin is the body of a file description packet without its
	// name: file id, MD5, 16k MD5 and length.
	fileDescMin = 16 + 16 + 16 + 8
)

var (
	magic        = []byte("PAR2\x00PKT")
	typeFileDesc = []byte("PAR 2.0\x00FileDesc")
)

// Files parses the PAR2 packets in b (a whole .par2 file, or a prefix of
// one: a truncated trailing packet is ignored) and returns the files of
// the file description packets, sorted by name, one per file ID. Packets
// whose MD5 does not verify are skipped, never trusted. It returns
// ErrNotPar2 when no packet verifies; a valid set without file
// descriptions (a prefix holding only the main packet) gives no files and
// no error.
//
// The MD5s it computes cover at most twice the input (see hashBudget): a
// packet that would take more is skipped as one that does not verify.
func Files(b []byte) ([]File, error) {
	files, _, err := scan(b)
	return files, err
}

// hashBudget is how many bytes scan may hash for an input of n bytes.
// Packets that verify do not overlap, so together they take at most n;
// the other n is for packets that fail (damaged or cut ones). Without a
// bound, overlapping headers (a magic every 16 bytes, each claiming the
// rest of the input) made every one of them hash the rest: a 250 KiB
// article cost 2 GiB of MD5, seconds of CPU, where an honest one costs
// its own length.
func hashBudget(n int) int { return 2 * n }

// scan is Files, also returning the bytes it hashed.
func scan(b []byte) ([]File, int, error) {
	byID := map[[16]byte]File{}
	verified := false
	budget := hashBudget(len(b))
	hashed := 0
	for i := 0; ; {
		j := bytes.Index(b[i:], magic)
		if j < 0 {
			break
		}
		p := b[i+j:]
		n, ok := packetLen(p)
		if !ok {
			// Not a packet here (or one cut short): look for the next
			// magic, which a damaged or truncated packet may hide.
			i += j + len(magic)
			continue
		}
		pkt := p[:n]
		if n-32 > budget-hashed {
			i += j + len(magic)
			continue
		}
		hashed += n - 32
		if md5.Sum(pkt[32:]) != [16]byte(pkt[16:32]) {
			i += j + len(magic)
			continue
		}
		verified = true
		i += j + n
		if !bytes.Equal(pkt[48:64], typeFileDesc) {
			continue
		}
		f, ok := fileDesc(pkt[headerLen:])
		if !ok {
			continue
		}
		// A set repeats its file descriptions in every volume: identical
		// copies keep the first.
		if _, seen := byID[f.ID]; !seen {
			byID[f.ID] = f
		}
	}
	if !verified {
		return nil, hashed, ErrNotPar2
	}
	files := make([]File, 0, len(byID))
	for _, f := range byID {
		files = append(files, f)
	}
	sort.Slice(files, func(a, b int) bool {
		if files[a].Name != files[b].Name {
			return files[a].Name < files[b].Name
		}
		return bytes.Compare(files[a].ID[:], files[b].ID[:]) < 0
	})
	return files, hashed, nil
}

// packetLen returns the length of the packet at the start of p when its
// length field is sane and the whole packet is in p.
func packetLen(p []byte) (int, bool) {
	if len(p) < headerLen {
		return 0, false
	}
	n := binary.LittleEndian.Uint64(p[8:16])
	if n < headerLen || n%4 != 0 || n > uint64(len(p)) {
		return 0, false
	}
	return int(n), true
}

// fileDesc decodes a file description packet's body.
func fileDesc(body []byte) (File, bool) {
	if len(body) < fileDescMin {
		return File{}, false
	}
	var f File
	copy(f.ID[:], body[0:16])
	copy(f.Hash[:], body[16:32])
	copy(f.Hash16k[:], body[32:48])
	size := binary.LittleEndian.Uint64(body[48:56])
	if size > 1<<63-1 {
		return File{}, false
	}
	f.Size = int64(size)
	f.Name = string(bytes.TrimRight(body[56:], "\x00"))
	if f.Name == "" {
		return File{}, false
	}
	return f, true
}
