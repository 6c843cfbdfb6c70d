package store

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/persist"
)

func TestStreamFileNames(t *testing.T) {
	t.Parallel()
	a, b := streamFileName("Case"), streamFileName("case")
	if strings.EqualFold(a, b) {
		t.Fatalf("%q and %q collide on a case-insensitive filesystem", a, b)
	}
	for _, n := range []string{"..", "/", "a/b", "\x00", strings.Repeat("é", 2000)} {
		f := streamFileName(n)
		if strings.ContainsAny(f, "/\\\x00") || strings.HasPrefix(f, ".") || len(f) > readableMax+1+hashHexLen+len(fileSuffix) {
			t.Fatalf("%q maps to unsafe file name %q", n, f)
		}
	}
	if _, err := StreamPath("/data", "Bad", "s"); persist.CodeOf(err) != persist.CodeBadRequest {
		t.Fatalf("bad scope: %v", err)
	}
}
