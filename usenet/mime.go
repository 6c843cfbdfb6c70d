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

// decodeMIME returns s with its encoded words (=?UTF-8?B?...?=) decoded;
// a word that cannot be decoded (a charset not known, a bad encoding) is
// left as posted, and the words beside it are decoded all the same: a
// subject is shown and keyed as posted rather than dropped.
func decodeMIME(s string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	d, err := wordDecoder.DecodeHeader(s)
	if err != nil {
		// DecodeHeader gives up on the whole of s when one word's charset
		// is not known; it leaves only a badly encoded word as posted.
		return decodeWords(s)
	}
	return d
}

// decodeWords is DecodeHeader word by word: it finds the encoded words
// as DecodeHeader does, and a word it cannot decode, whatever the reason,
// is left as posted. The white space between two decoded words is
// dropped (RFC 2047 6.2: it only separates the words an encoder split
// text into); beside a word left as posted it stays, as DecodeHeader
// keeps it beside a badly encoded word.
func decodeWords(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	between := false // s follows a decoded word
	for {
		start, end, ok := encodedWord(s)
		if !ok {
			break
		}
		word := s[start:end]
		// DecodeHeader of the word alone returns it unchanged when its
		// encoding is bad, and fails when its charset is not known. (A
		// word that decodes to itself reads as bad: that only keeps the
		// space beside it.)
		d, err := wordDecoder.DecodeHeader(word)
		if err != nil || d == word {
			b.WriteString(s[:end])
			between = false
		} else {
			if !between || strings.Trim(s[:start], " \t\r\n") != "" {
				b.WriteString(s[:start])
			}
			b.WriteString(d)
			between = true
		}
		s = s[end:]
	}
	b.WriteString(s)
	return b.String()
}

// encodedWord finds the first encoded word of s as mime.WordDecoder's
// DecodeHeader reads one: "=?", a charset up to the next "?", one byte
// of encoding, "?", and text up to the next "?=".
func encodedWord(s string) (start, end int, ok bool) {
	start = strings.Index(s, "=?")
	if start < 0 {
		return 0, 0, false
	}
	cur := start + len("=?")
	i := strings.IndexByte(s[cur:], '?')
	if i < 0 {
		return 0, 0, false
	}
	cur += i + len("?")
	if len(s) < cur+len("Q??=") || s[cur+1] != '?' {
		return 0, 0, false
	}
	cur += len("Q?")
	j := strings.Index(s[cur:], "?=")
	if j < 0 {
		return 0, 0, false
	}
	return start, cur + j + len("?="), true
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
