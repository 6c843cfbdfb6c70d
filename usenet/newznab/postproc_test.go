package newznab_test

import (
	"context"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
)

// TestPostProcessedAttrs: what post-processing found is in the feed
// (password) and in t=details (par2, inner, nfo, file, posted_name);
// t=getnfo serves the NFO as a feed and as a file and answers 300 for a
// release without one; HidePassworded keeps password=1 out of searches
// but not out of details.
func TestPostProcessedAttrs(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(c *newznab.Config) { c.HidePassworded = true })
	now := time.Now().Unix()
	locked := usenet.Release{ID: "locked", Name: "Locked.Film.2024.1080p-GRP", Category: usenet.CatMoviesHD, Date: now - 60,
		Processed: true, Password: 1, NFO: true, PostedName: "a8f7d6e5c4b3a2f1e0d9",
		Par2: []usenet.Par2File{{Name: "Locked.Film.2024.1080p-GRP.part01.rar", Size: 1000}}, Inner: []string{"Locked.Film.mkv"}}
	e.add(locked, "Locked.Film.2024.1080p-GRP.part01.rar")
	open := usenet.Release{ID: "open", Name: "Open.Film.2024.1080p-GRP", Category: usenet.CatMoviesHD, Date: now - 120, Processed: true, Password: 2}
	e.add(open, "open.mkv")
	if err := e.store.PutNFO(context.Background(), "locked", "Locked Film\n<by GRP>\n"); err != nil {
		t.Fatal(err)
	}

	doc := e.feed("t=search&q=film&apikey=" + testKey)
	if len(doc.Channel.Items) != 1 || doc.Channel.Items[0].GUID.Value != "open" || doc.Channel.Response.Total != 1 {
		t.Fatalf("search with HidePassworded: %+v", doc.Channel)
	}
	if got := doc.Channel.Items[0].attrs("password"); !slices.Equal(got, []string{"2"}) {
		t.Errorf("password %q, want 2", got)
	}
	d := e.feed("t=details&id=locked&apikey=" + testKey).Channel.Items[0]
	for name, want := range map[string][]string{
		"password": {"1"}, "par2": {"Locked.Film.2024.1080p-GRP.part01.rar 1000"}, "inner": {"Locked.Film.mkv"},
		"nfo": {"1"}, "posted_name": {"a8f7d6e5c4b3a2f1e0d9"},
	} {
		if got := d.attrs(name); !slices.Equal(got, want) {
			t.Errorf("details %s = %q, want %q", name, got, want)
		}
	}

	_, body := e.get("t=getnfo&id=locked&apikey=" + testKey)
	var nfoDoc struct {
		Items []struct {
			Description string `xml:"description"`
		} `xml:"channel>item"`
	}
	if err := xml.Unmarshal(body, &nfoDoc); err != nil || len(nfoDoc.Items) != 1 || nfoDoc.Items[0].Description != "Locked Film\n<by GRP>\n" {
		t.Fatalf("getnfo: %v %s", err, body)
	}
	resp, body := e.get("t=getnfo&id=locked&raw=1&apikey=" + testKey)
	if string(body) != "Locked Film\n<by GRP>\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), ".nfo") {
		t.Errorf("getnfo raw: %s %s %q", resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"), body)
	}
	if got, _ := e.apiErr("t=getnfo&id=open&apikey=" + testKey); got.Code != 300 {
		t.Errorf("getnfo without an NFO: %+v, want 300", got)
	}
	if got, _ := e.apiErr("t=getnfo&apikey=" + testKey); got.Code != 200 {
		t.Errorf("getnfo without id: %+v, want 200", got)
	}
}
