package usenet

import "testing"

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
	{"Some.Show.S01E02.2160p.WEB-DL", nil, CatTVUHD},
	{"Some.Show.S01.4K", nil, CatTVUHD},
	{"Some.Show.S01E02.720p.WEB-GRP", nil, CatTVHD},
	{"Some.Show.1x02.1080p.HDTV", nil, CatTVHD}, // HDTV with a resolution is HD
	{"Some.Show.Season 1.1080p", nil, CatTVHD},
	{"Some.Show.S01E02.HDTV.XviD", nil, CatTVSD},
	{"Some.Show.S01E02.480p", nil, CatTVSD},
	{"Some.Show.S01E02E03.WEB", []string{"alt.binaries.hdtv"}, CatTVHD},
	{"Some.Show.S01E02.WEB", nil, CatTV},
	{"Daily.Show.2026.01.31.WEB", nil, CatTV},
	{"Some.Show.S01E02.720p", []string{"alt.binaries.movies"}, CatTVHD}, // the name beats the group
	{"Film.2019.2160p.UHD.BluRay", nil, CatMoviesUHD},
	{"Film.2019.1080p.WEB", nil, CatMoviesHD},
	{"Film.2019.720p", []string{"alt.binaries.tv"}, CatMoviesHD}, // the name beats the group
	{"Film.2019.DVDRip.XviD", nil, CatMoviesSD},
	{"Film.BluRay.x264-GRP", nil, CatMoviesHD},
	{"Film.Name.WEB-DL", nil, CatMoviesHD},
	{"Some.Comic.001.CBZ", nil, CatBooksComic},
	{"Author - Title (EPUB)", nil, CatBooksEbook},
	{"Author - Title.pdf", nil, CatBooksEbook},
	{"Artist-Album-2019-FLAC", nil, CatAudioFLAC},
	{"Artist - Album (2019) MP3 320kbps", nil, CatAudioMP3},
	{"Tool.v1.2.x64", nil, CatPC},
	{"Some OS 22.04 ISO", nil, CatPC},
	{"a8f7d6e5c4", []string{"alt.binaries.console.ps3"}, CatConsole},
	{"a8f7d6e5c4 2160p", []string{"alt.binaries.movies.x264"}, CatMoviesUHD},
	{"a8f7d6e5c4", []string{"alt.binaries.hdtv.x264"}, CatMoviesHD}, // before "hdtv": films
	{"a8f7d6e5c4 1080p", []string{"alt.binaries.movies"}, CatMoviesHD},
	{"a8f7d6e5c4 xvid", []string{"alt.binaries.movies.divx"}, CatMoviesSD},
	{"a8f7d6e5c4", []string{"alt.binaries.movies"}, CatMovies},
	{"a8f7d6e5c4 uhd", []string{"alt.binaries.tv"}, CatTVUHD},
	{"a8f7d6e5c4 720p", []string{"alt.binaries.teevee"}, CatTVHD},
	{"a8f7d6e5c4 hdtv", []string{"alt.binaries.multimedia.tv"}, CatTVSD},
	{"a8f7d6e5c4", []string{"alt.binaries.hdtv"}, CatTVHD},
	{"a8f7d6e5c4", []string{"alt.binaries.teevee"}, CatTV},
	{"a8f7d6e5c4", []string{"alt.binaries.sounds.flac"}, CatAudioFLAC},
	{"a8f7d6e5c4", []string{"alt.binaries.sounds.mp3.complete_cd"}, CatAudioMP3},
	{"a8f7d6e5c4", []string{"alt.binaries.comics.dcp"}, CatBooksComic},
	{"a8f7d6e5c4", []string{"alt.binaries.e-book.technical"}, CatBooksEbook},
	{"a8f7d6e5c4", []string{"alt.binaries.cd.image"}, CatPC},
	{"a8f7d6e5c4", []string{"alt.binaries.misc"}, CatOtherMisc},
	{"", nil, CatOtherMisc},
	// Not markers: x264 is no 1x02, 1920x1080 no episode, tvseries no "tv".
	{"Clip.1920x1080.x264", []string{"alt.binaries.tvseries.fake"}, CatTV},
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
