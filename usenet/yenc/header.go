package yenc

import (
	"bytes"
	"fmt"
)

// Header holds the =ybegin and =ypart fields of a yEnc body.
type Header struct {
	Name  string
	Part  int   // 0 for a single-part body
	Total int   // 0 when the =ybegin line has no total=
	Line  int   // the line= of =ybegin
	Size  int64 // the whole file's size (size= of =ybegin)
	// Begin and End are the 1-based inclusive range of =ypart; for a
	// single-part body 1 and Size. Both are 0 for a multipart body whose
	// input ends before the end of its =ypart line.
	Begin, End int64
}

// maxHeaderSkip bounds how far into b ReadHeader looks for =ybegin: a
// body's header is in its first lines, and the rest is data not to scan.
const maxHeaderSkip = 64 << 10

// ReadHeader returns the =ybegin (and =ypart, if present) fields of a body
// (lines before =ybegin are skipped, CRLF or LF line ends) without
// decoding or checking the data, so a prefix of a body is enough: the
// name of a segment's file, its size, part, total and range (none when
// the prefix ends before the end of the =ypart line, whose numbers may be
// cut there). Errors wrap ErrFormat: no =ybegin line starting in the
// first 64 KiB, an input that ends inside the =ybegin line (its name=
// would be read short), a line longer than 64 KiB, malformed fields, or a
// multipart body whose next line is not =ypart.
func ReadHeader(b []byte) (Header, error) {
	// Only lines starting in the first maxHeaderSkip bytes are looked at,
	// but the =ybegin line is cut from b: one that starts in that window
	// may end past it, and cut at the window's end its name= would be
	// read short.
	window := min(len(b), maxHeaderSkip)
	for off := 0; off < window; {
		if !bytes.HasPrefix(b[off:], []byte("=ybegin ")) {
			i := bytes.IndexByte(b[off:window], '\n')
			if i < 0 {
				break
			}
			off += i + 1
			continue
		}
		line, n, whole, err := boundedLine(b[off:])
		if err != nil {
			return Header{}, err
		}
		if !whole {
			return Header{}, fmt.Errorf("%w: input ends inside the =ybegin line", ErrFormat)
		}
		off += n
		h, err := beginLine(line)
		if err != nil {
			return Header{}, err
		}
		if h.Part == 0 {
			h.Begin, h.End = 1, h.Size
			return h, nil
		}
		// The =ypart line follows.
		line, _, whole, err = boundedLine(b[off:])
		if err != nil {
			return Header{}, err
		}
		if !whole && (bytes.HasPrefix(line, []byte("=ypart ")) || bytes.HasPrefix([]byte("=ypart "), line)) {
			// The input ends inside the =ypart line: no range known. Its
			// last number may be cut (end=1000 read as end=10), and a
			// shorter range would read as a true one.
			return h, nil
		}
		if !whole || !bytes.HasPrefix(line, []byte("=ypart ")) {
			return Header{}, fmt.Errorf("%w: multipart body without =ypart", ErrFormat)
		}
		begin, end, err := partLine(line, h.Size)
		if err != nil {
			return Header{}, err
		}
		h.Begin, h.End = begin, end
		return h, nil
	}
	return Header{}, fmt.Errorf("%w: no =ybegin", ErrFormat)
}

// boundedLine is cutLine of b's first line, which must fit in maxLine
// bytes, as Decode requires.
func boundedLine(b []byte) (line []byte, n int, whole bool, err error) {
	line, n, whole = cutLine(b[:min(len(b), maxLine)])
	if !whole && len(b) > maxLine {
		return nil, 0, false, fmt.Errorf("%w: line longer than %d bytes", ErrFormat, maxLine)
	}
	return line, n, whole, nil
}

// cutLine returns b's first line without its line end, the bytes it
// takes with its line end, and whether it has one (else the input ends
// inside it).
func cutLine(b []byte) (line []byte, n int, whole bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.TrimSuffix(b, []byte("\r")), len(b), false
	}
	return bytes.TrimSuffix(b[:i], []byte("\r")), i + 1, true
}
