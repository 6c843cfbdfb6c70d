package usenet

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/nntp"
)

// lastPart matches the last "(p/t)" of a subject, to number other parts of
// the same file.
var lastPart = regexp.MustCompile(`^(.*)\((\d+)/(\d+)\)`)

// xrefNumbers matches the article numbers of an Xref, which change from
// line to line while the groups stay.
var xrefNumbers = regexp.MustCompile(`:\d+`)

// withPart returns subject with its last "(p/t)" made "(p/t)" of the
// given numbers, or with " (p/t)" appended when it has none.
func withPart(subject string, p, t int) string {
	m := lastPart.FindStringSubmatchIndex(subject)
	if m == nil {
		return fmt.Sprintf("%s (%d/%d)", subject, p, t)
	}
	return fmt.Sprintf("%s(%d/%d)%s", subject[:m[3]], p, t, subject[m[1]:])
}

// withTime returns date with its first "hh:mm:ss" replaced by secs, as
// written "hh:mm:ss" (possibly out of range: 24:00:00, 23:59:60).
func withTime(date string, secs int) string {
	re := regexp.MustCompile(`\d\d:\d\d:\d\d`)
	loc := re.FindStringIndex(date)
	if loc == nil {
		return date
	}
	return fmt.Sprintf("%s%02d:%02d:%02d%s", date[:loc[0]], secs/3600, secs/60%60, secs%60, date[loc[1]:])
}

var (
	parserFroms = []string{"poster <p@x.example>", " spaced <s@x> ", "=?ISO-8859-1?Q?J=F6rg?= <j@x>", "", "\u00a0nbsp@x\u00a0"}
	parserDates = []string{
		"Thu, 01 Jan 2026 00:00:07 +0000", "01 Jan 2026 23:59:59 -0130", "Thu, 1 Jan 2026 00:00:07 +0000",
		"Sat, 7 Mar 2026 14:05 -0130", "Thu, 01 Jan 2026 00:00:07 GMT (UTC)", "31 Dec 2025 23:59:60 +0000",
		"1 JAN 26 00:00:07 +0000", "31 Feb 2026 00:00:00 +0000", "yesterday", "", "Thu, 01 Jan 2026 00:00:07",
		"Thu, 01 Jan 2026 00:00:07 +0000 trailing",
	}
	parserXrefs = []string{
		"", "\tXref: h alt.binaries.tv:1", "\tXref: h alt.binaries.tv:1 alt.binaries.hdtv:2", "\tXREF:  h  b.group:3 ",
		"\tXref: h a.group:1\u00a0b.group:2", "\tX-Other: y\tXref: h c.group:9", "\tXref: h", "\tXref: h :1 x:y:2",
	}
	parserIDs = []string{"<m@x>", " <m@x> ", "<\u00a0m@x>", "<>", "m@x", "<a b@x>"}
)

// randomLine builds an overview line of one of the table subjects with a
// part counter, date, poster, Xref and message-id drawn from variants
// that reach both the memoized and the general paths.
func randomLine(rng *rand.Rand, n int) string {
	subj := subjectCases[rng.IntN(len(subjectCases))].in
	if rng.IntN(4) > 0 {
		t := 1 + rng.IntN(60)
		subj = withPart(subj, rng.IntN(t+2), t)
	}
	date := parserDates[rng.IntN(len(parserDates))]
	if rng.IntN(2) == 0 {
		date = withTime(date, rng.IntN(86400+2))
	}
	id := parserIDs[0]
	if rng.IntN(8) == 0 {
		id = parserIDs[rng.IntN(len(parserIDs))]
	}
	size := strconv.Itoa(rng.IntN(1 << 20))
	switch rng.IntN(16) {
	case 0:
		size = ""
	case 1:
		size = " 12 "
	case 2:
		size = "x"
	}
	line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t\t%s\t%d%s", n, subj, parserFroms[rng.IntN(len(parserFroms))], date, id, size, rng.IntN(5000), parserXrefs[rng.IntN(len(parserXrefs))])
	if rng.IntN(40) == 0 {
		line = strings.Replace(line, "\t", " ", 1+rng.IntN(3)) // too few fields, bad number
	}
	return line
}

// checkParser parses lines with one ArticleParser and fails on the first
// result that differs from ParseArticle's.
func checkParser(t *testing.T, p *ArticleParser, lines []string, group string) {
	t.Helper()
	for _, l := range lines {
		want, wantErr := ParseArticle([]byte(l), group)
		got, gotErr := p.Parse([]byte(l), group)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("line %q (group %q):\n got %+v, %v\nwant %+v, %v", l, group, got, gotErr, want, wantErr)
		}
	}
}

// TestArticleParserMatchesParseArticle runs random sequences of lines
// through one parser: runs of the parts of one file (the memoized path),
// files interleaved, lines repeated, odd lines between.
func TestArticleParserMatchesParseArticle(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	groups := []string{"alt.binaries.tv", "a.group", ""}
	for range 300 {
		var p ArticleParser
		group := groups[rng.IntN(len(groups))]
		var lines []string
		// Files in progress: consecutive parts of each, and its date.
		type file struct {
			subj, from, date, xref string
			part, parts, secs      int
		}
		var files []*file
		for n := 1; n <= 200; n++ {
			switch r := rng.IntN(20); {
			case r == 0 || len(files) == 0:
				line := randomLine(rng, n)
				lines = append(lines, line)
				f := strings.Split(line, "\t")
				if len(f) >= 8 {
					xref := ""
					if len(f) > 8 {
						xref = "\t" + strings.Join(f[8:], "\t")
					}
					files = append(files, &file{subj: f[1], from: f[2], date: f[3], xref: xref, parts: 1 + rng.IntN(60), secs: rng.IntN(86400)})
				}
			case r == 1 && len(lines) > 0: // a repeat
				lines = append(lines, lines[rng.IntN(len(lines))])
			default: // the next part of a file in progress
				f := files[len(files)-1]
				if rng.IntN(4) == 0 {
					f = files[rng.IntN(len(files))]
				}
				f.part++
				f.secs += rng.IntN(20)
				lines = append(lines, fmt.Sprintf("%d\t%s\t%s\t%s\t<p%d.%d@x>\t\t%d\t%d%s", n, withPart(f.subj, f.part, f.parts), f.from, withTime(f.date, f.secs), n, f.part, 700000+n, 5000, xrefNumbers.ReplaceAllString(f.xref, ":"+strconv.Itoa(n))))
			}
		}
		checkParser(t, &p, lines, group)
	}
}

func TestArticleParserGroupsShared(t *testing.T) {
	t.Parallel()
	var p ArticleParser
	l1 := "1\t\"a.rar\" yEnc (1/2)\tf\td\t<m1@x>\t\t1\t1\tXref: h g:1"
	l2 := "2\t\"a.rar\" yEnc (2/2)\tf\td\t<m2@x>\t\t1\t1\tXref: h g:2"
	a1, _ := p.Parse([]byte(l1), "g")
	a2, _ := p.Parse([]byte(l2), "g")
	if &a1.Groups[0] != &a2.Groups[0] {
		t.Errorf("groups of the same Xref are not shared")
	}
	// The shared slice is clipped: appending to one article's groups must
	// not change the next article's.
	_ = append(a1.Groups, "zzz")
	a3, _ := p.Parse([]byte(l2), "g")
	if got := append(a3.Groups, "x"); len(a2.Groups) != 1 || got[0] != "g" {
		t.Errorf("groups %q after an append", a2.Groups)
	}
}

// FuzzArticleParser: a line, then another part of the same file a little
// later (the memoized path), then an unrelated line, parse as ParseArticle
// parses each.
func FuzzArticleParser(f *testing.F) {
	for i, c := range articleCases {
		f.Add([]byte(c.line), []byte(articleCases[(i+1)%len(articleCases)].line), c.group, uint16(i+2), uint16(50), uint32(i*3000))
	}
	for i, c := range subjectCases {
		line := fmt.Sprintf("%d\t%s\tf\t%s\t<m@x>\t\t1\t1\tXref: h g:1", i+1, c.in, parserDates[i%len(parserDates)])
		f.Add([]byte(line), []byte("garbage"), "g", uint16(i), uint16(i+3), uint32(86399))
	}
	f.Fuzz(func(t *testing.T, line, other []byte, group string, part, parts uint16, secs uint32) {
		lines := []string{string(line)}
		if fs := strings.Split(string(line), "\t"); len(fs) >= 4 {
			fs[1] = withPart(fs[1], int(part), int(parts))
			fs[3] = withTime(fs[3], int(secs%(86400+2)))
			for i := 8; i < len(fs); i++ {
				fs[i] = xrefNumbers.ReplaceAllString(fs[i], ":"+strconv.Itoa(int(part)))
			}
			lines = append(lines, strings.Join(fs, "\t"))
		}
		lines = append(lines, string(other), string(line))
		var p ArticleParser
		checkParser(t, &p, lines, group)
	})
}

func BenchmarkArticleParser(b *testing.B) {
	// Lines shaped like the test server's: 50 parts per file, one date
	// string per second.
	lines := make([][]byte, 1000)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range lines {
		name := fmt.Sprintf("harbor.atlas.S0%dE%d-x1y2", i/200+1, i/200+10)
		lines[i] = fmt.Appendf(nil, "%d\t%s - \"%s.part%02d.rar\" yEnc (%d/50) 35840000\tAnonymous <anon@example.invalid>\t%s\t<part%dof50.%d.%d.abc@nntptest.invalid>\t\t732000\t5603\tXref: nntptest alt.binaries.tv:%d",
			i+1, name, name, i/50%4+1, i%50+1, base.Add(time.Duration(i)*7*time.Second).Format(time.RFC1123Z), i%50+1, i/50%4+1, i+1, i+1)
	}
	// The floor: only splitting the fields into strings, as
	// nntp.ParseOverview does for ParseArticle.
	b.Run("ParseOverview", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := nntp.ParseOverview(lines[i%len(lines)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("ParseArticle", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := ParseArticle(lines[i%len(lines)], "alt.binaries.tv"); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("ArticleParser", func(b *testing.B) {
		b.ReportAllocs()
		var p ArticleParser
		i := 0
		for b.Loop() {
			if _, err := p.Parse(lines[i%len(lines)], "alt.binaries.tv"); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
