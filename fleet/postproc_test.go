package fleet

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testci"
	"github.com/switchyard-dev/switchyard/internal/testpost"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/rar/rartest"
	"github.com/switchyard-dev/switchyard/work"
)

// ppLimit is the provider's connection limit of the post-processing
// tests: the coordinator gets 2, the post-processor 1.
const ppLimit = 3

// startPostProcessing starts up's roles against nntpAddr with
// post-processing on and returns the fleet and its API key.
func startPostProcessing(t *testing.T, ctx context.Context, nntpAddr, group string, hide bool) (*Fleet, string) {
	t.Helper()
	groups, err := work.ParseGroups(group)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f, err := Start(ctx, Config{
		Logger:   slog.New(slog.DiscardHandler),
		NATS:     NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist:  PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: filepath.Join(dir, "persist")},
		Balancer: true,
		Work: WorkConfig{
			NNTP: nntp.Config{Addr: nntpAddr},
			Coordinator: &work.CoordinatorConfig{
				Planner: work.PlannerConfig{Groups: groups, RangeSize: 50},
				Share:   work.ShareConfig{Limit: ppLimit, Every: 200 * time.Millisecond},
			},
			Workers:     []string{"w1"},
			Settle:      usenet.SettleConfig{MinBytes: -1},
			PostProcess: &PostProcessConfig{},
		},
		API:  APIConfig{Dir: filepath.Join(dir, "api"), HidePassworded: hide},
		HTTP: HTTPConfig{Addr: "127.0.0.1:0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	key, _ := f.APIKey()
	return f, key
}

// apiItem is an item of a JSON feed.
type apiItem struct {
	Title string `json:"title"`
	GUID  struct {
		Text string `json:"text"`
	} `json:"guid"`
	Description string `json:"description"`
	Attrs       []struct {
		Name  string `json:"_name"`
		Value string `json:"_value"`
	} `json:"newznab:attr"`
}

func (it apiItem) attrs(name string) []string {
	var out []string
	for _, a := range it.Attrs {
		if a.Name == name {
			out = append(out, a.Value)
		}
	}
	return out
}

// apiFeed calls the API with o=json and returns the feed's items.
func apiFeed(t *testing.T, f *Fleet, key string, kv ...string) ([]apiItem, error) {
	t.Helper()
	v := url.Values{"apikey": {key}, "o": {"json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	resp, err := http.Get(f.HTTPURL() + "/api?" + v.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Items []apiItem `json:"item"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", body, err)
	}
	if doc.Error != nil {
		return nil, fmt.Errorf("error %d %s", doc.Error.Code, doc.Error.Description)
	}
	return doc.Items, nil
}

// processed waits until the release titled title shows post-processing
// (t=details has a password attr and cond holds) and returns its details.
func processed(t *testing.T, f *Fleet, key, title string, cond func(apiItem) bool) apiItem {
	t.Helper()
	var got apiItem
	testwait.Until(t, title+" post-processed", func() (bool, string) {
		items, err := apiFeed(t, f, key, "t", "search", "q", title)
		if err != nil || len(items) == 0 {
			return false, fmt.Sprintf("search %q: %d items, %v", title, len(items), err)
		}
		d, err := apiFeed(t, f, key, "t", "details", "id", items[0].GUID.Text)
		if err != nil || len(d) != 1 {
			return false, fmt.Sprintf("details: %v", err)
		}
		got = d[0]
		return cond(got), fmt.Sprintf("%+v", got.Attrs)
	})
	return got
}

// randomName is an obfuscated file name: 20 random hex digits.
func randomName(rng *rand.Rand) string {
	var b [10]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// TestPostProcessing posts, to the test NNTP server, a release with an
// NFO and a par2 index, two releases with a passworded RAR (encrypted
// headers; encrypted files only) and an obfuscated release (a shared
// title, random file names, a par2 index with the real names), indexes
// them with post-processing on and reads the results from the API:
// t=getnfo, the par2 list, password=1, the inner names and the real file
// names (in t=details and in the NZB). The server never sees more than
// the limit's connections.
func TestPostProcessing(t *testing.T) {
	t.Parallel()
	testci.Require(t, func() (string, string) {
		if rel, err := testpost.RandomRelease(context.Background(), 1, "probe", testpost.Shape{Volumes: 1, VolumeSize: 1024}); err != nil || !rel.RealPar2 {
			return "", "par2 is not installed (Debian package par2)"
		}
		return "par2", ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const group = "alt.binaries.switchyard.postproc"
	srv := nntptest.Start(t)
	srv.AddGroup(group, 0)
	c, err := nntp.Dial(ctx, nntp.Config{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	post := func(title string, files []testpost.File) {
		t.Helper()
		if _, err := testpost.PostFiles(ctx, c, group, "poster <p@example.com>", files, testpost.Options{Title: title, PartSize: 16 << 10}); err != nil {
			t.Fatal(err)
		}
	}

	named, err := testpost.RandomRelease(ctx, 7, "Named.Show.S01E01.720p.WEB-DL-SY", testpost.Shape{Volumes: 2, VolumeSize: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	post(named.Title, named.Files)

	inner := []rartest.File{{Name: "Locked.Movie.2024.1080p-SY.mkv", Data: make([]byte, 40<<10)}}
	post("Locked.Movie.2024.1080p-SY", []testpost.File{{Name: "Locked.Movie.2024.1080p-SY.rar", Data: rartest.RAR5(inner, rartest.Options{EncryptedHeaders: true})}})
	innerFiles := []rartest.File{{Name: "Sealed.Album.2024-SY/01.flac", Data: make([]byte, 30<<10)}}
	post("Sealed.Album.2024-SY", []testpost.File{{Name: "Sealed.Album.2024-SY.rar", Data: rartest.RAR4(innerFiles, rartest.Options{EncryptedFiles: true})}})

	hidden, err := testpost.RandomRelease(ctx, 8, "Hidden.Show.S01E02.720p-SY", testpost.Shape{Volumes: 3, VolumeSize: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var obf []testpost.File
	realOf := map[string]string{}
	for _, f := range hidden.Files {
		name := randomName(rng)
		if strings.HasSuffix(f.Name, ".par2") {
			name += ".par2" // as ParPar's obfuscation leaves them
		}
		realOf[name] = f.Name
		obf = append(obf, testpost.File{Name: name, Data: f.Data})
	}
	post(hidden.Title, obf)

	srv.ResetPeak()
	f, key := startPostProcessing(t, ctx, srv.Addr(), group, false)

	// The NFO, through t=getnfo, and the par2 index's files in details.
	d := processed(t, f, key, named.Title, func(it apiItem) bool { return len(it.attrs("nfo")) == 1 })
	if got := d.attrs("par2"); len(got) != 2 || !strings.HasPrefix(got[0], named.Title+".part01.rar ") {
		t.Errorf("par2 attrs %q, want the 2 volumes", got)
	}
	if got := d.attrs("password"); len(got) != 1 || got[0] != "0" {
		t.Errorf("password %q, want 0", got)
	}
	nfoItems, err := apiFeed(t, f, key, "t", "getnfo", "id", d.GUID.Text)
	if err != nil || len(nfoItems) != 1 {
		t.Fatalf("getnfo: %v", err)
	}
	wantNFO := strings.ReplaceAll(string(named.Files[0].Data), "\r\n", "\n")
	if nfoItems[0].Description != wantNFO {
		t.Errorf("getnfo: %q, want %q", nfoItems[0].Description, wantNFO)
	}
	resp, err := http.Get(f.HTTPURL() + "/api?t=getnfo&raw=1&id=" + d.GUID.Text + "&apikey=" + key)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(raw) != wantNFO || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("getnfo raw: %s %q", resp.Header.Get("Content-Type"), raw)
	}

	// Passworded: encrypted headers (no names), encrypted files (names).
	d = processed(t, f, key, "Locked.Movie.2024.1080p-SY", func(it apiItem) bool { return len(it.attrs("password")) == 1 && it.attrs("password")[0] != "0" })
	if got := d.attrs("password"); got[0] != "1" {
		t.Errorf("encrypted headers: password %q, want 1", got)
	}
	d = processed(t, f, key, "Sealed.Album.2024-SY", func(it apiItem) bool { return len(it.attrs("password")) == 1 && it.attrs("password")[0] != "0" })
	if got, in := d.attrs("password"), d.attrs("inner"); got[0] != "1" || len(in) != 1 || in[0] != innerFiles[0].Name {
		t.Errorf("encrypted files: password %q inner %q, want 1 and %q", got, in, innerFiles[0].Name)
	}

	// The obfuscated release: its files under their real names.
	d = processed(t, f, key, hidden.Title, func(it apiItem) bool { return len(it.attrs("file")) > 0 })
	want := map[string]bool{}
	for _, hf := range hidden.Files[:4] { // the .nfo and the 3 volumes
		want[hf.Name] = true
	}
	for _, n := range d.attrs("file") {
		delete(want, n)
	}
	if len(want) > 0 {
		t.Errorf("real names missing from details: %v (files %q)", want, d.attrs("file"))
	}
	resp, err = http.Get(f.HTTPURL() + "/api?t=get&id=" + d.GUID.Text + "&apikey=" + key)
	if err != nil {
		t.Fatal(err)
	}
	nzb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, hf := range hidden.Files[1:4] {
		if !strings.Contains(string(nzb), `&#34;`+hf.Name+`&#34;`) && !strings.Contains(string(nzb), `"`+hf.Name+`"`) {
			t.Errorf("the NZB names no %s:\n%.2000s", hf.Name, nzb)
		}
	}

	if peak := srv.Stats().Peak; peak > ppLimit {
		t.Errorf("the server saw %d connections at once, over the limit of %d", peak, ppLimit)
	}
	// A release's findings reach the API (SetProcessed) before its record
	// is written and the counters count it: the last one may still be on
	// its way.
	testwait.Until(t, "the counters to count 4 releases", func() (bool, string) {
		st := f.PostProcessor().Counters().Stats()
		return st.Articles > 0 && st.Releases >= 4, fmt.Sprintf("%+v", st)
	})
	t.Logf("post-processing: %+v", f.PostProcessor().Counters().Stats())
}
