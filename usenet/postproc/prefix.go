package postproc

import (
	"bytes"
	"fmt"

	"github.com/switchyard-dev/switchyard/usenet/yenc"
)

// Decoding a prefix only. RAR headers sit in a volume's first bytes: of a
// 700 KiB first segment, decoding everything to read a few hundred bytes
// of headers would be most of what post-processing costs. Small bodies
// (the par2 index, the NFO) are decoded whole, CRC checked, by
// yenc.Decode.
const (
	// wholeMax is the largest body decoded whole.
	wholeMax = 256 << 10
	// prefixLen is how much of a larger body is decoded: RAR headers of
	// hundreds of names, and the 16 KiB whose MD5 the par2 index holds.
	prefixLen = 64 << 10
)

// decode is the yEnc body b decoded: whole when small, else its first
// prefixLen bytes (Data shorter than End-Begin+1 then; not CRC checked,
// there is no CRC of a prefix).
func decode(b []byte) (yenc.Decoded, error) {
	if len(b) <= wholeMax {
		return yenc.Decode(bytes.NewReader(b))
	}
	h, err := yenc.ReadHeader(b)
	if err != nil {
		return yenc.Decoded{}, err
	}
	d := yenc.Decoded{Name: h.Name, Part: h.Part, Total: h.Total, Line: h.Line, Size: h.Size, Begin: h.Begin, End: h.End}
	// The data starts after =ybegin, and =ypart for a multipart body. The
	// =ybegin line is the one ReadHeader read: the first that starts with
	// it, not a "=ybegin " inside an earlier line of text, which would
	// start the data at the header (garbage for the RAR signature and the
	// 16 KiB hash, while a downloader decodes the body right).
	i := 0
	if !bytes.HasPrefix(b, []byte("=ybegin ")) {
		if i = bytes.Index(b, []byte("\n=ybegin ")); i < 0 {
			return d, fmt.Errorf("%w: no =ybegin", yenc.ErrFormat)
		}
		i++
	}
	b = b[i:]
	skip := 1
	if h.Part > 0 {
		skip = 2
	}
	for range skip {
		j := bytes.IndexByte(b, '\n')
		if j < 0 {
			return d, fmt.Errorf("%w: no data", yenc.ErrFormat)
		}
		b = b[j+1:]
	}
	want := prefixLen
	if n := h.End - h.Begin + 1; h.End > 0 && n < int64(want) {
		want = int(n)
	}
	out := make([]byte, 0, want)
	for len(out) < want && len(b) > 0 {
		j := bytes.IndexByte(b, '\n')
		line := b
		if j >= 0 {
			line, b = b[:j], b[j+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if bytes.HasPrefix(line, []byte("=yend")) {
			break
		}
		for k := 0; k < len(line); k++ {
			c := line[k]
			if c == '=' {
				k++
				if k == len(line) {
					break
				}
				c = line[k] - 64
			}
			out = append(out, c-42)
		}
	}
	if len(out) > want {
		out = out[:want]
	}
	d.Data = out
	return d, nil
}
