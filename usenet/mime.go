package usenet

import (
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"
)

// wordDecoder decodes RFC 2047 encoded words. mime.WordDecoder knows
// UTF-8, ISO-8859-1 and US-ASCII; charsetReader adds windows-1252, which
// many posting tools on Windows declare. A WordDecoder holds no state
// between calls, so one serves every goroutine.
var wordDecoder = &mime.WordDecoder{CharsetReader: charsetReader}

// decodeMIME returns s with its encoded words (=?UTF-8?B?...?=) decoded, or
// s itself when it has none or one cannot be decoded: a subject is shown
// and keyed as posted rather than dropped.
func decodeMIME(s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	d, err := wordDecoder.DecodeHeader(s)
	if err != nil {
		return s
	}
	return d
}

// cp1252 maps the bytes 0x80-0x9F of windows-1252 to runes; the other
// bytes are the ISO-8859-1 code points. The five undefined bytes map to
// U+FFFD.
var cp1252 = [32]rune{
	'€', '\uFFFD', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\uFFFD', 'Ž', '\uFFFD',
	'\uFFFD', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\uFFFD', 'ž', 'Ÿ',
}

func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "windows-1252", "cp1252", "x-cp1252":
	default:
		return nil, fmt.Errorf("unhandled charset %q", charset)
	}
	b, err := io.ReadAll(input)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(b)/2)
	for _, c := range b {
		r := rune(c)
		if c >= 0x80 && c < 0xA0 {
			r = cp1252[c-0x80]
		}
		out = utf8.AppendRune(out, r)
	}
	return strings.NewReader(string(out)), nil
}
