package newznab_test

import (
	"context"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/search"
)

// probeQ is the size of the outside probe's q: 600 KB, 150,000 words.
var probeQ = strings.Repeat("abc ", 150_000)

func words(n int) string {
	var w []string
	for i := range n {
		w = append(w, "w"+strconv.Itoa(i))
	}
	return strings.Join(w, " ")
}

func cats(n int) string { return strings.TrimSuffix(strings.Repeat("5040,", n), ",") }

func decodeError(t *testing.T, body []byte) (int, string) {
	t.Helper()
	var got specError
	if err := xml.Unmarshal(body, &got); err != nil {
		t.Fatalf("not an error answer: %v\n%.300s", err, body)
	}
	return got.Code, got.Description
}

func TestSearchLimits(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	k := "&apikey=" + testKey
	esc := url.QueryEscape
	show := strings.TrimSpace(strings.Repeat("show ", search.MaxWordsBytes/5))
	for _, p := range []string{
		"t=search&q=" + esc(show),
		"t=search&q=" + esc(words(search.MaxWords)),
		"t=search&cat=" + cats(search.MaxCats),
		"t=search&group=" + strings.Repeat("g", search.MaxGroupBytes),
		"t=tvsearch&q=" + esc(show) + "&season=1",
	} {
		e.feed(p + k) // a feed, not an error
	}
	if got := titles(e.feed("t=search&q=" + esc(show) + k)); len(got) != 3 {
		t.Errorf("a repeated word found %q, want the three shows", got)
	}
	for _, tc := range []struct {
		name, params, desc string
	}{
		{"the probe's query", "t=search&q=" + esc(probeQ), "Incorrect parameter (q: longer than 512 bytes)"},
		{"q a byte too long", "t=search&q=" + strings.Repeat("a", search.MaxWordsBytes+1), "Incorrect parameter (q: longer than 512 bytes)"},
		{"q a word too many", "t=search&q=" + esc(words(search.MaxWords+1)), "Incorrect parameter (q: more than 32 distinct words)"},
		{"tvsearch title", "t=tvsearch&season=1&q=" + esc(probeQ), "Incorrect parameter (q: longer than 512 bytes)"},
		{"movie title", "t=movie&q=" + esc(words(search.MaxWords+1)), "Incorrect parameter (q: more than 32 distinct words)"},
		{"a category too many", "t=search&cat=" + cats(search.MaxCats+1), "Incorrect parameter (cat: more than 64 categories)"},
		{"a long category list", "t=search&cat=" + cats(100_000), "Incorrect parameter (cat: more than 64 categories)"},
		{"group too long", "t=search&group=" + strings.Repeat("g", search.MaxGroupBytes+1), "Incorrect parameter (group: longer than 256 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := e.get(tc.params + k)
			if code, desc := decodeError(t, body); code != newznab.ErrIncorrectParam || desc != tc.desc {
				t.Errorf("error %d %q, want 201 %q", code, desc, tc.desc)
			}
		})
	}
	// A form larger than MaxFormBytes is refused before it is parsed.
	form := url.Values{"t": {"search"}, "apikey": {testKey}, "q": {strings.Repeat("x", newznab.MaxFormBytes)}}
	resp, err := http.Post(e.server.URL+"/api", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got specError
	if err := xml.NewDecoder(resp.Body).Decode(&got); err != nil || got.Code != newznab.ErrIncorrectParam || !strings.Contains(got.Description, "form larger than 65536 bytes") {
		t.Errorf("large form: %+v, %v", got, err)
	}
}

// bareHandler is the API over an empty index, with no follower or bus, so
// that nothing else allocates while a test counts allocations.
func bareHandler(t testing.TB, cfg newznab.Config, now func() time.Time) http.Handler {
	t.Helper()
	ix, err := search.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	cfg.Index, cfg.Store = ix, panicStore{}
	if now == nil {
		return newznab.Handler(cfg)
	}
	return newznab.HandlerAt(cfg, now)
}

// TestProbeQueryCostsLittle: the probe's query (which took ~40 s of a core
// and grew the process by 200 MB) is answered 201 before its words are
// split: its cost in allocations is a small constant, and in bytes about
// the copies of the query the URL parser makes. Not parallel, as the
// package's tests: allocations are counted over the whole process.
func TestProbeQueryCostsLittle(t *testing.T) {
	codes := map[int]int{}
	h := bareHandler(t, newznab.Config{Observe: func(_ string, code int) { codes[code]++ }}, nil)
	req := httptest.NewRequest("GET", "/api?t=search&q="+url.QueryEscape(probeQ), nil)
	serve := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if code, _ := decodeError(t, rec.Body.Bytes()); code != newznab.ErrIncorrectParam {
			t.Fatalf("error %d, want 201", code)
		}
	}
	const runs = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		serve()
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 4*uint64(len(probeQ)) {
		t.Errorf("a refused query allocates %d bytes, want at most 4 times the query's %d", perRun, len(probeQ))
	}
	// Splitting 150,000 words would be 150,000 allocations at least.
	n := testing.AllocsPerRun(runs, serve)
	if n > 200 {
		t.Errorf("a refused query makes %v allocations, want at most 200", n)
	}
	if codes[newznab.ErrIncorrectParam] == 0 || len(codes) != 1 {
		t.Errorf("observed codes %v, want only 201", codes)
	}
}

func TestSearchBudget(t *testing.T) {
	past := func() time.Time { return time.Unix(1_000_000_000, 0) } // the budget ran out long ago
	for _, tc := range []struct {
		budget time.Duration
		desc   string
	}{
		{0, "Unknown error (search took longer than its time budget of 2s: use fewer categories or more specific words)"},
		{500 * time.Millisecond, "Unknown error (search took longer than its time budget of 500ms: use fewer categories or more specific words)"},
	} {
		h := bareHandler(t, newznab.Config{SearchBudget: tc.budget}, past)
		for _, fn := range []string{"search", "tvsearch", "movie"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api?t="+fn+"&q=show", nil))
			if code, desc := decodeError(t, rec.Body.Bytes()); code != newznab.ErrUnknown || desc != tc.desc {
				t.Errorf("budget %v, t=%s: error %d %q, want 900 %q", tc.budget, fn, code, desc, tc.desc)
			}
		}
	}
	// The budget starts at the request: a search in it is answered.
	h := bareHandler(t, newznab.Config{}, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api?t=search&q=show", nil))
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/rss+xml") {
		t.Errorf("search within its budget: %s", rec.Body)
	}
}

// TestClientGoneIsNotAnswered: a search whose client went away ends, and
// nothing is written or observed for it.
func TestClientGoneIsNotAnswered(t *testing.T) {
	observed := 0
	h := bareHandler(t, newznab.Config{Observe: func(string, int) { observed++ }}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api?t=search&q=show", nil).WithContext(ctx))
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Errorf("answered a client that went away: %q %s", rec.Header(), rec.Body)
	}
	if observed != 0 {
		t.Errorf("observed %d requests, want 0", observed)
	}
}

// FuzzSearchParams: whatever the parameters of a search function, the
// answer is a feed or error 201, never a failed search (900): every query
// the parser accepts is one the index runs, and a q over the limit is
// always refused.
func FuzzSearchParams(f *testing.F) {
	for _, s := range []string{
		"q=some+show", "q=show&season=1&ep=2&cat=5000,5040", "q=film&cat=2000&group=alt.binaries.x",
		"q=" + url.QueryEscape(`"*-:NEAR(`), "cat=,,", "cat=5000,-1", "limit=1000&offset=5&maxage=3",
		"q=" + strings.Repeat("a", 513), "q=" + url.QueryEscape(words(33)), "cat=" + cats(65),
		"q=%zz", "q=%00%ff", "season=99999999999999999999", "t=get&id=x",
	} {
		for fn := range uint8(3) {
			f.Add(fn, s)
		}
	}
	h := bareHandler(f, newznab.Config{}, nil)
	fns := []string{"search", "tvsearch", "movie"}
	f.Fuzz(func(t *testing.T, fn uint8, raw string) {
		req := httptest.NewRequest("GET", "/api", nil)
		// The first t is the function, whatever raw adds.
		req.URL.RawQuery = "t=" + fns[int(fn)%len(fns)] + "&" + raw
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/rss+xml") {
			if q := req.URL.Query().Get("q"); len(q) > search.MaxWordsBytes {
				t.Fatalf("%q: a q of %d bytes was searched", req.URL.RawQuery, len(q))
			}
			return
		}
		if code, desc := decodeError(t, rec.Body.Bytes()); code != newznab.ErrIncorrectParam {
			t.Fatalf("%q: error %d %q", req.URL.RawQuery, code, desc)
		}
	})
}
