package newznab_test

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/usenet"
)

// TestFeedTextKeepsGreaterThan: an item's text is written with '>' as it
// is, so that NZBGet's feed reader, which trims the blanks around every
// entity, reads the category "TV > HD" and not "TV>HD"; '<', '&' and the
// "]]>" that XML forbids in text stay escaped, and XML readers decode the
// same text as before.
func TestFeedTextKeepsGreaterThan(t *testing.T) {
	e := newEnv(t)
	name := "Odd]]>Name > Show & <Tell> S01E01"
	e.add(usenet.Release{ID: "odd", Name: name, Category: usenet.CatTVHD, Date: e.now.Unix()}, "odd.rar")
	_, body := e.get("t=search&apikey=" + testKey)
	s := string(body)
	for _, want := range []string{
		"<category>TV > HD</category>",
		"<title>Odd]]&gt;Name > Show &amp; &lt;Tell> S01E01</title>",
		"<description>Odd]]&gt;Name > Show &amp; &lt;Tell> S01E01</description>",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("feed lacks %s:\n%s", want, s)
		}
	}
	doc := e.feed("t=search&apikey=" + testKey)
	if len(doc.Channel.Items) != 1 {
		t.Fatalf("%d items", len(doc.Channel.Items))
	}
	if it := doc.Channel.Items[0]; it.Title != name || it.Category != "TV > HD" {
		t.Errorf("decoded title %q category %q, want %q and TV > HD", it.Title, it.Category, name)
	}
}
