package testnzbget

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

// copySpec is one posting of the repost tests' release.
type copySpec struct {
	partSize int
	ago      time.Duration
}

// repostCopies: posted, reposted with another article size (another part
// count per file), reposted alike (the first's split), hours apart.
var repostCopies = []copySpec{{16 << 10, 6 * time.Hour}, {24 << 10, 4 * time.Hour}, {16 << 10, 2 * time.Hour}}

// postCopies posts rel once per copy of repostCopies through c and
// returns what each posted.
func postCopies(ctx context.Context, t *testing.T, c *nntp.Conn, group string, rel testpost.Release, now time.Time) [][]testpost.Posted {
	t.Helper()
	var out [][]testpost.Posted
	for _, cp := range repostCopies {
		posted, err := testpost.PostFiles(ctx, c, group, poster, rel.Files, testpost.Options{Title: rel.Title, PartSize: cp.partSize, Date: now.Add(-cp.ago)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, posted)
	}
	return out
}

// checkReposts reads the feed of title until it lists the three copies and
// checks each is a release of its own: its own date, the later two marked
// reposts of the first. It returns the items, oldest first.
func checkReposts(ctx context.Context, t *testing.T, apiURL, key, title string, now time.Time) []feedItem {
	t.Helper()
	items := waitFeed(t, ctx, apiURL+"?"+rawQuery("t", "search", "q", title, "apikey", key), len(repostCopies))
	// Newest first: the last copy leads.
	for i, it := range items {
		want := now.Add(-repostCopies[len(items)-1-i].ago).UTC().Truncate(time.Second)
		if got := it.date(t); !got.Equal(want) || it.Title != title {
			t.Fatalf("item %d: %s at %v, want %s at %v", i, it.Title, got, title, want)
		}
	}
	first := items[len(items)-1]
	for i, it := range items {
		got := it.attr("repost_of")
		if want := map[bool]string{true: "", false: first.guid()}[i == len(items)-1]; got != want {
			t.Errorf("item %d: repost_of %q, want %q", i, got, want)
		}
	}
	return []feedItem{items[2], items[1], items[0]}
}

// download fetches an item's NZB and downloads it with NZBGet from
// readAddr, checking every file byte for byte.
func download(ctx context.Context, t *testing.T, it feedItem, readAddr string, rel testpost.Release) {
	t.Helper()
	resp, err := http.Get(it.Enclosure.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("get %s: %s %v", it.Enclosure.URL, resp.Status, err)
	}
	nzb := filepath.Join(t.TempDir(), "release.nzb")
	if err := os.WriteFile(nzb, body, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := Download(ctx, t, nzb, serverFor(t, readAddr))
	if err != nil {
		t.Fatalf("%s (%s): %v", it.Title, it.guid(), err)
	}
	checkDownload(t, dir, rel.Files)
}

// TestRepostsAndObfuscated: a release posted, reposted with another
// article size and reposted alike is three releases, each of its own date
// and each NZB downloading byte for byte; a post with a random subject
// per article makes no release and is counted as unmatched.
func TestRepostsAndObfuscated(t *testing.T) {
	t.Parallel()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const group = "alt.binaries.switchyard.repost"
	srv := nntptest.Start(t)
	srv.AddGroup(group, 0)
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	title := "Repost.Show.S01E01.720p.WEB-DL-SY"
	rel, err := testpost.RandomRelease(ctx, uint64(time.Now().UnixNano()), title, testpost.Shape{Volumes: 2, VolumeSize: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	postCopies(ctx, t, c, group, rel, now)
	obf, err := testpost.RandomRelease(ctx, uint64(time.Now().UnixNano())+1, "Hidden.Show.S01E02.720p-SY", testpost.Shape{Volumes: 2, VolumeSize: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	obfPosted, err := testpost.PostFiles(ctx, c, group, poster, obf.Files, testpost.Options{PartSize: 16 << 10, RandomSubjects: true})
	if err != nil {
		t.Fatal(err)
	}
	obfArticles := 0
	for _, p := range obfPosted {
		obfArticles += len(p.Parts)
	}

	apiURL, key := startIndexer(t, ctx, srv.Addr(), group)
	items := checkReposts(ctx, t, apiURL, key, title, now)
	// Every release of the group is one of the three copies: the
	// obfuscated post made none, and its articles are counted.
	all := waitFeed(t, ctx, apiURL+"?"+rawQuery("t", "search", "apikey", key), len(repostCopies))
	for _, it := range all {
		if it.Title != title {
			t.Errorf("a release of the obfuscated post: %s", it.Title)
		}
	}
	metricsURL := strings.TrimSuffix(apiURL, "/api") + "/metrics"
	want := fmt.Sprintf("usenet_articles_unmatched_total %d", obfArticles)
	testwait.Until(t, "the unmatched articles counted in /metrics", func() (bool, string) {
		resp, err := http.Get(metricsURL)
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), want), want + " not in:\n" + grepLines(string(b), "usenet_")
	})
	for _, it := range items {
		download(ctx, t, it, srv.Addr(), rel)
	}
}

// grepLines is the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// attr is the item's attribute name ("" without one).
func (it feedItem) attr(name string) string {
	for _, a := range it.Attrs {
		if a.Name == name {
			return a.Value
		}
	}
	return ""
}

// guid is the release id in the item's enclosure URL.
func (it feedItem) guid() string {
	i := strings.Index(it.Enclosure.URL, "id=")
	if i < 0 {
		return ""
	}
	id := it.Enclosure.URL[i+3:]
	if j := strings.IndexByte(id, '&'); j >= 0 {
		id = id[:j]
	}
	return id
}
