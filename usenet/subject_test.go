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
