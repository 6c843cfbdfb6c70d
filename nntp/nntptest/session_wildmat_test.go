package nntptest

import "testing"

func TestWildmatMatch(t *testing.T) {
	for _, tc := range []struct {
		wildmat, name string
		want          bool
	}{
		{"alt.*", "alt.test", true},
		{"alt.*,comp.lang", "comp.lang", true},
		{"alt.*,comp.lang", "comp.other", false},
		{"alt.*,!alt.bin*", "alt.binaries.x", false},
		{"alt.*,!alt.bin*", "alt.test", true},
		{"!alt.*", "alt.test", false},
	} {
		if got := wildmatMatch(tc.wildmat, tc.name); got != tc.want {
			t.Errorf("wildmatMatch(%q, %q) = %v, want %v", tc.wildmat, tc.name, got, tc.want)
		}
	}
}
