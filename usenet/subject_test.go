package usenet

import (
	"fmt"
	"strconv"
	"testing"
)

// subjectCases are the subjects seen in practice; fuzz_test.go seeds its
// corpus with them.
var subjectCases = []struct {
	name string
	in   string
	want Subject
}{
	{"nyuu full", `Some.Show.S01E02.720p.WEB-GRP [01/15] - "Some.Show.S01E02.720p.WEB-GRP.part01.rar" yEnc (1/50) 35651584`,
		Subject{Name: "Some.Show.S01E02.720p.WEB-GRP.part01.rar", Part: 1, Parts: 50, Counter: true, File: 1, Files: 15,
			Binary: `Some.Show.S01E02.720p.WEB-GRP [01/15] - "Some.Show.S01E02.720p.WEB-GRP.part01.rar" yEnc`, Base: "Some.Show.S01E02.720p.WEB-GRP"}},
	{"par2 alone", `"file.par2" yEnc (1/1)`,
		Subject{Name: "file.par2", Part: 1, Parts: 1, Counter: true, Binary: `"file.par2" yEnc`, Base: "file"}},
	{"file counter, r40", `[42/50] - "name.r40" yEnc (12/14)`,
		Subject{Name: "name.r40", Part: 12, Parts: 14, Counter: true, File: 42, Files: 50, Binary: `[42/50] - "name.r40" yEnc`, Base: "name"}},
	{"no quotes no yEnc", `name.part01.rar (1/50)`,
		Subject{Name: "name.part01.rar", Part: 1, Parts: 50, Counter: true, Binary: "name.part01.rar", Base: "name"}},
	{"zero-padded part", `name.vol03+04.PAR2 (01/50)`,
		Subject{Name: "name.vol03+04.PAR2", Part: 1, Parts: 50, Counter: true, Binary: "name.vol03+04.PAR2", Base: "name"}},
	{"only brackets: a file counter, one part", `Some Post [1/50] - "name.nfo"`,
		Subject{Name: "name.nfo", Part: 1, Parts: 1, File: 1, Files: 50, Binary: `Some Post [1/50] - "name.nfo"`, Base: "Some Post"}},
	{"Re: stripped", `Re: RE:  "x.sfv" yEnc (1/1)`,
		Subject{Name: "x.sfv", Part: 1, Parts: 1, Counter: true, Binary: `"x.sfv" yEnc`, Base: "x"}},
	{"size with unit", `"movie.mkv" yEnc (3/9) 1.2 GB`,
		Subject{Name: "movie.mkv", Part: 3, Parts: 9, Counter: true, Binary: `"movie.mkv" yEnc`, Base: "movie"}},
	{"size between yEnc and counter", `[3/4] - "a.7z.003" yEnc 716800 (2/5)`,
		Subject{Name: "a.7z.003", Part: 2, Parts: 5, Counter: true, File: 3, Files: 4, Binary: `[3/4] - "a.7z.003" yEnc 716800`, Base: "a"}},
	{"text after the counter stays in Binary", `"a.rar" (1/2) repost`,
		Subject{Name: "a.rar", Part: 1, Parts: 2, Counter: true, Binary: `"a.rar" repost`, Base: "repost"}},
	{"non-ASCII", `Café Ünïcode – Teil 1 [1/3] - "Café.part1.rar" yEnc (2/7)`,
		Subject{Name: "Café.part1.rar", Part: 2, Parts: 7, Counter: true, File: 1, Files: 3, Binary: `Café Ünïcode – Teil 1 [1/3] - "Café.part1.rar" yEnc`, Base: "Café Ünïcode – Teil 1"}},
	{"MIME base64", `=?UTF-8?B?U29tZS5TaG93?= [01/15] - "=?UTF-8?B?U29tZS5TaG93LnBhcjI=?=" yEnc (1/3)`,
		Subject{Name: "Some.Show.par2", Part: 1, Parts: 3, Counter: true, File: 1, Files: 15, Binary: `Some.Show [01/15] - "Some.Show.par2" yEnc`, Base: "Some.Show"}},
	{"MIME quoted-printable latin1", `=?ISO-8859-1?Q?Caf=E9_Show?= - "cafe.nfo" yEnc (1/1)`,
		Subject{Name: "cafe.nfo", Part: 1, Parts: 1, Counter: true, Binary: `Café Show - "cafe.nfo" yEnc`, Base: "Café Show"}},
	{"MIME windows-1252", `=?windows-1252?Q?=93Quoted=94?= "q.zip" yEnc (1/1)`,
		Subject{Name: "q.zip", Part: 1, Parts: 1, Counter: true, Binary: "\u201cQuoted\u201d \"q.zip\" yEnc", Base: "\u201cQuoted\u201d"}},
	{"MIME, a charset not known left as posted", `=?ISO-8859-2?Q?Ksi=B1=BFka?= [1/2] - "=?UTF-8?Q?Caf=C3=A9.mkv?=" yEnc (1/3)`,
		Subject{Name: "Café.mkv", Part: 1, Parts: 3, Counter: true, File: 1, Files: 2, Binary: `=?ISO-8859-2?Q?Ksi=B1=BFka?= [1/2] - "Café.mkv" yEnc`, Base: "=?ISO-8859-2?Q?Ksi=B1=BFka?="}},
	{"obfuscated r01", `My.Post.Title [03/15] - "a8f7d6e5c4.r01" yEnc (1/50)`,
		Subject{Name: "a8f7d6e5c4.r01", Part: 1, Parts: 50, Counter: true, File: 3, Files: 15, Binary: `My.Post.Title [03/15] - "a8f7d6e5c4.r01" yEnc`, Base: "My.Post.Title"}},
	{"obfuscated r02", `My.Post.Title [04/15] - "k2j3h4g5f6.r02" yEnc (7/50) 52428800`,
		Subject{Name: "k2j3h4g5f6.r02", Part: 7, Parts: 50, Counter: true, File: 4, Files: 15, Binary: `My.Post.Title [04/15] - "k2j3h4g5f6.r02" yEnc`, Base: "My.Post.Title"}},
	{"obfuscated, nothing shared", `[04/15] - "k2j3h4g5f6" yEnc (7/50)`,
		Subject{Name: "k2j3h4g5f6", Part: 7, Parts: 50, Counter: true, File: 4, Files: 15, Binary: `[04/15] - "k2j3h4g5f6" yEnc`, Base: "k2j3h4g5f6"}},
	{"bracketed title", `[My Post] [04/15] - "x.rar" yEnc (7/50)`,
		Subject{Name: "x.rar", Part: 7, Parts: 50, Counter: true, File: 4, Files: 15, Binary: `[My Post] [04/15] - "x.rar" yEnc`, Base: "My Post"}},
	{"year kept, size dropped", `Title 2019 [1/2] - "t.rar" yEnc (1/1) 123`,
		Subject{Name: "t.rar", Part: 1, Parts: 1, Counter: true, File: 1, Files: 2, Binary: `Title 2019 [1/2] - "t.rar" yEnc`, Base: "Title 2019"}},
	{"nfo as file 0", `[00/15] - "Post.nfo" yEnc (1/1)`,
		Subject{Name: "Post.nfo", Part: 1, Parts: 1, Counter: true, File: 0, Files: 15, Binary: `[00/15] - "Post.nfo" yEnc`, Base: "Post"}},
	{"counter in quotes is not a counter", `"odd (1/2).rar" yEnc (3/4)`,
		Subject{Name: "odd (1/2).rar", Part: 3, Parts: 4, Counter: true, Binary: `"odd (1/2).rar" yEnc`, Base: "odd (1/2)"}},
	{"unpaired quote is text", `x "a.rar (1/2)`,
		Subject{Name: "a.rar", Part: 1, Parts: 2, Counter: true, Binary: `x "a.rar`, Base: "x"}},
	{"part 0 is no part counter", `"x.nfo" yEnc (0/1)`,
		Subject{Name: "x.nfo", Part: 1, Parts: 1, ZeroPart: true, Binary: `"x.nfo" yEnc (0/1)`, Base: "x"}},
	{"p > t", `"x.rar" yEnc (51/50)`,
		Subject{Name: "x.rar", Part: 1, Parts: 1, Binary: `"x.rar" yEnc (51/50)`, Base: "x"}},
	{"t = 0", `"x.rar" yEnc (0/0) [0/0]`,
		Subject{Name: "x.rar", Part: 1, Parts: 1, Binary: `"x.rar" yEnc (0/0) [0/0]`, Base: "x"}},
	{"huge numbers", `[99999999999999999999/1] "x.rar" yEnc (1/99999999999999999999)`,
		Subject{Name: "x.rar", Part: 1, Parts: 1, Binary: `[99999999999999999999/1] "x.rar" yEnc (1/99999999999999999999)`, Base: "x"}},
	{"nine digits", `"x.rar" yEnc (123456789/999999999)`,
		Subject{Name: "x.rar", Part: 123456789, Parts: 999999999, Counter: true, Binary: `"x.rar" yEnc`, Base: "x"}},
	{"no counter, no name", `  just some words  `,
		Subject{Part: 1, Parts: 1, Binary: "just some words", Base: "just some words"}},
	{"only a counter", `(01/50)`,
		Subject{Part: 1, Parts: 50, Counter: true, Binary: "", Base: ""}},
	{"empty", ``, Subject{Part: 1, Parts: 1}},
	{"media extension dropped, case kept", `"Artist - Album.FLAC" yEnc (1/9)`,
		Subject{Name: "Artist - Album.FLAC", Part: 1, Parts: 9, Counter: true, Binary: `"Artist - Album.FLAC" yEnc`, Base: "Artist - Album"}},
	{"split mkv", `"Movie.2019.1080p.mkv.001" yEnc (1/9)`,
		Subject{Name: "Movie.2019.1080p.mkv.001", Part: 1, Parts: 9, Counter: true, Binary: `"Movie.2019.1080p.mkv.001" yEnc`, Base: "Movie.2019.1080p"}},
	{"file counter in parens before the name", `(02/15) "b.part02.rar" yEnc (1/9)`,
		Subject{Name: "b.part02.rar", Part: 1, Parts: 9, Counter: true, File: 2, Files: 15, Binary: `(02/15) "b.part02.rar" yEnc`, Base: "b"}},
	{"scene volume after .r99", `[102/170] - "Big.Set-GRP.s00" yEnc (1/70)`,
		Subject{Name: "Big.Set-GRP.s00", Part: 1, Parts: 70, Counter: true, File: 102, Files: 170, Binary: `[102/170] - "Big.Set-GRP.s00" yEnc`, Base: "Big.Set-GRP"}},
	{"a season before a suffix is no volume", `[102/170] - "Show.Name.S01.par2" yEnc (1/1)`,
		Subject{Name: "Show.Name.S01.par2", Part: 1, Parts: 1, Counter: true, File: 102, Files: 170, Binary: `[102/170] - "Show.Name.S01.par2" yEnc`, Base: "Show.Name.S01"}},
	{"a season in a post too small for .sNN volumes", `Show.Name.S01 [03/20] - yEnc (1/2)`,
		Subject{Name: "Show.Name.S01", Part: 1, Parts: 2, Counter: true, File: 3, Files: 20, Binary: `Show.Name.S01 [03/20] - yEnc`, Base: "Show.Name.S01"}},
	{"subtitles beside the film", `[2/3] - "Movie.2019.en-GRP.SRT" yEnc (1/1)`,
		Subject{Name: "Movie.2019.en-GRP.SRT", Part: 1, Parts: 1, Counter: true, File: 2, Files: 3, Binary: `[2/3] - "Movie.2019.en-GRP.SRT" yEnc`, Base: "Movie.2019.en-GRP"}},
}

func TestParseSubject(t *testing.T) {
	t.Parallel()
	for _, c := range subjectCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := ParseSubject(c.in); got != c.want {
				t.Errorf("ParseSubject(%q)\n got %+v\nwant %+v", c.in, got, c.want)
			}
		})
	}
}

// TestBaseSharedByAPost: every file of one post gets the same Base and a
// Binary of its own; every part of one file the same Binary.
func TestBaseSharedByAPost(t *testing.T) {
	t.Parallel()
	posts := map[string][]string{
		"Some.Show.S01E02.720p.WEB-GRP": {
			"Some.Show.S01E02.720p.WEB-GRP.part01.rar", "Some.Show.S01E02.720p.WEB-GRP.part12.rar",
			"Some.Show.S01E02.720p.WEB-GRP.par2", "Some.Show.S01E02.720p.WEB-GRP.vol000+001.par2",
			"Some.Show.S01E02.720p.WEB-GRP.vol15+16.PAR2", "Some.Show.S01E02.720p.WEB-GRP.nfo",
			"Some.Show.S01E02.720p.WEB-GRP.sfv", "Some.Show.S01E02.720p.WEB-GRP.nzb",
		},
		"Old.Post": {"Old.Post.rar", "Old.Post.r00", "Old.Post.r99", "Old.Post.par2"},
		"Seven":    {"Seven.7z.001", "Seven.7z.002", "Seven.7z", "Seven.vol1+2.par2"},
		"Zipped":   {"Zipped.zip", "Zipped.z01", "Zipped.srr"},
		"Film":     {"Film.mkv", "Film.mkv.par2", "Film.mkv.vol01+02.par2", "Film.mkv.001", "Film.nfo"},
	}
	for want, files := range posts {
		binaries := map[string]bool{}
		for i, f := range files {
			var firstBinary string
			for p := 1; p <= 3; p++ {
				subj := `[` + strconv.Itoa(i+1) + `/` + strconv.Itoa(len(files)) + `] - "` + f + `" yEnc (` + strconv.Itoa(p) + `/3) 123456`
				got := ParseSubject(subj)
				if got.Base != want {
					t.Errorf("%q: Base %q, want %q", subj, got.Base, want)
				}
				if p == 1 {
					firstBinary = got.Binary
				} else if got.Binary != firstBinary {
					t.Errorf("%q: Binary %q, part 1 had %q", subj, got.Binary, firstBinary)
				}
			}
			if binaries[firstBinary] {
				t.Errorf("two files of %s share Binary %q", want, firstBinary)
			}
			binaries[firstBinary] = true
		}
	}
}

// TestSceneSVolumesStayInTheirRelease: a scene release of more than 101
// RAR volumes names them .rar, .r00-.r99, then .s00-.s99. Every volume is
// a file of the one post and shares its Base, so the post is one release,
// complete. (Was: .sNN was no volume suffix, so each .sNN volume was a
// collection of its own and the post, lacking them, was never complete
// nor visible.) Where "S01" is a season it stays in Base: see the
// subjectCases of seasons.
func TestSceneSVolumesStayInTheirRelease(t *testing.T) {
	t.Parallel()
	const rel = "Movie.Title.2019.1080p.BluRay.x264-GRP"
	for _, name := range []string{rel + ".s00", rel + ".s17", rel + ".S99", rel + ".s100"} {
		if got := ParseSubject(`[102/170] - "` + name + `" yEnc (1/70)`).Base; got != rel {
			t.Errorf("Base of %q = %q, want %q (the .rar and .rNN volumes' Base)", name, got, rel)
		}
	}

	// .rar, .r00-.r99, .s00 and .par2: 103 files.
	names := []string{rel + ".rar"}
	for i := range 100 {
		names = append(names, fmt.Sprintf("%s.r%02d", rel, i))
	}
	names = append(names, rel+".s00", rel+".par2")
	files := make([]string, len(names))
	parts := make([]int, len(names))
	for i, n := range names {
		files[i] = fmt.Sprintf(`[%d/%d] - "%s" yEnc (%%d/%%d)`, i+1, len(names), n)
		parts[i] = 1 + i%2
	}
	rels := indexRange(t, testStore(t), "alt.binaries.tv", postLines(files, parts))
	if len(rels) != 1 || len(rels[0].Binaries) != len(names) || !rels[0].Complete() {
		t.Fatalf("a complete post of %d files (.rar, .r00-.r99, .s00, .par2): %d visible releases, want 1 of all files:%s", len(names), len(rels), describeReleases(rels))
	}
}

// TestSidecarFilesStayInTheirRelease: posts carry small files beside the
// main one under its name, a film's .srt subtitles, a CD image's .cue and
// .log. They are files of the post ([i/n]) and share its Base, so the
// post is one release, complete. (Was: Base stripped only volume and
// media extensions, so each side file was a collection of its own and
// the post lacked a file: never complete, and at 2 of 3 files below the
// settle completion too.)
func TestSidecarFilesStayInTheirRelease(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ base, main, side string }{
		{"Movie.Title.2019.1080p.BluRay.x264-GRP", ".mkv", ".srt"},
		{"Movie.Title.2019.1080p.BluRay.x264-GRP", ".mkv", ".idx"},
		{"Artist - Album (2019)", ".flac", ".cue"},
		{"Artist - Album (2019)", ".flac", ".log"},
		{"Artist - Album (2019)", ".flac", ".jpg"},
	} {
		m := ParseSubject(`[1/3] - "` + c.base + c.main + `" yEnc (1/70)`).Base
		s := ParseSubject(`[2/3] - "` + c.base + c.side + `" yEnc (1/1)`).Base
		if m != c.base || s != c.base {
			t.Errorf("one post, Bases %q (%s) and %q (%s); want %q", m, c.main, s, c.side, c.base)
		}
	}

	const rel = "Movie.Title.2019.1080p.BluRay.x264-GRP"
	files := []string{
		`[1/3] - "` + rel + `.mkv" yEnc (%d/%d)`,
		`[2/3] - "` + rel + `.srt" yEnc (%d/%d)`,
		`[3/3] - "` + rel + `.par2" yEnc (%d/%d)`,
	}
	rels := indexRange(t, testStore(t), "alt.binaries.moovee", postLines(files, []int{3, 1, 1}))
	if len(rels) != 1 || len(rels[0].Binaries) != 3 || !rels[0].Complete() {
		t.Fatalf("a complete post of 3 files (.mkv, .srt, .par2): %d visible releases, want 1 of 3 files:%s", len(rels), describeReleases(rels))
	}
}

// TestOldRARVolumesStayInTheirRelease: the old RAR naming goes on past
// .s99 with .t00-.t99 and .u00-.u99 (a set of more than 201 and 301
// volumes), and a PAR1 set's recovery volumes beside name.par are
// .p01-.p99. Every one is a file of the post and shares its Base, so the
// post is one release, complete. Where the same words are a title's last
// word in a post too small to hold such a volume, they stay. (Was: only
// .sNN was stripped, so each .tNN, .uNN and .pNN volume was a collection
// of its own and the post, lacking them, was never complete nor visible.)
func TestOldRARVolumesStayInTheirRelease(t *testing.T) {
	t.Parallel()
	const rel = "Movie.Title.2019.1080p.BluRay.x264-GRP"
	for _, c := range []struct {
		name        string
		file, files int
	}{
		{rel + ".t00", 202, 250}, {rel + ".T42", 244, 250}, {rel + ".t99", 301, 350},
		{rel + ".u00", 302, 350}, {rel + ".u07", 0, 0},
		{rel + ".p01", 3, 12}, {rel + ".P12", 14, 14},
	} {
		subj := fmt.Sprintf(`[%d/%d] - "%s" yEnc (1/70)`, c.file, c.files, c.name)
		if c.files == 0 {
			subj = fmt.Sprintf(`"%s" yEnc (1/70)`, c.name)
		}
		if got := ParseSubject(subj).Base; got != rel {
			t.Errorf("Base of %q = %q, want %q (the .rar and .rNN volumes' Base)", subj, got, rel)
		}
	}
	for _, c := range []struct {
		subj, want string
	}{
		// A .t00 is at least the 202nd file, a .u00 the 302nd.
		{`Show.Name.T01 [03/150] - yEnc (1/2)`, "Show.Name.T01"},
		{`Show.Name.U01 [03/250] - yEnc (1/2)`, "Show.Name.U01"},
		// Only the last extension is a volume.
		{`[1/3] - "Show.Name.P01.mkv" yEnc (1/9)`, "Show.Name.P01"},
		// Neither a letter the old naming does not reach, nor a codec.
		{`[1/900] - "Movie.2019.x26" yEnc (1/9)`, "Movie.2019.x26"},
		{`"Movie.2019.1080p.x264" yEnc (1/9)`, "Movie.2019.1080p.x264"},
	} {
		if got := ParseSubject(c.subj).Base; got != c.want {
			t.Errorf("Base of %q = %q, want %q", c.subj, got, c.want)
		}
	}

	// .rar, .r00-.r99, .s00-.s99, .t00 and .par2: 203 files.
	names := []string{rel + ".rar"}
	for _, l := range "rs" {
		for i := range 100 {
			names = append(names, fmt.Sprintf("%s.%c%02d", rel, l, i))
		}
	}
	names = append(names, rel+".t00", rel+".par2")
	files := make([]string, len(names))
	parts := make([]int, len(names))
	for i, n := range names {
		files[i] = fmt.Sprintf(`[%d/%d] - "%s" yEnc (%%d/%%d)`, i+1, len(names), n)
		parts[i] = 1
	}
	rels := indexRange(t, testStore(t), "alt.binaries.tv", postLines(files, parts))
	if len(rels) != 1 || len(rels[0].Binaries) != len(names) || !rels[0].Complete() {
		t.Fatalf("a complete post of %d files (.rar, .r00-.s99, .t00, .par2): %d visible releases, want 1 of all files:%s", len(names), len(rels), describeReleases(rels))
	}
}

// TestTaggedSubtitlesStayInTheirRelease: subtitles are posted beside a
// film under its name with a language tag and qualifiers, as players and
// Sonarr/Radarr name them (Movie.en.srt, Movie.eng.forced.srt,
// Movie.pt-BR.srt). They share the film's Base, so the post is one
// release named by the film. A title's own last word stays: a tag is a
// language code in one case (en, ENG; "It" is a word) or a qualifier.
// (Was: only the .srt was stripped, so Movie.en.srt was a release
// "Movie.en" of its own and the film's post was never complete.)
func TestTaggedSubtitlesStayInTheirRelease(t *testing.T) {
	t.Parallel()
	const rel = "Movie.Title.2019.1080p.BluRay.x264-GRP"
	for _, tag := range []string{".en", ".eng", ".EN", ".eng.forced", ".en.sdh", ".de.forced", ".pt-BR", ".pt_BR", ".zh-Hans", ".es-419", ".forced", ".en.hi", ".nl.default"} {
		for _, ext := range []string{".srt", ".ass", ".sub", ".idx", ".vtt", ".SRT"} {
			name := rel + tag + ext
			if got := ParseSubject(`[2/3] - "` + name + `" yEnc (1/1)`).Base; got != rel {
				t.Errorf("Base of %q = %q, want %q (the film's)", name, got, rel)
			}
		}
	}
	for name, want := range map[string]string{
		"Movie.Title.It.srt":           "Movie.Title.It",  // a title word, not Italian
		"Movie.Title.Dan.srt":          "Movie.Title.Dan", // a name, not Danish
		"It.srt":                       "It",              // never stripped to nothing
		"en.srt":                       "en",              // never stripped to nothing
		"Movie.Title.en.mkv":           "Movie.Title.en",  // only a subtitle's tags
		"Movie.Title.en.jpg":           "Movie.Title.en",  // only a subtitle's tags
		"Movie.Title.2019.en-GRP.srt":  "Movie.Title.2019.en-GRP",
		"Movie.Title.2019.NL-SUBS.srt": "Movie.Title.2019.NL-SUBS",
	} {
		if got := ParseSubject(`[2/3] - "` + name + `" yEnc (1/1)`).Base; got != want {
			t.Errorf("Base of %q = %q, want %q", name, got, want)
		}
	}

	files := []string{
		`[1/4] - "` + rel + `.mkv" yEnc (%d/%d)`,
		`[2/4] - "` + rel + `.en.srt" yEnc (%d/%d)`,
		`[3/4] - "` + rel + `.eng.forced.srt" yEnc (%d/%d)`,
		`[4/4] - "` + rel + `.par2" yEnc (%d/%d)`,
	}
	rels := indexRange(t, testStore(t), "alt.binaries.moovee", postLines(files, []int{3, 1, 1, 1}))
	if len(rels) != 1 || len(rels[0].Binaries) != 4 || !rels[0].Complete() || rels[0].Name != rel {
		t.Fatalf("a complete post of 4 files (.mkv, .en.srt, .eng.forced.srt, .par2): %d visible releases, want 1 of 4 files named %q:%s", len(rels), rel, describeReleases(rels))
	}
}

// TestUnmatchedNeedsNoNameAndNoPartCounter: only an article with neither
// a file name nor a valid part counter is left out. The "(1/1)" of a
// one-article file is a part counter: Unmatched used to test Parts <= 1,
// which dropped such a file of a post that names no files while its
// multi-part siblings were kept, so the post could never be complete.
func TestUnmatchedNeedsNoNameAndNoPartCounter(t *testing.T) {
	t.Parallel()
	for subject, want := range map[string]bool{
		`My Post Title [03/15] - yEnc (1/1)`: false,
		`My Post Title [04/15] - yEnc (1/3)`: false,
		`"a.nfo" yEnc`:                       false,
		`a8f7d6e5c4b3a2f1e0d9`:               true,
		`a8f7d6e5c4b3a2f1e0d9 (2/1)`:         true, // an impossible counter is none
	} {
		line := fmt.Sprintf("1\t%s\tposter@example.com\tMon, 01 Jan 2024 10:00:00 +0000\t<a1@post>\t\t700000\t5000", subject)
		a, err := ParseArticle([]byte(line), "alt.binaries.tv")
		if err != nil {
			t.Fatal(err)
		}
		if got := Unmatched(a); got != want {
			t.Errorf("Unmatched(%q) = %v, want %v (subject parsed as %+v)", subject, got, want, a.Subject)
		}
	}
}

func BenchmarkParseSubject(b *testing.B) {
	subjects := []string{
		`Some.Show.S01E02.720p.WEB-GRP [01/15] - "Some.Show.S01E02.720p.WEB-GRP.part01.rar" yEnc (1/50) 35651584`,
		`[42/50] - "name.r40" yEnc (12/14)`,
		`name.part01.rar (1/50)`,
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ParseSubject(subjects[i%len(subjects)])
	}
}
