package testnzbget

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/work"
)

// TestRSSFeed is NZBGet's RSS reader as a foreign client of the indexer:
// small releases are posted to nntptest and indexed by the stack `up`
// runs (bus, persist, coordinator, worker, Newznab API, in-process);
// NZBGet, as a daemon, previews a feed on our t=search URL and must list
// what our API answers for the same query — titles, sizes, categories;
// then a configured feed whose filter accepts one release is fetched, and
// NZBGet fetches that release's NZB from the feed's link and downloads it
// from the news server, byte for byte.
func TestRSSFeed(t *testing.T) {
	t.Parallel()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const group = "alt.binaries.switchyard.feed"
	srv := nntptest.Start(t)
	srv.AddGroup(group, 0)
	// A handful of small releases in three categories; the filter below
	// accepts the second one only.
	titles := []string{
		"Feed.Show.S01E01.720p.WEB-DL.x264-SY",
		"Feed.Show.S01E02.1080p.WEB-DL.x264-SY",
		"Feed.Show.S01E03.480p.HDTV.x264-SY",
		"Feed.Film.2024.1080p.BluRay.x264-SY",
	}
	want := titles[1]
	posted := map[string]testpost.Release{}
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	for i, title := range titles {
		rel, err := testpost.RandomRelease(ctx, uint64(time.Now().UnixNano())+uint64(i), title, testpost.Shape{Volumes: 2, VolumeSize: 48 << 10})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := testpost.PostFiles(ctx, c, group, poster, rel.Files, testpost.Options{Title: title, PartSize: 16 << 10}); err != nil {
			t.Fatal(err)
		}
		posted[title] = rel
	}
	c.Close()

	apiURL, key := startIndexer(t, ctx, srv.Addr(), group)
	feedURL := apiURL + "?" + rawQuery("t", "search", "cat", "5000,2000", "apikey", key)
	ours := waitFeed(t, ctx, feedURL, len(titles))

	d := StartDaemon(t, DaemonConfig{
		Server: serverFor(t, srv.Addr()),
		Feeds:  []Feed{{Name: "switchyard", URL: feedURL, Filter: "Accept: title:S01E02"}},
	})

	// Preview without a filter: every item, as our API listed it.
	items, err := d.PreviewFeed(ctx, feedURL, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, d.LogTail())
	}
	if len(items) != len(ours) {
		t.Fatalf("NZBGet lists %d items, our API %d: %+v", len(items), len(ours), items)
	}
	got := map[string]FeedItem{}
	for _, it := range items {
		got[it.Title] = it
	}
	for _, o := range ours {
		it, ok := got[o.Title]
		switch {
		case !ok:
			t.Errorf("NZBGet's preview lacks %q: %+v", o.Title, items)
			continue
		case it.Size() != o.size():
			t.Errorf("%s: NZBGet reads size %d, our feed says %d", o.Title, it.Size(), o.size())
		case it.Category != o.Category:
			t.Errorf("%s: NZBGet reads category %q, our feed says %q", o.Title, it.Category, o.Category)
		case it.URL != o.Enclosure.URL:
			t.Errorf("%s: NZBGet's URL %q, our enclosure %q", o.Title, it.URL, o.Enclosure.URL)
		case it.Time != o.date(t).Unix():
			t.Errorf("%s: NZBGet's time %d, our pubDate %s", o.Title, it.Time, o.PubDate)
		case it.Match != "ACCEPTED":
			t.Errorf("%s: an empty filter %s it", o.Title, it.Match)
		}
		// NZBGet reads the enclosure's length before the size attr: the
		// two must agree. Sizes count the articles, which hold more than
		// the data.
		if o.Enclosure.Length != o.size() {
			t.Errorf("%s: enclosure length %d, size attr %d", o.Title, o.Enclosure.Length, o.size())
		}
		if data := dataSize(posted[o.Title]); o.size() < data {
			t.Errorf("%s: size %d is less than the %d bytes posted", o.Title, o.size(), data)
		}
	}

	// Filters on our titles and category names: the feed's accepts
	// exactly one release.
	for _, f := range []struct{ filter, want string }{
		// NZBGet splits a rule's terms at spaces: "?" stands for the
		// blanks of "TV > SD", which it must have read as they are.
		{"Accept: category:TV?>?SD", titles[2]},
		{"Accept: title:S01E02", want},
	} {
		items, err = d.PreviewFeed(ctx, feedURL, f.filter)
		if err != nil {
			t.Fatalf("%v\n%s", err, d.LogTail())
		}
		var accepted []string
		for _, it := range items {
			if it.Match == "ACCEPTED" {
				accepted = append(accepted, it.Title)
			}
		}
		if len(accepted) != 1 || accepted[0] != f.want {
			t.Fatalf("filter %s accepts %q, want only %s: %+v", f.filter, accepted, f.want, items)
		}
	}

	// Fetched, the feed queues that release; NZBGet fetches the NZB and
	// downloads it.
	if err := d.FetchFeed(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var history []HistoryItem
	testwait.UntilWithin(t, 2*time.Minute, "NZBGet to finish the feed's download", func() (bool, string) {
		history, err = d.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		queue, _ := d.Queue(ctx)
		return len(history) > 0, fmt.Sprintf("history %+v, queue %q", history, queue)
	})
	if len(history) != 1 || history[0].Kind != "NZB" || !strings.HasPrefix(history[0].Status, "SUCCESS") {
		t.Fatalf("history %+v: want one NZB download of %s with status SUCCESS\n%s", history, want, d.LogTail())
	}
	if h := history[0]; h.Name != want {
		t.Errorf("NZBGet named the download %q, want %q", h.Name, want)
	}
	feed, err := d.ViewFeed(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range feed {
		if (it.Status == "FETCHED") != (it.Title == want) {
			t.Errorf("feed item %s: status %s, match %s", it.Title, it.Status, it.Match)
		}
	}
	t.Logf("NZBGet downloaded %s: %s into %s", history[0].Name, history[0].Status, history[0].DestDir)
	checkDownload(t, history[0].DestDir, posted[want].Files)
}

// startIndexer runs what `up` runs, small, on the news server at nntpAddr:
// the bus, a persist server and the balancer, a coordinator and a worker
// indexing group, and the Newznab API. It returns the API's URL and key.
func startIndexer(t *testing.T, ctx context.Context, nntpAddr, group string) (apiURL, key string) {
	t.Helper()
	return startIndexerWith(t, ctx, nntpAddr, group, nil)
}

// startIndexerWith is startIndexer with its config changed by edit first.
func startIndexerWith(t *testing.T, ctx context.Context, nntpAddr, group string, edit func(*fleet.Config)) (apiURL, key string) {
	t.Helper()
	groups, err := work.ParseGroups(group)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := fleet.Config{
		Logger:   slog.New(slog.DiscardHandler),
		NATS:     fleet.NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist:  fleet.PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: filepath.Join(dir, "persist")},
		Balancer: true,
		Work: fleet.WorkConfig{
			NNTP: nntp.Config{Addr: nntpAddr},
			Coordinator: &work.CoordinatorConfig{
				Planner: work.PlannerConfig{Groups: groups, RangeSize: 50},
				Share:   work.ShareConfig{Limit: 2, Max: 2},
			},
			Workers: []string{"w1"},
			// The test posts are small: publish them whatever their size.
			Settle: usenet.SettleConfig{MinBytes: -1},
		},
		API:  fleet.APIConfig{Dir: filepath.Join(dir, "api")},
		HTTP: fleet.HTTPConfig{Addr: "127.0.0.1:0"},
	}
	if edit != nil {
		edit(&cfg)
	}
	f, err := fleet.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Errorf("stop the indexer: %v", err)
		}
	})
	key, _ = f.APIKey()
	return f.HTTPURL() + "/api", key
}

// rawQuery joins name, value pairs in the order given, with the commas of
// a cat list as an operator types them (url.Values would sort the names
// and escape the commas).
func rawQuery(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, url.QueryEscape(kv[i])+"="+strings.ReplaceAll(url.QueryEscape(kv[i+1]), "%2C", ","))
	}
	return strings.Join(parts, "&")
}

// feedItem is an item of our feed, read as NZBGet's reader reads it.
type feedItem struct {
	Title     string `xml:"title"`
	Category  string `xml:"category"`
	PubDate   string `xml:"pubDate"`
	Enclosure struct {
		URL    string `xml:"url,attr"`
		Length int64  `xml:"length,attr"`
	} `xml:"enclosure"`
	Attrs []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"http://www.newznab.com/DTD/2010/feeds/attributes/ attr"`
}

// size is the item's size attr (-1 without one).
func (it feedItem) size() int64 {
	for _, a := range it.Attrs {
		if a.Name == "size" {
			if n, err := strconv.ParseInt(a.Value, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

func (it feedItem) date(t *testing.T) time.Time {
	d, err := time.Parse(time.RFC1123Z, it.PubDate)
	if err != nil {
		t.Fatalf("%s: pubDate %q: %v", it.Title, it.PubDate, err)
	}
	return d
}

// dataSize is the bytes of a release's files.
func dataSize(r testpost.Release) int64 {
	var n int64
	for _, f := range r.Files {
		n += int64(len(f.Data))
	}
	return n
}

// waitFeed reads feedURL until it lists n releases: the search index
// follows the releases stream, which the worker fills as it indexes.
func waitFeed(t *testing.T, ctx context.Context, feedURL string, n int) []feedItem {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var items []feedItem
	testwait.Until(t, fmt.Sprintf("our feed to list %d releases", n), func() (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, feedURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("%s %v: %.300s", resp.Status, err, body)
		}
		var doc struct {
			Items []feedItem `xml:"channel>item"`
		}
		if err := xml.Unmarshal(body, &doc); err != nil {
			t.Fatalf("our feed is not RSS: %v\n%s", err, body)
		}
		items = doc.Items
		return len(items) == n, string(body)
	})
	return items
}
