package yenc

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// maxLine bounds one body line; yEnc lines are ~128 characters, so a
// longer one means the input is not yEnc.
const maxLine = 64 << 10

// Decoded is one decoded yEnc body: its header fields and data.
type Decoded struct {
	Name  string
	Part  int   // 0 for a single-part body
	Total int   // 0 when the =ybegin line has no total=
	Line  int   // the line= of =ybegin
	Size  int64 // the whole file's size (size= of =ybegin)
	// Begin and End are the 1-based inclusive range of =ypart; for a
	// single-part body 1 and len(Data).
	Begin, End int64
	Data       []byte
	PartCRC32  uint32 // pcrc32= (crc32= for a single-part body); checked
	// FileCRC32 is crc32= of a multipart body's =yend, set on the last
	// part; HasFileCRC says whether it was present. It cannot be checked
	// against one part.
	FileCRC32  uint32
	HasFileCRC bool
}

// Decode reads one yEnc body (lines before =ybegin are skipped, CRLF or LF
// line ends, already dot-unstuffed) and checks the decoded size against
// =yend size= and =ypart, and the data against pcrc32= (or crc32= for a
// single-part body). Errors wrap ErrFormat, ErrSize or ErrCRC.
func Decode(r io.Reader) (Decoded, error) {
	var d Decoded
	br := bufio.NewReaderSize(r, 4<<10)
	state := 0 // 0 before =ybegin, 1 after it, 2 in data
	multipart := false
	for {
		line, err := readLine(br)
		if err == io.EOF {
			return d, fmt.Errorf("%w: no =yend", ErrFormat)
		}
		if err != nil {
			return d, err
		}
		switch {
		case state == 0:
			if !bytes.HasPrefix(line, []byte("=ybegin ")) {
				continue
			}
			h, err := beginLine(line)
			if err != nil {
				return d, err
			}
			d.Name, d.Line, d.Size, d.Part, d.Total = h.Name, h.Line, h.Size, h.Part, h.Total
			multipart = d.Part > 0
			state = 1
		case state == 1 && multipart:
			if !bytes.HasPrefix(line, []byte("=ypart ")) {
				return d, fmt.Errorf("%w: multipart body without =ypart", ErrFormat)
			}
			if d.Begin, d.End, err = partLine(line, d.Size); err != nil {
				return d, err
			}
			state = 2
		case bytes.HasPrefix(line, []byte("=yend")):
			return d, d.trailer(line[len("=yend"):], multipart)
		case bytes.HasPrefix(line, []byte("=y")):
			return d, fmt.Errorf("%w: unexpected %q", ErrFormat, line)
		default:
			state = 2
			if d.Data, err = decodeLine(d.Data, line); err != nil {
				return d, err
			}
		}
	}
}

// beginLine parses an =ybegin line's fields.
func beginLine(line []byte) (Header, error) {
	var h Header
	kv, name, err := fields(line[len("=ybegin "):], true)
	if err != nil {
		return h, err
	}
	h.Name = name
	if h.Line, err = intField(kv, "line", true); err != nil {
		return h, err
	}
	if h.Size, err = int64Field(kv, "size", true); err != nil {
		return h, err
	}
	if h.Part, err = intField(kv, "part", false); err != nil {
		return h, err
	}
	if h.Total, err = intField(kv, "total", false); err != nil {
		return h, err
	}
	if h.Part < 0 || h.Total < 0 || (h.Total > 0 && h.Part > h.Total) {
		return h, fmt.Errorf("%w: part %d of %d", ErrFormat, h.Part, h.Total)
	}
	return h, nil
}

// partLine parses an =ypart line's range and checks it against the size
// of the file.
func partLine(line []byte, size int64) (begin, end int64, err error) {
	kv, _, err := fields(line[len("=ypart "):], false)
	if err != nil {
		return 0, 0, err
	}
	if begin, err = int64Field(kv, "begin", true); err != nil {
		return 0, 0, err
	}
	if end, err = int64Field(kv, "end", true); err != nil {
		return 0, 0, err
	}
	if begin < 1 || end < begin-1 || end > size {
		return 0, 0, fmt.Errorf("%w: =ypart begin=%d end=%d in a file of %d", ErrFormat, begin, end, size)
	}
	return begin, end, nil
}

// trailer checks the =yend fields against the decoded data.
func (d *Decoded) trailer(rest []byte, multipart bool) error {
	kv, _, err := fields(rest, false)
	if err != nil {
		return err
	}
	size, err := int64Field(kv, "size", true)
	if err != nil {
		return err
	}
	if size != int64(len(d.Data)) {
		return fmt.Errorf("%w: =yend size=%d, decoded %d bytes", ErrSize, size, len(d.Data))
	}
	if multipart {
		if got := d.End - d.Begin + 1; got != size {
			return fmt.Errorf("%w: =ypart covers %d bytes, decoded %d", ErrSize, got, len(d.Data))
		}
		if p, err := intField(kv, "part", false); err != nil || (p != 0 && p != d.Part) {
			return fmt.Errorf("%w: =yend part=%d after =ybegin part=%d", ErrFormat, p, d.Part)
		}
	} else {
		if size != d.Size {
			return fmt.Errorf("%w: =ybegin size=%d, decoded %d bytes", ErrSize, d.Size, len(d.Data))
		}
		d.Begin, d.End = 1, size
	}
	key := "pcrc32"
	if !multipart {
		key = "crc32"
	}
	if v, ok := kv[key]; ok {
		crc, err := parseCRC(v)
		if err != nil {
			return err
		}
		d.PartCRC32 = crc
		if got := crc32.ChecksumIEEE(d.Data); got != crc {
			return fmt.Errorf("%w: %s=%08x, data has %08x", ErrCRC, key, crc, got)
		}
	}
	if v, ok := kv["crc32"]; ok && multipart {
		if d.FileCRC32, err = parseCRC(v); err != nil {
			return err
		}
		d.HasFileCRC = true
	}
	return nil
}

// readLine returns the next line without its line end.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrFormat, maxLine)
		}
		switch err {
		case nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(line) > 0 {
				return bytes.TrimSuffix(line, []byte("\r")), nil
			}
			return nil, io.EOF
		default:
			return nil, fmt.Errorf("yenc: read: %w", err)
		}
	}
}

// decodeLine appends the decoded bytes of one encoded line.
func decodeLine(dst, line []byte) ([]byte, error) {
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '=' {
			i++
			if i == len(line) {
				return dst, fmt.Errorf("%w: escape at the end of a line", ErrFormat)
			}
			c = line[i] - 64
		}
		dst = append(dst, c-42)
	}
	return dst, nil
}

// fields parses "k=v k=v ..." of a keyword line. With withName the value
// of name= runs to the end of the line (names may hold spaces) and must be
// there.
func fields(b []byte, withName bool) (map[string]string, string, error) {
	var name string
	if withName {
		i := bytes.Index(b, []byte("name="))
		if i < 0 || (i > 0 && b[i-1] != ' ') {
			return nil, "", fmt.Errorf("%w: =ybegin without name=", ErrFormat)
		}
		name, b = string(b[i+len("name="):]), b[:i]
		if name == "" {
			return nil, "", fmt.Errorf("%w: empty name=", ErrFormat)
		}
		if strings.ContainsAny(name, "\r\x00") {
			// A line ends at \n: a \r or NUL left inside the name is no
			// part of a file name (and could not be written back).
			return nil, "", fmt.Errorf("%w: control character in name=", ErrFormat)
		}
	}
	kv := map[string]string{}
	for _, f := range bytes.Fields(b) {
		k, v, ok := bytes.Cut(f, []byte("="))
		if !ok {
			return nil, "", fmt.Errorf("%w: field %q", ErrFormat, f)
		}
		kv[string(k)] = string(v)
	}
	return kv, name, nil
}

func int64Field(kv map[string]string, key string, required bool) (int64, error) {
	v, ok := kv[key]
	if !ok {
		if required {
			return 0, fmt.Errorf("%w: no %s=", ErrFormat, key)
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s=%q", ErrFormat, key, v)
	}
	return n, nil
}

func intField(kv map[string]string, key string, required bool) (int, error) {
	n, err := int64Field(kv, key, required)
	if err != nil {
		return 0, err
	}
	if n > 1<<31-1 {
		return 0, fmt.Errorf("%w: %s=%d", ErrFormat, key, n)
	}
	return int(n), nil
}

// parseCRC reads a CRC32 in hex; some posters drop leading zeros.
func parseCRC(v string) (uint32, error) {
	if v == "" || len(v) > 8 {
		return 0, fmt.Errorf("%w: crc32 %q", ErrFormat, v)
	}
	n, err := strconv.ParseUint(v, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: crc32 %q", ErrFormat, v)
	}
	return uint32(n), nil
}
