package usenet_test

import (
	"bytes"
	"encoding/xml"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/usenet"
)

// The NZB 1.1 shapes as a downloader reads them: namespaced, so a file
// without the namespace decodes to nothing and fails the checks.
type specNZB struct {
	XMLName xml.Name   `xml:"http://www.newzbin.com/DTD/2003/nzb nzb"`
	Meta    []specMeta `xml:"http://www.newzbin.com/DTD/2003/nzb head>meta"`
	Files   []specFile `xml:"http://www.newzbin.com/DTD/2003/nzb file"`
}

type specMeta struct {
	Type  string `xml:"type,attr"`
	Value string `xml:",chardata"`
}

type specFile struct {
	Poster   string        `xml:"poster,attr"`
	Date     int64         `xml:"date,attr"`
	Subject  string        `xml:"subject,attr"`
	Groups   []string      `xml:"http://www.newzbin.com/DTD/2003/nzb groups>group"`
	Segments []specSegment `xml:"http://www.newzbin.com/DTD/2003/nzb segments>segment"`
}

type specSegment struct {
	Bytes  int64  `xml:"bytes,attr"`
	Number int    `xml:"number,attr"`
	ID     string `xml:",chardata"`
}

func decodeNZB(t *testing.T, data []byte) specNZB {
	t.Helper()
	var doc specNZB
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("decode nzb: %v\n%s", err, data)
	}
	return doc
}

func writeNZB(t *testing.T, r usenet.Release, bins []usenet.Binary) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := usenet.WriteNZB(&buf, r, bins); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriteNZBStructure(t *testing.T) {
	t.Parallel()
	r := usenet.Release{ID: "r1", Name: "Some.Show.S01E02.720p", Category: usenet.CatTVHD}
	seg := func(n int, id string) usenet.Segment { return usenet.Segment{Number: n, Bytes: int64(100 * n), ID: id} }
	bins := []usenet.Binary{
		{ID: "p2", Name: "show.vol03+04.par2", Poster: "p@x", Subject: "s par2 big", Date: 30, Groups: []string{"a.b.tv"},
			Segments: []usenet.Segment{seg(1, "v1@x"), seg(2, "v2@x")}},
		{ID: "r2", Name: "show.part2.rar", File: 2, Poster: "p@x", Subject: "s rar 2", Date: 20, Groups: []string{"a.b.tv", "a.b.hd"},
			Segments: []usenet.Segment{seg(2, "b2@x"), seg(1, "b1@x")}},
		{ID: "p1", Name: "show.par2", Poster: "p@x", Subject: "s par2", Date: 30, Groups: []string{"a.b.tv"},
			Segments: []usenet.Segment{seg(1, "q1@x")}},
		{ID: "r1", Name: "show.part1.rar", File: 1, Poster: "p@x", Subject: "s rar 1", Date: 10, Groups: []string{"a.b.tv"},
			// Part 1 posted twice: the first in slice order wins.
			Segments: []usenet.Segment{seg(1, "<a1@x>"), seg(2, "a2@x"), {Number: 1, Bytes: 7, ID: "repost@x"}}},
		{ID: "n", Name: "show.nfo", Poster: "p@x", Subject: "s nfo", Date: 5, Groups: []string{"a.b.tv"},
			Segments: []usenet.Segment{seg(1, "n1@x")}},
	}
	out := writeNZB(t, r, bins)
	text := string(out)
	for _, want := range []string{
		`<?xml version="1.0" encoding="UTF-8"?>` + "\n",
		usenet.NZBDoctype + "\n",
		`<nzb xmlns="http://www.newzbin.com/DTD/2003/nzb">`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("nzb lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasPrefix(text, `<?xml`) {
		t.Errorf("nzb does not start with the XML declaration")
	}
	doc := decodeNZB(t, out)
	wantMeta := []specMeta{{"title", "Some.Show.S01E02.720p"}, {"category", "TV > HD"}}
	if !reflect.DeepEqual(doc.Meta, wantMeta) {
		t.Errorf("meta = %+v, want %+v", doc.Meta, wantMeta)
	}
	var subjects []string
	for _, f := range doc.Files {
		subjects = append(subjects, f.Subject)
	}
	// File 0 (no counter) sorts before 1 and 2; par2 files last, smallest first.
	wantOrder := []string{"s nfo", "s rar 1", "s rar 2", "s par2", "s par2 big"}
	if !reflect.DeepEqual(subjects, wantOrder) {
		t.Errorf("file order = %q, want %q", subjects, wantOrder)
	}
	rar1 := doc.Files[1]
	wantSegs := []specSegment{{100, 1, "a1@x"}, {200, 2, "a2@x"}}
	if !reflect.DeepEqual(rar1.Segments, wantSegs) {
		t.Errorf("rar1 segments = %+v, want %+v", rar1.Segments, wantSegs)
	}
	if rar1.Date != 10 || rar1.Poster != "p@x" {
		t.Errorf("rar1 = %+v", rar1)
	}
	rar2 := doc.Files[2]
	if !reflect.DeepEqual(rar2.Groups, []string{"a.b.tv", "a.b.hd"}) {
		t.Errorf("rar2 groups = %q", rar2.Groups)
	}
	if rar2.Segments[0].Number != 1 || rar2.Segments[1].Number != 2 {
		t.Errorf("rar2 segments not in part order: %+v", rar2.Segments)
	}
	// The input is not reordered.
	if bins[0].ID != "p2" || bins[3].Segments[0].ID != "<a1@x>" {
		t.Errorf("WriteNZB changed its input")
	}
}

func TestWriteNZBEscapes(t *testing.T) {
	t.Parallel()
	nasty := `<a & "b" 'c'>`
	r := usenet.Release{ID: "r", Name: "Name " + nasty, Category: usenet.CatOtherMisc}
	bins := []usenet.Binary{{
		ID: "b", Name: "f.bin", Poster: "Po <s&t> \"er\"", Subject: "Subj " + nasty + " (1/1)", Date: 1700000000,
		Groups:   []string{"alt.binaries.x&y"},
		Segments: []usenet.Segment{{Number: 1, Bytes: 5, ID: `<part1&"x"<y>@host>`}},
	}}
	doc := decodeNZB(t, writeNZB(t, r, bins))
	if len(doc.Files) != 1 {
		t.Fatalf("files = %d, want 1", len(doc.Files))
	}
	f := doc.Files[0]
	if f.Poster != bins[0].Poster || f.Subject != bins[0].Subject || f.Date != 1700000000 {
		t.Errorf("file = %+v, want poster %q subject %q", f, bins[0].Poster, bins[0].Subject)
	}
	if got := f.Segments[0].ID; got != `part1&"x"<y>@host` {
		t.Errorf("message-id = %q", got)
	}
	if f.Groups[0] != "alt.binaries.x&y" {
		t.Errorf("group = %q", f.Groups[0])
	}
	if doc.Meta[0].Value != r.Name {
		t.Errorf("title = %q, want %q", doc.Meta[0].Value, r.Name)
	}
}

func TestWriteNZBEmptyAndUnknownCategory(t *testing.T) {
	t.Parallel()
	doc := decodeNZB(t, writeNZB(t, usenet.Release{ID: "r", Name: "x", Category: 4242}, nil))
	if len(doc.Files) != 0 {
		t.Errorf("files = %d", len(doc.Files))
	}
	if len(doc.Meta) != 1 || doc.Meta[0].Type != "title" {
		t.Errorf("meta = %+v: an unknown category writes no category meta", doc.Meta)
	}
}

func TestNZBFileName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, id, want string }{
		{"Some.Show.S01E02.720p-GRP", "x", "Some.Show.S01E02.720p-GRP.nzb"},
		{`My "Film" (2020) [1/3] / \ :`, "x", "My_Film_2020_1_3.nzb"},
		{"", "abc123", "abc123.nzb"},
		{`"\/`, "", "release.nzb"},
		{"Ünïcode name", "x", "n_code_name.nzb"},
		{strings.Repeat("a", 300), "x", strings.Repeat("a", 200) + ".nzb"},
	} {
		got := usenet.NZBFileName(usenet.Release{Name: tc.name, ID: tc.id})
		if got != tc.want {
			t.Errorf("NZBFileName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
