package search

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
)

// FuzzQuery: whatever a caller puts in a Query, Search either refuses it
// with a LimitError that names a field really over its limit, or runs it
// without an FTS syntax error, with at most MaxWords name terms for its
// words (and one more, a phrase, for an Aired date).
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "some show s01e02", `"`, `NEAR(a b)`, "tags:c5000", "a a a a", "Café Crème",
		strings.Repeat("x ", MaxWords+1), strings.Repeat("y", MaxWordsBytes+1), "\x00\xff", "name:*"} {
		f.Add(s, "alt.binaries.test", usenet.CatTV, 3, 5)
	}
	f.Add("", strings.Repeat("g", MaxGroupBytes+1), -1, 0, 0)
	f.Add("one", `a"b`, 0, -2, 1<<40)
	ix := openTest(f)
	applyAll(f, ix,
		rel("a", "Some.Show.S01E02.720p.HDTV-GRP", usenet.CatTVHD, 1, "alt.binaries.test"),
		rel("b", "Café.Crème.3x07", usenet.CatTVSD, 2),
	)
	f.Fuzz(func(t *testing.T, words, group string, cat, season, episode int) {
		q := Query{Words: words, Group: group, Season: season, Episode: episode, HasSeason: season&1 == 0}
		if episode%3 == 0 {
			// Any day, far outside the years of names too.
			q.Aired = time.Unix(int64(episode)*86400, 0)
		}
		// cat stands for a list: its low byte is how many times it repeats.
		for range cat & 0xff {
			q.Cats = append(q.Cats, cat>>8)
		}
		_, err := ix.Search(context.Background(), q)
		var le *LimitError
		if errors.As(err, &le) {
			over := map[string]bool{
				"Words": len(words) > MaxWordsBytes || len(distinct(usenet.Words(words))) > MaxWords,
				"Cats":  len(q.Cats) > MaxCats,
				"Group": len(group) > MaxGroupBytes,
			}
			if !over[le.Field] {
				t.Fatalf("%+v refused with %v, but %s is within its limit", q, err, le.Field)
			}
			return
		}
		if err != nil {
			t.Fatalf("Search(%+v): %v", q, err)
		}
		w, err := q.words()
		if err != nil {
			t.Fatalf("Search accepted %+v but words() = %v", q, err)
		}
		limit := MaxWords
		if !q.Aired.IsZero() {
			limit++ // the date's phrase of three name tokens (matchExpr)
		}
		if n := strings.Count(matchExpr(q, w), "name:"); n > limit {
			t.Fatalf("%+v: %d name terms, over %d", q, n, limit)
		}
	})
}

func distinct(words []string) map[string]bool {
	m := map[string]bool{}
	for _, w := range words {
		m[w] = true
	}
	return m
}
