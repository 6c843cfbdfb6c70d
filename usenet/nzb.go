package usenet

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
)

// NZB 1.1 identifiers: every downloader recognises the file by them.
const (
	NZBNamespace = "http://www.newzbin.com/DTD/2003/nzb"
	NZBDoctype   = `<!DOCTYPE nzb PUBLIC "-//newzBin//DTD NZB 1.1//EN" "http://www.newzbin.com/DTD/nzb/nzb-1.1.dtd">`
	// NZBContentType is the MIME type an NZB is served with.
	NZBContentType = "application/x-nzb"
)

// The XML shapes of NZB 1.1, as written.
type (
	nzbDoc struct {
		XMLName xml.Name  `xml:"http://www.newzbin.com/DTD/2003/nzb nzb"`
		Meta    []nzbMeta `xml:"head>meta"`
		Files   []nzbFile `xml:"file"`
	}
	nzbMeta struct {
		Type  string `xml:"type,attr"`
		Value string `xml:",chardata"`
	}
	nzbFile struct {
		Poster   string       `xml:"poster,attr"`
		Date     int64        `xml:"date,attr"`
		Subject  string       `xml:"subject,attr"`
		Groups   []string     `xml:"groups>group"`
		Segments []nzbSegment `xml:"segments>segment"`
	}
	nzbSegment struct {
		Bytes  int64  `xml:"bytes,attr"`
		Number int    `xml:"number,attr"`
		ID     string `xml:",chardata"`
	}
)

// WriteNZB writes the NZB 1.1 file of r made of bins: its title and
// category in the head, then one file per binary. Data files come first,
// ordered by file counter and name, then the .par2 files smallest first, so
// that a downloader that fetches in order has the data before the repair
// volumes it may not need. Each part number is written once: when a part
// was posted more than once (reposts), its first segment in bins wins.
func WriteNZB(w io.Writer, r Release, bins []Binary) error {
	doc := nzbDoc{Meta: []nzbMeta{{Type: "title", Value: r.Name}}}
	if name := CategoryName(r.Category); name != "" {
		doc.Meta = append(doc.Meta, nzbMeta{Type: "category", Value: name})
	}
	for _, b := range nzbOrder(realNames(r, bins)) {
		doc.Files = append(doc.Files, nzbFile{
			Poster:   b.Poster,
			Date:     b.Date,
			Subject:  b.Subject,
			Groups:   b.Groups,
			Segments: nzbSegments(b.Segments),
		})
	}
	if _, err := io.WriteString(w, xml.Header+NZBDoctype+"\n"); err != nil {
		return fmt.Errorf("write nzb: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", " ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write nzb %s: %w", r.ID, err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write nzb: %w", err)
	}
	return nil
}

// realNames gives the binaries post-processing named (FileSummary.Posted)
// their real names, in their subjects too: a downloader names a file by
// the quoted name of its subject. bins is not changed.
func realNames(r Release, bins []Binary) []Binary {
	var out []Binary
	for _, f := range r.Binaries {
		if f.Posted == "" {
			continue
		}
		if out == nil {
			out = slices.Clone(bins)
		}
		for i := range out {
			if out[i].ID != f.ID {
				continue
			}
			out[i].Name = f.Name
			switch q := `"` + f.Posted + `"`; {
			case strings.Contains(out[i].Subject, q):
				out[i].Subject = strings.Replace(out[i].Subject, q, `"`+f.Name+`"`, 1)
			case strings.Contains(out[i].Subject, f.Posted):
				out[i].Subject = strings.Replace(out[i].Subject, f.Posted, f.Name, 1)
			default:
				out[i].Subject = `"` + f.Name + `" ` + out[i].Subject
			}
		}
	}
	if out == nil {
		return bins
	}
	return out
}

// nzbOrder returns bins in NZB order without changing bins.
func nzbOrder(bins []Binary) []Binary {
	out := slices.Clone(bins)
	slices.SortStableFunc(out, func(a, b Binary) int {
		pa, pb := isPar2(a.Name), isPar2(b.Name)
		switch {
		case pa != pb:
			if pa {
				return 1
			}
			return -1
		case pa:
			return cmp.Or(cmp.Compare(binaryBytes(a), binaryBytes(b)), cmp.Compare(a.Name, b.Name))
		default:
			return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Name, b.Name))
		}
	})
	return out
}

func isPar2(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".par2") }

func binaryBytes(b Binary) int64 {
	var n int64
	for _, s := range b.Segments {
		n = addBytes(n, s.Bytes)
	}
	return n
}

// nzbSegments orders segs by part number and keeps the first segment of
// each number in slice order.
func nzbSegments(segs []Segment) []nzbSegment {
	sorted := slices.Clone(segs)
	slices.SortStableFunc(sorted, func(a, b Segment) int { return cmp.Compare(a.Number, b.Number) })
	out := make([]nzbSegment, 0, len(sorted))
	for i, s := range sorted {
		if i > 0 && sorted[i-1].Number == s.Number {
			continue
		}
		out = append(out, nzbSegment{Bytes: s.Bytes, Number: s.Number, ID: strings.TrimSuffix(strings.TrimPrefix(s.ID, "<"), ">")})
	}
	return out
}

// NZBFileName is the file name to offer r's NZB under (Content-Disposition):
// its name with every character outside [A-Za-z0-9._-] turned into '_',
// at most 200 bytes, ending in ".nzb". A release with no usable name is
// named by its ID.
func NZBFileName(r Release) string {
	name := safeName(r.Name)
	if name == "" {
		name = safeName(r.ID)
	}
	if name == "" {
		name = "release"
	}
	return name + ".nzb"
}

func safeName(s string) string {
	var b strings.Builder
	lastUnderscore := false
	for _, c := range s {
		ok := c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-')
		if !ok {
			// Runs of unsafe characters become one '_' so that a name of
			// spaces and brackets stays readable.
			if !lastUnderscore {
				b.WriteByte('_')
			}
			lastUnderscore = true
			continue
		}
		b.WriteRune(c)
		lastUnderscore = false
	}
	out := strings.Trim(b.String(), "._-")
	if len(out) > 200 {
		out = strings.TrimRight(out[:200], "._-")
	}
	return out
}

// PostBinaries trims bins (the binaries of r's files, in r.Binaries'
// order) to the copies that belong to r's post: the segments posted
// between each file's From and To. A binary posted twice alike holds
// both copies; the NZB of each post lists its own only. A record written
// before copies had dates (all zero) keeps every segment.
func PostBinaries(r Release, bins []Binary) []Binary {
	out := make([]Binary, 0, len(bins))
	for i, b := range bins {
		if i >= len(r.Binaries) || r.Binaries[i].ID != b.ID {
			out = append(out, b)
			continue
		}
		f := r.Binaries[i]
		b.Segments = slices.DeleteFunc(slices.Clone(b.Segments), func(s Segment) bool { return s.Date < f.From || s.Date > f.To })
		if len(b.Segments) > 0 && f.From != 0 {
			b.Date = f.From // the copy's, not the binary's first
		}
		out = append(out, b)
	}
	return out
}
