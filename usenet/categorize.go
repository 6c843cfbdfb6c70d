package usenet

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// catRule gives id to a release whose groups and name match it. A rule
// with both conditions needs both; a nil condition matches anything.
type catRule struct {
	id int
	// groups are group-name patterns: dot-separated components that must
	// appear in a row in one of the groups ("hdtv.x264" matches
	// alt.binaries.hdtv.x264, "tv" matches alt.binaries.multimedia.tv but
	// not alt.binaries.tvseries).
	groups []string
	// dotted are groups as ".pattern.", made once (init) rather than for
	// every group of every release.
	dotted []string
	// names are lists of name markers; the name must hold a marker of
	// every list. A marker is a word of the name, compared case-
	// insensitively after splitting the name at every rune that is not a
	// letter or digit; "web-dl" is two words in a row; "<episode>",
	// "<year>" are the patterns below.
	names [][]string
	// parts are names' markers split at "-", made once (init): split for
	// every marker of every release, they were most of Categorize's
	// allocations.
	parts [][][]string
}

// Marker lists the rules share.
var (
	mkEpisode = []string{"<episode>"}
	mkUHD     = []string{"2160p", "4k", "uhd"}
	mkHD      = []string{"720p", "1080p", "1080i"}
	// mkSD comes after mkHD and mkUHD: HDTV marks SD only without a
	// resolution ("Show.S01E02.720p.HDTV" is HD).
	mkSD = []string{"480p", "576p", "sd", "dvdrip", "xvid", "divx", "hdtv", "pdtv", "sdtv", "dvdr", "dvd", "dvdscr"}
	// mkMovie marks a film without an episode marker: a year with a
	// resolution (the resolution list is the other condition) or a source
	// only films come from.
	mkMovie  = []string{"<year>", "bluray", "blu-ray", "bdrip", "brrip", "bdremux", "remux", "web-dl", "webdl", "webrip", "hdrip", "dvdrip", "dvdscr"}
	mkHDDisc = []string{"bluray", "blu-ray", "bdrip", "brrip", "bdremux", "remux", "web-dl", "webdl"}
	// mkFullDisc marks a whole Blu-ray disc or a remux of one, the
	// BluRay category; a 1080p.BluRay.x264 encode is HD.
	mkFullDisc = []string{"complete-bluray", "complete-uhd-bluray", "bd25", "bd50", "bd66", "bd100", "bdmv", "bdremux", "remux"}
	mk3D       = []string{"3d", "hsbs", "h-sbs", "half-sbs", "hou", "h-ou", "half-ou"}
	// mkSport names leagues and events whose releases are dated or
	// numbered like episodes ("NFL.2026.12.01…", "UFC.300…").
	mkSport = []string{"nfl", "nba", "nhl", "mlb", "mls", "ufc", "wwe", "aew", "nascar", "motogp", "formula1", "formula-1", "epl", "uefa", "bundesliga", "laliga", "wrestling", "boxing"}
	mkDocu  = []string{"documentary", "docu", "docuseries"}

	grTV     = []string{"tv", "teevee", "hdtv", "tvseries", "multimedia.tv"}
	grMovies = []string{"movies", "hdtv.x264", "x264", "dvd", "dvdr", "bluray", "divx", "hd.movies"}
)

// catRules is the whole categorizer, first match wins. Name rules come
// before group rules, so a name beats a group where they conflict (an
// episode posted to a movies group is TV, a film in a TV group is a film),
// with two exceptions that come first: anime and XXX groups beat names,
// because their posts carry TV and film markers of their own. A release
// of TV or film that names no quality goes to its "Other" subcategory,
// never to the bare parent: apps ask for subcategories (Sonarr's default
// is 5030,5040).
var catRules = []catRule{
	// An explicit XXX tag beats everything: XXX posts carry resolutions,
	// years and episode-like numbers.
	{id: CatXXX, names: [][]string{{"xxx"}}},
	// Anime groups: fansub names look like TV episodes, only the group
	// tells them apart.
	{id: CatTVAnime, groups: []string{"anime"}},
	{id: CatXXX, groups: []string{"erotica", "xxx", "pictures.erotica"}},

	// Sport before TV and films: its dates look like a daily show's, and
	// "UFC.300.2026…" like a film's year.
	{id: CatTVSport, names: [][]string{mkSport}},
	// TV by name: an episode or season marker, then the resolution.
	{id: CatTVDocumentary, names: [][]string{mkEpisode, mkDocu}},
	{id: CatTVUHD, names: [][]string{mkEpisode, mkUHD}},
	{id: CatTVHD, names: [][]string{mkEpisode, mkHD}},
	{id: CatTVSD, names: [][]string{mkEpisode, mkSD}},
	// An episode without a resolution: the HD groups say HD.
	{id: CatTVHD, groups: []string{"hdtv"}, names: [][]string{mkEpisode}},
	{id: CatTVOther, names: [][]string{mkEpisode}},

	// Films by name (no episode marker: the TV rules came first). 3D and
	// full discs before the resolution, which they name too.
	{id: CatMovies3D, names: [][]string{mkMovie, mk3D}},
	{id: CatMoviesBluRay, names: [][]string{mkFullDisc}},
	{id: CatMoviesUHD, names: [][]string{mkMovie, mkUHD}},
	{id: CatMoviesHD, names: [][]string{mkMovie, mkHD}},
	{id: CatMoviesSD, names: [][]string{mkMovie, mkSD}},
	// A disc or web source without a resolution is HD more often than not.
	{id: CatMoviesHD, names: [][]string{mkHDDisc}},

	// Audiobooks first: they are MP3 or M4B files of a book.
	{id: CatAudioAudiobook, names: [][]string{{"audiobook", "audiobooks", "audiobuch", "hoerbuch", "m4b", "unabridged", "abridged"}}},
	// Books before audio: "CBR" is a comic archive here, not a bit rate.
	{id: CatBooksComic, names: [][]string{{"cbr", "cbz", "cb7", "comic", "comics"}}},
	{id: CatBooksEbook, names: [][]string{{"epub", "mobi", "azw3", "azw", "pdf", "ebook", "ebooks", "e-book"}}},
	// Lossless before MP3: a FLAC release may mention its MP3 sibling.
	{id: CatAudioFLAC, names: [][]string{{"flac", "lossless", "alac", "24bit", "ape"}}},
	{id: CatAudioMP3, names: [][]string{{"mp3", "320kbps", "256kbps", "192kbps", "v0", "v2"}}},
	// Software: films on disc images were taken by the film rules.
	{id: CatPC, names: [][]string{{"iso", "x64", "x86", "win64", "win32", "windows", "macos", "keygen", "portable"}}},

	// Groups, for names that say nothing (obfuscated posts). "hdtv.x264"
	// before "hdtv": the first carries films, the second TV.
	{id: CatConsole, groups: []string{"console", "games.xbox", "games.nintendods", "games.wii"}},
	{id: CatMoviesUHD, groups: grMovies, names: [][]string{mkUHD}},
	{id: CatMoviesHD, groups: []string{"hdtv.x264", "bluray", "hd.movies"}},
	{id: CatMoviesHD, groups: grMovies, names: [][]string{mkHD}},
	{id: CatMoviesSD, groups: grMovies, names: [][]string{mkSD}},
	{id: CatMoviesOther, groups: grMovies},
	{id: CatTVUHD, groups: grTV, names: [][]string{mkUHD}},
	{id: CatTVHD, groups: grTV, names: [][]string{mkHD}},
	{id: CatTVSD, groups: grTV, names: [][]string{mkSD}},
	{id: CatTVHD, groups: []string{"hdtv"}},
	{id: CatTVOther, groups: grTV},
	{id: CatAudioFLAC, groups: []string{"sounds.flac", "sounds.lossless", "lossless", "flac"}},
	{id: CatAudioAudiobook, groups: []string{"audiobooks", "audiobook"}},
	{id: CatAudioMP3, groups: []string{"sounds", "mp3", "music"}},
	{id: CatBooksComic, groups: []string{"comics"}},
	{id: CatBooksEbook, groups: []string{"ebook", "ebooks", "e-book", "e-books"}},
	{id: CatPC, groups: []string{"cd.image", "iso", "warez", "apps"}},

	// Last, after the groups had their say: a name with a year and no
	// other marker is a film that names no quality ("Film.Title.2019-GRP").
	{id: CatMoviesOther, names: [][]string{{"<year>"}}},
}

func init() {
	for i := range catRules {
		r := &catRules[i]
		for _, p := range r.groups {
			r.dotted = append(r.dotted, "."+p+".")
		}
		for _, list := range r.names {
			var ps [][]string
			for _, m := range list {
				ps = append(ps, strings.Split(m, "-"))
			}
			r.parts = append(r.parts, ps)
		}
	}
}

// Bounds of what Categorize reads. Its work is rules x markers x words of
// the name and rules x patterns x groups, and both come from strangers: a
// subject (a name is its Base) and an Xref may fill the 64 KiB of an
// overview line, and Collection.posts categorizes every post of a
// collection on every merge and every settle sweep. Unbounded, a
// 4,000-byte name made a collection of 8,000 posts cost seconds each time.
const (
	// maxCategorizeBytes is how much of a name Categorize reads: its whole
	// words within the first 512 bytes. A release is named after its files,
	// and a file name is at most 255 bytes on Linux file systems (255
	// UTF-16 units on NTFS); twice that leaves room for the subject text
	// around a name when the name comes from the subject. The test data's
	// names run to under 60 bytes. A group name longer than this is no
	// real group's and is not read either.
	maxCategorizeBytes = 512
	// maxCategorizeGroups is how many groups Categorize reads: the first
	// 32 in sorted order. A binary post goes to a handful of groups (the
	// test data's to at most three).
	maxCategorizeGroups = 32
)

// Categorize assigns a category from the groups a release was posted to
// and its name, by the first rule of catRules that matches. It returns
// CatOtherMisc when none does. The result depends on the set of groups,
// not their order. It reads the first maxCategorizeGroups groups in
// sorted order and the whole words of the first maxCategorizeBytes of the
// name, so its work is bounded whatever a poster sends.
func Categorize(groups []string, name string) int {
	id, _ := categorize(groups, name)
	return id
}

// categorize is Categorize that also returns the index of the rule that
// matched (-1 for none), for the test that every rule is reachable.
func categorize(groups []string, name string) (int, int) {
	groups = categorizeGroups(groups)
	dotted := make([]string, 0, len(groups))
	for _, g := range groups {
		if len(g) <= maxCategorizeBytes {
			dotted = append(dotted, "."+strings.ToLower(g)+".")
		}
	}
	words := nameWords(name)
	for i, r := range catRules {
		if r.matchGroups(dotted) && r.matchName(words) {
			return r.id, i
		}
	}
	return CatOtherMisc, -1
}

// categorizeGroups is the groups Categorize reads: all of them, or the
// first maxCategorizeGroups in sorted order, distinct. A release's groups
// come sorted and distinct (unionSorted), so it is usually a slice of
// groups.
func categorizeGroups(groups []string) []string {
	if len(groups) <= maxCategorizeGroups {
		return groups
	}
	if !slices.IsSorted(groups) {
		groups = slices.Sorted(slices.Values(groups))
	}
	out := make([]string, 0, maxCategorizeGroups)
	for _, g := range groups {
		if len(out) == maxCategorizeGroups {
			break
		}
		if len(out) == 0 || out[len(out)-1] != g {
			out = append(out, g)
		}
	}
	return out
}

// nameWords is the words of name Categorize reads, lower-cased: those that
// lie whole within its first maxCategorizeBytes. A word the bound cuts is
// left out, so that no cut word matches a marker the whole one does not
// ("s01e0234", no episode, cut to "s01e023").
func nameWords(name string) []string {
	if len(name) > maxCategorizeBytes {
		cut := maxCategorizeBytes
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		if r, _ := utf8.DecodeRuneInString(name[cut:]); isWordRune(r) {
			// Back to the start of the word the cut is in: after the
			// last rune before it that is no word's.
			i := strings.LastIndexFunc(name[:cut], notWordRune)
			size := 1 // i = -1: no such rune, nothing is read
			if i >= 0 {
				_, size = utf8.DecodeRuneInString(name[i:])
			}
			cut = i + size
		}
		name = name[:cut]
	}
	return strings.FieldsFunc(strings.ToLower(name), notWordRune)
}

// isWordRune is a rune of a name's words: a letter or a digit.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func notWordRune(r rune) bool { return !isWordRune(r) }

func (r *catRule) matchGroups(dotted []string) bool {
	if r.groups == nil {
		return true
	}
	for _, p := range r.dotted {
		for _, g := range dotted {
			if strings.Contains(g, p) {
				return true
			}
		}
	}
	return false
}

func (r *catRule) matchName(words []string) bool {
	for _, list := range r.parts {
		found := false
		for _, m := range list {
			if hasMarker(words, m) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// hasMarker reports whether words hold the marker of parts (the marker
// split at "-").
func hasMarker(words []string, parts []string) bool {
	switch m := parts[0]; {
	case len(parts) > 1:
	case m == "<episode>":
		return hasEpisode(words)
	case m == "<year>":
		for _, w := range words {
			if isYear(w) {
				return true
			}
		}
		return false
	}
	for i := 0; i+len(parts) <= len(words); i++ {
		if slices.Equal(words[i:i+len(parts)], parts) {
			return true
		}
	}
	return false
}

// hasEpisode finds an episode or season marker: s01e02 (and s01e02e03),
// s01, 1x02, "season 1", or a daily show's date (2026 01 31).
func hasEpisode(words []string) bool {
	for i, w := range words {
		switch {
		case isSeasonEpisode(w), isCrossEpisode(w):
			return true
		case w == "season" && i+1 < len(words) && isDigits(words[i+1]) && len(words[i+1]) <= 2:
			return true
		case isYear(w) && i+2 < len(words) && inRange(words[i+1], 1, 12) && inRange(words[i+2], 1, 31):
			return true
		}
	}
	return false
}

// isSeasonEpisode matches s\d{1,2}(e\d{1,3})*.
func isSeasonEpisode(w string) bool {
	if len(w) < 2 || w[0] != 's' {
		return false
	}
	i := digitsRun(w, 1, 2)
	if i == 1 {
		return false
	}
	for i < len(w) {
		if w[i] != 'e' {
			return false
		}
		j := digitsRun(w, i+1, 3)
		if j == i+1 {
			return false
		}
		i = j
	}
	return true
}

// isCrossEpisode matches \d{1,2}x\d{2,3} (1x02), not 1920x1080.
func isCrossEpisode(w string) bool {
	i := digitsRun(w, 0, 2)
	if i == 0 || i >= len(w) || w[i] != 'x' {
		return false
	}
	j := digitsRun(w, i+1, 3)
	return j == len(w) && j-i-1 >= 2
}

// digitsRun returns the index after at most max digits of w from i, or i
// when more digits than max follow (so "s123" is no season).
func digitsRun(w string, i, max int) int {
	j := i
	for j < len(w) && w[j] >= '0' && w[j] <= '9' {
		j++
	}
	if j-i > max {
		return i
	}
	return j
}

func isYear(w string) bool { return len(w) == 4 && inRange(w, 1900, 2099) }

func inRange(w string, lo, hi int) bool {
	if !isDigits(w) || len(w) > 4 {
		return false
	}
	n := 0
	for i := 0; i < len(w); i++ {
		n = n*10 + int(w[i]-'0')
	}
	return n >= lo && n <= hi
}
