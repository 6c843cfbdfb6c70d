package persist_test

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

// The naming rule: names and keys that the header or JSON encodings would
// turn into another name are refused; everything else is kept byte for byte.
func TestNamingRule(t *testing.T) {
	t.Parallel()
	valid := map[string]string{
		"plain":        "notes",
		"inner space":  "a b",
		"unicode":      "ünïcødé ☃",
		"path-like":    "../../etc/passwd",
		"tilde":        "a~0123",
		"inner nbsp":   "a\u00a0b",
		"max name":     strings.Repeat("x", persist.MaxStreamNameBytes),
		"one byte":     "x",
		"percent":      "%2e%2e",
		"quote":        `"q"`,
		"backslash":    `C:\windows`,
		"emoji":        "🙂",
		"inner U+2028": "a\u2028b",
	}
	refused := map[string]string{
		"LF inside":       "a\nb",
		"CR inside":       "a\rb",
		"CRLF inside":     "a\r\nb",
		"tab inside":      "a\tb",
		"NUL":             "nul\x00byte",
		"other C0":        "a\x01b",
		"escape":          "\x1b[31m",
		"DEL":             "a\x7fb",
		"C1 NEL":          "a\u0085b",
		"C1 CSI":          "a\u009bb",
		"leading space":   " sp",
		"trailing space":  "sp ",
		"both spaces":     " sp ",
		"only spaces":     "   ",
		"leading tab":     "\tsp",
		"trailing LF":     "sp\n",
		"leading nbsp":    "\u00a0sp",
		"trailing em sp":  "sp\u2003",
		"trailing U+3000": "sp\u3000",
		"invalid UTF-8":   "a\xffb",
		"truncated UTF-8": "a\xc3",
	}
	for name, s := range valid {
		if err := persist.ValidStreamName(s); err != nil {
			t.Errorf("%s: stream name %q refused: %v", name, s, err)
		}
		if len(s) <= persist.MaxKeyBytes {
			if err := persist.ValidKey(s); err != nil {
				t.Errorf("%s: key %q refused: %v", name, s, err)
			}
		}
	}
	for name, s := range refused {
		if err := persist.ValidStreamName(s); persist.CodeOf(err) != persist.CodeBadRequest {
			t.Errorf("%s: stream name %q: %v, want bad-request", name, s, err)
		}
		if err := persist.ValidKey(s); persist.CodeOf(err) != persist.CodeBadRequest {
			t.Errorf("%s: key %q: %v, want bad-request", name, s, err)
		}
	}
	if err := persist.ValidKey(""); err != nil {
		t.Errorf("the empty key (no key): %v", err)
	}
	if err := persist.ValidStreamName(""); persist.CodeOf(err) != persist.CodeBadRequest {
		t.Errorf("the empty stream name: %v, want bad-request", err)
	}
	if err := persist.ValidKey(strings.Repeat("k", persist.MaxKeyBytes+1)); persist.CodeOf(err) != persist.CodeTooLarge {
		t.Errorf("an over-long key: %v, want too-large", err)
	}
	if err := persist.ValidStreamName(strings.Repeat("x", persist.MaxStreamNameBytes+1)); persist.CodeOf(err) != persist.CodeBadRequest {
		t.Errorf("an over-long stream name: %v, want bad-request", err)
	}
}
