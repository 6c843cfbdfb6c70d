package newznab

import (
	"encoding/xml"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
)

// Namespaces of a feed.
const (
	NewznabNamespace = "http://www.newznab.com/DTD/2010/feeds/attributes/"
	AtomNamespace    = "http://www.w3.org/2005/Atom"
)

// The RSS 2.0 shapes of a result feed. Prefixed names are written as they
// are ("newznab:attr"), with the prefixes declared on <rss>, which is the
// form every Newznab client parses.
type (
	rssDoc struct {
		XMLName xml.Name   `xml:"rss"`
		Version string     `xml:"version,attr"`
		Atom    string     `xml:"xmlns:atom,attr"`
		Newznab string     `xml:"xmlns:newznab,attr"`
		Channel rssChannel `xml:"channel"`
	}
	rssChannel struct {
		AtomLink    atomLink   `xml:"atom:link"`
		Title       string     `xml:"title"`
		Description string     `xml:"description"`
		Link        string     `xml:"link"`
		Response    nzResponse `xml:"newznab:response"`
		Items       []rssItem  `xml:"item"`
	}
	atomLink struct {
		Href string `xml:"href,attr"`
		Rel  string `xml:"rel,attr"`
		Type string `xml:"type,attr"`
	}
	nzResponse struct {
		Offset int `xml:"offset,attr"`
		Total  int `xml:"total,attr"`
	}
	rssItem struct {
		Title       feedText     `xml:"title"`
		GUID        rssGUID      `xml:"guid"`
		Link        string       `xml:"link"`
		Comments    string       `xml:"comments"`
		PubDate     string       `xml:"pubDate"`
		Category    feedText     `xml:"category"`
		Description feedText     `xml:"description"`
		Enclosure   rssEnclosure `xml:"enclosure"`
		Attrs       []nzAttr     `xml:"newznab:attr"`
	}
	rssGUID struct {
		IsPermaLink string `xml:"isPermaLink,attr"`
		Value       string `xml:",chardata"`
	}
	rssEnclosure struct {
		URL    string `xml:"url,attr"`
		Length int64  `xml:"length,attr"`
		Type   string `xml:"type,attr"`
	}
	nzAttr struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
)

// feedText is an item's text (title, category, description) written with
// '>' as it is rather than as "&gt;", which XML requires only after "]]".
// NZBGet's feed reader trims the blanks of every piece of text its SAX
// parser hands it, and an entity splits the text into pieces: every
// category name ("TV &gt; HD") reached it as "TV>HD", and its filter
// category:TV?>?HD matched nothing.
type feedText string

func (s feedText) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return err
	}
	text := strings.ReplaceAll(b.String(), "&gt;", ">")
	text = strings.ReplaceAll(text, "]]>", "]]&gt;")
	return e.EncodeElement(struct {
		Text string `xml:",innerxml"`
	}{text}, start)
}

// item is the feed entry of r, grabbed grabs times; links hold the apikey
// of the request so a client can fetch them as they are.
func (h *handler) item(r usenet.Release, base, key string, grabs int, extended bool) rssItem {
	date := time.Unix(r.Date, 0).UTC().Format(time.RFC1123Z)
	getURL := h.link(base, "get", r.ID, key)
	it := rssItem{
		Title:       feedText(r.Name),
		GUID:        rssGUID{IsPermaLink: "false", Value: r.ID},
		Link:        getURL,
		Comments:    h.link(base, "details", r.ID, key),
		PubDate:     date,
		Category:    feedText(usenet.CategoryName(r.Category)),
		Description: feedText(r.Name),
		Enclosure:   rssEnclosure{URL: getURL, Length: r.Size, Type: usenet.NZBContentType},
	}
	attr := func(name, value string) { it.Attrs = append(it.Attrs, nzAttr{name, value}) }
	if p := usenet.CategoryParent(r.Category); p != r.Category {
		attr("category", strconv.Itoa(p))
	}
	attr("category", strconv.Itoa(r.Category))
	attr("size", strconv.FormatInt(r.Size, 10))
	attr("files", strconv.Itoa(r.FileCount()))
	attr("grabs", strconv.Itoa(grabs))
	if len(r.Groups) > 0 {
		attr("group", r.Groups[0])
	}
	attr("poster", r.Poster)
	attr("usenetdate", date)
	if extended {
		attr("guid", r.ID)
		attr("comments", "0")
	}
	// Always: downloaders' RSS filters read it from plain feeds too.
	attr("password", strconv.Itoa(r.Password))
	if r.RepostOf != "" {
		// Not in the Newznab spec: clients ignore attrs they do not know,
		// and a person or script can tell a repost from the original.
		attr("repost_of", r.RepostOf)
	}
	return it
}

// The JSON shapes: nZEDb's o=json, which is its XML feed's <channel>
// turned into JSON by rule: elements by their XML names (prefixed ones
// with their prefix, "newznab:attr"), attributes as the XML has them
// under their names with a leading _ and string values, an element's
// text beside its attributes as "text". Where nZEDb writes a lone item
// or attr as an object, item and newznab:attr here are always lists
// (empty when nothing matched), which a client of nZEDb reads too.
type (
	jsonChannel struct {
		AtomLink    jsonAtomLink `json:"atom:link"`
		Title       string       `json:"title"`
		Description string       `json:"description"`
		Link        string       `json:"link"`
		Response    jsonResponse `json:"newznab:response"`
		Items       []jsonItem   `json:"item"`
	}
	jsonAtomLink struct {
		Href string `json:"_href"`
		Rel  string `json:"_rel"`
		Type string `json:"_type"`
	}
	jsonResponse struct {
		Offset string `json:"_offset"`
		Total  string `json:"_total"`
	}
	jsonItem struct {
		Title       string        `json:"title"`
		GUID        jsonGUID      `json:"guid"`
		Link        string        `json:"link"`
		Comments    string        `json:"comments"`
		PubDate     string        `json:"pubDate"`
		Category    string        `json:"category"`
		Description string        `json:"description"`
		Enclosure   jsonEnclosure `json:"enclosure"`
		Attrs       []jsonAttr    `json:"newznab:attr"`
	}
	jsonGUID struct {
		IsPermaLink string `json:"_isPermaLink"`
		Text        string `json:"text"`
	}
	jsonEnclosure struct {
		URL    string `json:"_url"`
		Length string `json:"_length"`
		Type   string `json:"_type"`
	}
	jsonAttr struct {
		Name  string `json:"_name"`
		Value string `json:"_value"`
	}
)

func (d rssDoc) json() jsonChannel {
	c := d.Channel
	j := jsonChannel{
		AtomLink:    jsonAtomLink(c.AtomLink),
		Title:       c.Title,
		Description: c.Description,
		Link:        c.Link,
		Response:    jsonResponse{Offset: strconv.Itoa(c.Response.Offset), Total: strconv.Itoa(c.Response.Total)},
		Items:       make([]jsonItem, 0, len(c.Items)),
	}
	for _, it := range c.Items {
		ji := jsonItem{
			Title: string(it.Title), GUID: jsonGUID{IsPermaLink: it.GUID.IsPermaLink, Text: it.GUID.Value},
			Link: it.Link, Comments: it.Comments, PubDate: it.PubDate, Category: string(it.Category), Description: string(it.Description),
			Enclosure: jsonEnclosure{URL: it.Enclosure.URL, Length: strconv.FormatInt(it.Enclosure.Length, 10), Type: it.Enclosure.Type},
			Attrs:     make([]jsonAttr, 0, len(it.Attrs)),
		}
		for _, a := range it.Attrs {
			ji.Attrs = append(ji.Attrs, jsonAttr(a))
		}
		j.Items = append(j.Items, ji)
	}
	return j
}
