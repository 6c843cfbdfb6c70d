package newznab_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testusenet"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/search"
)

const (
	nzNS    = "http://www.newznab.com/DTD/2010/feeds/attributes/"
	testKey = "secret-key"
)

// The spec's shapes, decoded namespace-aware: a newznab:attr outside the
// newznab namespace decodes to nothing.
type (
	specRSS struct {
		XMLName xml.Name    `xml:"rss"`
		Version string      `xml:"version,attr"`
		Channel specChannel `xml:"channel"`
	}
	specChannel struct {
		AtomLink struct {
			Href string `xml:"href,attr"`
		} `xml:"http://www.w3.org/2005/Atom link"`
		Title    string `xml:"title"`
		Response struct {
			Offset int `xml:"offset,attr"`
			Total  int `xml:"total,attr"`
		} `xml:"http://www.newznab.com/DTD/2010/feeds/attributes/ response"`
		Items []specItem `xml:"item"`
	}
	specItem struct {
		Title string `xml:"title"`
		GUID  struct {
			IsPermaLink string `xml:"isPermaLink,attr"`
			Value       string `xml:",chardata"`
		} `xml:"guid"`
		Link      string `xml:"link"`
		Comments  string `xml:"comments"`
		PubDate   string `xml:"pubDate"`
		Category  string `xml:"category"`
		Enclosure struct {
			URL    string `xml:"url,attr"`
			Length int64  `xml:"length,attr"`
			Type   string `xml:"type,attr"`
		} `xml:"enclosure"`
		Attrs []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"http://www.newznab.com/DTD/2010/feeds/attributes/ attr"`
	}
	specError struct {
		XMLName     xml.Name `xml:"error"`
		Code        int      `xml:"code,attr"`
		Description string   `xml:"description,attr"`
	}
	specCaps struct {
		XMLName xml.Name `xml:"caps"`
		Server  struct {
			Version string `xml:"version,attr"`
			Title   string `xml:"title,attr"`
		} `xml:"server"`
		Limits struct {
			Max     int `xml:"max,attr"`
			Default int `xml:"default,attr"`
		} `xml:"limits"`
		Searching struct {
			Search      specSearch `xml:"search"`
			TVSearch    specSearch `xml:"tv-search"`
			MovieSearch specSearch `xml:"movie-search"`
		} `xml:"searching"`
		Categories []struct {
			ID      int    `xml:"id,attr"`
			Name    string `xml:"name,attr"`
			Subcats []struct {
				ID   int    `xml:"id,attr"`
				Name string `xml:"name,attr"`
			} `xml:"subcat"`
		} `xml:"categories>category"`
	}
	specSearch struct {
		Available       string `xml:"available,attr"`
		SupportedParams string `xml:"supportedParams,attr"`
	}
)

func (it specItem) attrs(name string) []string {
	var out []string
	for _, a := range it.Attrs {
		if a.Name == name {
			out = append(out, a.Value)
		}
	}
	return out
}

// env is a real persist server, a store, an index following the releases
// stream and the API served over HTTP.
type env struct {
	t      *testing.T
	store  *usenet.Store
	bins   *persist.KV
	index  *search.Index
	u      *testusenet.Env
	server *httptest.Server
	now    time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with change applied to the handler's Config.
func newEnvWith(t *testing.T, change func(*newznab.Config)) *env {
	t.Helper()
	u := testusenet.Start(t)
	st, ix := u.Store, u.Index
	e := &env{t: t, u: u, store: st, bins: u.Binaries, index: ix, now: time.Now()}
	cfg := newznab.Config{
		Index: ix, Store: st, APIKeys: func(k string) bool { return k == testKey },
		Title: "test indexer", Version: "9.9", MaxLimit: 50, DefaultLimit: 20,
	}
	if change != nil {
		change(&cfg)
	}
	e.server = httptest.NewServer(newznab.Handler(cfg))
	t.Cleanup(e.server.Close)
	return e
}

// add writes r (with one binary per name) to the store and waits until
// the index has it.
func (e *env) add(r usenet.Release, files ...string) {
	e.t.Helper()
	ctx := context.Background()
	r.Visible, r.Version = true, max(r.Version, 1)
	if r.Poster == "" {
		r.Poster = "poster <p@example.com>"
	}
	if len(r.Groups) == 0 {
		r.Groups = []string{"alt.binaries.test"}
	}
	r.Binaries = nil
	for i, name := range files {
		b := usenet.Binary{
			ID: r.ID + "-b" + string(rune('0'+i)), Release: r.ID, Poster: r.Poster, Name: name, File: i + 1, Files: len(files),
			Subject: `[` + string(rune('1'+i)) + `/` + string(rune('0'+len(files))) + `] - "` + name + `" yEnc (1/2)`,
			Parts:   2, Date: r.Date, Groups: r.Groups,
			Segments: []usenet.Segment{{Number: 1, Bytes: 700, ID: name + ".1@example.com"}, {Number: 2, Bytes: 300, ID: name + ".2@example.com"}},
		}
		v, _ := json.Marshal(b)
		if _, err := e.bins.Set(ctx, b.ID, v, persist.SetOptions{}); err != nil {
			e.t.Fatal(err)
		}
		r.Binaries = append(r.Binaries, usenet.FileSummary{ID: b.ID, Name: name, File: i + 1, Parts: 2, Present: 2, Bytes: 1000})
		r.Size += 1000
	}
	r.Files = len(files)
	v, _ := json.Marshal(r)
	res, err := e.store.Releases().Set(ctx, v, persist.SetOptions{Key: r.ID})
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitSeq(res.Seq)
}

// waitSeq waits until the index applied seq.
func (e *env) waitSeq(seq uint64) {
	e.t.Helper()
	e.u.WaitSeq(e.t, seq)
}

func (e *env) get(params string) (*http.Response, []byte) {
	e.t.Helper()
	resp, err := http.Get(e.server.URL + "/api?" + params)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("%s: status %d", params, resp.StatusCode)
	}
	return resp, body
}

func (e *env) feed(params string) specRSS {
	e.t.Helper()
	resp, body := e.get(params)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/rss+xml") {
		e.t.Fatalf("%s: content type %q:\n%s", params, ct, body)
	}
	var doc specRSS
	if err := xml.Unmarshal(body, &doc); err != nil {
		e.t.Fatalf("%s: %v\n%s", params, err, body)
	}
	if doc.Version != "2.0" {
		e.t.Fatalf("%s: not an RSS 2.0 feed:\n%s", params, body)
	}
	return doc
}

func titles(doc specRSS) []string {
	var out []string
	for _, it := range doc.Channel.Items {
		out = append(out, it.Title)
	}
	return out
}

func (e *env) fixture() {
	h := func(hours int) int64 { return e.now.Add(-time.Duration(hours) * time.Hour).Unix() }
	e.add(usenet.Release{ID: "tv1", Name: "Some.Show.S01E02.720p.HDTV-GRP", Category: usenet.CatTVHD, Date: h(1), Groups: []string{"alt.binaries.teevee"}},
		"some.show.part1.rar", "some.show.part2.rar", "some.show.par2")
	e.add(usenet.Release{ID: "tv2", Name: "Some_Other-Show.S01E03.480p", Category: usenet.CatTVSD, Date: h(2)}, "other.rar")
	e.add(usenet.Release{ID: "tv3", Name: "Some.Show.S02.Complete.1080p", Category: usenet.CatTVHD, Date: h(3)}, "s2.rar")
	e.add(usenet.Release{ID: "mv1", Name: "Another.Film.2020.1080p.BluRay", Category: usenet.CatMoviesHD, Date: h(24 * 30)}, "film.mkv")
	e.add(usenet.Release{ID: "au1", Name: "Rock & Roll <Album> FLAC", Category: usenet.CatAudioFLAC, Date: h(5)}, "album.flac")
}

func TestCaps(t *testing.T) {
	e := newEnv(t)
	// No key needed.
	resp, body := e.get("t=caps")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml") {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	var caps specCaps
	if err := xml.Unmarshal(body, &caps); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if caps.Server.Title != "test indexer" || caps.Server.Version != "9.9" || caps.Limits.Max != 50 || caps.Limits.Default != 20 {
		t.Errorf("server/limits = %+v %+v", caps.Server, caps.Limits)
	}
	s := caps.Searching
	if s.Search != (specSearch{"yes", "q"}) || s.TVSearch != (specSearch{"yes", "q,season,ep"}) || s.MovieSearch != (specSearch{"yes", "q"}) {
		t.Errorf("searching = %+v", s)
	}
	if len(caps.Categories) != len(usenet.Categories) {
		t.Fatalf("categories = %d, want %d", len(caps.Categories), len(usenet.Categories))
	}
	for i, c := range usenet.Categories {
		got := caps.Categories[i]
		if got.ID != c.ID || got.Name != c.Name || len(got.Subcats) != len(c.Subcats) {
			t.Errorf("category %d = %+v, want %+v", i, got, c)
			continue
		}
		for j, sc := range c.Subcats {
			if got.Subcats[j].ID != sc.ID || got.Subcats[j].Name != sc.Name {
				t.Errorf("subcat %d/%d = %+v", c.ID, j, got.Subcats[j])
			}
		}
	}
	_, body = e.get("t=caps&o=json")
	var j struct {
		Limits struct{ Max int } `json:"limits"`
	}
	if err := json.Unmarshal(body, &j); err != nil || j.Limits.Max != 50 {
		t.Errorf("caps json = %s (%v)", body, err)
	}
}

func TestSearchParameters(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	h := func(hours int) int64 { return e.now.Add(-time.Duration(hours) * time.Hour).Unix() }
	e.add(usenet.Release{ID: "sp1", Name: "Some.Show.S00E05.Special", Category: usenet.CatTVHD, Date: h(24 * 40)}, "sp.rar")
	e.add(usenet.Release{ID: "dy1", Name: "Daily.Show.2026.12.02.720p.WEB", Category: usenet.CatTVHD, Date: h(24 * 41)}, "dy.rar")
	k := "&apikey=" + testKey
	for _, tc := range []struct {
		name, params string
		want         []string
	}{
		{"all newest first", "t=search", []string{"Some.Show.S01E02.720p.HDTV-GRP", "Some_Other-Show.S01E03.480p", "Some.Show.S02.Complete.1080p", "Rock & Roll <Album> FLAC", "Another.Film.2020.1080p.BluRay", "Some.Show.S00E05.Special", "Daily.Show.2026.12.02.720p.WEB"}},
		{"words across separators", "t=search&q=" + url.QueryEscape("some show s01e02"), []string{"Some.Show.S01E02.720p.HDTV-GRP"}},
		{"words any order", "t=search&q=show+SOME", []string{"Some.Show.S01E02.720p.HDTV-GRP", "Some_Other-Show.S01E03.480p", "Some.Show.S02.Complete.1080p", "Some.Show.S00E05.Special"}},
		{"fts syntax is text", "t=search&q=" + url.QueryEscape(`"show* -some: AND NEAR(`), nil},
		{"cat parent", "t=search&cat=5000", []string{"Some.Show.S01E02.720p.HDTV-GRP", "Some_Other-Show.S01E03.480p", "Some.Show.S02.Complete.1080p", "Some.Show.S00E05.Special", "Daily.Show.2026.12.02.720p.WEB"}},
		{"cat sub list", "t=search&cat=5030,2040", []string{"Some_Other-Show.S01E03.480p", "Another.Film.2020.1080p.BluRay"}},
		{"group", "t=search&group=alt.binaries.teevee", []string{"Some.Show.S01E02.720p.HDTV-GRP"}},
		{"maxage days", "t=search&maxage=2", []string{"Some.Show.S01E02.720p.HDTV-GRP", "Some_Other-Show.S01E03.480p", "Some.Show.S02.Complete.1080p", "Rock & Roll <Album> FLAC"}},
		{"tvsearch season", "t=tvsearch&q=show&season=1", []string{"Some.Show.S01E02.720p.HDTV-GRP", "Some_Other-Show.S01E03.480p"}},
		{"tvsearch season ep", "t=tvsearch&season=1&ep=3", []string{"Some_Other-Show.S01E03.480p"}},
		{"tvsearch season pack", "t=tvsearch&season=2", []string{"Some.Show.S02.Complete.1080p"}},
		{"tvsearch is tv only", "t=tvsearch&q=1080p", []string{"Some.Show.S02.Complete.1080p"}},
		{"tvsearch with cat", "t=tvsearch&q=1080p&cat=2000", []string{"Another.Film.2020.1080p.BluRay"}},
		{"movie", "t=movie&q=1080p", []string{"Another.Film.2020.1080p.BluRay"}},
		{"tvsearch empty q is newest tv", "t=tvsearch&cat=5030,5040", []string{"Some.Show.S01E02.720p.HDTV-GRP", "Some_Other-Show.S01E03.480p", "Some.Show.S02.Complete.1080p", "Some.Show.S00E05.Special", "Daily.Show.2026.12.02.720p.WEB"}},
		{"a child matches only itself", "t=tvsearch&cat=5030", []string{"Some_Other-Show.S01E03.480p"}},
		{"movie empty q is newest movies", "t=movie&cat=2000,2010,2020,2030,2040,2045,2050,2060", []string{"Another.Film.2020.1080p.BluRay"}},
		{"season 0 episode", "t=tvsearch&season=00&ep=5", []string{"Some.Show.S00E05.Special"}},
		{"season 0 whole", "t=tvsearch&season=00", []string{"Some.Show.S00E05.Special"}},
		{"daily", "t=tvsearch&season=2026&ep=12/02", []string{"Daily.Show.2026.12.02.720p.WEB"}},
		{"daily with q", "t=tvsearch&q=daily+show&season=2026&ep=12%2F02", []string{"Daily.Show.2026.12.02.720p.WEB"}},
		{"daily other day", "t=tvsearch&season=2026&ep=12/03", nil},
		{"imdbid alone finds nothing", "t=movie&imdbid=tt0133093", nil},
		{"imdbid without tt", "t=movie&imdbid=0133093", nil},
		{"imdbid with q is q", "t=movie&imdbid=0133093&q=another+film", []string{"Another.Film.2020.1080p.BluRay"}},
		{"tvdbid alone finds nothing", "t=tvsearch&tvdbid=121361&season=1&ep=2", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := e.feed(tc.params + k)
			if got := titles(doc); !slices.Equal(got, tc.want) {
				t.Errorf("titles = %q, want %q", got, tc.want)
			}
			if doc.Channel.Response.Total != len(tc.want) {
				t.Errorf("total = %d, want %d", doc.Channel.Response.Total, len(tc.want))
			}
		})
	}
}

// TestSearchSizeAndMinAge: minsize and maxsize (bytes, as NNTmux reads
// them; both ends kept) and minage (days, as maxage) bound t=search,
// tvsearch and movie, totals included; a value that is not a number >= 0
// is 201, as for maxage, and one past 64 bits is the largest there is.
// (Was: the three were ignored, so a search for at least 2000 bytes
// listed the 1000-byte releases too.)
func TestSearchSizeAndMinAge(t *testing.T) {
	e := newEnv(t)
	h := func(hours int) int64 { return e.now.Add(-time.Duration(hours) * time.Hour).Unix() }
	// Each file is 1000 bytes (see add).
	e.add(usenet.Release{ID: "s1", Name: "Show.S01E01.720p", Category: usenet.CatTVHD, Date: h(1)}, "a.rar")
	e.add(usenet.Release{ID: "s2", Name: "Show.S01E02.720p", Category: usenet.CatTVHD, Date: h(24 * 3)}, "a.rar", "b.rar")
	e.add(usenet.Release{ID: "s3", Name: "Show.S01E03.720p", Category: usenet.CatTVHD, Date: h(24 * 10)}, "a.rar", "b.rar", "c.rar")
	e.add(usenet.Release{ID: "m1", Name: "Film.2020.1080p", Category: usenet.CatMoviesHD, Date: h(2)}, "a.mkv", "b.mkv")
	k := "&apikey=" + testKey
	for _, tc := range []struct {
		name, params string
		want         []string
	}{
		{"minsize", "t=search&minsize=2000", []string{"Film.2020.1080p", "Show.S01E02.720p", "Show.S01E03.720p"}},
		{"maxsize", "t=search&maxsize=2000", []string{"Show.S01E01.720p", "Film.2020.1080p", "Show.S01E02.720p"}},
		{"both", "t=search&minsize=1500&maxsize=2500", []string{"Film.2020.1080p", "Show.S01E02.720p"}},
		{"zero is no bound", "t=search&minsize=0&maxsize=0", []string{"Show.S01E01.720p", "Film.2020.1080p", "Show.S01E02.720p", "Show.S01E03.720p"}},
		{"with q", "t=search&q=show&minsize=2000", []string{"Show.S01E02.720p", "Show.S01E03.720p"}},
		{"tvsearch", "t=tvsearch&season=1&maxsize=2000", []string{"Show.S01E01.720p", "Show.S01E02.720p"}},
		{"tvsearch ep", "t=tvsearch&season=1&ep=3&maxsize=2000", nil},
		{"movie", "t=movie&minsize=2000", []string{"Film.2020.1080p"}},
		{"movie too small", "t=movie&minsize=2001", nil},
		{"minage", "t=search&minage=2", []string{"Show.S01E02.720p", "Show.S01E03.720p"}},
		{"minage and maxage", "t=search&minage=2&maxage=5", []string{"Show.S01E02.720p"}},
		{"minage and size", "t=tvsearch&minage=1&minsize=3000", []string{"Show.S01E03.720p"}},
		{"minsize past 64 bits", "t=search&minsize=99999999999999999999", nil},
		{"maxsize past 64 bits", "t=search&maxsize=99999999999999999999", []string{"Show.S01E01.720p", "Film.2020.1080p", "Show.S01E02.720p", "Show.S01E03.720p"}},
		{"minage past 292 years", "t=search&minage=99999999999999999999", nil},
		{"minage of 300 years", "t=search&minage=109500", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := e.feed(tc.params + k)
			if got := titles(doc); !slices.Equal(got, tc.want) || doc.Channel.Response.Total != len(tc.want) {
				t.Errorf("titles = %q (total %d), want %q", got, doc.Channel.Response.Total, tc.want)
			}
		})
	}
	for _, params := range []string{"t=search&minsize=big", "t=tvsearch&maxsize=-1", "t=movie&minsize=1.5", "t=search&minage=old", "t=search&maxsize=1e9"} {
		_, body := e.get(params + k)
		var got specError
		if err := xml.Unmarshal(body, &got); err != nil || got.Code != 201 || !strings.HasPrefix(got.Description, specText[201]) {
			t.Errorf("%q: error %d %q (%v), want 201", params, got.Code, got.Description, err)
		}
	}
}

func TestSearchItemAndPaging(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	doc := e.feed("t=search&q=s01e02&apikey=" + testKey)
	if len(doc.Channel.Items) != 1 {
		t.Fatalf("items = %d", len(doc.Channel.Items))
	}
	it := doc.Channel.Items[0]
	base := e.server.URL + "/api?"
	if it.GUID.Value != "tv1" || it.GUID.IsPermaLink != "false" {
		t.Errorf("guid = %+v", it.GUID)
	}
	if it.Link != base+"apikey="+testKey+"&id=tv1&t=get" || it.Enclosure.URL != it.Link {
		t.Errorf("link = %q, enclosure %q", it.Link, it.Enclosure.URL)
	}
	if it.Comments != base+"apikey="+testKey+"&id=tv1&t=details" {
		t.Errorf("comments = %q", it.Comments)
	}
	if it.Enclosure.Type != "application/x-nzb" || it.Enclosure.Length != 3000 {
		t.Errorf("enclosure = %+v", it.Enclosure)
	}
	if _, err := time.Parse(time.RFC1123Z, it.PubDate); err != nil {
		t.Errorf("pubDate %q: %v", it.PubDate, err)
	}
	if it.Category != "TV > HD" {
		t.Errorf("category = %q", it.Category)
	}
	for name, want := range map[string][]string{
		"category": {"5000", "5040"}, "size": {"3000"}, "files": {"3"}, "grabs": {"0"},
		"group": {"alt.binaries.teevee"}, "poster": {"poster <p@example.com>"}, "guid": nil,
	} {
		if got := it.attrs(name); !slices.Equal(got, want) {
			t.Errorf("attr %s = %q, want %q", name, got, want)
		}
	}
	if _, err := time.Parse(time.RFC1123Z, strings.Join(it.attrs("usenetdate"), "")); err != nil {
		t.Errorf("usenetdate: %v", err)
	}
	ext := e.feed("t=search&q=s01e02&extended=1&apikey=" + testKey).Channel.Items[0]
	if !slices.Equal(ext.attrs("guid"), []string{"tv1"}) || len(ext.attrs("comments")) != 1 {
		t.Errorf("extended attrs = %+v", ext.Attrs)
	}

	// Paging: limit+offset with the total over all pages; limit clamped.
	var all []string
	for off := 0; off < 5; off += 2 {
		doc := e.feed("t=search&limit=2&offset=" + string(rune('0'+off)) + "&apikey=" + testKey)
		if doc.Channel.Response.Total != 5 || doc.Channel.Response.Offset != off {
			t.Errorf("offset %d: response = %+v", off, doc.Channel.Response)
		}
		all = append(all, titles(doc)...)
	}
	if want := titles(e.feed("t=search&apikey=" + testKey)); !slices.Equal(all, want) {
		t.Errorf("pages = %q, want %q", all, want)
	}
	if n := len(e.feed("t=search&limit=1000&apikey=" + testKey).Channel.Items); n != 5 {
		t.Errorf("limit 1000 gave %d items", n)
	}
}

func TestManyResultsClampedToMaxLimit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var last uint64
	for i := range 60 {
		r := usenet.Release{ID: "r" + string(rune('A'+i/26)) + string(rune('a'+i%26)), Name: "Bulk.Release", Category: usenet.CatOtherMisc,
			Date: e.now.Unix() - int64(i), Visible: true, Version: 1}
		v, _ := json.Marshal(r)
		res, err := e.store.Releases().Set(ctx, v, persist.SetOptions{Key: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Seq
	}
	e.waitSeq(last)
	doc := e.feed("t=search&limit=500&apikey=" + testKey)
	if len(doc.Channel.Items) != 50 || doc.Channel.Response.Total != 60 {
		t.Errorf("items = %d total = %d, want 50 of 60", len(doc.Channel.Items), doc.Channel.Response.Total)
	}
	if n := len(e.feed("t=search&apikey=" + testKey).Channel.Items); n != 20 {
		t.Errorf("default limit gave %d items, want 20", n)
	}
}

func TestGetAndDetails(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	resp, body := e.get("t=get&id=tv1&apikey=" + testKey)
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-nzb" {
		t.Errorf("content type %q", ct)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="Some.Show.S01E02.720p.HDTV-GRP.nzb"` {
		t.Errorf("content disposition %q", cd)
	}
	details := e.server.URL + "/api?apikey=" + testKey + "&id=tv1&t=details"
	for name, want := range map[string]string{
		"X-DNZB-Name": "Some.Show.S01E02.720p.HDTV-GRP", "X-DNZB-Category": "TV > HD",
		"X-DNZB-MoreInfo": details, "X-DNZB-Details": details, "X-DNZB-Failure": details,
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	var nzb struct {
		XMLName xml.Name `xml:"http://www.newzbin.com/DTD/2003/nzb nzb"`
		Meta    []struct {
			Type  string `xml:"type,attr"`
			Value string `xml:",chardata"`
		} `xml:"http://www.newzbin.com/DTD/2003/nzb head>meta"`
		Files []struct {
			Subject  string   `xml:"subject,attr"`
			Groups   []string `xml:"http://www.newzbin.com/DTD/2003/nzb groups>group"`
			Segments []struct {
				Number int    `xml:"number,attr"`
				ID     string `xml:",chardata"`
			} `xml:"http://www.newzbin.com/DTD/2003/nzb segments>segment"`
		} `xml:"http://www.newzbin.com/DTD/2003/nzb file"`
	}
	if err := xml.Unmarshal(body, &nzb); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if len(nzb.Files) != 3 || len(nzb.Meta) != 2 || nzb.Meta[0].Value != "Some.Show.S01E02.720p.HDTV-GRP" {
		t.Fatalf("nzb = %+v", nzb)
	}
	if !strings.Contains(nzb.Files[2].Subject, ".par2") || nzb.Files[0].Segments[1].ID != "some.show.part1.rar.2@example.com" {
		t.Errorf("nzb files = %+v", nzb.Files)
	}

	doc := e.feed("t=details&id=au1&apikey=" + testKey)
	if len(doc.Channel.Items) != 1 || doc.Channel.Items[0].Title != "Rock & Roll <Album> FLAC" {
		t.Errorf("details = %+v", doc.Channel.Items)
	}
}

// specText is the spec's description of each code, which clients match.
var specText = map[int]string{
	100: "Incorrect user credentials", 200: "Missing parameter", 201: "Incorrect parameter",
	202: "No such function", 300: "No such item", 900: "Unknown error",
}

// TestGetHeadersSafe: a name with CR, LF and non-ASCII characters gives
// header values of printable ASCII and a UTF-8 filename*.
func TestGetHeadersSafe(t *testing.T) {
	e := newEnv(t)
	e.add(usenet.Release{ID: "odd", Name: "Caf\u00e9.Cr\u00e8me\r\nX-Evil: 1", Category: usenet.CatOtherMisc, Date: e.now.Unix()}, "a.bin")
	resp, _ := e.get("t=get&id=odd&apikey=" + testKey)
	if resp.Header.Get("X-Evil") != "" {
		t.Fatal("a header was injected")
	}
	if got := resp.Header.Get("X-DNZB-Name"); got != "Caf_.Cr_me  X-Evil: 1" {
		t.Errorf("X-DNZB-Name = %q", got)
	}
	if got := resp.Header.Get("Content-Disposition"); got != `attachment; filename="Caf_.Cr_me_X-Evil_1.nzb"; filename*=UTF-8''Caf%C3%A9.Cr%C3%A8me%0D%0AX-Evil%3A%201.nzb` {
		t.Errorf("Content-Disposition = %q", got)
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	k := "&apikey=" + testKey
	for _, tc := range []struct {
		params string
		code   int
	}{
		{"t=tvsearch&season=2026&ep=13/40" + k, 201},
		{"t=tvsearch&ep=12/02" + k, 201},
		{"t=movie&imdbid=ttx" + k, 201},
		{"t=search", 100},
		{"t=search&apikey=wrong", 100},
		{"t=get&id=tv1", 100},
		{"t=get" + k, 200},
		{"t=details" + k, 200},
		{"t=search&limit=x" + k, 201},
		{"t=search&limit=-1" + k, 201},
		{"t=search&offset=1.5" + k, 201},
		{"t=search&maxage=old" + k, 201},
		{"t=search&cat=5000,tv" + k, 201},
		{"t=tvsearch&season=SS01" + k, 201},
		{"t=tvsearch&ep=two" + k, 201},
		{"t=nope" + k, 202},
		{"apikey=" + testKey, 202},
		{"", 202},
		{"t=get&id=missing" + k, 300},
		{"t=details&id=missing" + k, 300},
	} {
		resp, body := e.get(tc.params)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml") {
			t.Errorf("%q: content type %q", tc.params, resp.Header.Get("Content-Type"))
		}
		var got specError
		if err := xml.Unmarshal(body, &got); err != nil {
			t.Errorf("%q: %v\n%s", tc.params, err, body)
			continue
		}
		if got.Code != tc.code || !strings.HasPrefix(got.Description, specText[tc.code]) {
			t.Errorf("%q: error %+v, want code %d", tc.params, got, tc.code)
		}
		if strings.Contains(string(body), "goroutine") {
			t.Errorf("%q: stack trace in the answer", tc.params)
		}
	}
	_, body := e.get("t=search&o=json")
	var j struct {
		Error struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &j); err != nil || j.Error.Code != 100 || j.Error.Description != "Incorrect user credentials" {
		t.Errorf("json error = %s (%v)", body, err)
	}
}

// (Was: a pair the query parser could not decode was dropped and the rest
// answered, so q=Film% or q=Law;Order listed the newest releases of every
// category.)
func TestMalformedQueryRefused(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	k := "&apikey=" + testKey
	for _, tc := range []struct{ params, desc string }{
		{"t=search&q=Film%" + k, `Incorrect parameter (malformed query: invalid URL escape "%")`},
		{"t=search&q=Nothing%zz" + k, `Incorrect parameter (malformed query: invalid URL escape "%zz")`},
		{"t=search&q=Law;Order" + k, "Incorrect parameter (malformed query: invalid semicolon separator in query)"},
		{"t=movie&cat=2000;" + k, "Incorrect parameter (malformed query: invalid semicolon separator in query)"},
	} {
		_, body := e.get(tc.params)
		if code, desc := decodeError(t, body); code != newznab.ErrIncorrectParam || desc != tc.desc {
			t.Errorf("%s: error %d %q, want 201 %q", tc.params, code, desc, tc.desc)
		}
	}
	// A POSTed form names what it could not decode as well.
	resp, err := http.Post(e.server.URL+"/api", "application/x-www-form-urlencoded", strings.NewReader("t=search&q=Film%&apikey="+testKey))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if code, desc := decodeError(t, body); code != newznab.ErrIncorrectParam || desc != `Incorrect parameter (malformed form: invalid URL escape "%")` {
		t.Errorf("POST: error %d %q", code, desc)
	}
	// Escaped, the same characters are words like any other.
	if got := titles(e.feed("t=search&q=" + url.QueryEscape("Film;100%") + k)); len(got) != 0 {
		t.Errorf("q=Film;100%% found %q, want nothing (no name holds 100)", got)
	}
}

func TestPanicIs900(t *testing.T) {
	e := newEnv(t)
	h := newznab.Handler(newznab.Config{Index: e.index, Store: panicStore{}})
	for _, o := range []string{"", "&o=json"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api?t=get&id=x"+o, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "900") || strings.Contains(rec.Body.String(), "boom") {
			t.Errorf("o=%q: %d %s", o, rec.Code, rec.Body)
		}
	}
}

type panicStore struct{}

func (panicStore) Release(context.Context, string) (usenet.Release, error) { panic("boom") }
func (panicStore) Binaries(context.Context, []string) ([]usenet.Binary, error) {
	panic("boom")
}
func (panicStore) NFO(context.Context, string) (string, error) { panic("boom") }

func TestSearchJSON(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	_, body := e.get("t=search&q=s01e02&o=json&apikey=" + testKey)
	// nZEDb's shape: the channel, names as in the XML, attributes with _.
	var c struct {
		AtomLink struct {
			Href string `json:"_href"`
		} `json:"atom:link"`
		Response struct {
			Offset string `json:"_offset"`
			Total  string `json:"_total"`
		} `json:"newznab:response"`
		Item []struct {
			Title string `json:"title"`
			GUID  struct {
				IsPermaLink string `json:"_isPermaLink"`
				Text        string `json:"text"`
			} `json:"guid"`
			Link      string `json:"link"`
			PubDate   string `json:"pubDate"`
			Enclosure struct {
				URL    string `json:"_url"`
				Length string `json:"_length"`
				Type   string `json:"_type"`
			} `json:"enclosure"`
			Attr []struct {
				Name  string `json:"_name"`
				Value string `json:"_value"`
			} `json:"newznab:attr"`
		} `json:"item"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if c.Response.Total != "1" || c.Response.Offset != "0" || len(c.Item) != 1 || c.Item[0].GUID.Text != "tv1" ||
		c.Item[0].Enclosure.Type != "application/x-nzb" || c.Item[0].Enclosure.Length != "3000" || c.Item[0].PubDate == "" || c.AtomLink.Href == "" {
		t.Fatalf("json = %s", body)
	}
	for _, upper := range []string{`"Offset"`, `"Total"`, `"@attributes"`} {
		if strings.Contains(string(body), upper) {
			t.Errorf("json has %s: %s", upper, body)
		}
	}
	var cats []string
	for _, a := range c.Item[0].Attr {
		if a.Name == "category" {
			cats = append(cats, a.Value)
		}
	}
	if !slices.Equal(cats, []string{"5000", "5040"}) {
		t.Errorf("json categories = %q", cats)
	}
	// An empty result is an empty list, not null.
	_, body = e.get("t=search&q=zzz&o=json&apikey=" + testKey)
	if !strings.Contains(string(body), `"item":[]`) {
		t.Errorf("empty json = %s", body)
	}
}

// TestFollowLive: a release written after the handler started is served
// once the follower applied it.
func TestFollowLive(t *testing.T) {
	e := newEnv(t)
	if n := len(e.feed("t=search&apikey=" + testKey).Channel.Items); n != 0 {
		t.Fatalf("items before = %d", n)
	}
	e.add(usenet.Release{ID: "late", Name: "Late.Arrival.S05E06", Category: usenet.CatTVSD, Date: e.now.Unix()}, "late.rar")
	doc := e.feed("t=tvsearch&season=5&ep=6&apikey=" + testKey)
	if got := titles(doc); !slices.Equal(got, []string{"Late.Arrival.S05E06"}) {
		t.Errorf("titles = %q", got)
	}
}

// TestFeedNamespaces checks the raw feed declares the prefixes it uses.
func TestFeedNamespaces(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	_, body := e.get("t=search&apikey=" + testKey)
	s := string(body)
	for _, want := range []string{`<?xml version="1.0" encoding="UTF-8"?>`, `xmlns:newznab="` + nzNS + `"`, `xmlns:atom="http://www.w3.org/2005/Atom"`, `<newznab:attr name="category" value="5000">`, `&amp; Roll &lt;Album>`} {
		if !strings.Contains(s, want) {
			t.Errorf("feed lacks %q", want)
		}
	}
	// Well-formed throughout: a full token walk.
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("feed not well-formed: %v", err)
		}
	}
}

// (Was: season=S13 and ep=E13, the forms the Newznab spec gives for tvsearch,
// "Season string, e.g S13 or 13", were refused with 201.)
func TestTVSearchSeasonAndEpisodeWithLetters(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	k := "&apikey=" + testKey
	for _, tc := range []struct {
		params string
		want   []string
	}{
		{"t=tvsearch&q=show&season=S01&ep=E03", []string{"Some_Other-Show.S01E03.480p"}},
		{"t=tvsearch&season=s1&ep=e2", []string{"Some.Show.S01E02.720p.HDTV-GRP"}},
		{"t=tvsearch&season=1&ep=E02", []string{"Some.Show.S01E02.720p.HDTV-GRP"}},
		{"t=tvsearch&season=S02", []string{"Some.Show.S02.Complete.1080p"}},
	} {
		doc := e.feed(tc.params + k)
		if got := titles(doc); !slices.Equal(got, tc.want) {
			t.Errorf("%s: titles = %q, want %q", tc.params, got, tc.want)
		}
	}
	// A letter is a prefix of a number, not a number itself.
	for _, p := range []string{"season=S", "ep=E", "season=SS01", "season=S-1", "ep=EE2", "season=E01", "ep=S02"} {
		_, body := e.get("t=tvsearch&" + p + k)
		var got specError
		if err := xml.Unmarshal(body, &got); err != nil || got.Code != 201 {
			t.Errorf("%s: %s, want error 201", p, body)
		}
	}
}

// (Was: t=details&guid=ID, the spec's form of DETAILS, answered 200 Missing parameter (id).)
func TestDetailsByGUID(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	doc := e.feed("t=details&guid=tv1&apikey=" + testKey)
	if got := titles(doc); !slices.Equal(got, []string{"Some.Show.S01E02.720p.HDTV-GRP"}) {
		t.Errorf("details by guid: titles = %q", got)
	}
	for params, code := range map[string]int{"t=details&guid=missing": 300, "t=details&guid=": 200} {
		_, body := e.get(params + "&apikey=" + testKey)
		var got specError
		if err := xml.Unmarshal(body, &got); err != nil || got.Code != code {
			t.Errorf("%s: %s, want error %d", params, body, code)
		}
	}
}
