package releases_test

import (
	"context"
	"encoding/xml"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/users"
	"github.com/switchyard-dev/switchyard/web"
	"github.com/switchyard-dev/switchyard/web/releases"
)

// TestSearch: the search answers newest first with each release's files
// (FileCount), and words, categories (a parent with its children), group,
// offset and limit select as t=search's do.
func TestSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.standard()
	all := get[releases.SearchAnswer](e, "/releases/api/search")
	if all.Total != 3 || names(all.Items) != "tv,film,album" || all.Limit != releases.PageSizeDefault {
		t.Fatalf("all: total %d, items %s, limit %d", all.Total, names(all.Items), all.Limit)
	}
	tv := all.Items[0]
	if tv.Files != 2 || tv.CategoryName != "TV > HD" || tv.Size != 2000 || tv.Poster == "" || len(tv.Groups) != 1 {
		t.Errorf("tv item %+v", tv)
	}
	for _, c := range []struct{ name, query, want string }{
		{"words", "q=film+title", "film"},
		{"words any case", "q=SHOW", "tv"},
		{"a parent category has its children", "cat=5000", "tv"},
		{"categories", "cat=2000,3040", "film,album"},
		{"group", "group=alt.binaries.test", "tv,film,album"},
		{"other group", "group=alt.binaries.other", ""},
		{"page", "offset=1&limit=1", "film"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := get[releases.SearchAnswer](e, "/releases/api/search?"+c.query)
			if names(got.Items) != c.want {
				t.Errorf("%s: %s, want %s", c.query, names(got.Items), c.want)
			}
		})
	}
}

// TestSearchSeenWaits: a search that names the stream seq of a release
// just posted waits for the index to apply it, so the page that heard of
// it on the WebSocket finds it.
func TestSearchSeenWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seq := e.post(release("new", "Brand.New.S01E01.1080p.WEB-DL-GRP", usenet.CatTVWebDL, 0, 2, "new.mkv"))
	got := get[releases.SearchAnswer](e, "/releases/api/search?seen="+strconv.FormatUint(seq, 10))
	if names(got.Items) != "new" || got.IndexSeq < seq {
		t.Fatalf("items %s at index seq %d, want new at >= %d", names(got.Items), got.IndexSeq, seq)
	}
}

// TestBadInput: every malformed parameter is a 400 with code bad-request
// and a message naming the parameter; a missing or unknown release is a
// 404.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, c := range []struct{ name, path, param string }{
		{"negative offset", "/releases/api/search?offset=-1", "offset"},
		{"offset not a number", "/releases/api/search?offset=x", "offset"},
		{"zero limit", "/releases/api/search?limit=0", "limit"},
		{"limit over the most", "/releases/api/search?limit=101", "limit"},
		{"category not a number", "/releases/api/search?cat=tv", "cat"},
		{"category zero", "/releases/api/search?cat=0", "cat"},
		{"too many categories", "/releases/api/search?cat=" + strings.Repeat("5000,", 64) + "5000", "cat"},
		{"words too long", "/releases/api/search?q=" + strings.Repeat("a", 513), "q"},
		{"too many words", "/releases/api/search?q=" + url.QueryEscape(distinct(33)), "q"},
		{"group too long", "/releases/api/search?group=" + strings.Repeat("g", 257), "group"},
		{"seen not a seq", "/releases/api/search?seen=-2", "seen"},
		{"release without id", "/releases/api/release", "id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := e.do("GET", c.path, nil, web.APIKeyHeader, testKey)
			code, msg := apiError(t, b)
			if resp.StatusCode != http.StatusBadRequest || code != "bad-request" || !strings.HasPrefix(msg, c.param) {
				t.Errorf("%s: %d %s %q, want 400 bad-request naming %s", c.path, resp.StatusCode, code, msg, c.param)
			}
		})
	}
	for _, path := range []string{"/releases/api/release?id=nope", "/releases/nzb/nope", "/releases/no-such-page"} {
		resp, b := e.do("GET", path, nil, web.APIKeyHeader, testKey)
		if code, _ := apiError(t, b); resp.StatusCode != http.StatusNotFound || code != "not-found" {
			t.Errorf("%s: %d %s, want 404 not-found", path, resp.StatusCode, code)
		}
	}
}

// (Was: a pair the query parser could not decode was dropped and the rest
// answered, so q=Film% or q=x;y listed every release.)
func TestMalformedQueryRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.standard()
	for _, c := range []struct{ path, msg string }{
		{"/releases/api/search?q=Film%", `malformed query: invalid URL escape "%"`},
		{"/releases/api/search?q=x;y", "malformed query: invalid semicolon separator in query"},
		{"/releases/api/release?id=tv;", "malformed query: invalid semicolon separator in query"},
	} {
		resp, b := e.do("GET", c.path, nil, web.APIKeyHeader, testKey)
		if code, msg := apiError(t, b); resp.StatusCode != http.StatusBadRequest || code != "bad-request" || msg != c.msg {
			t.Errorf("%s: %d %s %q, want 400 bad-request %q", c.path, resp.StatusCode, code, msg, c.msg)
		}
	}
}

// distinct is n distinct words.
func distinct(n int) string {
	var w []string
	for i := range n {
		w = append(w, "w"+strconv.Itoa(i))
	}
	return strings.Join(w, " ")
}

// TestReleaseAndNZB: a release answers its files with their completion,
// and its NZB is the NZB of its binaries, named, with no link that could
// carry a key.
func TestReleaseAndNZB(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.standard()
	d := get[releases.Detail](e, "/releases/api/release?id=film")
	if d.Name != "Film.Title.2021.1080p.BluRay.x264-GRP" || len(d.FilesList) != 1 || d.Parts != 2 || d.Present != 1 || d.NZB != "/releases/nzb/film" {
		t.Fatalf("detail %+v", d)
	}
	if f := d.FilesList[0]; f.Name != "film.mkv" || f.Bytes != 500 || f.Parts != 2 || f.Present != 1 {
		t.Errorf("file %+v", f)
	}
	resp, body := e.do("GET", "/releases/nzb/tv", nil, web.APIKeyHeader, testKey)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != usenet.NZBContentType {
		t.Fatalf("nzb: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, ".nzb") {
		t.Errorf("Content-Disposition %q", cd)
	}
	for k, v := range resp.Header {
		if strings.Contains(strings.ToLower(strings.Join(v, " ")), "apikey") {
			t.Errorf("header %s %q names a key", k, v)
		}
	}
	var nzb struct {
		XMLName xml.Name
		Files   []struct {
			Subject string `xml:"subject,attr"`
		} `xml:"file"`
	}
	if err := xml.Unmarshal(body, &nzb); err != nil || nzb.XMLName.Local != "nzb" || len(nzb.Files) != 2 {
		t.Fatalf("nzb: %v, root %q, %d files:\n%s", err, nzb.XMLName.Local, len(nzb.Files), body)
	}
}

// TestAuth: the data needs the key, from the page's cookie or an
// X-Api-Key header and never from the URL; a refusal is JSON without a
// Basic challenge (a script's fetch must not make the browser prompt);
// signing in checks the key, takes it only from the body and only from a
// page of the server's own, and sets an HttpOnly SameSite=Strict cookie.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.standard()
	for _, c := range []struct {
		name   string
		path   string
		header []string
		status int
	}{
		{"no key", "/releases/api/search", nil, http.StatusUnauthorized},
		{"wrong key", "/releases/api/search", []string{web.APIKeyHeader, "wrong"}, http.StatusUnauthorized},
		{"key in the URL is not read", "/releases/api/search?apikey=" + testKey, nil, http.StatusUnauthorized},
		{"key in the header", "/releases/api/search", []string{web.APIKeyHeader, testKey}, http.StatusOK},
		{"key in the cookie", "/releases/api/search", []string{"Cookie", releases.CookieName + "=" + testKey}, http.StatusOK},
		{"nzb without key", "/releases/nzb/tv", nil, http.StatusUnauthorized},
		{"release without key", "/releases/api/release?id=tv", nil, http.StatusUnauthorized},
		{"the page holds no data", "/releases", nil, http.StatusOK},
		{"nor its script", "/releases/assets/releases.js", nil, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := e.do("GET", c.path, nil, c.header...)
			if resp.StatusCode != c.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, b, c.status)
			}
			if c.status == http.StatusUnauthorized {
				if code, _ := apiError(t, b); code != "unauthorized" || resp.Header.Get("WWW-Authenticate") != "" {
					t.Errorf("code %q, WWW-Authenticate %q", code, resp.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}

	form := func(v string) *strings.Reader { return strings.NewReader(url.Values{"key": {v}}.Encode()) }
	ct := "application/x-www-form-urlencoded"
	for _, c := range []struct {
		name   string
		path   string
		key    string
		header []string
		status int
		code   string
	}{
		{"wrong key", "/releases/api/key", "wrong", nil, http.StatusUnauthorized, "unauthorized"},
		{"no key", "/releases/api/key", "", nil, http.StatusBadRequest, "bad-request"},
		{"key in the URL", "/releases/api/key?key=" + testKey, testKey, nil, http.StatusBadRequest, "bad-request"},
		{"from another site", "/releases/api/key", testKey, []string{"Origin", "http://evil.example"}, http.StatusForbidden, "forbidden"},
	} {
		t.Run("sign in: "+c.name, func(t *testing.T) {
			resp, b := e.do("POST", c.path, form(c.key), append([]string{"Content-Type", ct}, c.header...)...)
			if code, _ := apiError(t, b); resp.StatusCode != c.status || code != c.code {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, b, c.status, c.code)
			}
			if len(resp.Cookies()) > 0 {
				t.Errorf("refused, yet set %v", resp.Cookies())
			}
		})
	}
	resp, b := e.do("POST", "/releases/api/key", form(testKey), "Content-Type", ct, "Origin", e.srv.URL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %d %s", resp.StatusCode, b)
	}
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != releases.CookieName || cs[0].Value == "" || !cs[0].HttpOnly ||
		cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" || cs[0].MaxAge <= 0 {
		t.Fatalf("cookies %+v", cs)
	}
	info := get[releases.Info](e, "/releases/api/info")
	if !info.SignedIn || info.Scope != usenet.DefaultScope || info.Stream != usenet.ReleasesStream || len(info.Categories) == 0 {
		t.Errorf("info %+v", info)
	}
	resp, _ = e.do("DELETE", "/releases/api/key", nil, "Cookie", releases.CookieName+"="+testKey)
	if cs := resp.Cookies(); resp.StatusCode != http.StatusNoContent || len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("sign out: %d %+v", resp.StatusCode, cs)
	}
	resp, b = e.do("GET", "/releases/api/info", nil)
	var out releases.Info
	if err := jsonDecode(b, &out); err != nil || resp.StatusCode != http.StatusOK || out.SignedIn || out.Problem == "" {
		t.Errorf("info without a key: %d %s", resp.StatusCode, b)
	}
}

// TestBusUsers: with an Authorizer (up --auth) a bus user reads by Basic
// auth or with its key as the page's key; a tenant of other scopes is
// refused (403).
func TestBusUsers(t *testing.T) {
	t.Parallel()
	authz := web.Accounts([]web.Account{
		{Principal: web.Principal{Name: "client", AllScopes: true}, Password: "client-pass", APIKeys: []string{"client-pass"}},
		{Principal: web.Principal{Name: "tenant", Scopes: []string{"account-1"}}, Password: "tenant-pass", APIKeys: []string{"tenant-pass"}},
	})
	e := newEnv(t, func(c *releases.Config) { c.Authorizer = authz })
	basic := func(user, pass string) []string {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pass)
		return []string{"Authorization", r.Header.Get("Authorization")}
	}
	for _, c := range []struct {
		name   string
		header []string
		status int
	}{
		{"basic", basic("client", "client-pass"), http.StatusOK},
		{"basic wrong", basic("client", "nope"), http.StatusUnauthorized},
		{"bus key as the page's key", []string{"Cookie", releases.CookieName + "=client-pass"}, http.StatusOK},
		{"indexer key still", []string{web.APIKeyHeader, testKey}, http.StatusOK},
		{"tenant", basic("tenant", "tenant-pass"), http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := e.do("GET", "/releases/api/search", nil, c.header...)
			if resp.StatusCode != c.status {
				t.Errorf("%d %s, want %d", resp.StatusCode, b, c.status)
			}
		})
	}
}

// TestWatchAuthorizer: the gateway admits the page's key as a reader of
// the usenet scope alone, asks next about everything else, and without a
// next refuses it.
func TestWatchAuthorizer(t *testing.T) {
	t.Parallel()
	req := func(cookie string) *http.Request {
		r, _ := http.NewRequest("GET", "/ws/watch", nil)
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: releases.CookieName, Value: cookie})
		}
		return r
	}
	alone := releases.WatchAuthorizer(keys, "usenet", nil)
	p, err := alone(req(testKey))
	if err != nil || !p.CanRead("usenet") || p.CanRead("hub") {
		t.Errorf("the key: %+v %v, want a reader of usenet alone", p, err)
	}
	for _, c := range []string{"", "wrong"} {
		if _, err := alone(req(c)); err == nil {
			t.Errorf("cookie %q admitted without a next", c)
		}
	}
	open := releases.WatchAuthorizer(keys, "usenet", web.Open())
	if p, err := open(req("")); err != nil || !p.AllScopes {
		t.Errorf("open next: %+v %v", p, err)
	}
}

// TestPostProcessed: what post-processing found shows on the page's data:
// the password flag in the list, the NFO, the par2 index and the inner
// names in the release.
func TestPostProcessed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r, bins := release("locked", "Locked.Film.2024.1080p-GRP", usenet.CatMoviesHD, 1, 2, "locked.part01.rar")
	r.Processed, r.Password, r.NFO = true, 1, true
	r.Par2 = []usenet.Par2File{{Name: "locked.part01.rar", Size: 1000}}
	r.Inner = []string{"Locked.Film.2024.1080p-GRP.mkv"}
	if err := e.store.PutNFO(context.Background(), r.ID, "Locked Film\nRipped by GRP\n"); err != nil {
		t.Fatal(err)
	}
	e.add(r, bins)
	ans := get[releases.SearchAnswer](e, "/releases/api/search?q=locked")
	if len(ans.Items) != 1 || ans.Items[0].Password != 1 {
		t.Fatalf("search %+v", ans)
	}
	hidden := newEnv(t, func(c *releases.Config) { c.HidePassworded = true })
	hidden.add(r, bins)
	if ans := get[releases.SearchAnswer](hidden, "/releases/api/search?q=locked"); len(ans.Items) != 0 || ans.Total != 0 {
		t.Errorf("HidePassworded: search %+v", ans)
	}
	d := get[releases.Detail](e, "/releases/api/release?id=locked")
	if d.Password != 1 || d.NFO != "Locked Film\nRipped by GRP\n" || len(d.Par2) != 1 || d.Par2[0].Name != "locked.part01.rar" ||
		len(d.Inner) != 1 || d.Inner[0] != r.Inner[0] {
		t.Fatalf("detail %+v", d)
	}
}

// TestNZBOddNames: a release whose name holds quotes, markup, control
// characters, non-ASCII and bytes that are not UTF-8 downloads as an NZB
// that is well-formed XML 1.0 with its title intact (control characters
// and bad bytes replaced), under a Content-Disposition that parses
// (RFC 6266): a printable ASCII filename and a UTF-8 filename* of the
// name.
func TestNZBOddNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	// fix is s as stored (each byte that is not UTF-8 a U+FFFD) and, for
	// XML, with the characters XML 1.0 forbids replaced too.
	fix := func(s string, xml bool) string {
		var b strings.Builder
		for _, c := range s {
			if xml && c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				c = utf8.RuneError
			}
			b.WriteRune(c)
		}
		return b.String()
	}
	for i, name := range []string{
		`<script>alert(1)</script>"onmouseover="x" 'a' & b`,
		"Café \"Crème\" ✓ 😀 (2021)",
		"ctl\x00\x01\x1b\x7f tab\there nl\ncr\r",
		"bad\xff\xfe utf\xc3 é",
	} {
		id := "odd" + strconv.Itoa(i)
		r, bins := release(id, name, usenet.CatOtherMisc, 1, 2, "f.bin")
		bins[0].Poster = name
		bins[0].Subject = name + ` "f.bin" yEnc (1/2)`
		e.add(r, bins)
		resp, body := e.do("GET", "/releases/nzb/"+id, nil, web.APIKeyHeader, testKey)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: nzb %d %s", name, resp.StatusCode, body)
		}
		cd := resp.Header.Get("Content-Disposition")
		disp, params, err := mime.ParseMediaType(cd)
		if err != nil || disp != "attachment" {
			t.Errorf("%q: Content-Disposition %q: %v", name, cd, err)
		}
		want := fix(name, false) + ".nzb"
		// mime puts filename*'s decoded value in "filename" when present.
		if got := params["filename"]; !utf8.ValidString(got) || (got != want && got != usenet.NZBFileName(r)) {
			t.Errorf("%q: Content-Disposition %q gives filename %q, want %q or %q", name, cd, got, want, usenet.NZBFileName(r))
		}
		for _, c := range cd {
			if c < 0x20 || c >= 0x7f {
				t.Errorf("%q: Content-Disposition %q holds %q", name, cd, c)
			}
		}
		var doc struct {
			Meta []struct {
				Type  string `xml:"type,attr"`
				Value string `xml:",chardata"`
			} `xml:"head>meta"`
			Files []struct {
				Poster  string `xml:"poster,attr"`
				Subject string `xml:"subject,attr"`
			} `xml:"file"`
		}
		if err := xml.Unmarshal(body, &doc); err != nil || len(doc.Meta) == 0 || len(doc.Files) != 1 {
			t.Fatalf("%q: nzb: %v\n%s", name, err, body)
		}
		if doc.Meta[0].Value != fix(name, true) || doc.Files[0].Poster != fix(name, true) || doc.Files[0].Subject != fix(bins[0].Subject, true) {
			t.Errorf("%q: nzb title %q poster %q subject %q", name, doc.Meta[0].Value, doc.Files[0].Poster, doc.Files[0].Subject)
		}
	}
}

// TestNZBCountsGrabs: an NZB downloaded from the page with a user's key is
// a grab, as t=get is: past the user's daily limit it is refused (429 with
// Retry-After) and counts nothing; a HEAD counts nothing; the admin's key
// has no limit; every grab counts for the release.
// (Was: the page sent NZBs to a user whose grab limit was used up, as often
// as asked, and counted none of them.)
func TestNZBCountsGrabs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	us, err := users.Open(filepath.Join(t.TempDir(), users.File), users.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = us.Close() })
	userKey, err := us.Add(ctx, "alice", users.Limits{GrabsPerDay: 1})
	if err != nil {
		t.Fatal(err)
	}
	nz := newznab.Config{APIKeys: keys, Users: us}
	e := newEnv(t, func(c *releases.Config) {
		c.APIKeys = func(k string) bool { return nz.ValidKey(context.Background(), k) }
		c.Grab = nz.Grab
	})
	e.standard()
	get := func(method, key string) *http.Response {
		t.Helper()
		resp, _ := e.do(method, "/releases/nzb/tv", nil, web.APIKeyHeader, key)
		return resp
	}
	if resp := get("HEAD", userKey); resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD: %d", resp.StatusCode)
	}
	if resp := get("GET", userKey); resp.StatusCode != http.StatusOK {
		t.Fatalf("first grab: %d", resp.StatusCode)
	}
	resp := get("GET", userKey)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("grab past the limit: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for range 2 {
		if resp := get("GET", testKey); resp.StatusCode != http.StatusOK {
			t.Fatalf("admin grab: %d", resp.StatusCode)
		}
	}
	g, err := us.Grabs(ctx, []string{"tv"})
	if err != nil {
		t.Fatal(err)
	}
	if g["tv"] != 3 {
		t.Fatalf("release tv counted %d grabs, want 3 (the user's one and the admin's two; not the HEAD nor the refused one)", g["tv"])
	}
}
