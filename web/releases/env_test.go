package releases_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testusenet"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/web"
	"github.com/switchyard-dev/switchyard/web/releases"
	"github.com/switchyard-dev/switchyard/web/watch"
)

const testKey = "page-test-key-0123456789"

// env is a real persist server, the usenet store, an index following its
// releases stream, the watch gateway (admitting the page's key) and the
// page, served over HTTP as the fleet mounts them.
type env struct {
	t     *testing.T
	store *usenet.Store
	bins  *persist.KV
	index *search.Index
	u     *testusenet.Env
	srv   *httptest.Server
}

func keys(k string) bool { return k == testKey }

func newEnv(t *testing.T, mod func(*releases.Config)) *env {
	t.Helper()
	u := testusenet.Start(t)
	c, st, ix := u.Client, u.Store, u.Index
	cfg := releases.Config{Index: ix, Store: st, Scope: st.Scope(), APIKeys: keys}
	if mod != nil {
		mod(&cfg)
	}
	page, err := releases.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := watch.New(watch.Config{Client: c, Authorizer: releases.WatchAuthorizer(keys, st.Scope(), nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	gw.Mount(mux)
	page.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if err := gw.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &env{t: t, u: u, store: st, bins: u.Binaries, index: ix, srv: srv}
}

// release is a visible release posted hours ago with one binary per file
// name, each of two parts (present of them seen).
func release(id, name string, cat int, hours int, present int, files ...string) (usenet.Release, []usenet.Binary) {
	r := usenet.Release{ID: id, Name: name, Category: cat, Poster: "poster <p@example.com>", Groups: []string{"alt.binaries.test"},
		Date: time.Now().Add(-time.Duration(hours) * time.Hour).Unix(), Visible: true, Version: 1}
	var bins []usenet.Binary
	for i, f := range files {
		b := usenet.Binary{ID: fmt.Sprintf("%s-b%d", id, i), Release: id, Poster: r.Poster, Name: f, File: i + 1, Files: len(files),
			Subject: fmt.Sprintf(`[%d/%d] - "%s" yEnc (1/2)`, i+1, len(files), f), Parts: 2, Date: r.Date, Groups: r.Groups,
			Segments: []usenet.Segment{{Number: 1, Bytes: 700, ID: f + ".1@example.com"}, {Number: 2, Bytes: 300, ID: f + ".2@example.com"}}[:present]}
		bins = append(bins, b)
		r.Binaries = append(r.Binaries, usenet.FileSummary{ID: b.ID, Name: f, File: i + 1, Parts: 2, Present: present, Bytes: int64(present) * 500})
		r.Size += int64(present) * 500
	}
	r.Files = len(files)
	return r, bins
}

// post writes r and its binaries to the store and returns the release's
// seq on the releases stream, without waiting for the index.
func (e *env) post(r usenet.Release, bins []usenet.Binary) uint64 {
	e.t.Helper()
	ctx := context.Background()
	for _, b := range bins {
		v, _ := json.Marshal(b)
		if _, err := e.bins.Set(ctx, b.ID, v, persist.SetOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	v, _ := json.Marshal(r)
	res, err := e.store.Releases().Set(ctx, v, persist.SetOptions{Key: r.ID})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Seq
}

// add posts r and waits, on the index's commit signal, until it has it.
func (e *env) add(r usenet.Release, bins []usenet.Binary) {
	e.t.Helper()
	e.u.WaitSeq(e.t, e.post(r, bins))
}

// standard adds three releases of three categories, newest first: a TV
// episode, a film and an album.
func (e *env) standard() {
	e.t.Helper()
	e.add(release("tv", "Show.Name.S01E02.720p.HDTV.x264-GRP", usenet.CatTVHD, 1, 2, "show.rar", "show.par2"))
	e.add(release("film", "Film.Title.2021.1080p.BluRay.x264-GRP", usenet.CatMoviesHD, 2, 1, "film.mkv"))
	e.add(release("album", "Artist-Album-2021-FLAC", usenet.CatAudioFLAC, 3, 2, "album.flac"))
}

// do sends a request with the header h (pairs of name and value) and
// returns the response with its body read.
func (e *env) do(method, path string, body io.Reader, h ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// get GETs path with the key in its header and decodes a 200's JSON.
func get[T any](e *env, path string) T {
	e.t.Helper()
	resp, b := e.do("GET", path, nil, web.APIKeyHeader, testKey)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		e.t.Fatalf("GET %s: %v\n%s", path, err, b)
	}
	return v
}

// apiError decodes an error answer.
func apiError(t *testing.T, b []byte) (code, msg string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("not an error answer (%v): %s", err, b)
	}
	return e.Error.Code, e.Error.Message
}

func names(items []releases.Item) string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	return strings.Join(out, ",")
}

func jsonDecode(b []byte, v any) error { return json.Unmarshal(b, v) }
