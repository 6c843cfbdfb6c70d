// Package rartest writes small RAR archives for tests: RAR 5.0 and RAR 4.x
// archives of stored (uncompressed) files with correct header and data
// CRCs, optionally flagged as encrypted (headers or file data) or as a
// volume of a multi-volume set. No free program creates RAR archives, so
// tests that post or read archives build them here.
//
// Encryption is only flagged, never performed: an encrypted file's data
// and an archive's encrypted headers are pseudo-random bytes of the right
// shape (AES block multiples, after the records a reader expects), enough
// for readers to see that a password is needed and nothing more.
package rartest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf16"
)

// File is one entry of an archive.
type File struct {
	Name string // path inside the archive, '/' separated
	Data []byte
	Dir  bool // a directory entry: Data is ignored
}

// Options choose the variant written. The zero value is a plain,
// single-volume, unencrypted archive.
type Options struct {
	// EncryptedHeaders writes the archive as with rar -hp: RAR5 an
	// archive encryption header followed by bytes standing in for the
	// encrypted headers; RAR4 the MHD_PASSWORD main header followed by
	// such bytes. The files are not visible.
	EncryptedHeaders bool
	// EncryptedFiles flags every file's data as encrypted (RAR5 a file
	// encryption extra record, RAR4 LHD_PASSWORD and a salt), as with
	// rar -p: names stay readable, the data is pseudo-random.
	EncryptedFiles bool
	// Volume marks the archive as one volume of a multi-volume set;
	// VolumeNumber is its 0-based number (0: the first volume) and Last
	// says no volume follows it. Files are not split across volumes.
	Volume       bool
	VolumeNumber int
	Last         bool
	Solid        bool
}

// mtime is the modification time written for every file.
var mtime = time.Date(2024, 5, 6, 7, 8, 10, 0, time.UTC)

// noise returns n pseudo-random bytes derived from seed, so that the same
// inputs always give the same archive.
func noise(seed string, n int) []byte {
	s := sha256.Sum256([]byte(seed))
	r := rand.New(rand.NewChaCha8(s))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func padded(n int) int { return (n + 15) &^ 15 }

// vint appends a RAR5 variable-length integer.
func vint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// header5 returns a RAR5 header: CRC32, size, then body (type onwards).
func header5(body []byte) []byte {
	size := vint(nil, uint64(len(body)))
	crc := crc32.NewIEEE()
	crc.Write(size)
	crc.Write(body)
	h := binary.LittleEndian.AppendUint32(nil, crc.Sum32())
	h = append(h, size...)
	return append(h, body...)
}

// RAR5 returns a RAR 5.0 archive of files.
func RAR5(files []File, opt Options) []byte {
	out := []byte("Rar!\x1a\x07\x01\x00")
	if opt.EncryptedHeaders {
		// Archive encryption header: version 0 (AES-256), password
		// check present, KDF count, salt, check value.
		body := vint(nil, 4) // type
		body = vint(body, 0) // header flags
		body = vint(body, 0) // encryption version
		body = vint(body, 1) // flags: password check present
		body = append(body, 15)
		body = append(body, noise("salt", 16)...)
		body = append(body, checkValue("archive")...)
		out = append(out, header5(body)...)
		// Each encrypted header is a 16-byte IV and AES blocks.
		for _, f := range files {
			out = append(out, noise(f.Name, 16+padded(64+len(f.Name)))...)
			out = append(out, noise(f.Name+"/data", padded(len(f.Data)))...)
		}
		return append(out, noise("end", 32)...)
	}
	var af uint64
	if opt.Volume {
		af |= 0x0001
		if opt.VolumeNumber > 0 {
			af |= 0x0002
		}
	}
	if opt.Solid {
		af |= 0x0004
	}
	body := vint(nil, 1) // main archive header
	body = vint(body, 0)
	body = vint(body, af)
	if af&0x0002 != 0 {
		body = vint(body, uint64(opt.VolumeNumber))
	}
	out = append(out, header5(body)...)
	for _, f := range files {
		out = append(out, file5(f, opt)...)
	}
	var ef uint64
	if opt.Volume && !opt.Last {
		ef = 0x0001 // not the last volume
	}
	out = append(out, header5(vint(vint(vint(nil, 5), 0), ef))...)
	return out
}

// checkValue is a RAR5 password check value: 8 bytes and the first 4
// bytes of their SHA-256, which readers use to tell a damaged check value.
func checkValue(seed string) []byte {
	c := noise(seed+"/check", 8)
	s := sha256.Sum256(c)
	return append(c, s[:4]...)
}

func file5(f File, opt Options) []byte {
	name := strings.TrimSuffix(f.Name, "/")
	data := f.Data
	if f.Dir {
		data = nil
	}
	var extra []byte
	if opt.EncryptedFiles && !f.Dir {
		rec := vint(nil, 0x01) // file encryption record
		rec = vint(rec, 0)     // AES-256
		rec = vint(rec, 0x01)  // password check present
		rec = append(rec, 15)
		rec = append(rec, noise(name+"/salt", 16)...)
		rec = append(rec, noise(name+"/iv", 16)...)
		rec = append(rec, checkValue(name)...)
		extra = append(vint(nil, uint64(len(rec))), rec...)
		data = noise(name+"/data", padded(len(f.Data)))
	}
	hflags := uint64(0x0002) // data area
	if extra != nil {
		hflags |= 0x0001
	}
	var ff, attr uint64 = 0x0002 | 0x0004, 0o100644 // mtime, CRC32
	if f.Dir {
		ff, attr = 0x0001|0x0002, 0o40755
	}
	body := vint(nil, 2)
	body = vint(body, hflags)
	if extra != nil {
		body = vint(body, uint64(len(extra)))
	}
	body = vint(body, uint64(len(data)))
	body = vint(body, ff)
	if f.Dir {
		body = vint(body, 0)
	} else {
		body = vint(body, uint64(len(f.Data)))
	}
	body = vint(body, attr)
	body = binary.LittleEndian.AppendUint32(body, uint32(mtime.Unix()))
	if !f.Dir {
		body = binary.LittleEndian.AppendUint32(body, crc32.ChecksumIEEE(f.Data))
	}
	var comp uint64 // version 0, method 0 (store)
	if opt.Solid {
		comp |= 0x0040
	}
	body = vint(body, comp)
	body = vint(body, 1) // host OS: Unix
	body = vint(body, uint64(len(name)))
	body = append(body, name...)
	body = append(body, extra...)
	return append(header5(body), data...)
}

// header4 completes a RAR4 header h (HEAD_CRC and HEAD_SIZE left zero).
func header4(h []byte) []byte {
	binary.LittleEndian.PutUint16(h[5:7], uint16(len(h)))
	binary.LittleEndian.PutUint16(h[0:2], uint16(crc32.ChecksumIEEE(h[2:])))
	return h
}

// RAR4 returns a RAR 4.x (RAR 2.9 format) archive of files. Names that are
// not ASCII are stored with LHD_UNICODE in RAR's compressed UTF-16 form.
func RAR4(files []File, opt Options) []byte {
	out := []byte("Rar!\x1a\x07\x00")
	var mf uint16
	if opt.Volume {
		mf |= 0x0001 | 0x0010 // MHD_VOLUME, MHD_NEWNUMBERING
		if opt.VolumeNumber == 0 {
			mf |= 0x0100 // MHD_FIRSTVOLUME
		}
	}
	if opt.Solid {
		mf |= 0x0008
	}
	if opt.EncryptedHeaders {
		mf |= 0x0080
	}
	main := []byte{0, 0, 0x73, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(main[3:5], mf)
	main = append(main, make([]byte, 6)...) // reserved
	out = append(out, header4(main)...)
	if opt.EncryptedHeaders {
		// Each encrypted header is an 8-byte salt and AES blocks.
		for _, f := range files {
			out = append(out, noise(f.Name, 8+padded(40+len(f.Name)))...)
			out = append(out, noise(f.Name+"/data", padded(len(f.Data)))...)
		}
		return append(out, noise("end", 8+16)...)
	}
	for _, f := range files {
		out = append(out, file4(f, opt)...)
	}
	ef := uint16(0x4000) // skip if unknown
	if opt.Volume && !opt.Last {
		ef |= 0x0001 // EARC_NEXT_VOLUME
	}
	end := []byte{0, 0, 0x7b, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(end[3:5], ef)
	return append(out, header4(end)...)
}

func file4(f File, opt Options) []byte {
	name := strings.ReplaceAll(strings.TrimSuffix(f.Name, "/"), "/", `\`)
	data := f.Data
	if f.Dir {
		data = nil
	}
	flags := uint16(0x8000)
	var salt []byte
	if opt.EncryptedFiles && !f.Dir {
		flags |= 0x0004 | 0x0400 // LHD_PASSWORD, LHD_SALT
		salt = noise(name+"/salt", 8)
		data = noise(name+"/data", padded(len(f.Data)))
	}
	if opt.Solid {
		flags |= 0x0010
	}
	attr := uint32(0x20) // FILE_ATTRIBUTE_ARCHIVE
	if f.Dir {
		flags |= 0x00e0
		attr = 0x10
	}
	rawName := []byte(name)
	if !isASCII(name) {
		flags |= 0x0200
		rawName = unicodeName(name)
	}
	h := []byte{0, 0, 0x74, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(h[3:5], flags)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(data)))
	h = binary.LittleEndian.AppendUint32(h, uint32(len(f.Data)))
	h = append(h, 2) // host OS: Win32
	h = binary.LittleEndian.AppendUint32(h, crc32.ChecksumIEEE(f.Data))
	h = binary.LittleEndian.AppendUint32(h, dosTime(mtime))
	h = append(h, 29, 0x30) // UNP_VER 2.9, METHOD store
	h = binary.LittleEndian.AppendUint16(h, uint16(len(rawName)))
	h = binary.LittleEndian.AppendUint32(h, attr)
	h = append(h, rawName...)
	h = append(h, salt...)
	return append(header4(h), data...)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// unicodeName returns RAR4's LHD_UNICODE name field: an 8-bit name ('_'
// for what is not ASCII), a zero byte, then the UTF-16 name compressed
// with the simplest of RAR's ops: a zero high byte, and every unit as a
// whole 16-bit value (op 2, four per flag byte).
func unicodeName(name string) []byte {
	var b bytes.Buffer
	for _, r := range name {
		if r < 0x80 {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	b.WriteByte(0)
	b.WriteByte(0) // high byte
	units := utf16.Encode([]rune(name))
	for i, u := range units {
		if i%4 == 0 {
			b.WriteByte(0xaa)
		}
		b.WriteByte(byte(u))
		b.WriteByte(byte(u >> 8))
	}
	return b.Bytes()
}

// dosTime is t in MS-DOS date and time format.
func dosTime(t time.Time) uint32 {
	return uint32(t.Year()-1980)<<25 | uint32(t.Month())<<21 | uint32(t.Day())<<16 |
		uint32(t.Hour())<<11 | uint32(t.Minute())<<5 | uint32(t.Second()/2)
}
