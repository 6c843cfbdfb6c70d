package jsonstr

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// CheckText reports (as a plain error, for the caller to give a code and
// context) whether the JSON text b holds anything encoding/json would
// replace with U+FFFD while decoding it: a byte sequence that is not valid
// UTF-8, or a \u escape of a UTF-16 surrogate (U+D800-U+DFFF) that is not
// the high half of a pair immediately followed by its low half. encoding/json
// converts both silently, so without this check "alias\xff", "alias\xfe"
// and "alias\udcff" would all decode to the one key "alias\ufffd". A real
// U+FFFD (its UTF-8 bytes, or the escape \ufffd) is a character like any
// other and passes.
//
// It must run on the raw bytes, before encoding/json sees them. It does not
// check the JSON syntax: a backslash outside a string is a syntax error the
// decoder reports anyway.
func CheckText(b []byte) error {
	if !utf8.Valid(b) {
		for i := 0; i < len(b); {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Errorf("byte %d (%#02x) is not valid UTF-8", i, b[i])
			}
			i += n
		}
	}
	for i := bytes.IndexByte(b, '\\'); i >= 0; {
		if i+1 >= len(b) {
			return nil // a truncated escape: the decoder's syntax error
		}
		n := 2 // a one-letter escape, \\ included: its letter is not a backslash
		if b[i+1] == 'u' {
			r, ok := hex4(b[i+2:])
			switch {
			case !ok:
				// A malformed \u escape is the decoder's syntax error.
			case r >= 0xdc00 && r <= 0xdfff:
				return fmt.Errorf("byte %d: %s is the low half of a UTF-16 surrogate pair without its high half", i, b[i:i+6])
			case r >= 0xd800 && r <= 0xdbff:
				lo, ok := rune(0), false
				if len(b) >= i+12 && b[i+6] == '\\' && b[i+7] == 'u' {
					lo, ok = hex4(b[i+8:])
				}
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return fmt.Errorf("byte %d: %s is the high half of a UTF-16 surrogate pair without its low half", i, b[i:i+6])
				}
				n = 12
			default:
				n = 6
			}
		}
		next := bytes.IndexByte(b[i+n:], '\\')
		if next < 0 {
			break
		}
		i += n + next
	}
	return nil
}

// hex4 reads the four hex digits of a \u escape from the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
