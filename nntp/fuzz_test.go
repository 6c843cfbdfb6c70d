package nntp

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"200 ready", "211 10 1 10 alt.test", "502", "2x0 garbage", "999 x", "20", "200\tx", "", "100 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		code, msg, err := ParseStatus(line)
		if err != nil {
			return
		}
		if code < 100 || code > 599 {
			t.Fatalf("accepted code %d from %q", code, line)
		}
		if len(line) > 4 && msg != string(line[4:]) {
			t.Fatalf("text %q from %q", msg, line)
		}
	})
}

// FuzzParseDate: a 111 answer is taken only when it starts with a real
// UTC date and time written as 14 digits, ending there or followed by a
// space.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"20240229235958", "20240229235958 Server date and time", "2024022923595", "+0240229235958", "20230229000000", " 20240229235958", "20240229235958\tx", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		got, err := parseDate(msg)
		if err != nil {
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("%q: %v is not UTC", msg, got)
		}
		// The timestamp is all of the text up to the first space.
		if arg, _, _ := strings.Cut(msg, " "); got.Format("20060102150405") != arg {
			t.Fatalf("%q: parsed as %v", msg, got)
		}
	})
}

func FuzzParseOverview(f *testing.F) {
	f.Add([]byte("1\tsubj \"a.part01.rar\" yEnc (1/50) 716800\tme <me@x>\tThu, 01 Jan 2026 00:00:07 +0000\t<a@b>\t\t740000\t5603\tXref: h g:1"))
	f.Add([]byte("5\ts\tf\td\t<m>\tr\t\t"))
	f.Add([]byte("x\ts\tf\td\t<m>\tr\t1\t1"))
	f.Add([]byte("garbage\tnot an overview line"))
	f.Add([]byte("99999999999999999999\ta\tb\tc\td\te\t1\t1"))
	f.Fuzz(func(t *testing.T, line []byte) {
		ov, err := ParseOverview(line)
		if err != nil {
			return
		}
		if ov.Number <= 0 || ov.Bytes < 0 || ov.Lines < 0 {
			t.Fatalf("accepted %+v from %q", ov, line)
		}
		for _, f := range []string{ov.Subject, ov.From, ov.Date, ov.MessageID, ov.References} {
			if strings.Contains(f, "\t") {
				t.Fatalf("field %q holds a tab", f)
			}
		}
		extra := 0
		if ov.Extra != "" || strings.Count(string(line), "\t") > 7 {
			extra = 1 + strings.Count(ov.Extra, "\t")
		}
		if got := strings.Count(string(line), "\t"); got != 7+extra {
			t.Fatalf("%d tabs, extra %q in %q", got, ov.Extra, line)
		}
	})
}

// FuzzReadBlock drives the multi-line block reader (line framing, length
// limit, dot-unstuffing) with arbitrary bytes: it must end with the block,
// an error, or the data; never panic or loop.
func FuzzReadBlock(f *testing.F) {
	f.Add([]byte("a\r\n..b\r\n.\r\n"), 64)
	f.Add([]byte(".\r\n"), 8)
	f.Add([]byte("no terminator\r\n"), 64)
	f.Add([]byte("long line that will not fit\r\n.\r\n"), 4)
	f.Add([]byte("lf only\n.\n"), 64)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 64
		}
		r := lineReader{br: bufio.NewReaderSize(bytes.NewReader(data), 16), max: max}
		var lines [][]byte
		_, err := readBlock(&r, func(l []byte) error {
			if len(l) > max {
				t.Fatalf("line of %d bytes over max %d", len(l), max)
			}
			if bytes.ContainsAny(l, "\n") {
				t.Fatalf("line %q holds a line feed", l)
			}
			lines = append(lines, bytes.Clone(l))
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrLineTooLong) && err.Error() != "unexpected EOF" {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// Each line read is the input line minus its line end and minus
		// one leading dot; the block ends at the first lone ".".
		in := bytes.Split(data, []byte("\n"))
		if len(in) <= len(lines) {
			t.Fatalf("%d lines read from %d", len(lines), len(in))
		}
		for i, l := range lines {
			src := bytes.TrimSuffix(in[i], []byte("\r"))
			if len(src) > 0 && src[0] == '.' {
				src = src[1:]
			}
			if !bytes.Equal(src, l) {
				t.Fatalf("line %d: read %q from %q", i, l, in[i])
			}
		}
		if end := bytes.TrimSuffix(in[len(lines)], []byte("\r")); string(end) != "." {
			t.Fatalf("block ended at %q", end)
		}
	})
}
