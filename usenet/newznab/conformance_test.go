package newznab_test

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
)

// TestConformance replays what Sonarr, Radarr and Prowlarr send on
// "Test", on RSS sync and on a search, and reads the answers the way
// their Newznab parsers do (src/NzbDrone.Core/Indexers/Newznab/): caps
// with int limits and the searches they need, at least one item in
// their default categories, the enclosure type exactly
// application/x-nzb, attrs in the newznab namespace with size and
// usenetdate, paging that ends on the first page shorter than the page
// size, and an NZB whose root is <nzb> with at least one <file>. The
// releases are its own, so it needs no categoriser or demo data.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	// The defaults (limits 100/100), as an operator runs it.
	srv := httptest.NewServer(newznab.Handler(newznab.Config{
		Index: e.index, Store: e.store, APIKeys: func(k string) bool { return k == testKey }, Title: "conformance",
	}))
	t.Cleanup(srv.Close)
	e.server = srv
	h := func(hours int) int64 { return e.now.Add(-time.Duration(hours) * time.Hour).Unix() }
	e.add(usenet.Release{ID: "tv-hd", Name: "Show.Name.S01E02.720p.HDTV.x264-GRP", Category: usenet.CatTVHD, Date: h(1)},
		"show.name.s01e02.720p.hdtv.x264-grp.rar", "show.name.s01e02.720p.hdtv.x264-grp.par2")
	e.add(usenet.Release{ID: "tv-sd", Name: "Show.Name.S01E03.480p.HDTV.x264-GRP", Category: usenet.CatTVSD, Date: h(2)}, "s01e03.rar")
	e.add(usenet.Release{ID: "mv-hd", Name: "Film.Title.2021.1080p.BluRay.x264-GRP", Category: usenet.CatMoviesHD, Date: h(3)}, "film.mkv")
	e.add(usenet.Release{ID: "au", Name: "Artist-Album-2021-FLAC", Category: usenet.CatAudioFLAC, Date: h(4)}, "album.flac")
	// Enough TV for more than one page of 100.
	const bulk = 130
	var last uint64
	for i := range bulk {
		r := usenet.Release{ID: fmt.Sprintf("bulk%03d", i), Name: fmt.Sprintf("Bulk.Show.S02E%02d.720p.WEB-DL-GRP", i+1),
			Category: usenet.CatTVHD, Date: h(10 + i), Visible: true, Version: 1, Size: 1 << 20, Groups: []string{"alt.binaries.test"}, Poster: "p <p@example.com>"}
		v, _ := json.Marshal(r)
		res, err := e.store.Releases().Set(t.Context(), v, persist.SetOptions{Key: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Seq
	}
	e.waitSeq(last)
	tvTotal := 2 + bulk

	k := "&apikey=" + testKey
	t.Run("caps", func(t *testing.T) {
		_, body := e.get("t=caps")
		var caps appCaps // read as the apps read it (caps_test.go)
		if err := xml.Unmarshal(body, &caps); err != nil {
			t.Fatalf("caps: %v\n%s", err, body)
		}
		// Sonarr and Radarr int.Parse both: a missing one breaks caps.
		if _, err := strconv.Atoi(caps.Limits.Max); err != nil {
			t.Errorf("limits max %q: %v", caps.Limits.Max, err)
		}
		if _, err := strconv.Atoi(caps.Limits.Default); err != nil {
			t.Errorf("limits default %q: %v", caps.Limits.Default, err)
		}
		params := map[string][]string{
			"search":       caps.Searching.Search.params(),
			"tv-search":    caps.Searching.TVSearch.params(),
			"movie-search": caps.Searching.MovieSearch.params(),
		}
		has := func(fn string, want ...string) bool {
			for _, w := range want {
				if !slices.Contains(params[fn], w) {
					return false
				}
			}
			return true
		}
		// Sonarr's Test: q, and q with season and ep on tv-search.
		if !has("search", "q") || !has("tv-search", "q", "season", "ep") {
			t.Errorf("searching %+v: Sonarr needs search q and tv-search q,season,ep", params)
		}
		// Radarr's Test: search q or movie-search q.
		if !has("movie-search", "q") && !has("search", "q") {
			t.Errorf("searching %+v: Radarr needs q", params)
		}
		ids := map[string]bool{}
		for _, c := range caps.Categories {
			ids[c.ID] = true
			for _, s := range c.Subcats {
				ids[s.ID] = true
			}
		}
		for _, id := range []string{"5000", "5030", "5040", "2000", "2040"} {
			if !ids[id] {
				t.Errorf("caps lacks category %s", id)
			}
		}
	})

	// Sonarr's Test and RSS sync: the empty tvsearch in its default
	// categories, paged at 100 until a page is shorter.
	t.Run("sonarr rss paging", func(t *testing.T) {
		seen := map[string]bool{}
		for page := 0; ; page++ {
			if page == 30 {
				t.Fatal("paging did not end in 30 pages")
			}
			off := page * 100
			doc := conformFeed(t, e, fmt.Sprintf("t=tvsearch&cat=5030,5040&extended=1%s&offset=%d&limit=100", k, off))
			if doc.Channel.Response.Offset != off || doc.Channel.Response.Total != tvTotal {
				t.Errorf("page %d: response %+v, want offset %d total %d", page, doc.Channel.Response, off, tvTotal)
			}
			for _, it := range doc.Channel.Items {
				if seen[it.GUID.Value] {
					t.Errorf("page %d repeats %s", page, it.GUID.Value)
				}
				seen[it.GUID.Value] = true
			}
			if n := len(doc.Channel.Items); n < 100 {
				if off+n != tvTotal {
					t.Errorf("a short page (%d items at offset %d) before the end (%d)", n, off, tvTotal)
				}
				break
			}
		}
		if len(seen) != tvTotal || !seen["tv-hd"] || !seen["tv-sd"] {
			t.Errorf("paging saw %d items, want %d with tv-hd and tv-sd", len(seen), tvTotal)
		}
	})

	// Sonarr's episode search, Radarr's Test and RSS, Prowlarr's Test.
	for _, tc := range []struct {
		name, params, want string
	}{
		{"sonarr episode search", "t=tvsearch&cat=5030,5040&extended=1&q=Show%20Name&season=1&ep=2&offset=0&limit=100", "tv-hd"},
		{"sonarr season 0", "t=tvsearch&cat=5030,5040&extended=1&q=Show%20Name&season=00&offset=0&limit=100", ""},
		{"radarr rss", "t=movie&cat=2000,2010,2020,2030,2040,2045,2050,2060&extended=1&offset=0&limit=100", "mv-hd"},
		{"radarr search", "t=movie&cat=2000,2010,2020,2030,2040,2045,2050,2060&extended=1&q=Film%20Title%202021&offset=0&limit=100", "mv-hd"},
		{"prowlarr test", "t=search&cat=2000,3000,5000&extended=1&offset=0&limit=100", "tv-hd"},
		{"prowlarr no cat", "t=search&extended=1&offset=0&limit=100", "tv-hd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := conformFeed(t, e, tc.params+k)
			if tc.want == "" {
				if len(doc.Channel.Items) != 0 {
					t.Errorf("items %q, want none", titles(doc))
				}
				return
			}
			if len(doc.Channel.Items) == 0 {
				t.Fatal("no results in the configured categories")
			}
			if doc.Channel.Items[0].GUID.Value != tc.want {
				t.Errorf("first item %s, want %s", doc.Channel.Items[0].GUID.Value, tc.want)
			}
		})
	}

	t.Run("grab", func(t *testing.T) {
		doc := conformFeed(t, e, "t=tvsearch&cat=5030,5040&extended=1&q=Show%20Name&season=1&ep=2"+k)
		u, err := url.Parse(doc.Channel.Items[0].Enclosure.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := e.get(u.RawQuery)
		if ct := resp.Header.Get("Content-Type"); ct != "application/x-nzb" {
			t.Errorf("content type %q", ct)
		}
		if resp.Header.Get("X-DNZB-Name") != "Show.Name.S01E02.720p.HDTV.x264-GRP" {
			t.Errorf("X-DNZB-Name %q", resp.Header.Get("X-DNZB-Name"))
		}
		// Sonarr: the root must be <nzb> with at least one <file>.
		var nzb struct {
			XMLName xml.Name
			Files   []struct{} `xml:"file"`
		}
		if err := xml.Unmarshal(body, &nzb); err != nil || nzb.XMLName.Local != "nzb" || len(nzb.Files) < 1 {
			t.Errorf("nzb root %q with %d files (%v)", nzb.XMLName.Local, len(nzb.Files), err)
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		_, body := e.get("t=tvsearch&cat=5030,5040&apikey=wrong")
		var er specError
		if err := xml.Unmarshal(body, &er); err != nil || er.Code < 100 || er.Code > 199 {
			t.Errorf("error %+v (%v), want 1xx (invalid API key)", er, err)
		}
	})
}

// conformFeed fetches a feed and checks every item as Sonarr's parser
// reads it: an enclosure of type exactly application/x-nzb (else the item
// is dropped), a size from the size attr, a date from usenetdate (neither
// that nor pubDate rejects the feed), attrs in the newznab namespace.
func conformFeed(t *testing.T, e *env, params string) specRSS {
	t.Helper()
	resp, _ := e.get(params)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: html content", params)
	}
	doc := e.feed(params)
	for _, it := range doc.Channel.Items {
		if it.Enclosure.Type != "application/x-nzb" || it.Enclosure.URL == "" {
			t.Errorf("%s: enclosure %+v", it.GUID.Value, it.Enclosure)
		}
		size, err := strconv.ParseInt(strings.Join(it.attrs("size"), ""), 10, 64)
		if err != nil || size <= 0 {
			t.Errorf("%s: size attr %q (namespace %s)", it.GUID.Value, it.attrs("size"), nzNS)
		}
		if _, err := time.Parse(time.RFC1123Z, strings.Join(it.attrs("usenetdate"), "")); err != nil {
			t.Errorf("%s: usenetdate: %v", it.GUID.Value, err)
		}
		if len(it.attrs("category")) == 0 || it.Title == "" || it.GUID.Value == "" {
			t.Errorf("%s: item %+v", it.GUID.Value, it)
		}
	}
	return doc
}
