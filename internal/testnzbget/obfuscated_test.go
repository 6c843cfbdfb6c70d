package testnzbget

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/internal/testci"
	"github.com/switchyard-dev/switchyard/internal/testinn2"
	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
)

// TestObfuscatedPar2NamesINN2 posts to INN2 a release whose subjects share
// a title but whose file names are random strings (the par2 files keep
// their extension, as ParPar's obfuscation leaves them), indexes it with
// post-processing on, and checks that the release lists its files under
// the real names its par2 index holds (and its NFO under the release's),
// and that its NZB downloads with NZBGet byte for byte, the volumes under
// their real names (NZBGet 21 names files by their articles' yEnc names
// and renames them by the par2 index, as it does by default).
func TestObfuscatedPar2NamesINN2(t *testing.T) {
	t.Parallel()
	Require(t)
	postAddr := testinn2.Addr(t)
	readAddr := testinn2.Reader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	title := fmt.Sprintf("Obfuscated.Show.S02E%02d.720p.WEB-DL-SY%d", seed%100, seed)
	rel, err := testpost.RandomRelease(ctx, seed, title, testpost.Shape{Volumes: 3, VolumeSize: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if !rel.RealPar2 {
		// Without par2 there is no index to read the names from.
		testci.Missing(t, "par2 is not installed (Debian package par2): no par2 index to read the real names from")
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var posted []testpost.File
	for _, f := range rel.Files {
		var b [10]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		name := hex.EncodeToString(b[:])
		if strings.HasSuffix(f.Name, ".par2") {
			name += ".par2"
		}
		posted = append(posted, testpost.File{Name: name, Data: f.Data})
	}
	c, err := nntp.Dial(ctx, nntp.Config{Addr: postAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	group := testinn2.DefaultGroups[1]
	done, err := testpost.PostFiles(ctx, c, group, poster, posted, testpost.Options{Title: title, PartSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	awaitFiled(ctx, t, readAddr, done)

	apiURL, key := startIndexerWith(t, ctx, postAddr, group, func(cfg *fleet.Config) {
		cfg.Work.Coordinator.Share.Limit, cfg.Work.Coordinator.Share.Max = 3, 0
		cfg.Work.Coordinator.Share.Every = 200 * time.Millisecond
		cfg.Work.PostProcess = &fleet.PostProcessConfig{}
	})
	items := waitFeed(t, ctx, apiURL+"?"+rawQuery("t", "search", "q", title, "apikey", key), 1)
	it := items[0]
	// The .nfo and the volumes are the files whose names matter: the par2
	// index names the volumes, the NFO is named after the release.
	var want []string
	for _, f := range rel.Files {
		if !strings.HasSuffix(f.Name, ".par2") {
			want = append(want, f.Name)
		}
	}
	detailsURL := apiURL + "?" + rawQuery("t", "details", "id", it.guid(), "apikey", key)
	testwait.Until(t, "the real names in t=details", func() (bool, string) {
		resp, err := http.Get(detailsURL)
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc struct {
			Items []feedItem `xml:"channel>item"`
		}
		if err := xml.Unmarshal(body, &doc); err != nil || len(doc.Items) != 1 {
			return false, string(body)
		}
		var got []string
		for _, a := range doc.Items[0].Attrs {
			if a.Name == "file" {
				got = append(got, a.Value)
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false, fmt.Sprintf("files %q, want %q among them", got, want)
			}
		}
		return true, ""
	})

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
	srv := serverFor(t, readAddr)
	srv.ParRename = true
	dir, err := Download(ctx, t, nzb, srv)
	if err != nil {
		t.Fatal(err)
	}
	// NZBGet names the volumes from the par2 index as we do; the .nfo,
	// which the index does not list, keeps the name its articles carry.
	for i, f := range rel.Files {
		name := f.Name
		switch {
		case strings.HasSuffix(f.Name, ".par2"):
			continue // recovery volumes: NZBGet renames them after the set
		case strings.HasSuffix(f.Name, ".nfo"):
			name = posted[i].Name
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("downloaded %s: %v (the directory holds %q)", name, err, names)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("downloaded %s: %d bytes differ from the %d posted", name, len(got), len(f.Data))
		}
	}
}
