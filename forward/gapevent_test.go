package forward

import (
	"strings"
	"testing"
)

// TestIsGapEventPrefilter: the byte search in front of the member scan must
// never change the answer, for small events (searched) and large ones (not).
func TestIsGapEventPrefilter(t *testing.T) {
	big := strings.Repeat("y", 2*gapPrefilterMax)
	cases := []struct {
		ev   string
		want bool
	}{
		{`{"id":"e1","op":"gap","reason":"backlog_overflow"}`, true},
		{`{"id":"e1","op":"write","data":"gap"}`, false},
		{`{"id":"e1","op":"write","data":"\"gap\""}`, false},
		{`{"id":"e1","nested":{"op":"gap"},"op":"write"}`, false},
		{`{"id":"e1","op":"\u0067ap"}`, false},
		{`{"id":"e1","op":"write"}`, false},
		{`{"data":"` + big + `","op":"gap"}`, true},
		{`{"op":"write","data":"` + big + `"}`, false},
		{`{"op":"gap","data":"` + big + `"}`, true},
	}
	for _, c := range cases {
		ev := []byte(c.ev)
		if got := isGapEvent(ev); got != c.want {
			t.Errorf("isGapEvent(%.60q) = %v, want %v", c.ev, got, c.want)
		}
		if ref := string(topLevel(ev, "op")) == `"gap"`; ref != c.want {
			t.Errorf("reference scan of %.60q = %v, want %v", c.ev, ref, c.want)
		}
	}
}
