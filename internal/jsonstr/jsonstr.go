// Package jsonstr appends strings as JSON without reflection, for the
// encoders that build their messages from bytes (the forward queue's items,
// the events gateway's deliveries), and checks JSON text from outside for
// what encoding/json would silently turn into U+FFFD (CheckText), for the
// decoders where two spellings must not read as one name.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s to b as a JSON string, with the bytes encoding/json
// writes for it: invalid UTF-8 as U+FFFD (so every body decodes), U+2028 and
// U+2029 escaped (valid JSON, but they end a line in JavaScript), \b \f \n
// \r \t short, other control bytes as \u00XX. With escapeHTML, <, > and &
// are escaped too, as json.Marshal does, so the result equals its bytes.
func Append[T string | []byte](b []byte, s T, escapeHTML bool) []byte {
	safe := &plainSafe
	if escapeHTML {
		safe = &htmlSafe
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control bytes, and <, >, & when escaped
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		// A few bytes at most made a string: it stays on the stack.
		n := min(len(s)-i, utf8.UTFMax)
		r, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainSafe is the ASCII bytes that go into a JSON string as they are:
// printable, but not " or \. htmlSafe leaves out <, > and & as well.
var plainSafe, htmlSafe = func() (plain, html [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
		html[c] = plain[c] && c != '<' && c != '>' && c != '&'
	}
	return plain, html
}()
