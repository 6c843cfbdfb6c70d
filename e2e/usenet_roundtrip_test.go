//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testinn2"
	"github.com/switchyard-dev/switchyard/internal/testnzbget"
	"github.com/switchyard-dev/switchyard/internal/testpersist"
	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/work"
)

// TestUsenetRoundTrip is the indexer as its users see it: a real
// multi-file release (rar volumes of random bytes, an nfo, par2 recovery
// files), yEnc-encoded in parts, is posted to an NNTP server; coordinator
// run and two worker run processes index the group in ranges smaller than
// the post; usenet serve answers a Newznab search and hands out the NZB;
// NZBGet downloads the articles from the NNTP server with it, and every
// file must equal the original byte for byte.
func TestUsenetRoundTrip(t *testing.T) {
	t.Parallel()
	t.Run("nntptest", func(t *testing.T) {
		t.Parallel()
		testnzbget.Require(t)
		const group = "alt.binaries.switchyard.roundtrip"
		srv := nntptest.New(nntptest.Config{Addr: "127.0.0.1:0"})
		srv.AddGroup(group, 0)
		if err := srv.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop(context.Background()) })
		roundTrip(t, srv.Addr(), srv.Addr(), group)
	})
	t.Run("inn2", func(t *testing.T) {
		t.Parallel()
		testnzbget.Require(t)
		addr := testinn2.Addr(t)
		group := "switchyard.usenet.r" + strconv.FormatInt(time.Now().UnixNano(), 36)
		if out, err := exec.Command("bash", "../scripts/inn2.sh", "newgroup", group).CombinedOutput(); err != nil {
			t.Fatalf("newgroup %s: %v: %s", group, err, out)
		}
		// NZBGet reads from a reader port: innd itself answers a client
		// that never sends MODE READER with 401.
		roundTrip(t, addr, testinn2.Reader(t), group)
	})
}

func roundTrip(t *testing.T, postAddr, readAddr, group string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	title := "Switchyard.Roundtrip.S01E02.720p.WEB-GRP"
	rel, err := testpost.RandomRelease(ctx, uint64(time.Now().UnixNano()), title, testpost.Shape{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := nntp.Dial(ctx, nntp.Config{Addr: postAddr})
	if err != nil {
		t.Fatal(err)
	}
	posted, err := testpost.PostFiles(ctx, c, group, "Roundtrip Poster <poster@switchyard.test>", rel.Files, testpost.Options{Title: title, PartSize: 64 << 10})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	articles := 0
	for _, p := range posted {
		articles += len(p.Parts)
	}
	waitArticles(t, ctx, c, group, articles)
	c.Close()

	env := testpersist.Start(t, 1)
	st, err := work.NewStore(env.Client(), "roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"--nats", env.URL(), "--source", "roundtrip"}
	// Ranges of 7 articles: the post's files span ranges, and the two
	// workers each assemble parts of them.
	procs := []*logProc{
		startLogProc(t, "coordinator", append([]string{"coordinator", "run", "--nntp", postAddr, "--groups", group, "--range-size", "7", "--chunk", "3", "--nntp-conns", "2"}, common...)...),
		startLogProc(t, "worker-1", append([]string{"worker", "run", "--name", "w1", "--min-bytes", "-1"}, common...)...),
		startLogProc(t, "worker-2", append([]string{"worker", "run", "--name", "w2", "--min-bytes", "-1"}, common...)...),
	}
	api := startLogProc(t, "usenet-serve", "usenet", "serve", "--nats", env.URL(), "--http", "127.0.0.1:0", "--data", t.TempDir())
	procs = append(procs, api)
	api.waitLog("usenet api listening", 30*time.Second)
	apiURL := logValue(t, api, "usenet api listening", "url")
	waitStatus(t, st, "the group indexed", func(s work.Status) bool {
		return len(s.Groups) == 1 && s.Groups[0].Planned >= int64(articles) && s.Groups[0].Done == s.Groups[0].Planned
	})

	// The key: usenet serve created it in its data dir and printed it.
	key := apiKeyOf(t, api)
	feed := waitSearch(t, ctx, apiURL, key, "roundtrip s01e02")
	if len(feed.Items) != 1 {
		t.Fatalf("search found %d releases, want 1: %+v", len(feed.Items), feed.Items)
	}
	item := feed.Items[0]
	if item.Title != title || item.attr("files") != strconv.Itoa(len(rel.Files)) || item.attr("category") != "5000" {
		t.Errorf("search item %+v: want title %s, %d files, category 5000", item, title, len(rel.Files))
	}
	nzb := get(t, ctx, apiURL+"?"+url.Values{"t": {"get"}, "id": {item.GUID}, "apikey": {key}}.Encode())
	nzbPath := filepath.Join(t.TempDir(), "release.nzb")
	if err := os.WriteFile(nzbPath, nzb, 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(readAddr)
	p, _ := strconv.Atoi(port)
	dir, err := testnzbget.Download(ctx, t, nzbPath, testnzbget.Server{Host: host, Port: p})
	if err != nil {
		t.Fatalf("NZBGet: %v\nNZB:\n%s", err, nzb)
	}
	for _, f := range rel.Files {
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Errorf("NZBGet did not write %s: %v", f.Name, err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s: NZBGet's %d bytes differ from the %d posted", f.Name, len(got), len(f.Data))
		}
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].signal(syscall.SIGTERM)
		if code := procs[i].exit(30 * time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM:\n%s", procs[i].name, code, procs[i].logText())
		}
	}
}

// waitArticles waits until the server lists n articles in group, and
// returns the group, selected on c: INN2 files a post shortly after
// accepting it, and gives no signal to wait on.
func waitArticles(t *testing.T, ctx context.Context, c *nntp.Conn, group string, n int) nntp.Group {
	t.Helper()
	var gr nntp.Group
	testwait.Until(t, fmt.Sprintf("%d posts in %s", n, group), func() (bool, string) {
		var err error
		gr, err = c.Group(ctx, group)
		return err == nil && gr.Count >= int64(n), fmt.Sprintf("GROUP %+v, %v", gr, err)
	})
	return gr
}

// logValue returns the value of key= on p's first log line containing msg.
func logValue(t *testing.T, p *logProc, msg, key string) string {
	t.Helper()
	for _, l := range strings.Split(p.logText(), "\n") {
		if !strings.Contains(l, msg) {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				return strings.Trim(v, `"`)
			}
		}
	}
	t.Fatalf("%s: no %s= on a %q line:\n%s", p.name, key, msg, p.logText())
	return ""
}

// apiKeyFile is the file, in usenet serve's --data dir, that holds the
// Newznab API key: the name is part of the data dir's layout, which an
// operator backs up and reads.
const apiKeyFile = "apikey"

// apiKeyOf reads the key usenet serve stored in its --data dir.
func apiKeyOf(t *testing.T, p *logProc) string {
	t.Helper()
	args := p.cmd.Args
	for i, a := range args {
		if a == "--data" && i+1 < len(args) {
			b, err := os.ReadFile(filepath.Join(args[i+1], apiKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatal("usenet serve has no --data")
	return ""
}

// rssFeed is the part of a Newznab search answer the round trip reads.
type rssFeed struct {
	Items []rssItem `xml:"channel>item"`
}

type rssItem struct {
	Title string `xml:"title"`
	GUID  string `xml:"guid"`
	Attrs []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"http://www.newznab.com/DTD/2010/feeds/attributes/ attr"`
}

func (it rssItem) attr(name string) string {
	for _, a := range it.Attrs {
		if a.Name == name {
			return a.Value
		}
	}
	return ""
}

// waitSearch searches until a release shows: the search index follows the
// releases stream, a moment behind the workers.
func waitSearch(t *testing.T, ctx context.Context, apiURL, key, q string) rssFeed {
	t.Helper()
	var f rssFeed
	testwait.Until(t, fmt.Sprintf("search %q to find a release", q), func() (bool, string) {
		body := get(t, ctx, apiURL+"?"+url.Values{"t": {"search"}, "q": {q}, "apikey": {key}}.Encode())
		f = rssFeed{}
		if err := xml.Unmarshal(body, &f); err != nil {
			t.Fatalf("search answer is not RSS: %v\n%s", err, body)
		}
		return len(f.Items) > 0, string(body)
	})
	return f
}

func get(t *testing.T, ctx context.Context, u string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", u, resp.StatusCode, err, b)
	}
	return b
}
