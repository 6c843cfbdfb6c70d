package rar

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf8"
)

// RAR 5.0 header types and flags (RAR 5.0 archive format technote).
const (
	head5Main    = 1
	head5File    = 2
	head5Service = 3
	head5Crypt   = 4
	head5End     = 5

	hflExtra = 0x0001 // the header has an extra area
	hflData  = 0x0002 // the header has a data area

	arcVolume    = 0x0001
	arcVolNumber = 0x0002
	arcSolid     = 0x0004

	fileDir      = 0x0001
	fileTime     = 0x0002
	fileCRC      = 0x0004
	endMoreVols  = 0x0001
	extraCrypt5  = 0x01
	maxHeader5   = 2 << 20 // the technote's limit on one header's size
	maxVintBytes = 10
)

// reader5 reads RAR5 fields from one header; a read past its end sets err.
type reader5 struct {
	b   []byte
	err error
}

func (r *reader5) vint() uint64 {
	var v uint64
	for i := 0; i < maxVintBytes; i++ {
		if i >= len(r.b) {
			r.fail("vint past the header")
			return 0
		}
		c := r.b[i]
		if i == maxVintBytes-1 && c > 1 {
			r.fail("vint overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			r.b = r.b[i+1:]
			return v
		}
	}
	r.fail("vint longer than 10 bytes")
	return 0
}

func (r *reader5) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail("field past the header")
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader5) fail(why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: rar5: %s", ErrFormat, why)
	}
	r.b = nil
}

// vint reads a vint at the start of b, returning its value and length;
// n is 0 when b ends inside it, -1 when it is malformed.
func vint(b []byte) (v uint64, n int) {
	for i := 0; i < maxVintBytes; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == maxVintBytes-1 && c > 1 {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, -1
}

func inspect5(b []byte) (Info, error) {
	info := Info{Version: 5, FirstVolume: true}
	for pos := 0; ; {
		rest := b[pos:]
		// CRC32, then the header size (of what follows the size field).
		if len(rest) < 4 {
			info.Truncated = len(rest) > 0
			return info, nil
		}
		size, n := vint(rest[4:])
		switch {
		case n == 0:
			info.Truncated = true
			return info, nil
		case n < 0 || size == 0 || size > maxHeader5:
			return info, fmt.Errorf("%w: rar5: header size %d at offset %d", ErrFormat, size, pos)
		}
		end := 4 + n + int(size)
		if end > len(rest) {
			info.Truncated = true
			return info, nil
		}
		if crc32.ChecksumIEEE(rest[4:end]) != binary.LittleEndian.Uint32(rest) {
			return info, fmt.Errorf("%w: rar5 header at offset %d", ErrCRC, pos)
		}
		r := reader5{b: rest[4+n : end]}
		typ := r.vint()
		flags := r.vint()
		var extraSize, dataSize uint64
		if flags&hflExtra != 0 {
			extraSize = r.vint()
		}
		if flags&hflData != 0 {
			dataSize = r.vint()
		}
		if r.err != nil {
			return info, r.err
		}
		if extraSize > uint64(len(r.b)) {
			return info, fmt.Errorf("%w: rar5: extra area of %d bytes in a header of %d", ErrFormat, extraSize, size)
		}
		extra := r.b[uint64(len(r.b))-extraSize:]
		r.b = r.b[:uint64(len(r.b))-extraSize]
		switch typ {
		case head5Main:
			af := r.vint()
			info.Volume = af&arcVolume != 0
			info.Solid = af&arcSolid != 0
			if af&arcVolNumber != 0 {
				if r.vint() != 0 {
					info.FirstVolume = false
				}
			}
		case head5File:
			name, dir, crypt, err := file5(&r, extra)
			if err != nil {
				return info, err
			}
			if crypt {
				info.EncryptedFiles = true
			}
			if !dir && name != "" {
				info.Names = append(info.Names, name)
			}
		case head5Crypt:
			// Every header after this one is encrypted.
			info.EncryptedHeaders = true
			return info, nil
		case head5End:
			info.End = true
			return info, nil
		}
		if r.err != nil {
			return info, r.err
		}
		if dataSize > uint64(len(rest)-end) {
			return info, nil // the data area runs past the input
		}
		pos += end + int(dataSize)
	}
}

// file5 reads a file header's fields after its common ones: the name,
// whether it is a directory, and whether its extra area has an encryption
// record.
func file5(r *reader5, extra []byte) (name string, dir, crypt bool, err error) {
	ff := r.vint()
	r.vint() // unpacked size
	r.vint() // attributes
	if ff&fileTime != 0 {
		r.bytes(4)
	}
	if ff&fileCRC != 0 {
		r.bytes(4)
	}
	r.vint() // compression information
	r.vint() // host OS
	nameLen := r.vint()
	raw := r.bytes(nameLen)
	if r.err != nil {
		return "", false, false, r.err
	}
	// Names are UTF-8; anything else is kept readable, not trusted.
	name = string(raw)
	if !utf8.ValidString(name) {
		name = latin1(raw)
	}
	x := reader5{b: extra}
	for len(x.b) > 0 && x.err == nil {
		recSize := x.vint()
		rec := reader5{b: x.bytes(recSize)}
		if x.err != nil {
			break
		}
		if rec.vint() == extraCrypt5 && rec.err == nil {
			crypt = true
		}
	}
	if x.err != nil {
		return "", false, false, x.err
	}
	return name, ff&fileDir != 0, crypt, nil
}

// latin1 maps each byte to the code point of the same value: a name in an
// unknown 8-bit code page stays readable and valid UTF-8.
func latin1(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = rune(c)
	}
	return string(rs)
}
