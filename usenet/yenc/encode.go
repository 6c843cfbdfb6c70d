// Package yenc encodes and decodes yEnc 1.3 article bodies: the multipart
// form posters use for binaries (=ybegin, =ypart, encoded lines, =yend with
// the part's CRC32 and, on the last part, the whole file's). ReadHeader
// reads only a body's =ybegin and =ypart fields, from a prefix of it.
package yenc

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
)

// LineDefault is the encoded line length posters use and Part.Line's default.
const LineDefault = 128

// Part describes one article of a file split for posting. Offsets and
// sizes are in bytes of the decoded file.
type Part struct {
	// Name is the file name; it goes last on the =ybegin line, so it may
	// hold spaces but not line breaks.
	Name string
	// Number is the part number, 1..Total.
	Number, Total int
	// Offset is where the part's data starts in the file (0-based); the
	// =ypart line says begin=Offset+1.
	Offset int64
	// FileSize is the size of the whole file.
	FileSize int64
	// FileCRC32 is the CRC32 (IEEE) of the whole file, written as crc32=
	// on the last part only.
	FileCRC32 uint32
	// Line is the encoded line length. Zero means LineDefault.
	Line int
}

// Split cuts file into parts of at most partSize bytes and describes each;
// the data of part i is file[parts[i].Offset:][:min(partSize, ...)], see
// Data. An empty file is one empty part.
func Split(name string, file []byte, partSize int) []Part {
	if partSize <= 0 {
		partSize = len(file)
	}
	total := 1
	if len(file) > 0 && partSize > 0 {
		total = (len(file) + partSize - 1) / partSize
	}
	crc := crc32.ChecksumIEEE(file)
	parts := make([]Part, total)
	for i := range parts {
		parts[i] = Part{
			Name: name, Number: i + 1, Total: total,
			Offset: int64(i) * int64(partSize), FileSize: int64(len(file)), FileCRC32: crc,
		}
	}
	return parts
}

// Data returns the part's slice of file, given the partSize Split used.
func (p Part) Data(file []byte, partSize int) []byte {
	end := min(int64(len(file)), p.Offset+int64(partSize))
	if partSize <= 0 {
		end = int64(len(file))
	}
	return file[p.Offset:end]
}

func (p Part) validate(n int) error {
	switch {
	case p.Name == "" || strings.ContainsAny(p.Name, "\r\n\x00"):
		return fmt.Errorf("yenc: bad file name %q", p.Name)
	case p.Total < 1 || p.Number < 1 || p.Number > p.Total:
		return fmt.Errorf("yenc: part %d of %d", p.Number, p.Total)
	case p.Offset < 0 || p.Offset+int64(n) > p.FileSize:
		return fmt.Errorf("yenc: part data [%d,%d) outside a file of %d bytes", p.Offset, p.Offset+int64(n), p.FileSize)
	case p.Line < 0:
		return fmt.Errorf("yenc: line length %d", p.Line)
	}
	return nil
}

// Encode writes data, the part p describes, as a yEnc 1.3 multipart
// article body with CRLF line ends. The body is not dot-stuffed: that is
// the NNTP client's job (a line may start with a literal '.' only if the
// client stuffs it, so Encode escapes a leading '.' anyway, as posters do
// for servers that mishandle it).
func Encode(w io.Writer, data []byte, p Part) error {
	if err := p.validate(len(data)); err != nil {
		return err
	}
	line := p.Line
	if line == 0 {
		line = LineDefault
	}
	bw := bufio.NewWriterSize(w, 32<<10)
	fmt.Fprintf(bw, "=ybegin part=%d total=%d line=%d size=%d name=%s\r\n", p.Number, p.Total, line, p.FileSize, p.Name)
	fmt.Fprintf(bw, "=ypart begin=%d end=%d\r\n", p.Offset+1, p.Offset+int64(len(data)))
	encodeLines(bw, data, line)
	fmt.Fprintf(bw, "=yend size=%d part=%d pcrc32=%08x", len(data), p.Number, crc32.ChecksumIEEE(data))
	if p.Number == p.Total {
		fmt.Fprintf(bw, " crc32=%08x", p.FileCRC32)
	}
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("yenc: write: %w", err)
	}
	return nil
}

// encodeLines writes the encoded data in lines of about line characters:
// a line ends once it holds line characters or more, so an escape pair is
// never split (a line may hence be one character longer).
func encodeLines(bw *bufio.Writer, data []byte, line int) {
	col := 0
	for i, b := range data {
		c := b + 42
		last := col+1 >= line || i == len(data)-1
		if critical(c, col == 0, last) {
			bw.WriteByte('=')
			c += 64
			col++
		}
		bw.WriteByte(c)
		col++
		if col >= line {
			bw.WriteString("\r\n")
			col = 0
		}
	}
	if col > 0 {
		bw.WriteString("\r\n")
	}
}

// critical reports whether encoded byte c must be escaped: NUL, LF, CR and
// '=' always (they would break the line structure or look like an
// escape); TAB and SPACE at either end of a line, where transports strip
// whitespace; '.' at a line's start, which NNTP reserves.
func critical(c byte, first, last bool) bool {
	switch c {
	case 0, '\n', '\r', '=':
		return true
	case '\t', ' ':
		return first || last
	case '.':
		return first
	}
	return false
}

// Errors Decode reports; match them with errors.Is.
var (
	// ErrFormat: the body is not a well-formed yEnc body.
	ErrFormat = errors.New("yenc: malformed body")
	// ErrSize: the decoded data's size differs from the trailer's or the
	// =ypart range's.
	ErrSize = errors.New("yenc: size mismatch")
	// ErrCRC: a CRC32 in the trailer does not match the decoded data.
	ErrCRC = errors.New("yenc: crc32 mismatch")
)
