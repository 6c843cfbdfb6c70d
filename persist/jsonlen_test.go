package persist

import (
	"encoding/json"
	"testing"
)

// FuzzJSONLenBound: jsonLen is never below what encoding/json writes for
// a string's contents, so a pipeline's batch sized by it stays within the
// max payload whatever its keys and headers hold.
func FuzzJSONLenBound(f *testing.F) {
	for _, s := range []string{"", "plain", "a&b<c>d", "\x00\n\t\"\\", "\u2028\u2029", "\xff\xfe", "héllo wörld"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, wrote := jsonLen(s), len(b)-2; got < wrote {
			t.Fatalf("jsonLen(%q) = %d, encoding/json writes %d", s, got, wrote)
		}
	})
}
