package testnzbget

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/testpost"
)

// writeNZB writes an NZB 1.1 file for posted, as an indexer would. The
// real writer lives with the indexer; this one only lets the harness be
// tested without it.
func writeNZB(w io.Writer, title string, posted []testpost.Posted) error {
	esc := func(s string) string {
		var b strings.Builder
		xml.EscapeText(&b, []byte(s))
		return strings.ReplaceAll(b.String(), `"`, "&quot;")
	}
	var b strings.Builder
	b.WriteString(xml.Header)
	b.WriteString(`<!DOCTYPE nzb PUBLIC "-//newzBin//DTD NZB 1.1//EN" "http://www.newzbin.com/DTD/nzb/nzb-1.1.dtd">` + "\n")
	b.WriteString(`<nzb xmlns="http://www.newzbin.com/DTD/2003/nzb">` + "\n")
	fmt.Fprintf(&b, " <head>\n  <meta type=\"title\">%s</meta>\n </head>\n", esc(title))
	for _, p := range posted {
		fmt.Fprintf(&b, " <file poster=\"%s\" date=\"%d\" subject=\"%s\">\n  <groups>\n", esc(p.Poster), p.Date.Unix(), esc(p.Subject))
		for _, g := range p.Groups {
			fmt.Fprintf(&b, "   <group>%s</group>\n", esc(g))
		}
		b.WriteString("  </groups>\n  <segments>\n")
		for _, s := range p.Parts {
			id := strings.TrimSuffix(strings.TrimPrefix(s.MessageID, "<"), ">")
			fmt.Fprintf(&b, "   <segment bytes=\"%d\" number=\"%d\">%s</segment>\n", s.Bytes, s.Number, esc(id))
		}
		b.WriteString("  </segments>\n </file>\n")
	}
	b.WriteString("</nzb>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
