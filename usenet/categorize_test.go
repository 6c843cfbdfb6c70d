package usenet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// categoryCases cover every rule of catRules; TestEveryRuleIsTested
// checks that.
var categoryCases = []struct {
	name   string
	groups []string
	want   int
}{
	{"XXX.Title.2019.1080p.WEB-DL", []string{"alt.binaries.movies"}, CatXXX},
	{"[Fansub] Some Anime - 01 [1080p]", []string{"alt.binaries.multimedia.anime.highspeed"}, CatTVAnime},
	{"Some.Anime.S01E02.1080p", []string{"alt.binaries.anime"}, CatTVAnime}, // the group beats the episode marker
	{"Anything.1080p", []string{"alt.binaries.erotica"}, CatXXX},
	{"NFL.2026.12.01.Team.A.vs.Team.B.720p.WEB.h264-GRP", nil, CatTVSport},
	{"UFC.300.PPV.1080p.WEB.h264-GRP", nil, CatTVSport}, // a number and no episode: still sport
	{"Formula.1.2026.Bahrain.Grand.Prix.Race.1080p.WEB-GRP", nil, CatTVSport},
	{"Planet.Docs.S01E03.Documentary.1080p.WEB.h264-GRP", nil, CatTVDocumentary},
	{"Show.Name.S01E02.2160p.WEB-DL.DDP5.1.HDR.H.265-GRP", nil, CatTVUHD},
	{"Some.Show.S01.4K", nil, CatTVUHD},
	{"Show.Name.S01E02.1080p.WEB-DL.DDP5.1.H.264-GRP", nil, CatTVHD},
	{"Some.Show.S01E02.720p.WEB-GRP", nil, CatTVHD},
	{"Show.2026.12.02.720p.HDTV.x264-GRP", nil, CatTVHD}, // a daily show
	{"Some.Show.1x02.1080p.HDTV", nil, CatTVHD},          // HDTV with a resolution is HD
	{"Some.Show.Season 1.1080p", nil, CatTVHD},
	{"Show.Name.S03E04.1080p.WEBRip.x265-GRP", nil, CatTVHD},
	{"Show.Name.S01E02.HDTV.XviD-GRP", nil, CatTVSD},
	{"Show.Name.S01E02.480p.x264-GRP", nil, CatTVSD},
	{"Show.Name.S02E05.DVDRip.XviD-GRP", nil, CatTVSD},
	{"Show.Name.S00E01.SDTV.x264-GRP", nil, CatTVSD}, // a special, season 0
	{"Some.Show.S01E02E03.WEB", []string{"alt.binaries.hdtv"}, CatTVHD},
	{"Show.Name.S01E02.WEB.h264-GRP", nil, CatTVOther},
	{"Daily.Show.2026.01.31.WEB", nil, CatTVOther},
	{"Some.Show.S01E02.720p", []string{"alt.binaries.movies"}, CatTVHD}, // the name beats the group
	{"Movie.Title.2021.1080p.3D.HSBS.BluRay.x264-GRP", nil, CatMovies3D},
	{"Movie.Title.2021.1080p.BluRay.REMUX.AVC.DTS-HD.MA.5.1-GRP", nil, CatMoviesBluRay},
	{"Movie.Title.2021.COMPLETE.BLURAY-GRP", nil, CatMoviesBluRay},
	{"Movie.Title.2021.2160p.UHD.BluRay.x265-GRP", nil, CatMoviesUHD},
	{"Movie.Title.2021.1080p.WEB-DL.DDP5.1.H.264-GRP", nil, CatMoviesHD},
	{"Film.2019.720p", []string{"alt.binaries.tv"}, CatMoviesHD}, // the name beats the group
	{"Movie.Title.2019.DVDRip.XviD-GRP", nil, CatMoviesSD},
	{"Movie.Title.2019.480p.WEB.x264-GRP", nil, CatMoviesSD},
	{"Film.BluRay.x264-GRP", nil, CatMoviesHD},
	{"Film.Name.WEB-DL", nil, CatMoviesHD},
	{"Author.Name-Book.Title.Unabridged-2020-GRP", nil, CatAudioAudiobook},
	{"Some.Comic.001.2021.Digital.CBZ-GRP", nil, CatBooksComic},
	{"Author - Title (EPUB)", nil, CatBooksEbook},
	{"Author.Name-Book.Title-2020-RETAIL.EPUB.eBook-GRP", nil, CatBooksEbook},
	{"Author - Title.pdf", nil, CatBooksEbook},
	{"Artist_Name-Album_Title-WEB-2019-FLAC", nil, CatAudioFLAC},
	{"Artist - Album (2019) MP3 320kbps", nil, CatAudioMP3},
	{"Tool.v1.2.x64", nil, CatPC},
	{"Some OS 22.04 ISO", nil, CatPC},
	{"a8f7d6e5c4", []string{"alt.binaries.console.ps3"}, CatConsole},
	{"a8f7d6e5c4 2160p", []string{"alt.binaries.movies.x264"}, CatMoviesUHD},
	{"a8f7d6e5c4", []string{"alt.binaries.hdtv.x264"}, CatMoviesHD}, // before "hdtv": films
	{"a8f7d6e5c4 1080p", []string{"alt.binaries.movies"}, CatMoviesHD},
	{"a8f7d6e5c4 xvid", []string{"alt.binaries.movies.divx"}, CatMoviesSD},
	{"a8f7d6e5c4", []string{"alt.binaries.movies"}, CatMoviesOther},
	{"a8f7d6e5c4 uhd", []string{"alt.binaries.tv"}, CatTVUHD},
	{"a8f7d6e5c4 720p", []string{"alt.binaries.teevee"}, CatTVHD},
	{"a8f7d6e5c4 hdtv", []string{"alt.binaries.multimedia.tv"}, CatTVSD},
	{"a8f7d6e5c4", []string{"alt.binaries.hdtv"}, CatTVHD},
	{"a8f7d6e5c4", []string{"alt.binaries.teevee"}, CatTVOther},
	{"a8f7d6e5c4", []string{"alt.binaries.sounds.flac"}, CatAudioFLAC},
	{"a8f7d6e5c4", []string{"alt.binaries.sounds.audiobooks"}, CatAudioAudiobook},
	{"a8f7d6e5c4", []string{"alt.binaries.sounds.mp3.complete_cd"}, CatAudioMP3},
	{"Artist - Album (2019)", []string{"alt.binaries.sounds.mp3"}, CatAudioMP3}, // the group beats a bare year
	{"a8f7d6e5c4", []string{"alt.binaries.comics.dcp"}, CatBooksComic},
	{"a8f7d6e5c4", []string{"alt.binaries.e-book.technical"}, CatBooksEbook},
	{"a8f7d6e5c4", []string{"alt.binaries.cd.image"}, CatPC},
	{"Movie.Title.2019-GRP", nil, CatMoviesOther},
	{"a8f7d6e5c4", []string{"alt.binaries.misc"}, CatOtherMisc},
	{"", nil, CatOtherMisc},
	// Not markers: x264 is no 1x02, 1920x1080 no episode, tvseries no "tv".
	{"Clip.1920x1080.x264", []string{"alt.binaries.tvseries.fake"}, CatTVOther},
	{"Clip.1920x1080.x264", []string{"alt.binaries.tvseriesx"}, CatOtherMisc},
}

func TestCategorize(t *testing.T) {
	t.Parallel()
	for _, c := range categoryCases {
		if got := Categorize(c.groups, c.name); got != c.want {
			_, rule := categorize(c.groups, c.name)
			t.Errorf("Categorize(%q, %q) = %d (rule %d), want %d", c.groups, c.name, got, rule, c.want)
		}
		// The order of the groups does not matter.
		if len(c.groups) > 0 {
			rev := append([]string{"alt.binaries.misc"}, c.groups...)
			if got := Categorize(rev, c.name); got != c.want {
				t.Errorf("Categorize(%q, %q) = %d, want %d", rev, c.name, got, c.want)
			}
		}
	}
}

// TestEveryRuleIsTested: each rule of catRules decides at least one case,
// so a rule shadowed by an earlier one shows up.
func TestEveryRuleIsTested(t *testing.T) {
	t.Parallel()
	hit := make([]bool, len(catRules))
	for _, c := range categoryCases {
		if _, i := categorize(c.groups, c.name); i >= 0 {
			hit[i] = true
		}
	}
	for i, ok := range hit {
		if !ok {
			t.Errorf("rule %d (%+v) decides no case", i, catRules[i])
		}
	}
}

// (Was: Categorize read every word of a name and every group, so a name or
// Xref filling an overview line made each post of a collection cost
// milliseconds on every merge and settle sweep.)
func TestCategorizeReadsABoundedPart(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
	// The words of a name of 64 KiB are those of its first
	// maxCategorizeBytes, and categorizing it allocates no more than
	// categorizing those: its work stops growing at the bound.
	long := strings.Repeat("a.", 32<<10)
	if got, want := nameWords(long), nameWords(long[:maxCategorizeBytes]); !slices.Equal(got, want) {
		t.Errorf("%d words read of a 64 KiB name, want the %d of its first %d bytes", len(got), len(want), maxCategorizeBytes)
	}
	allocs := func(groups []string, name string) float64 {
		return testing.AllocsPerRun(10, func() { Categorize(groups, name) })
	}
	if at, far := allocs(nil, long[:maxCategorizeBytes]), allocs(nil, long); far != at {
		t.Errorf("%v allocations for a 64 KiB name, %v at the bound: the work grows with the name", far, at)
	}
	// So for groups: 10,000 (a release's groups come sorted) cost what
	// one past the bound do.
	var groups []string
	for i := range 10_000 {
		groups = append(groups, fmt.Sprintf("alt.binaries.g%05d", i))
	}
	if at, far := allocs(groups[:maxCategorizeGroups+1], "Name"), allocs(groups, "Name"); far != at {
		t.Errorf("%v allocations for 10,000 groups, %v at the bound: the work grows with the groups", far, at)
	}
	// The result is a function of the set of groups still.
	tv := append(slices.Clone(groups[:maxCategorizeGroups+5]), "alt.binaries.aaa.tv")
	rev := slices.Clone(tv)
	slices.Reverse(rev)
	if got, want := Categorize(rev, "Name"), Categorize(tv, "Name"); got != want || want != CatTVOther {
		t.Errorf("Categorize of %d groups = %d, reversed %d; want %d either way", len(tv), want, got, CatTVOther)
	}

	// A word the bound cuts is left out, not read cut: "S01E0234" is no
	// episode, "S01E023" would be one.
	cut := strings.Repeat("x", maxCategorizeBytes-6) + ".S01E0234"
	if got := Categorize(nil, cut); got != CatOtherMisc {
		t.Errorf("Categorize of a name cut in its last word = %d, want %d", got, CatOtherMisc)
	}
	// A name within the bound is read whole; one past it keeps the
	// markers of its first 512 bytes.
	pad := strings.Repeat(".Word", (maxCategorizeBytes-40)/5)
	for name, want := range map[string]int{
		"Show.Name.S01E02" + pad + ".1080p":                                 CatTVHD,
		"Show.Name.S01E02.1080p" + pad + strings.Repeat(".Word", 1000):      CatTVHD,
		"Show.Name.S01E02" + pad + strings.Repeat(".Word", 1000) + ".1080p": CatTVOther,
		// Cut at a rune, not in one (byte 512 is inside the 171st é).
		strings.Repeat("é", maxCategorizeBytes): CatOtherMisc,
		strings.Repeat(".é", 171) + ".1080p":    CatOtherMisc,
	} {
		if got := Categorize(nil, name); got != want {
			t.Errorf("Categorize of a name of %d bytes = %d, want %d", len(name), got, want)
		}
		for _, w := range nameWords(name) {
			if !utf8.ValidString(w) {
				t.Errorf("word %q of a name of %d bytes is not UTF-8", w, len(name))
			}
		}
	}
}
