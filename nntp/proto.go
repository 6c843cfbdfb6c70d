package nntp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// lineReader reads CRLF-terminated lines with a length limit. The slices it
// returns are valid only until the next read: the hot path (OVER) never
// copies a line unless the caller keeps it.
type lineReader struct {
	br   *bufio.Reader
	max  int
	long []byte // scratch for lines longer than br's buffer
}

// readLine returns the next line without its line ending.
func (r *lineReader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(r.long) > r.max+2 {
				return nil, ErrLineTooLong
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > r.max {
		return nil, ErrLineTooLong
	}
	return line, nil
}

// readBlockLine reads one line of a multi-line block, undoing dot-stuffing.
// done is true on the terminating "." line.
func (r *lineReader) readBlockLine() (line []byte, done bool, err error) {
	line, err = r.readLine()
	if err != nil {
		return nil, false, err
	}
	if len(line) > 0 && line[0] == '.' {
		if len(line) == 1 {
			return nil, true, nil
		}
		line = line[1:]
	}
	return line, false, nil
}

// ParseStatus splits a status line into its three-digit code and text.
// It rejects anything RFC 3977 does not allow: a code outside 100-599, a
// missing or non-digit code, or a code not followed by a space or the end.
func ParseStatus(line []byte) (code int, msg string, err error) {
	if len(line) < 3 {
		return 0, "", errors.New("status line too short")
	}
	for i := 0; i < 3; i++ {
		if line[i] < '0' || line[i] > '9' {
			return 0, "", errors.New("status code is not three digits")
		}
	}
	if line[0] < '1' || line[0] > '5' {
		return 0, "", errors.New("status code out of range")
	}
	if len(line) > 3 && line[3] != ' ' {
		return 0, "", errors.New("status code not followed by a space")
	}
	code = int(line[0]-'0')*100 + int(line[1]-'0')*10 + int(line[2]-'0')
	if len(line) > 4 {
		msg = string(line[4:])
	}
	return code, msg, nil
}

// parseDate parses the text of a 111 answer to DATE: "yyyymmddhhmmss",
// the server's clock in UTC (RFC 3977 section 7.1), then possibly a space
// and any text, which section 3.2 lets a server add after the last
// argument.
func parseDate(msg string) (time.Time, error) {
	arg, _, _ := strings.Cut(msg, " ")
	if len(arg) != 14 {
		return time.Time{}, errors.New("timestamp is not 14 digits")
	}
	for i := 0; i < len(arg); i++ {
		if arg[i] < '0' || arg[i] > '9' {
			return time.Time{}, errors.New("timestamp is not 14 digits")
		}
	}
	// time.ParseInLocation refuses impossible dates (February 30, hour 24).
	return time.ParseInLocation("20060102150405", arg, time.UTC)
}

// Overview is one line of an OVER/XOVER response: the fields of RFC 3977
// section 8.3 in the default LIST OVERVIEW.FMT order.
type Overview struct {
	Number     int64
	Subject    string
	From       string
	Date       string
	MessageID  string
	References string
	Bytes      int64 // 0 when the server left the field empty
	Lines      int64 // 0 when the server left the field empty
	// Extra holds the fields after Lines as sent, tab-separated, typically
	// "Xref: host group:number" (LIST OVERVIEW.FMT names them). A string,
	// not a slice, so a line costs one allocation.
	Extra string
}

// Xref returns the value of an "Xref:" field among the extra fields, or "".
func (ov Overview) Xref() string {
	for f := range strings.SplitSeq(ov.Extra, "\t") {
		if len(f) >= 5 && strings.EqualFold(f[:5], "xref:") {
			return strings.TrimSpace(f[5:])
		}
	}
	return ""
}

// ParseOverview parses one overview line (already dot-unstuffed). It needs
// the eight standard fields; Bytes and Lines may be empty but not
// non-numeric. The strings share one allocation of the line.
func ParseOverview(line []byte) (Overview, error) {
	var ov Overview
	tab := bytes.IndexByte(line, '\t')
	if tab < 0 {
		return ov, errors.New("overview line has no tab")
	}
	n, ok := parseUint(line[:tab])
	if !ok || n == 0 {
		return ov, errors.New("bad article number")
	}
	ov.Number = n
	s := string(line[tab+1:])
	var f [7]string
	for i := 0; i < 6; i++ {
		j := strings.IndexByte(s, '\t')
		if j < 0 {
			return Overview{}, errors.New("overview line has fewer than 8 fields")
		}
		f[i], s = s[:j], s[j+1:]
	}
	if j := strings.IndexByte(s, '\t'); j >= 0 {
		f[6], s = s[:j], s[j+1:]
		ov.Extra = s
	} else {
		f[6] = s
	}
	ov.Subject, ov.From, ov.Date, ov.MessageID, ov.References = f[0], f[1], f[2], f[3], f[4]
	if ov.Bytes, ok = parseOptUint(f[5]); !ok {
		return Overview{}, errors.New("bad bytes field")
	}
	if ov.Lines, ok = parseOptUint(f[6]); !ok {
		return Overview{}, errors.New("bad lines field")
	}
	return ov, nil
}

// parseUint parses a non-empty decimal without sign, at most 2^63-1 (19
// digits), as GROUP's numbers are read.
func parseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		// Up to 2^63-1, as GROUP's numbers (parseOptUint): 19 digits may
		// overflow, which the check before each step refuses.
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func parseOptUint(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, 10, 63)
	return int64(n), err == nil
}

// readBlock reads a whole multi-line block from r, calling fn for each
// dot-unstuffed line; it is the parser the fuzz target drives. If fn fails
// the rest of the block is still consumed so the stream stays in step, and
// fn's first error is returned.
func readBlock(r *lineReader, fn func([]byte) error) (cbErr error, err error) {
	for {
		line, done, err := r.readBlockLine()
		if err != nil {
			return cbErr, err
		}
		if done {
			return cbErr, nil
		}
		if cbErr == nil {
			cbErr = fn(line)
		}
	}
}

// parseGroupLine parses the text of a 211 response: "count low high name".
func parseGroupLine(msg string) (Group, bool) {
	f := strings.Fields(msg)
	if len(f) < 4 {
		return Group{}, false
	}
	var g Group
	var ok1, ok2, ok3 bool
	g.Count, ok1 = parseOptUint(f[0])
	g.Low, ok2 = parseOptUint(f[1])
	g.High, ok3 = parseOptUint(f[2])
	g.Name = f[3]
	return g, ok1 && ok2 && ok3 && f[0] != "" && f[1] != "" && f[2] != ""
}

// parseActiveLine parses one LIST ACTIVE line: "name high low status".
func parseActiveLine(line []byte) (ActiveGroup, bool) {
	f := strings.Fields(string(line))
	if len(f) != 4 {
		return ActiveGroup{}, false
	}
	hi, ok1 := parseUint([]byte(f[1]))
	lo, ok2 := parseUint([]byte(f[2]))
	if !ok1 || !ok2 {
		return ActiveGroup{}, false
	}
	return ActiveGroup{Name: f[0], High: hi, Low: lo, Status: f[3]}, true
}
