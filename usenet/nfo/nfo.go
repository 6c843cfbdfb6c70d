// Package nfo reads the .nfo files posted with releases: text in CP437
// (the DOS code page of their box-drawing art) or UTF-8, sometimes UTF-16.
// Text turns one into clean UTF-8 for storing and serving, Words picks its
// search words, and Looks tells a body that is plausibly an NFO from
// binary data. It is pure and reads at most MaxSize bytes of any input.
package nfo

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxSize is how much of an input Text and Looks read: NFOs are a few KiB,
// and anything past 64 KiB is not one.
const MaxSize = 64 << 10

// Word bounds of Words.
const (
	MinWordRunes = 2
	MaxWordRunes = 40
	MaxWords     = 200
)

// Text returns the first MaxSize bytes of b as valid UTF-8: kept as they
// are when they are UTF-8 (a byte order mark, and a rune the cap cut
// short, dropped), decoded when they start with a UTF-16 byte order mark,
// and otherwise read as CP437. CRLF and lone CR become LF; ANSI escape
// sequences (ESC [ … final byte), NUL and every other control character
// except LF and TAB are removed.
func Text(b []byte) string {
	capped := len(b) > MaxSize
	b = b[:min(len(b), MaxSize)]
	var s string
	switch {
	case len(b) >= 2 && (b[0] == 0xff && b[1] == 0xfe || b[0] == 0xfe && b[1] == 0xff):
		s = fromUTF16(b[2:], b[0] == 0xfe)
	case validUTF8(b, capped):
		s = strings.TrimPrefix(string(b), "\ufeff")
	default:
		s = fromCP437(b)
	}
	return clean(s)
}

// validUTF8 says whether b is UTF-8, allowing a rune cut at its end when
// capped says the cap cut b there (it may fall inside one). An input the
// cap did not cut has no such excuse: its last byte is what was posted,
// and a lone lead byte there (CP437 0xDB, the full block) is not UTF-8.
func validUTF8(b []byte, capped bool) bool {
	if utf8.Valid(b) {
		return true
	}
	if !capped {
		return false
	}
	for cut := 1; cut <= 3 && cut < len(b); cut++ {
		tail := b[len(b)-cut:]
		if utf8.RuneStart(tail[0]) && !utf8.FullRune(tail) {
			return utf8.Valid(b[:len(b)-cut])
		}
	}
	return false
}

func fromCP437(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/2)
	for _, c := range b {
		if c < 0x80 {
			sb.WriteByte(c)
		} else {
			sb.WriteRune(cp437[c-0x80])
		}
	}
	return sb.String()
}

func fromUTF16(b []byte, bigEndian bool) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		if bigEndian {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		} else {
			u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		}
	}
	return string(utf16.Decode(u))
}

// clean normalises line ends and drops control characters (and invalid
// UTF-8, which only a cut rune at the end can leave).
func clean(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	skip := 0 // bytes of an ANSI escape sequence left to drop
	for i, r := range s {
		if i < skip {
			continue
		}
		switch {
		case r == 0x1b && i+1 < len(s) && s[i+1] == '[':
			// An ANSI sequence (ESC [ parameters, a final byte in
			// 0x40–0x7E) sets colours: no text of its own.
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) && j-i < 32 {
				j++
			}
			skip = j + 1
		case r == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				continue
			}
			sb.WriteByte('\n')
		case r == '\n' || r == '\t':
			sb.WriteRune(r)
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
		case unicode.IsControl(r), r == '\ufeff':
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// Words returns the distinct words of text for search: runs of letters
// and digits, lowercased, of MinWordRunes to MaxWordRunes runes (longer
// runs are skipped, not cut), in order of first appearance, at most
// MaxWords.
func Words(text string) []string {
	var words []string
	seen := map[string]bool{}
	f := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range f {
		if n := utf8.RuneCountInString(w); n < MinWordRunes || n > MaxWordRunes {
			continue
		}
		w = strings.ToLower(w)
		if seen[w] {
			continue
		}
		seen[w] = true
		words = append(words, w)
		if len(words) == MaxWords {
			break
		}
	}
	return words
}

// Looks says whether b is plausibly an NFO: text, not binary data. Within
// its first MaxSize bytes (trailing NULs, which some NFOs are padded
// with, aside) at most one character in a hundred may be a control
// character other than TAB, LF, CR, FF, ESC (ANSI colour codes) and SUB
// (the DOS end-of-file mark). Read as CP437 (when not UTF-8), at least a
// quarter of the bytes must also be printable ASCII: art-heavy NFOs still
// have their text and spaces, while random or compressed data has an
// eighth of its bytes below 0x20 and many more above 0x7E.
func Looks(b []byte) bool {
	capped := len(b) > MaxSize
	b = b[:min(len(b), MaxSize)]
	if len(b) >= 2 && (b[0] == 0xff && b[1] == 0xfe || b[0] == 0xfe && b[1] == 0xff) {
		return Looks([]byte(fromUTF16(b[2:], b[0] == 0xfe)))
	}
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
		capped = false // b's end is now the padding's start, not the cap
	}
	if len(b) == 0 {
		return false
	}
	if validUTF8(b, capped) {
		var ctl, n int
		for _, r := range string(b) {
			n++
			if unicode.IsControl(r) && !allowedControl(r) {
				ctl++
			}
		}
		return ctl*100 <= n
	}
	var ctl, ascii int
	for _, c := range b {
		switch {
		case allowedControl(rune(c)):
			ascii++
		case c < 0x20, c == 0x7f:
			ctl++
		case c < 0x7f:
			ascii++
		}
	}
	return ctl*100 <= len(b) && ascii*4 >= len(b)
}

// allowedControl says whether a control character is one that text files
// hold.
func allowedControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r', '\f', 0x1b, 0x1a:
		return true
	}
	return false
}
