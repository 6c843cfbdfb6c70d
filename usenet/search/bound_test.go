package search

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
)

// hugeWords is the size of the outside probe's query: 600 KB, 150,000
// words.
var hugeWords = strings.Repeat("abc ", 150_000)

// worstQuery is the costliest query Search accepts: Words of exactly
// MaxWordsBytes with MaxWords distinct words, the first of them in common
// (the words of every generated bench name that are the most frequent),
// and MaxCats categories.
func worstQuery() Query {
	words := append([]string{}, benchCommon...)
	for i := 0; len(words) < MaxWords; i++ {
		words = append(words, "grp"+strconv.Itoa(i))
	}
	s := strings.Join(words, " ")
	// Pad with a repeated word: it counts once and is searched once.
	s += strings.Repeat(" web", (MaxWordsBytes-len(s))/4)
	s += strings.Repeat(" ", MaxWordsBytes-len(s))
	var cats []int
	for i := range MaxCats {
		cats = append(cats, benchCats[i%len(benchCats)]+i/len(benchCats))
	}
	return Query{Words: s, Cats: cats}
}

func TestQueryLimits(t *testing.T) {
	t.Parallel()
	ix := fixture(t)
	distinct := func(n int) string {
		var w []string
		for i := range n {
			w = append(w, "w"+strconv.Itoa(i))
		}
		return strings.Join(w, " ")
	}
	cats := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = usenet.CatTVHD
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		q     Query
		field string // "" when accepted
		unit  string
	}{
		{"bytes at the limit", Query{Words: strings.Repeat("a", MaxWordsBytes)}, "", ""},
		{"bytes over the limit", Query{Words: strings.Repeat("a", MaxWordsBytes+1)}, "Words", "bytes"},
		{"the probe's query", Query{Words: hugeWords}, "Words", "bytes"},
		{"words at the limit", Query{Words: distinct(MaxWords)}, "", ""},
		{"words over the limit", Query{Words: distinct(MaxWords + 1)}, "Words", "words"},
		{"a repeated word counts once", Query{Words: strings.Repeat("show ", MaxWordsBytes/5)}, "", ""},
		{"cats at the limit", Query{Cats: cats(MaxCats)}, "", ""},
		{"cats over the limit", Query{Cats: cats(MaxCats + 1)}, "Cats", "categories"},
		{"group at the limit", Query{Group: strings.Repeat("g", MaxGroupBytes)}, "", ""},
		{"group over the limit", Query{Group: strings.Repeat("g", MaxGroupBytes+1)}, "Group", "bytes"},
		{"the worst accepted query", worstQuery(), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ix.Search(context.Background(), tc.q)
			if check := tc.q.Check(); (check == nil) != (err == nil) {
				t.Errorf("Check = %v but Search = %v", check, err)
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, ErrQueryTooLarge) {
				t.Fatalf("error %v, want a LimitError", err)
			}
			if le.Field != tc.field || le.Unit != tc.unit || le.Limit <= 0 {
				t.Errorf("LimitError %+v, want field %s unit %s", le, tc.field, tc.unit)
			}
		})
	}
	// The repeated word finds what the word alone finds.
	res := search(t, ix, Query{Words: strings.Repeat("show ", MaxWordsBytes/5)})
	if got, want := ids(res), ids(search(t, ix, Query{Words: "show"})); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("repeated word found %q, the word alone %q", got, want)
	}
}

// TestHugeQueryCostsNothing: the probe's 600 KB query is refused before
// it is split into words or reaches SQLite: no row read and a handful of
// allocations, the same as for a query one byte over the limit (it used to
// cost seconds of a core per ten thousand words, and hundreds of MB of
// SQLite's heap for the FTS expression). Not parallel: AllocsPerRun
// counts the whole process's allocations.
func TestHugeQueryCostsNothing(t *testing.T) {
	ix := fixture(t)
	rows := 0
	ix.onRow = func() { rows++ }
	ctx := context.Background()
	q := Query{Words: hugeWords}
	if len(q.Words) < 600_000 || len(usenet.Words(q.Words)) != 150_000 {
		t.Fatalf("the query has %d bytes and %d words", len(q.Words), len(usenet.Words(q.Words)))
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := ix.Search(ctx, q); !errors.Is(err, ErrQueryTooLarge) {
			t.Fatalf("Search = %v, want ErrQueryTooLarge", err)
		}
	})
	if allocs > 4 {
		t.Errorf("a refused query makes %v allocations, want at most 4", allocs)
	}
	if rows != 0 {
		t.Errorf("a refused query read %d rows", rows)
	}
}

// TestWorstQueryIsBounded: whatever the caller sends, the FTS expression
// of an accepted query has at most MaxWords name terms and one term per
// distinct category: the work SQLite is given is bounded by the limits,
// not by the input.
func TestWorstQueryIsBounded(t *testing.T) {
	t.Parallel()
	q := worstQuery()
	if len(q.Words) != MaxWordsBytes {
		t.Fatalf("worst query has %d bytes, want %d", len(q.Words), MaxWordsBytes)
	}
	words, err := q.words()
	if err != nil {
		t.Fatal(err)
	}
	expr := matchExpr(q, words)
	if n := strings.Count(expr, "name:"); n != MaxWords {
		t.Errorf("%d name terms, want %d", n, MaxWords)
	}
	distinctCats := map[int]bool{}
	for _, c := range q.Cats {
		distinctCats[c] = true
	}
	if n := strings.Count(expr, "tags:"); n != len(distinctCats) {
		t.Errorf("%d category terms, want %d", n, len(distinctCats))
	}
	// Repeats collapse: 64 times the same category and 100 times the same
	// word are one term each.
	rep := Query{Words: strings.Repeat("x264 ", 100), Cats: make([]int, MaxCats)}
	for i := range rep.Cats {
		rep.Cats[i] = usenet.CatTVHD
	}
	words, err = rep.words()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := matchExpr(rep, words), `name:"x264" AND (tags:"c5040")`; got != want {
		t.Errorf("repeats: %s, want %s", got, want)
	}
}

// TestSearchStopsWhenContextEnds: Search checks its context while it
// reads the page, not only when it starts; a context already past its
// deadline reads nothing.
func TestSearchStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	var rs []usenet.Release
	for i := range 150 {
		rs = append(rs, rel("r"+strconv.Itoa(i), "Many.Release", usenet.CatOtherMisc, i))
	}
	applyAll(t, ix, rs...)
	for _, q := range []Query{{Words: "many"}, {}} {
		rows := 0
		ctx, cancel := context.WithCancel(context.Background())
		ix.onRow = func() {
			rows++
			cancel() // as the client going away in the middle of the page
		}
		_, err := ix.Search(ctx, q)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%+v: Search = %v, want context.Canceled", q, err)
		}
		if rows != 1 {
			t.Errorf("%+v: %d rows read after the context ended at the first, want 1", q, rows)
		}
	}

	rows := 0
	ix.onRow = func() { rows++ }
	ctx, cancel := context.WithDeadline(context.Background(), testNow) // long past
	defer cancel()
	if _, err := ix.Search(ctx, Query{Words: "many"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Search past its deadline = %v, want context.DeadlineExceeded", err)
	}
	if rows != 0 {
		t.Errorf("%d rows read past the deadline", rows)
	}
}

// TestStatementEndsWithContext guards what the time budget of a search
// relies on: the SQLite driver interrupts a statement in progress when its
// context ends. The statement here never ends by itself.
func TestStatementEndsWithContext(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	// The deadline is what ends the statement, not a bound on the time the
	// test measures: the test only fails by never returning.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var n int64
	err := ix.db.QueryRowContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c`).Scan(&n)
	if err == nil {
		t.Fatalf("an endless statement ended with %d and no error", n)
	}
	if ctx.Err() == nil {
		t.Fatalf("the statement failed before its deadline: %v", err)
	}
}
