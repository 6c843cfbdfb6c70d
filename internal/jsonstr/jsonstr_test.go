package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppend holds Append to encoding/json: with escapeHTML its bytes are
// json.Marshal's; without it they decode to the same string.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "<a&b>", "\"\\\b\f\n\r\t\x00\x1f", "\u2028\u2029", "bad\xff\xfe", "é€😀", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q, html) = %s, json.Marshal %s", s, got, want)
		}
		if got := Append([]byte("x"), []byte(s), true); !bytes.Equal(got[1:], want) {
			t.Fatalf("Append of bytes %q = %s, want %s", s, got[1:], want)
		}
		var plain, marshalled string
		if err := json.Unmarshal(Append(nil, s, false), &plain); err != nil {
			t.Fatalf("Append(%q, plain) does not decode: %v", s, err)
		}
		_ = json.Unmarshal(want, &marshalled)
		if plain != marshalled {
			t.Fatalf("Append(%q, plain) decodes to %q, json.Marshal's to %q", s, plain, marshalled)
		}
	})
}
