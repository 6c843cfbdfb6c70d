package rar

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// RAR 1.5–4.x block types and flags (unrar's technote.txt).
const (
	block4Main   = 0x73
	block4File   = 0x74
	block4NewSub = 0x7a
	block4End    = 0x7b

	longBlock = 0x8000 // the block has ADD_SIZE: a data area follows

	mhdVolume      = 0x0001
	mhdSolid       = 0x0008
	mhdPassword    = 0x0080
	mhdFirstVolume = 0x0100

	lhdPassword = 0x0004
	lhdDirMask  = 0x00e0
	lhdLarge    = 0x0100
	lhdUnicode  = 0x0200

	head4Len   = 7  // HEAD_CRC, HEAD_TYPE, HEAD_FLAGS, HEAD_SIZE
	file4Fixed = 25 // PACK_SIZE .. ATTR of a file header
)

func inspect4(b []byte) (Info, error) {
	info := Info{Version: 4}
	sawMain := false
	for pos := 0; ; {
		rest := b[pos:]
		if len(rest) < head4Len {
			info.Truncated = len(rest) > 0
			return info, nil
		}
		typ := rest[2]
		flags := binary.LittleEndian.Uint16(rest[3:5])
		size := int(binary.LittleEndian.Uint16(rest[5:7]))
		if size < head4Len {
			return info, fmt.Errorf("%w: rar4: header size %d at offset %d", ErrFormat, size, pos)
		}
		if size > len(rest) {
			info.Truncated = true
			return info, nil
		}
		h := rest[:size]
		// HEAD_CRC is the low 16 bits of the CRC32 of the header after it.
		if uint16(crc32.ChecksumIEEE(h[2:])) != binary.LittleEndian.Uint16(h) {
			return info, fmt.Errorf("%w: rar4 header type %#x at offset %d", ErrCRC, typ, pos)
		}
		if !sawMain && typ != block4Main {
			return info, fmt.Errorf("%w: rar4: block type %#x before the archive header", ErrFormat, typ)
		}
		var data uint64
		switch typ {
		case block4Main:
			sawMain = true
			info.Volume = flags&mhdVolume != 0
			info.FirstVolume = !info.Volume || flags&mhdFirstVolume != 0
			info.Solid = flags&mhdSolid != 0
			if flags&mhdPassword != 0 {
				// The headers after this one are encrypted.
				info.EncryptedHeaders = true
				return info, nil
			}
		case block4File, block4NewSub:
			if size < head4Len+file4Fixed {
				return info, fmt.Errorf("%w: rar4: file header of %d bytes", ErrFormat, size)
			}
			f := h[head4Len:]
			data = uint64(binary.LittleEndian.Uint32(f[0:4]))
			nameSize := int(binary.LittleEndian.Uint16(f[19:21]))
			f = f[file4Fixed:]
			if flags&lhdLarge != 0 {
				if len(f) < 8 {
					return info, fmt.Errorf("%w: rar4: large file header of %d bytes", ErrFormat, size)
				}
				data |= uint64(binary.LittleEndian.Uint32(f[0:4])) << 32
				f = f[8:]
			}
			if nameSize > len(f) {
				return info, fmt.Errorf("%w: rar4: name of %d bytes in a header of %d", ErrFormat, nameSize, size)
			}
			if typ == block4File {
				if flags&lhdPassword != 0 {
					info.EncryptedFiles = true
				}
				// An empty name is no file's: not listed.
				if name := name4(f[:nameSize], flags&lhdUnicode != 0); name != "" && flags&lhdDirMask != lhdDirMask {
					info.Names = append(info.Names, name)
				}
			}
		case block4End:
			info.End = true
			return info, nil
		default:
			if flags&longBlock != 0 {
				if size < head4Len+4 {
					return info, fmt.Errorf("%w: rar4: long block of %d bytes", ErrFormat, size)
				}
				data = uint64(binary.LittleEndian.Uint32(h[head4Len:]))
			}
		}
		if data > uint64(len(rest)-size) {
			return info, nil // the data area runs past the input
		}
		pos += size + int(data)
	}
}

// name4 decodes a RAR4 file name. With LHD_UNICODE it is either UTF-8 (no
// zero byte in it) or an 8-bit name, a zero byte and the compressed UTF-16
// form of the name; without it, an 8-bit name in the packer's code page,
// kept when it is valid UTF-8 and else read as Latin-1. Paths use '\'
// (RAR4 as written on Windows); they are returned with '/'.
func name4(raw []byte, unicode bool) string {
	var name string
	zero := -1
	for i, c := range raw {
		if c == 0 {
			zero = i
			break
		}
	}
	switch {
	case unicode && zero >= 0:
		if name = decodeUnicode(raw[:zero], raw[zero+1:]); name != "" {
			break
		}
		// Nothing decoded: the 8-bit name is all there is.
		fallthrough
	case zero >= 0:
		raw = raw[:zero]
		fallthrough
	default:
		name = string(raw)
		if !utf8.ValidString(name) {
			name = latin1(raw)
		}
	}
	return strings.ReplaceAll(name, `\`, "/")
}

// decodeUnicode expands RAR's compressed UTF-16 name: a high byte, then
// groups of four 2-bit ops per flag byte: 0 a low byte (high 0), 1 a low
// byte with the high byte, 2 a whole 16-bit unit, 3 a run copied from the
// 8-bit name (optionally with a correction added to each byte and the high
// byte). The result is bounded by the 8-bit name's length and the input.
func decodeUnicode(ascii, enc []byte) string {
	var out []uint16
	limit := len(ascii) + len(enc) // each unit takes an input byte or copies one from ascii
	pos := 0
	next := func() (byte, bool) {
		if pos >= len(enc) {
			return 0, false
		}
		pos++
		return enc[pos-1], true
	}
	high, _ := next()
	var flags byte
	bits := 0
	for pos < len(enc) && len(out) < limit {
		if bits == 0 {
			flags, _ = next()
			bits = 8
		}
		op := flags >> 6
		flags <<= 2
		bits -= 2
		switch op {
		case 0:
			c, ok := next()
			if !ok {
				break
			}
			out = append(out, uint16(c))
		case 1:
			c, ok := next()
			if !ok {
				break
			}
			out = append(out, uint16(c)|uint16(high)<<8)
		case 2:
			if pos+1 >= len(enc) {
				pos = len(enc)
				break
			}
			out = append(out, uint16(enc[pos])|uint16(enc[pos+1])<<8)
			pos += 2
		case 3:
			l, ok := next()
			if !ok {
				break
			}
			if l&0x80 != 0 {
				corr, ok := next()
				if !ok {
					break
				}
				for n := int(l&0x7f) + 2; n > 0 && len(out) < len(ascii); n-- {
					out = append(out, uint16(ascii[len(out)]+corr)|uint16(high)<<8)
				}
			} else {
				for n := int(l) + 2; n > 0 && len(out) < len(ascii); n-- {
					out = append(out, uint16(ascii[len(out)]))
				}
			}
		}
	}
	for i, u := range out {
		if u == 0 { // the name ends at a zero unit, as in unrar
			out = out[:i]
			break
		}
	}
	return string(utf16.Decode(out))
}
