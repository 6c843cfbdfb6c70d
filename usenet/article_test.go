package usenet

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/work"
)

func TestParseDate(t *testing.T) {
	t.Parallel()
	at := func(y int, mo time.Month, d, h, mi, s int, offset int) int64 {
		return time.Date(y, mo, d, h, mi, s, 0, time.UTC).Unix() - int64(offset)
	}
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"Thu, 01 Jan 2026 00:00:07 +0000", at(2026, 1, 1, 0, 0, 7, 0)},
		{"01 Jan 2026 00:00:07 +0000", at(2026, 1, 1, 0, 0, 7, 0)},
		{"Thu, 1 Jan 2026 00:00:07 +0000", at(2026, 1, 1, 0, 0, 7, 0)},
		{"  Sat, 7 Mar 2026 14:05 -0130", at(2026, 3, 7, 14, 5, 0, -5400)},
		{"Thu, 01 Jan 2026 00:00:07 GMT", at(2026, 1, 1, 0, 0, 7, 0)},
		{"Thu, 01 Jan 2026 00:00:07 UTC", at(2026, 1, 1, 0, 0, 7, 0)},
		{"Thu, 01 Jan 2026 00:00:07 EST", at(2026, 1, 1, 0, 0, 7, -5*3600)},
		{"Thu, 01 Jan 2026 00:00:07 pdt", at(2026, 1, 1, 0, 0, 7, -7*3600)},
		{"Thu, 01 Jan 2026 00:00:07 +0000 (UTC)", at(2026, 1, 1, 0, 0, 7, 0)},
		{"Thu, 01 Jan 2026 00:00:07 +0200 (CEST)", at(2026, 1, 1, 0, 0, 7, 7200)},
		{"Thu, 01 Jan 2026 00:00:07", at(2026, 1, 1, 0, 0, 7, 0)},
		{"1 JAN 26 00:00:07 +0000", at(2026, 1, 1, 0, 0, 7, 0)},
		{"1 Jan 99 00:00:07 +0000", at(1999, 1, 1, 0, 0, 7, 0)},
		{"31 Dec 2025 23:59:60 +0000", at(2025, 12, 31, 23, 59, 59, 0)},
		{"Thu, 01 Jan 2026 00:00:07 J", at(2026, 1, 1, 0, 0, 7, 0)}, // military: +0000
		// Unparseable: 0.
		{"", 0},
		{"yesterday", 0},
		{"31 Feb 2026 00:00:00 +0000", 0},
		{"01 Foo 2026 00:00:00 +0000", 0},
		{"01 Jan 2026 24:00:00 +0000", 0},
		{"01 Jan 2026 00:00:00 +0099", 0},
		{"01 Jan 2026 00:00:00 +0000 trailing", 0},
		{"2026-01-01T00:00:07Z", 0},
		{"Thu, 001 Jan 2026 00:00:07 +0000", 0},
	} {
		if got := ParseDate(c.in); got != c.want {
			t.Errorf("ParseDate(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// articleCases are overview lines; fuzz_test.go seeds its corpus with them.
var articleCases = []struct {
	name  string
	line  string
	group string
	want  Article
	err   bool
}{
	{"full", "1234\tSome.Show [01/15] - \"a.part01.rar\" yEnc (1/50) 716800\tposter <p@x.example>\tThu, 01 Jan 2026 00:00:07 +0000\t<part1of50@x.example>\t\t740000\t5603\tXref: news.example alt.binaries.tv:1234 alt.binaries.hdtv:99 alt.binaries.tv:1234",
		"alt.binaries.tv", Article{
			Number: 1234, RawSubject: `Some.Show [01/15] - "a.part01.rar" yEnc (1/50) 716800`,
			Subject: Subject{Name: "a.part01.rar", Part: 1, Parts: 50, Counter: true, File: 1, Files: 15, Binary: `Some.Show [01/15] - "a.part01.rar" yEnc`, Base: "Some.Show"},
			From:    "poster <p@x.example>", Date: 1767225607, MessageID: "part1of50@x.example", Bytes: 740000,
			Groups: []string{"alt.binaries.hdtv", "alt.binaries.tv"},
		}, false},
	{"no xref, MIME, bad date", "7\t=?UTF-8?Q?Caf=C3=A9?= \"c.nfo\" yEnc (1/1)\t=?ISO-8859-1?Q?J=F6rg?= <j@x>\tsometime\t<m@x>\t\t\t",
		"alt.binaries.test", Article{
			Number: 7, RawSubject: `Café "c.nfo" yEnc (1/1)`,
			Subject: Subject{Name: "c.nfo", Part: 1, Parts: 1, Counter: true, Binary: `Café "c.nfo" yEnc`, Base: "Café"},
			From:    "Jörg <j@x>", MessageID: "m@x", Groups: []string{"alt.binaries.test"},
		}, false},
	{"xref without the group read", "8\ts (1/2)\tf\t1 Jan 2026 00:00:07 GMT\t<m2@x>\tr\t10\t1\tXref: h b.group:3",
		"a.group", Article{
			Number: 8, RawSubject: "s (1/2)", Subject: Subject{Part: 1, Parts: 2, Counter: true, Binary: "s", Base: "s"},
			From: "f", Date: 1767225607, MessageID: "m2@x", Bytes: 10, Groups: []string{"a.group", "b.group"},
		}, false},
	{"no message-id", "9\ts\tf\td\t\t\t1\t1", "g", Article{}, true},
	{"blank message-id", "9\ts\tf\td\t <> \t\t1\t1", "g", Article{}, true},
	{"not an overview line", "garbage", "g", Article{}, true},
	{"too few fields", "9\ts\tf\td\t<m@x>", "g", Article{}, true},
	{"bad bytes", "9\ts\tf\td\t<m@x>\t\tmany\t1", "g", Article{}, true},
}

func TestParseArticle(t *testing.T) {
	t.Parallel()
	for _, c := range articleCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseArticle([]byte(c.line), c.group)
			if c.err {
				if !errors.Is(err, ErrBadArticle) {
					t.Fatalf("err = %v, want ErrBadArticle", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Groups, c.want.Groups) {
				t.Errorf("Groups %q, want %q", got.Groups, c.want.Groups)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestMIMEUndecodableWordLeftAlone: of a subject's or poster's encoded
// words, only one that cannot be decoded is left as posted: a word in a
// charset the decoder does not know (ISO-8859-2, common in Polish and
// Czech posts, or KOI8-R) keeps its encoding, the UTF-8 words beside it
// are decoded. (Was: mime.WordDecoder's DecodeHeader fails as a whole on
// an unknown charset and decodeMIME then kept the whole text as posted,
// so the file was named "=?UTF-8?Q?Caf=C3=A9.mkv?=".)
func TestMIMEUndecodableWordLeftAlone(t *testing.T) {
	t.Parallel()
	const latin2 = `=?ISO-8859-2?Q?Ksi=B1=BFka?=`
	s := ParseSubject(latin2 + ` [1/2] - "=?UTF-8?Q?Caf=C3=A9.mkv?=" yEnc (1/3)`)
	if s.Name != "Café.mkv" || s.Base != latin2 {
		t.Errorf("Name %q, Base %q; want the UTF-8 word decoded (Café.mkv) and the ISO-8859-2 word left as posted (%s)", s.Name, s.Base, latin2)
	}
	a, err := ParseArticle([]byte("1\t"+`=?UTF-8?Q?Caf=C3=A9?= [1/2] - "x.mkv" yEnc (1/3)`+"\t=?UTF-8?Q?J=C3=BCrgen?= =?KOI8-R?B?8NLJ18XU?= <j@example.com>\tMon, 01 Jan 2024 10:00:00 +0000\t<a@b>\t\t700000\t5000"), "alt.binaries.x")
	if err != nil {
		t.Fatal(err)
	}
	if a.RawSubject != `Café [1/2] - "x.mkv" yEnc (1/3)` {
		t.Errorf("subject %q, want its UTF-8 word decoded", a.RawSubject)
	}
	// A word left as posted keeps the space beside it; between two decoded
	// words the space goes (RFC 2047 6.2).
	if a.From != "Jürgen =?KOI8-R?B?8NLJ18XU?= <j@example.com>" {
		t.Errorf("From %q, want the UTF-8 word decoded (Jürgen) and the KOI8-R one as posted", a.From)
	}
	for in, want := range map[string]string{
		"=?UTF-8?Q?a?= =?UTF-8?Q?b?= =?X-UNKNOWN?Q?c?=":                             "ab =?X-UNKNOWN?Q?c?=",
		"=?X-UNKNOWN?Q?c?= =?UTF-8?Q?a?=\t=?UTF-8?Q?b?= z":                          "=?X-UNKNOWN?Q?c?= ab z",
		"x =?X-UNKNOWN?Q?c?==?UTF-8?B?w6k=?= =?UTF-8?Q?bad=ZZ?= =?UTF-8?Q?=C3=A9?=": "x =?X-UNKNOWN?Q?c?=é =?UTF-8?Q?bad=ZZ?= é",
	} {
		if got := decodeMIME(in); got != want {
			t.Errorf("decodeMIME(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkParseArticle(b *testing.B) {
	line := []byte(articleCases[0].line)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseArticle(line, "alt.binaries.tv"); err != nil {
			b.Fatal(err)
		}
	}
}

// (Was: a message-id of any length, up to the 64 KiB of an overview line, was
// indexed: each segment kept it in its binary's record, merges and NZBs.)
func TestMessageIDOver250BytesIsBad(t *testing.T) {
	t.Parallel()
	line := func(n int, id string) []byte {
		return fmt.Appendf(nil, "%d\tPost [1/1] - \"Post.mkv\" yEnc (%d/3)\tp@example.com\tSat, 14 Nov 2023 22:13:20 +0000\t<%s>\t\t700000\t5000", n, n, id)
	}
	// 250 bytes with the angle brackets is the most RFC 3977 allows.
	atLimit := strings.Repeat("a", 248-len("@x")) + "@x"
	over := "b" + atLimit
	var p ArticleParser
	for i, c := range []struct {
		id string
		ok bool
	}{{atLimit, true}, {over, false}, {atLimit, true}, {over, false}} {
		l := line(i+1, c.id)
		for name, parse := range map[string]func([]byte, string) (Article, error){"ParseArticle": ParseArticle, "ArticleParser": p.Parse} {
			a, err := parse(l, "alt.binaries.a")
			switch {
			case c.ok && (err != nil || a.MessageID != c.id):
				t.Errorf("%s of a message-id of %d bytes: one of %d bytes, %v; want it read", name, len(c.id)+2, len(a.MessageID), err)
			case !c.ok && !errors.Is(err, ErrBadArticle):
				t.Errorf("%s of a message-id of %d bytes: one of %d bytes, %v; want ErrBadArticle", name, len(c.id)+2, len(a.MessageID), err)
			}
		}
	}

	// The indexer counts it as it counts every bad line: skipped.
	st := testStore(t)
	ix := &Indexer{Store: st, Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
	ri, err := ix.Begin(t.Context(), work.Range{Group: "alt.binaries.a", First: 1, Last: 3})
	if err != nil {
		t.Fatal(err)
	}
	for n, id := range []string{"1@x", over, "3@x"} {
		if err := ri.Line(t.Context(), int64(n+1), line(n+1, id)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := ri.End(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var res RangeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 1 || res.Articles != 2 {
		t.Errorf("range result %+v, want 1 skipped and 2 articles", res)
	}
}
