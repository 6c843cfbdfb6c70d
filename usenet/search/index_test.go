package search

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
)

var testNow = time.Unix(1_750_000_000, 0)

func openTest(t testing.TB) *Index {
	t.Helper()
	ix, err := Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	ix.now = func() time.Time { return testNow }
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

func rel(id, name string, cat int, ageHours int, groups ...string) usenet.Release {
	if len(groups) == 0 {
		groups = []string{"alt.binaries.test"}
	}
	return usenet.Release{
		ID: id, Name: name, Category: cat, Groups: groups, Visible: true, Version: 1,
		Date: testNow.Add(-time.Duration(ageHours) * time.Hour).Unix(),
	}
}

// applyAll sets rs at seqs 1..n.
func applyAll(t testing.TB, ix *Index, rs ...usenet.Release) {
	t.Helper()
	var b Batch
	for _, r := range rs {
		b.LastSeq = ix.LastSeq() + uint64(len(b.Changes)) + 1
		b.Changes = append(b.Changes, Change{Seq: b.LastSeq, Release: r})
	}
	if err := ix.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func ids(res Result) []string {
	var out []string
	for _, r := range res.Releases {
		out = append(out, r.ID)
	}
	return out
}

func search(t *testing.T, ix *Index, q Query) Result {
	t.Helper()
	res, err := ix.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%+v): %v", q, err)
	}
	return res
}

func fixture(t *testing.T) *Index {
	ix := openTest(t)
	applyAll(t, ix,
		rel("a", "Some.Show.S01E02.720p.HDTV-GRP", usenet.CatTVHD, 1, "alt.binaries.teevee"),
		rel("b", "Some_Other-Show.S01E03.480p", usenet.CatTVSD, 2, "alt.binaries.teevee", "alt.binaries.multimedia"),
		rel("c", "Some.Show.S02.Complete.1080p", usenet.CatTVHD, 3),
		rel("d", "Another.Film.2020.1080p.BluRay", usenet.CatMoviesHD, 30*24),
		rel("e", "Rock and Roll Album FLAC", usenet.CatAudioFLAC, 5),
		rel("f", "Café.Crème.3x07.Série", usenet.CatTVSD, 6),
	)
	return ix
}

func TestSearchConditions(t *testing.T) {
	t.Parallel()
	ix := fixture(t)
	for _, tc := range []struct {
		name string
		q    Query
		want []string
	}{
		{"empty is all newest first", Query{}, []string{"a", "b", "c", "e", "f", "d"}},
		{"words across separators", Query{Words: "some show s01e02"}, []string{"a"}},
		{"words any case any order", Query{Words: "SHOW some"}, []string{"a", "b", "c"}},
		{"dotted words", Query{Words: "some.show"}, []string{"a", "b", "c"}},
		{"underscore and dash", Query{Words: "other_show-s01e03"}, []string{"b"}},
		{"diacritics", Query{Words: "cafe creme"}, []string{"f"}},
		{"missing word", Query{Words: "show nothere"}, nil},
		{"keyword is a word", Query{Words: "AND"}, []string{"e"}},
		{"cat parent", Query{Cats: []int{usenet.CatTV}}, []string{"a", "b", "c", "f"}},
		{"cat sub", Query{Cats: []int{usenet.CatTVHD}}, []string{"a", "c"}},
		{"cats or", Query{Cats: []int{usenet.CatTVSD, usenet.CatMovies}}, []string{"b", "f", "d"}},
		{"cat unknown", Query{Cats: []int{9999}}, nil},
		{"cat and words", Query{Words: "show", Cats: []int{usenet.CatTVSD}}, []string{"b"}},
		{"group", Query{Group: "alt.binaries.teevee"}, []string{"a", "b"}},
		{"group case", Query{Group: "ALT.Binaries.Multimedia"}, []string{"b"}},
		{"group prefix is not the group", Query{Group: "alt.binaries"}, nil},
		{"maxage", Query{MaxAge: 150 * time.Minute}, []string{"a", "b"}},
		{"maxage and words", Query{Words: "film", MaxAge: 24 * time.Hour}, nil},
		{"season", Query{Season: 1}, []string{"a", "b"}},
		{"season pack", Query{Season: 2}, []string{"c"}},
		{"season episode", Query{Season: 1, Episode: 3}, []string{"b"}},
		{"NxMM", Query{Season: 3, Episode: 7}, []string{"f"}},
		{"episode alone", Query{Episode: 2}, []string{"a"}},
		{"season words cat", Query{Words: "some show", Season: 1, Cats: []int{usenet.CatTV}}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := search(t, ix, tc.q)
			if got := ids(res); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %q, want %q", got, tc.want)
			}
			if res.Total != len(tc.want) {
				t.Errorf("total = %d, want %d", res.Total, len(tc.want))
			}
		})
	}
}

func TestSearchSyntaxIsPlainText(t *testing.T) {
	t.Parallel()
	ix := fixture(t)
	for _, q := range []string{`"`, `""`, `*`, `show*`, `-`, `-show`, `:`, `name:show`, `tags:c5000`, `AND`, `OR`, `NOT`,
		`NEAR(`, `NEAR(some show)`, `some AND`, `(`, `)`, `{name}:x`, `^some`, `'`, `\`, "\x00", `+`} {
		if _, err := ix.Search(context.Background(), Query{Words: q}); err != nil {
			t.Errorf("Search(%q): %v", q, err)
		}
	}
	// "tags:c5000" is the words tags and c5000 in the name, not a filter.
	if res := search(t, ix, Query{Words: "tags:c5000"}); res.Total != 0 {
		t.Errorf("tags:c5000 matched %q", ids(res))
	}
}

// TestPunctuationOnlyFindsNothing: Words of nothing but punctuation or
// symbols (q=..., q=-, q=") holds no word to find, and finds nothing, as a
// word no name holds does; only Words empty or of spaces alone is no
// query, which lists every release (what the *arr apps' RSS and Test
// send). (Was: such Words folded to no term and the search listed the
// whole index, newest first, as if no q had been given.)
func TestPunctuationOnlyFindsNothing(t *testing.T) {
	t.Parallel()
	ix := fixture(t)
	for _, words := range []string{"...", "-", `"`, "*", "--- ...", "!?", "★", "\u0301"} {
		for _, q := range []Query{{Words: words}, {Words: words, Cats: []int{usenet.CatTV}}, {Words: words, HidePassworded: true}, {Words: words, Season: 1}} {
			if res := search(t, ix, q); res.Total != 0 || len(res.Releases) != 0 {
				t.Errorf("Search(%+v): total %d, %q; want nothing", q, res.Total, ids(res))
			}
		}
	}
	for _, words := range []string{"", " ", "\t \u00a0"} {
		if res := search(t, ix, Query{Words: words}); res.Total != 6 {
			t.Errorf("Search(Words %q): total %d, want all 6 releases", words, res.Total)
		}
	}
}

func TestSearchPaging(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	var rs []usenet.Release
	// Three per hour; within one second, ID order.
	for i := range 30 {
		r := rel(string(rune('a'+i%3))+"-"+string(rune('a'+i/3)), "Paged.Release", usenet.CatOtherMisc, i/3)
		rs = append(rs, r)
	}
	applyAll(t, ix, rs...)
	var all []string
	for off := 0; off < 40; off += 7 {
		res := search(t, ix, Query{Words: "paged", Limit: 7, Offset: off})
		if res.Total != 30 {
			t.Fatalf("total = %d", res.Total)
		}
		all = append(all, ids(res)...)
	}
	var want []string
	for h := range 10 {
		for k := range 3 {
			want = append(want, string(rune('a'+k))+"-"+string(rune('a'+h)))
		}
	}
	if !slices.Equal(all, want) {
		t.Errorf("pages = %q\nwant   %q", all, want)
	}
	// The unfiltered path pages the same way.
	res := search(t, ix, Query{Limit: 4, Offset: 3})
	if !slices.Equal(ids(res), want[3:7]) || res.Total != 30 {
		t.Errorf("unfiltered page = %q (total %d), want %q", ids(res), res.Total, want[3:7])
	}
	if _, err := ix.Search(context.Background(), Query{Limit: -1}); err == nil {
		t.Error("negative limit accepted")
	}
}

func TestSameSecondSharedPrefix(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	// IDs with the same first bytes in one second take neighbouring slots.
	applyAll(t, ix, rel("abc1", "x", 8010, 0), rel("abc2", "x", 8010, 0), rel("abc0", "x", 8010, 0))
	res := search(t, ix, Query{})
	if len(res.Releases) != 3 {
		t.Fatalf("got %q", ids(res))
	}
	for _, id := range []string{"abc0", "abc1", "abc2"} {
		if _, ok, err := ix.Get(context.Background(), id); err != nil || !ok {
			t.Errorf("Get(%s) = %v, %v", id, ok, err)
		}
	}
}

// TestSameSecondOrderByID: releases of one second come in ID order, by
// the documented "newest first (by posting date, then release ID)",
// whatever order they were applied in: IDs that differ in their third hex
// digit's low bits, IDs that share their first five hex digits (ranked in
// their group, also after a delete and a new version), and IDs that are
// not hex. Row keys used to keep 22 bits of the ID's first 3 bytes, and an
// ID whose slot another held went below it, in arrival order.
func TestSameSecondOrderByID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ix := openTest(t)
	applyAll(t, ix,
		rel("3a1f000000000000", "Show.One", usenet.CatTVHD, 1),
		rel("3a0f000000000000", "Show.Two", usenet.CatTVHD, 1),
		rel("5b5b5ff000000000", "x", usenet.CatTVHD, 1),
		rel("5b5b5aa000000000", "x", usenet.CatTVHD, 1),
		rel("5b5b5f0000000000", "x", usenet.CatTVHD, 1),
		rel("5b5b5a0000000000", "x", usenet.CatTVHD, 1),
		rel("Zz", "x", usenet.CatTVHD, 1),
		rel("zz", "x", usenet.CatTVHD, 1),
		rel("fz", "x", usenet.CatTVHD, 1),
		rel("f:", "x", usenet.CatTVHD, 1),
		rel("f", "x", usenet.CatTVHD, 1),
		rel("9", "x", usenet.CatTVHD, 1),
	)
	want := []string{"3a0f000000000000", "3a1f000000000000", "5b5b5a0000000000", "5b5b5aa000000000",
		"5b5b5f0000000000", "5b5b5ff000000000", "9", "Zz", "f", "f:", "fz", "zz"}
	if got := ids(search(t, ix, Query{})); !slices.Equal(got, want) {
		t.Fatalf("same-second order = %q, want %q (by ID)", got, want)
	}
	// A new version takes its place again among the others.
	again := rel("5b5b5aa000000000", "y", usenet.CatTVHD, 1)
	again.Version = 2
	if err := ix.Apply(ctx, Batch{Changes: []Change{{Seq: 20, Release: again}}}); err != nil {
		t.Fatal(err)
	}
	if got := ids(search(t, ix, Query{})); !slices.Equal(got, want) {
		t.Errorf("after a new version: %q, want %q", got, want)
	}
	if res := search(t, ix, Query{Words: "y"}); res.Total != 1 || res.Releases[0].ID != "5b5b5aa000000000" {
		t.Errorf("moved rows lost their words: %+v", res)
	}
	// More releases of one second and prefix than a group's slots: all
	// stored, found by their words.
	var many []usenet.Release
	for i := range 1<<rankBits + 3 {
		many = append(many, rel(fmt.Sprintf("77777%02x", 200-i), fmt.Sprintf("Many.%d", i), usenet.CatTVHD, 2))
	}
	applyAll(t, ix, many...)
	for i, r := range many {
		if res := search(t, ix, Query{Words: fmt.Sprintf("many %d", i)}); res.Total != 1 || res.Releases[0].ID != r.ID {
			t.Errorf("release %d of a full group: %+v", i, res)
		}
	}
	if n, _ := ix.Count(ctx); n != len(want)+len(many) {
		t.Errorf("count = %d, want %d", n, len(want)+len(many))
	}
}

// TestSearchDecomposedAccents: a query typed with an accent apart from its
// letter (NFD, e + U+0301, as macOS input often is) finds the name, as the
// composed form does. usenet.Words used to split the word at the combining
// mark ("ame", "lie"), while the index's tokenizer keeps the mark in the
// token and folds it ("amelie"), so it found nothing.
func TestSearchDecomposedAccents(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	applyAll(t, ix,
		rel("a", "Amélie.2001.1080p.BluRay", usenet.CatMoviesHD, 1),
		rel("b", "Ame\u0301lie.2001.720p", usenet.CatMoviesHD, 2),
	)
	for _, q := range []string{"Amélie", "Ame\u0301lie", "amelie", "AME\u0301LIE 2001"} {
		if res := search(t, ix, Query{Words: q}); res.Total != 2 {
			t.Errorf("query %q found %q, want both names", q, ids(res))
		}
	}
	if res := search(t, ix, Query{Words: "ame"}); res.Total != 0 {
		t.Errorf("query ame found %q: a word cut at the accent", ids(res))
	}
}

// TestAdjacentEpisodeMarkers: a marker right after another, with one
// separator between them, is tagged too: Show.S01.S02.Complete is in
// seasons 1 and 2, Show.S01E05.S01E06 is episodes 5 and 6. episodeRe's
// matches used to take the separator after a marker, so the next one had
// none before it and was missed.
func TestAdjacentEpisodeMarkers(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	applyAll(t, ix,
		rel("a", "Some.Show.S01.S02.Complete.1080p", usenet.CatTVHD, 1),
		rel("b", "Some.Show.S01E05.S01E06.720p", usenet.CatTVHD, 2),
		rel("c", "Some.Show.1x07.1x08.720p", usenet.CatTVHD, 3),
		rel("d", "Some.Show.S03E01E02.720p", usenet.CatTVHD, 4),
	)
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{Season: 1}, []string{"a", "b", "c"}},
		{Query{Season: 2}, []string{"a"}},
		{Query{Season: 1, Episode: 5}, []string{"b"}},
		{Query{Season: 1, Episode: 6}, []string{"b"}},
		{Query{Season: 1, Episode: 8}, []string{"c"}},
		{Query{Season: 3, Episode: 1}, []string{"d"}},
	} {
		if got := ids(search(t, ix, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("season %d episode %d: %q, want %q", tc.q.Season, tc.q.Episode, got, tc.want)
		}
	}
}

// TestMultiEpisodeMarkers: a multi-episode release holds every episode its
// marker names, which Sonarr reads as the range from the first to the
// last (S01E07E09 is 7, 8 and 9). Sonarr searches each episode on its own
// (t=tvsearch&season=S&ep=E) and takes a multi-episode release for any of
// them, so each one must find it. A marker is read as a range only where
// it is one: ascending, at most maxMarkerEpisodes long, each part ending a
// token, after a dash two digits at least; a group, a resolution or a year
// after a dash is no episode. (Was: only the first episode of S03E01E02
// and S01E04-E05 was tagged, the trailing E02 being checked as what may
// follow a marker and never read, so season=3&ep=2 found nothing.)
func TestMultiEpisodeMarkers(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	applyAll(t, ix,
		rel("a", "Some.Show.S03E01E02.720p.HDTV-GRP", usenet.CatTVHD, 1),
		rel("b", "Some.Show.S01E04-E05.1080p.WEB-GRP", usenet.CatTVHD, 2),
		rel("c", "Some.Show.S02E07E09.720p", usenet.CatTVHD, 3),
		rel("d", "Some.Show.S04E01-24.Complete.720p", usenet.CatTVHD, 4),
		rel("e", "Some.Show.S05E01-E02-E03.1080p", usenet.CatTVHD, 5),
		rel("f", "Some.Show.S06E01-E2", usenet.CatTVHD, 6),        // group E2
		rel("g", "Some.Show.S06E05-E03.720p", usenet.CatTVHD, 7),  // descends
		rel("h", "Some.Show.S06E10-2010.720p", usenet.CatTVHD, 8), // a year
		rel("i", "Some.Show.S06E20-E80.720p", usenet.CatTVHD, 9),  // over 50
		rel("j", "Some.Show.S06E30-1080p", usenet.CatTVHD, 10),
		rel("k", "Some.Show.S06E40-41bit", usenet.CatTVHD, 11),
		rel("l", "Some.Show.S07E01E02-E03-2010.720p", usenet.CatTVHD, 12),
	)
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{Season: 3, Episode: 1}, []string{"a"}},
		{Query{Season: 3, Episode: 2}, []string{"a"}},
		{Query{Season: 1, Episode: 4}, []string{"b"}},
		{Query{Season: 1, Episode: 5}, []string{"b"}},
		{Query{Season: 2, Episode: 8}, []string{"c"}},
		{Query{Season: 2, Episode: 9}, []string{"c"}},
		{Query{Season: 4, Episode: 1}, []string{"d"}},
		{Query{Season: 4, Episode: 12}, []string{"d"}},
		{Query{Season: 4, Episode: 24}, []string{"d"}},
		{Query{Season: 4, Episode: 25}, nil},
		{Query{Season: 5, Episode: 3}, []string{"e"}},
		{Query{Episode: 3}, []string{"d", "e", "l"}},
		{Query{Season: 6, Episode: 1}, []string{"f"}},
		{Query{Season: 6, Episode: 2}, nil},
		{Query{Season: 6, Episode: 3}, nil},
		{Query{Season: 6, Episode: 4}, nil},
		{Query{Season: 6, Episode: 5}, []string{"g"}},
		{Query{Season: 6, Episode: 11}, nil},
		{Query{Season: 6, Episode: 20}, []string{"i"}},
		{Query{Season: 6, Episode: 21}, nil},
		{Query{Season: 6, Episode: 31}, nil},
		{Query{Season: 6, Episode: 41}, nil},
		{Query{Season: 7, Episode: 3}, []string{"l"}},
		{Query{Season: 7, Episode: 4}, nil},
	} {
		if got := ids(search(t, ix, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("season %d episode %d: found %q, want %q", tc.q.Season, tc.q.Episode, got, tc.want)
		}
	}
}

// TestMultiEpisodeNxMMMarkers: the NxMM form names several episodes as
// SxxEyy does, in Sonarr's forms: 1x01-02, 1x01-1x02, 1x01-x03, 2x04x05
// (a range from the first to the last, as 2x09-2x10 and 1x01-x03 are to
// Sonarr). Each episode must be found by its own tvsearch, season=1&ep=2.
// The same limits hold: ascending, at most maxMarkerEpisodes, each part
// ending a token, after a bare dash two digits; a full NxMM part that
// does not extend the range (another season, descending) is a marker of
// its own, as adjacent markers are. (Was: only SxxEyy read further episodes:
// 1x01-02 was episode 1 alone, 1x01-1x03 episodes 1 and 3, and 2x04x05,
// its trailing x05 no separator, no episode at all.)
func TestMultiEpisodeNxMMMarkers(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	applyAll(t, ix,
		rel("a", "Some.Show.1x01-02.720p.HDTV-GRP", usenet.CatTVHD, 1),
		rel("b", "Some Show - 2x01-2x03 - Title [HDTV]", usenet.CatTVHD, 2),
		rel("c", "Some.Show.3x01-x03.720p", usenet.CatTVHD, 3),
		rel("d", "Some.Show.4x04x05.720p.BluRay-GRP", usenet.CatTVHD, 4),
		rel("e", "Some Show - 5x9-5x10 - Title", usenet.CatTVHD, 5),
		rel("f", "Some.Show.10x01-10x02.720p", usenet.CatTVHD, 6),
		rel("g", "Some.Show.6x01-2", usenet.CatTVHD, 7),          // a bare digit
		rel("h", "Some.Show.6x10-2010.720p", usenet.CatTVHD, 8),  // a year
		rel("i", "Some.Show.6x20-1080p", usenet.CatTVHD, 9),      // a resolution
		rel("j", "Some.Show.6x30-6x28.720p", usenet.CatTVHD, 10), // two markers
		rel("k", "Some.Show.7x01-8x02.720p", usenet.CatTVHD, 11), // two seasons
	)
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{Season: 1, Episode: 1}, []string{"a"}},
		{Query{Season: 1, Episode: 2}, []string{"a"}},
		{Query{Season: 1, Episode: 3}, nil},
		{Query{Season: 2, Episode: 2}, []string{"b"}},
		{Query{Season: 2, Episode: 3}, []string{"b"}},
		{Query{Season: 3, Episode: 2}, []string{"c"}},
		{Query{Season: 3, Episode: 3}, []string{"c"}},
		{Query{Season: 4, Episode: 4}, []string{"d"}},
		{Query{Season: 4, Episode: 5}, []string{"d"}},
		{Query{Season: 5, Episode: 10}, []string{"e"}},
		{Query{Season: 10, Episode: 2}, []string{"f"}},
		{Query{Season: 6, Episode: 1}, []string{"g"}},
		{Query{Season: 6, Episode: 2}, nil},
		{Query{Season: 6, Episode: 11}, nil},
		{Query{Season: 6, Episode: 21}, nil},
		{Query{Season: 6, Episode: 30}, []string{"j"}},
		{Query{Season: 6, Episode: 28}, []string{"j"}},
		{Query{Season: 6, Episode: 29}, nil},
		{Query{Season: 7, Episode: 1}, []string{"k"}},
		{Query{Season: 7, Episode: 2}, nil},
		{Query{Season: 8, Episode: 2}, []string{"k"}},
	} {
		if got := ids(search(t, ix, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("season %d episode %d: found %q, want %q", tc.q.Season, tc.q.Episode, got, tc.want)
		}
	}
}

// TestMultiEpisodeFullMarkerRange: scene names write a range of one
// season as S01E01-S01E03 as well as S01E01-E03, and Sonarr reads both as
// episodes 1 to 3; the same limits as for the short form hold (ascending,
// at most maxMarkerEpisodes, ending a token), and a full marker of another
// season or one that does not ascend is a marker of its own.
// (Was: S01E01-S01E03 was read as two markers, episodes 1 and 3, so a
// tvsearch for season=1&ep=2 did not find it.)
func TestMultiEpisodeFullMarkerRange(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	applyAll(t, ix,
		rel("a", "Some.Show.S01E01-S01E03.720p.HDTV-GRP", usenet.CatTVHD, 1),
		rel("b", "Some.Show.s02e04-s02e05-S02E06.1080p", usenet.CatTVHD, 2),
		rel("c", "Some.Show.S03E01-S03.E02.720p", usenet.CatTVHD, 3),
		rel("d", "Some.Show.S04E09-S05E01.720p", usenet.CatTVHD, 4),  // two seasons
		rel("e", "Some.Show.S06E05-S06E03.720p", usenet.CatTVHD, 5),  // descends
		rel("f", "Some.Show.S07E01-S07E80.720p", usenet.CatTVHD, 6),  // over 50
		rel("g", "Some.Show.S08E01-S08E03x.720p", usenet.CatTVHD, 7), // not a token's end
	)
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{Season: 1, Episode: 1}, []string{"a"}},
		{Query{Season: 1, Episode: 2}, []string{"a"}},
		{Query{Season: 1, Episode: 3}, []string{"a"}},
		{Query{Season: 1, Episode: 4}, nil},
		{Query{Season: 2, Episode: 4}, []string{"b"}},
		{Query{Season: 2, Episode: 6}, []string{"b"}},
		{Query{Season: 3, Episode: 2}, []string{"c"}},
		{Query{Season: 4, Episode: 9}, []string{"d"}},
		{Query{Season: 4, Episode: 10}, nil},
		{Query{Season: 5, Episode: 1}, []string{"d"}},
		{Query{Season: 6, Episode: 5}, []string{"e"}},
		{Query{Season: 6, Episode: 4}, nil},
		{Query{Season: 6, Episode: 3}, []string{"e"}},
		{Query{Season: 7, Episode: 1}, []string{"f"}},
		{Query{Season: 7, Episode: 2}, nil},
		{Query{Season: 7, Episode: 80}, []string{"f"}},
		{Query{Season: 8, Episode: 1}, []string{"g"}},
		{Query{Season: 8, Episode: 2}, nil},
	} {
		if got := ids(search(t, ix, tc.q)); !slices.Equal(got, tc.want) {
			t.Errorf("season %d episode %d: found %q, want %q", tc.q.Season, tc.q.Episode, got, tc.want)
		}
	}
}

// TestSearchAccentsOfEveryScript: q is matched "ignoring case and
// accents" (docs/usenet-api.md) in every script: a Greek word with its
// tonos (ά) or a Russian one with Ё is found by the word typed without
// them, as people usually type them, and the other way; Latin is folded
// as before. (Was: the tokenizer's remove_diacritics, the only folding,
// folds Latin letters only, so σοφια did not find Σοφία nor елки Ёлки.)
func TestSearchAccentsOfEveryScript(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	applyAll(t, ix,
		rel("a", "Η.Σοφία.2020.1080p.WEB", usenet.CatMoviesHD, 1),
		rel("b", "Ёлки.2010.720p.BluRay", usenet.CatMoviesHD, 2),
		rel("c", "Amélie.2001.1080p", usenet.CatMoviesHD, 3),
		rel("d", "Ελενη.2019.720p", usenet.CatMoviesHD, 4),
	)
	for q, want := range map[string]string{
		"amelie":      "c", // Latin: folded, as documented
		"AMÉLIE":      "c",
		"σοφια":       "a",
		"ΣΟΦΙΑ":       "a",
		"Σοφία":       "a",
		"σοφι\u0301α": "a", // the accent typed apart
		"елки":        "b",
		"ЁЛКИ":        "b",
		"Ελένη":       "d", // the name without the accent
	} {
		if got := ids(search(t, ix, Query{Words: q})); !slices.Equal(got, []string{want}) {
			t.Errorf("q %q: found %q, want %q (accents ignored)", q, got, want)
		}
	}
}

// TestOpenResetsOtherSchemaVersion: an index written at another schema
// version (an older layout of row keys and tags) is emptied on Open, at
// LastSeq 0, so that following rebuilds it from the stream.
func TestOpenResetsOtherSchemaVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	ix, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, ix, rel("a", "Alpha", 8010, 1))
	if _, err := ix.db.ExecContext(ctx, `UPDATE meta SET v = ? WHERE k = 'schema'`, schemaVersion-1); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if n, err := ix.Count(ctx); err != nil || n != 0 || ix.LastSeq() != 0 {
		t.Fatalf("reopened: count %d (%v), LastSeq %d; want an empty index", n, err, ix.LastSeq())
	}
	applyAll(t, ix, rel("b", "Beta", 8010, 1))
	if got := ids(search(t, ix, Query{})); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after reset: %q", got)
	}
}

func TestApplyVersionsAndDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ix := openTest(t)
	r := rel("r", "First.Name", usenet.CatTVHD, 1)
	r.Version = 2
	apply := func(cs ...Change) {
		t.Helper()
		if err := ix.Apply(ctx, Batch{Changes: cs}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(want int) {
		t.Helper()
		if n, err := ix.Count(ctx); err != nil || n != want {
			t.Fatalf("count = %d, %v; want %d", n, err, want)
		}
		if res := search(t, ix, Query{}); res.Total != want {
			t.Fatalf("total = %d; want %d", res.Total, want)
		}
	}
	apply(Change{Seq: 1, Release: r})
	count(1)

	older := r
	older.Version, older.Name = 1, "Older.Name"
	apply(Change{Seq: 2, Release: older})
	if got, _, _ := ix.Get(ctx, "r"); got.Name != "First.Name" {
		t.Errorf("a lower version replaced the release: %q", got.Name)
	}
	// Seq 1 is the key's replaced row: its delete changes nothing.
	apply(Change{Seq: 1, Delete: true})
	count(1)

	newer := r
	newer.Version, newer.Name, newer.Date = 3, "Newer.Name", r.Date-7200
	apply(Change{Seq: 3, Release: newer})
	count(1)
	if res := search(t, ix, Query{Words: "first"}); res.Total != 0 {
		t.Errorf("old name still indexed: %q", ids(res))
	}
	if res := search(t, ix, Query{Words: "newer", MaxAge: 90 * time.Minute}); res.Total != 0 {
		t.Errorf("the date change did not move the release")
	}
	if res := search(t, ix, Query{Words: "newer"}); res.Total != 1 {
		t.Errorf("newer name not found")
	}
	apply(Change{Seq: 3, Delete: true})
	count(0)
	if _, ok, _ := ix.Get(ctx, "r"); ok {
		t.Error("deleted release still there")
	}

	hidden := newer
	hidden.Version = 4
	apply(Change{Seq: 4, Release: newer}, Change{Seq: 5, Release: hidden})
	count(1)
	hidden.Visible = false
	apply(Change{Seq: 6, Release: hidden})
	count(0)
}

func TestReopenKeepsLastSeq(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "index.db")
	ix, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Apply(context.Background(), Batch{Changes: []Change{{Seq: 7, Release: rel("x", "X", 8010, 0)}}, LastSeq: 9}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.LastSeq() != 9 {
		t.Errorf("LastSeq = %d, want 9", ix.LastSeq())
	}
	if n, _ := ix.Count(context.Background()); n != 1 {
		t.Errorf("count = %d", n)
	}
}

// TestSeasonZeroAndDaily: season 0 asked as such (Sonarr's season=00)
// and a daily show's date, which only the name holds.
func TestSeasonZeroAndDaily(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	applyAll(t, ix,
		rel("sp", "Show.S00E05.Special.720p.HDTV.x264-GRP", usenet.CatTVHD, 1),
		rel("e1", "Show.S01E05.720p.HDTV.x264-GRP", usenet.CatTVHD, 2),
		rel("d1", "Daily.Show.2026.12.02.Guest.720p.WEB.h264-GRP", usenet.CatTVHD, 3),
		rel("d2", "Daily.Show.2026-12-03.720p.WEB.h264-GRP", usenet.CatTVHD, 4),
		rel("d3", "Other.2026.02.12.Not.The.Day-GRP", usenet.CatTVHD, 5),
	)
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name string
		q    Query
		want []string
	}{
		{"season 0 episode", Query{HasSeason: true, Episode: 5}, []string{"sp"}},
		{"season 0 whole", Query{HasSeason: true}, []string{"sp"}},
		{"season 0 unset is any", Query{Episode: 5}, []string{"sp", "e1"}},
		{"daily dots", Query{Aired: day(2026, 12, 2)}, []string{"d1"}},
		{"daily dashes", Query{Aired: day(2026, 12, 3)}, []string{"d2"}},
		{"daily order matters", Query{Aired: day(2026, 2, 12)}, []string{"d3"}},
		{"daily and words", Query{Words: "daily show", Aired: day(2026, 12, 2)}, []string{"d1"}},
		{"daily none", Query{Aired: day(2026, 12, 4)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := search(t, ix, tc.q)
			if got := ids(res); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSearchSizeAndMinAge: MinSize and MaxSize bound the release's bytes
// (both ends kept) and MinAge its age, with and without words, with
// passworded releases hidden, and paged: the total counts only what they
// keep, and a page is full while more remain.
// (Was: Query had neither, so the API's minsize, maxsize and minage,
// which NNTmux and Prowlarr send, could not be honoured.)
func TestSearchSizeAndMinAge(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	sized := func(id string, size int64, ageHours, password int) usenet.Release {
		r := rel(id, "Some.Show.S01E0"+id[1:]+".720p", usenet.CatTVHD, ageHours)
		r.Size, r.Password = size, password
		return r
	}
	applyAll(t, ix,
		sized("r1", 100, 1, 0),
		sized("r2", 200, 2, 1),
		sized("r3", 300, 30, 0),
		sized("r4", 400, 50, 0),
		sized("r5", 500, 70, 0),
	)
	for _, tc := range []struct {
		name  string
		q     Query
		want  []string
		total int
	}{
		{"min size", Query{MinSize: 300}, []string{"r3", "r4", "r5"}, 3},
		{"max size", Query{MaxSize: 200}, []string{"r1", "r2"}, 2},
		{"both, ends kept", Query{MinSize: 200, MaxSize: 400}, []string{"r2", "r3", "r4"}, 3},
		{"none between", Query{MinSize: 201, MaxSize: 299}, nil, 0},
		{"words and size", Query{Words: "some show", MinSize: 250}, []string{"r3", "r4", "r5"}, 3},
		{"episode and size", Query{Season: 1, Episode: 2, MaxSize: 150}, nil, 0},
		{"hidden and size", Query{HidePassworded: true, MaxSize: 300}, []string{"r1", "r3"}, 2},
		{"hidden, words and size", Query{Words: "show", HidePassworded: true, MaxSize: 300}, []string{"r1", "r3"}, 2},
		{"size paged", Query{MinSize: 200, Limit: 2, Offset: 1}, []string{"r3", "r4"}, 4},
		{"words, size paged", Query{Words: "show", MinSize: 200, Limit: 2, Offset: 2}, []string{"r4", "r5"}, 4},
		{"min age", Query{MinAge: 24 * time.Hour}, []string{"r3", "r4", "r5"}, 3},
		{"min and max age", Query{MinAge: 24 * time.Hour, MaxAge: 60 * time.Hour}, []string{"r3", "r4"}, 2},
		{"min age and words", Query{Words: "show", MinAge: 60 * time.Hour}, []string{"r5"}, 1},
		{"min age, size, hidden", Query{MinAge: time.Hour, MaxSize: 300, HidePassworded: true}, []string{"r1", "r3"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := search(t, ix, tc.q)
			if got := ids(res); !slices.Equal(got, tc.want) || res.Total != tc.total {
				t.Errorf("ids = %q (total %d), want %q (total %d)", got, res.Total, tc.want, tc.total)
			}
		})
	}
}

// TestSearchHidePassworded: HidePassworded leaves out password=1 (not 2),
// with and without other conditions, and counts the total without them.
func TestSearchHidePassworded(t *testing.T) {
	t.Parallel()
	ix := openTest(t)
	locked := rel("p1", "Some.Show.S01E01.720p", usenet.CatTVHD, 1)
	locked.Password = 1
	maybe := rel("p2", "Some.Show.S01E02.720p", usenet.CatTVHD, 2)
	maybe.Password = 2
	applyAll(t, ix, locked, maybe, rel("p0", "Some.Show.S01E03.720p", usenet.CatTVHD, 3))
	for _, tc := range []struct {
		name string
		q    Query
		want []string
	}{
		{"all", Query{}, []string{"p1", "p2", "p0"}},
		{"hidden, no condition", Query{HidePassworded: true}, []string{"p2", "p0"}},
		{"hidden, words", Query{Words: "some show", HidePassworded: true}, []string{"p2", "p0"}},
		{"hidden, cat", Query{Cats: []int{usenet.CatTV}, HidePassworded: true}, []string{"p2", "p0"}},
		{"hidden, paged", Query{HidePassworded: true, Limit: 1, Offset: 1}, []string{"p0"}},
	} {
		res, err := ix.Search(context.Background(), tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, r := range res.Releases {
			got = append(got, r.ID)
		}
		wantTotal := len(tc.want)
		if tc.q.Limit > 0 {
			wantTotal = 2
		}
		if !slices.Equal(got, tc.want) || res.Total != wantTotal {
			t.Errorf("%s: %v (total %d), want %v (total %d)", tc.name, got, res.Total, tc.want, wantTotal)
		}
	}
}

// (Was: a name written of episode markers made a tag per episode of each,
// 735,000 tags and megabytes of FTS index for one release.)
func TestTagsBoundedPerName(t *testing.T) {
	t.Parallel()
	var distinct strings.Builder
	for s := 1; distinct.Len() < 64<<10; s++ {
		fmt.Fprintf(&distinct, "S%dE01-50.", s)
	}
	bound := 3 + maxMarkers*(1+2*maxMarkerEpisodes) // category, parent, group, markers
	ix := openTest(t)
	for i, name := range []string{strings.Repeat("S1E01-50.", 64<<10/9), distinct.String()} {
		r := rel(fmt.Sprintf("%032x", i+1), name, usenet.CatTVHD, i+1)
		if n := len(strings.Fields(tags(r))); n > bound {
			t.Errorf("name %d: %d tags, want at most %d", i, n, bound)
		}
		applyAll(t, ix, r)
	}
	// The first markers are still tagged.
	if got := ids(search(t, ix, Query{Season: 1, Episode: 50})); len(got) != 2 {
		t.Errorf("season 1 episode 50: found %q, want both", got)
	}
}
