package releases

import (
	"net/url"
	"testing"
)

// FuzzSearchQuery: whatever query string a page sends, the search's
// parameters are refused with an error or come out within their bounds
// (a page of 1 to MaxPageSize, no negative offset, categories > 0) and
// within the index's limits.
func FuzzSearchQuery(f *testing.F) {
	for _, s := range []string{"", "q=show+s01e02&cat=5000,5040&group=alt.binaries.test&offset=50&limit=50&seen=9",
		"limit=0", "offset=-1", "cat=,", "cat=5000,,2000", "seen=18446744073709551616", "q=%ff%fe"} {
		f.Add(s)
	}
	p := &Page{cfg: Config{}.withDefaults()}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, _, err := p.searchQuery(v)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > MaxPageSize || q.Offset < 0 {
			t.Fatalf("%q: limit %d offset %d", raw, q.Limit, q.Offset)
		}
		for _, c := range q.Cats {
			if c <= 0 {
				t.Fatalf("%q: category %d", raw, c)
			}
		}
		if err := q.Check(); err != nil {
			t.Fatalf("%q: accepted, yet over a limit: %v", raw, err)
		}
	})
}
