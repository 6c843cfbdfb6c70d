package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		"plain":                   `{"key":"alias"}`,
		"empty":                   ``,
		"real U+FFFD":             "{\"key\":\"alias\ufffd\"}",
		"U+FFFD escape":           `{"key":"alias\ufffd"}`,
		"other escapes":           `{"key":"a\"b\\c\/d\n\t\u0041\u00e9"}`,
		"surrogate pair":          `{"key":"\ud83d\ude00"}`,
		"upper-case pair":         `{"key":"\uD83D\uDE00"}`,
		"two pairs":               `{"key":"\ud83d\ude00\udbff\udfff"}`,
		"escaped backslash":       `{"key":"alias\\udcff"}`,
		"escaped backslash pair":  `{"key":"\\\\ud800"}`,
		"multi-byte UTF-8":        `{"key":"ünïcødé ☃ 🙂"}`,
		"non-surrogate neighbour": `{"key":"\ud7ff\ue000"}`,
		"malformed escape":        `{"key":"\u12"}`, // the decoder's syntax error, not ours
		"trailing backslash":      `{"key":"a\`,
	}
	bad := map[string]string{
		"raw 0xff":                  "{\"key\":\"alias\xff\"}",
		"raw 0xfe":                  "{\"key\":\"alias\xfe\"}",
		"truncated UTF-8":           "{\"key\":\"a\xc3\"}",
		"overlong NUL":              "{\"key\":\"a\xc0\x80\"}",
		"CESU-8 surrogate":          "{\"key\":\"alias\xed\xb3\xbf\"}",
		"lone low escape":           `{"key":"alias\udcff"}`,
		"lone high escape":          `{"key":"alias\ud800"}`,
		"high then text":            `{"key":"\ud800abcdef"}`,
		"high then other escape":    `{"key":"\ud800\u0041"}`,
		"high then high":            `{"key":"\ud800\ud800"}`,
		"reversed pair":             `{"key":"\ude00\ud83d"}`,
		"upper-case lone":           `{"key":"\uDCFF"}`,
		"after escaped backslash":   `{"key":"\\\udcff"}`,
		"in a header name":          `{"headers":{"\udcff":"v"}}`,
		"in a header value":         "{\"headers\":{\"h\":\"\xff\"}}",
		"high at the very end":      `"\ud800`,
		"high, truncated low":       `"\ud800\udc0`,
		"bad byte outside a string": "{\"key\":1\xff}",
	}
	for name, s := range ok {
		if err := CheckText([]byte(s)); err != nil {
			t.Errorf("%s: %q refused: %v", name, s, err)
		}
	}
	for name, s := range bad {
		if err := CheckText([]byte(s)); err == nil {
			t.Errorf("%s: %q passed", name, s)
		}
	}
}

// Every input the check refuses is one encoding/json would have decoded
// with a U+FFFD in it: the check does exactly its job, and no more.
func TestCheckTextMatchesDecoder(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"alias\xff", "alias\xfe", `alias\udcff`, `alias\ud800`, "alias\xed\xb3\xbf", `\ud800\u0041`} {
		doc := []byte(`{"key":"` + s + `"}`)
		var f struct{ Key string }
		if err := json.Unmarshal(doc, &f); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if f.Key == "alias" || !strings.ContainsRune(f.Key, '\ufffd') {
			t.Fatalf("%q: encoding/json decoded %q, expected a U+FFFD (the conversion the check exists for)", doc, f.Key)
		}
		if CheckText(doc) == nil {
			t.Fatalf("%q passed", doc)
		}
	}
}

// FuzzCheckText: for JSON text with no U+FFFD of its own (neither its
// bytes nor a \ufffd escape), which encoding/json decodes, the check passes
// exactly when the decoded value holds no U+FFFD, i.e. when encoding/json
// converted nothing.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{
		`{"key":"alias"}`, "{\"key\":\"alias\xff\"}", `{"key":"alias\udcff"}`, `{"key":"\ud83d\ude00"}`,
		`{"key":"\\udcff"}`, `{"key":"\\\udcff"}`, `["\ud800\u0041",{"\udbff\udfff":1}]`, "\"\xed\xa0\x80\"",
		`{"headers":{"a":"\ud800\udc00x"}}`, `"\u00e9\u0000"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckText(b)
		if bytes.Contains(b, []byte("\ufffd")) || bytes.Contains(bytes.ToLower(b), []byte("fffd")) {
			return
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if converted := holdsReplacement(b); converted != (err != nil) {
			t.Fatalf("%q: encoding/json converted: %v; check: %v", b, converted, err)
		}
	})
}

// holdsReplacement reports whether encoding/json decodes a U+FFFD into any
// string or object key of the JSON text b. It reads the text's tokens, not
// a decoded value: in an object with a key twice the decoded value keeps
// only the last member, and a converted string in the first would be lost.
func holdsReplacement(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.ContainsRune(s, '\ufffd') {
			return true
		}
	}
}
