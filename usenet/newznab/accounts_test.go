package newznab_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/progress"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/users"
)

// limitError is an error answer with the reset time beside it.
type limitError struct {
	XMLName     xml.Name `xml:"error"`
	Code        int      `xml:"code,attr"`
	Description string   `xml:"description,attr"`
	Reset       string   `xml:"reset,attr"`
}

// newUsersEnv is an env whose API has a users store on clk beside the
// admin key testKey.
func newUsersEnv(t *testing.T, clk *progress.FakeClock) (*env, *users.Store) {
	t.Helper()
	st, err := users.Open(filepath.Join(t.TempDir(), users.File), users.Config{Now: clk.Now, RegistrationsPerDay: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := newEnvWith(t, func(c *newznab.Config) { c.Users = st })
	e.add(usenet.Release{ID: "tv1", Name: "Some.Show.S01E02.720p.HDTV-GRP", Category: usenet.CatTVHD, Date: e.now.Add(-time.Hour).Unix()}, "some.show.rar")
	return e, st
}

// apiErr reads the error answer of params, failing the test if it is not one.
func (e *env) apiErr(params string) (limitError, string) {
	e.t.Helper()
	resp, body := e.get(params)
	var got limitError
	if err := xml.Unmarshal(body, &got); err != nil {
		e.t.Fatalf("%s: not an error: %v\n%s", params, err, body)
	}
	return got, resp.Header.Get("Retry-After")
}

// TestUserLimits: a user's key works up to its limits; past them the
// answers are 500 "Request limit reached" and 501 "Download limit reached",
// the description exactly the spec's text, with the next midnight UTC as
// a reset attribute (and JSON field) and the seconds to it as Retry-After;
// the next day the counts start again. The admin key has no limits.
func TestUserLimits(t *testing.T) {
	t.Parallel()
	clk := progress.NewFakeClock(time.Date(2026, 3, 14, 23, 0, 0, 0, time.UTC))
	e, st := newUsersEnv(t, clk)
	ctx := context.Background()
	key, err := st.Add(ctx, "alice", users.Limits{RequestsPerDay: 2, GrabsPerDay: 1})
	if err != nil {
		t.Fatal(err)
	}
	k := "&apikey=" + key
	for range 2 {
		if doc := e.feed("t=search" + k); len(doc.Channel.Items) != 1 {
			t.Fatalf("a user's search found %v", titles(doc))
		}
	}
	got, retry := e.apiErr("t=tvsearch" + k)
	const reset = "2026-03-15T00:00:00Z"
	if got.Code != 500 || got.Description != "Request limit reached" || got.Reset != reset || retry != "3600" {
		t.Fatalf("past the request limit: %+v, Retry-After %q; want 500 %q reset %s, Retry-After 3600", got, retry, "Request limit reached", reset)
	}
	_, body := e.get("t=search&o=json" + k)
	var j struct {
		Error struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
			Reset       string `json:"reset"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &j); err != nil || j.Error.Code != 500 || j.Error.Description != "Request limit reached" || j.Error.Reset != reset {
		t.Fatalf("json: %s (%v)", body, err)
	}

	// A grab is not a request: the first still works.
	resp, nzb := e.get("t=get&id=tv1" + k)
	if resp.Header.Get("Content-Type") != usenet.NZBContentType {
		t.Fatalf("a user's grab: %s", nzb)
	}
	got, retry = e.apiErr("t=get&id=tv1" + k)
	if got.Code != 501 || got.Description != "Download limit reached" || got.Reset != reset || retry != "3600" {
		t.Fatalf("past the grab limit: %+v, Retry-After %q", got, retry)
	}
	// A grab of what does not exist counts nothing (and says so).
	if got, _ := e.apiErr("t=get&id=missing" + k); got.Code != 300 {
		t.Fatalf("missing release: %+v", got)
	}

	// The admin key: no limits, whatever the users used.
	for range 5 {
		e.feed("t=search&apikey=" + testKey)
	}
	for range 3 {
		if resp, _ := e.get("t=get&id=tv1&apikey=" + testKey); resp.Header.Get("Content-Type") != usenet.NZBContentType {
			t.Fatal("the admin key's grab was refused")
		}
	}

	clk.Advance(time.Hour) // midnight
	e.feed("t=search" + k)
	if resp, _ := e.get("t=get&id=tv1" + k); resp.Header.Get("Content-Type") != usenet.NZBContentType {
		t.Fatal("the next day the user's grab was refused")
	}

	if got, _ := e.apiErr("t=search&apikey=0123456789abcdef0123456789abcdef"); got.Code != 100 {
		t.Fatalf("an unknown key: %+v", got)
	}
	if _, err := st.Reset(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.apiErr("t=search" + k); got.Code != 100 {
		t.Fatalf("the key replaced by reset: %+v", got)
	}
	cfg := newznab.Config{APIKeys: newznab.KeyChecker(testKey), Users: st}
	if !cfg.ValidKey(ctx, testKey) || cfg.ValidKey(ctx, key) || cfg.ValidKey(ctx, "") {
		t.Fatal("ValidKey: want the admin key valid, the replaced key and no key not")
	}
}

// TestRefusedParametersCountNoRequest: a request refused for its
// parameters (200 Missing parameter, 201 Incorrect parameter) did none of
// the work it asked for, and uses none of the user's requests, as nZEDb
// checks a function's parameters before it counts the request; a request
// answered counts, one that finds nothing (300 No such item) too. The
// order of the answers stays nZEDb's: the key, then the limit, then the
// parameters. (Was: every request was counted when its key was checked,
// before its parameters were, so a client sending a bad cat or limit
// used up the day's requests on errors.)
func TestRefusedParametersCountNoRequest(t *testing.T) {
	t.Parallel()
	clk := progress.NewFakeClock(time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC))
	e, st := newUsersEnv(t, clk)
	ctx := context.Background()
	key, err := st.Add(ctx, "alice", users.Limits{RequestsPerDay: 2})
	if err != nil {
		t.Fatal(err)
	}
	k := "&apikey=" + key
	for params, code := range map[string]int{
		"t=search&cat=abc":                           201,
		"t=search&limit=-1":                          201,
		"t=search&q=" + strings.Repeat("word+", 200): 201,
		"t=tvsearch&season=x":                        201,
		"t=tvsearch&season=1&ep=12/40":               201,
		"t=movie&imdbid=abc":                         201,
		"t=details":                                  200,
		"t=getnfo":                                   200,
	} {
		if got, _ := e.apiErr(params + k); got.Code != code {
			t.Fatalf("%s: %+v, want code %d", params, got, code)
		}
	}
	requestsToday := func() int {
		t.Helper()
		list, err := st.List(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("List: %v, %v", list, err)
		}
		return list[0].RequestsToday
	}
	if n := requestsToday(); n != 0 {
		t.Fatalf("after 8 requests refused for their parameters: %d requests counted, want 0", n)
	}
	if got, _ := e.apiErr("t=details&id=missing" + k); got.Code != 300 {
		t.Fatalf("details of a missing release: %+v", got)
	}
	if doc := e.feed("t=search" + k); len(doc.Channel.Items) != 1 {
		t.Fatalf("a user's search found %v", titles(doc))
	}
	if n := requestsToday(); n != 2 {
		t.Fatalf("after a details of a missing release and a search: %d requests counted, want 2", n)
	}
	// At the limit the limit is the answer, whatever the parameters.
	if got, _ := e.apiErr("t=search&cat=abc" + k); got.Code != 500 {
		t.Fatalf("past the limit, a bad cat: %+v, want 500", got)
	}
	if n := requestsToday(); n != 2 {
		t.Fatalf("after a refused request past the limit: %d requests counted, want 2", n)
	}
}

// TestGrabsAttr: the grabs attr of search and details items is how often
// the release was grabbed, by anyone.
func TestGrabsAttr(t *testing.T) {
	t.Parallel()
	e, st := newUsersEnv(t, progress.NewFakeClock(time.Now()))
	key, err := st.Add(context.Background(), "bob", users.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	grabs := func(params string) string {
		t.Helper()
		doc := e.feed(params)
		if len(doc.Channel.Items) != 1 {
			t.Fatalf("%s: items %v", params, titles(doc))
		}
		g := doc.Channel.Items[0].attrs("grabs")
		if len(g) != 1 {
			t.Fatalf("%s: grabs attrs %v", params, g)
		}
		return g[0]
	}
	if g := grabs("t=search&apikey=" + testKey); g != "0" {
		t.Fatalf("before any grab: %s", g)
	}
	e.get("t=get&id=tv1&apikey=" + testKey)
	e.get("t=get&id=tv1&apikey=" + key)
	for _, p := range []string{"t=search&apikey=" + key, "t=details&id=tv1&apikey=" + testKey} {
		if g := grabs(p); g != "2" {
			t.Errorf("%s: grabs %s after 2 grabs", p, g)
		}
	}
}

// TestHeadGrabCountsNothing: a HEAD of t=get answers the NZB's headers
// but sends no NZB, so it counts no grab: neither the user's, against its
// limit, nor the release's grabs attr. The GET after it is the grab.
// (Was: a HEAD counted as a GET, so a client checking a link used up the
// user's grabs and raised the release's count without a download.)
func TestHeadGrabCountsNothing(t *testing.T) {
	t.Parallel()
	e, st := newUsersEnv(t, progress.NewFakeClock(time.Now()))
	key, err := st.Add(context.Background(), "carol", users.Limits{GrabsPerDay: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, testKey} {
		for range 2 {
			resp, err := http.Head(e.server.URL + "/api?t=get&id=tv1&apikey=" + k)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != usenet.NZBContentType {
				t.Fatalf("HEAD t=get: status %d, content type %q", resp.StatusCode, ct)
			}
		}
	}
	doc := e.feed("t=details&id=tv1&apikey=" + testKey)
	if g := doc.Channel.Items[0].attrs("grabs"); len(g) != 1 || g[0] != "0" {
		t.Fatalf("grabs attr %v after HEADs only, want 0", g)
	}
	if resp, body := e.get("t=get&id=tv1&apikey=" + key); resp.Header.Get("Content-Type") != usenet.NZBContentType {
		t.Fatalf("the user's one grab of the day, after HEADs: %s", body)
	}
	if got, _ := e.apiErr("t=get&id=tv1&apikey=" + key); got.Code != 501 {
		t.Fatalf("the second GET: %+v, want 501", got)
	}
	doc = e.feed("t=details&id=tv1&apikey=" + testKey)
	if g := doc.Channel.Items[0].attrs("grabs"); len(g) != 1 || g[0] != "1" {
		t.Fatalf("grabs attr %v after one GET, want 1", g)
	}
}

// TestRegisterAPI: t=register answers 104 until an operator opens
// registration, then creates an account with the registration's limits and
// answers its key, as nZEDb does; the spec's 105, 106, 200 and, past the
// registrations a day, 103.
func TestRegisterAPI(t *testing.T) {
	t.Parallel()
	e, st := newUsersEnv(t, progress.NewFakeClock(time.Now()))
	got, _ := e.apiErr("t=register&email=a@example.org")
	if got.Code != 104 || got.Description != "Registrations are closed" {
		t.Fatalf("closed: %+v", got)
	}
	if err := st.SetRegistration(context.Background(), users.Registration{Open: true, Limits: users.Limits{RequestsPerDay: 1}}); err != nil {
		t.Fatal(err)
	}
	var caps struct {
		Registration struct {
			Available string `xml:"available,attr"`
			Open      string `xml:"open,attr"`
		} `xml:"registration"`
	}
	if _, body := e.get("t=caps"); xml.Unmarshal(body, &caps) != nil || caps.Registration.Available != "yes" || caps.Registration.Open != "yes" {
		t.Fatalf("caps registration %+v", caps.Registration)
	}
	_, body := e.get("t=register&email=" + url.QueryEscape("a@example.org"))
	var reg struct {
		XMLName  xml.Name `xml:"register"`
		Username string   `xml:"username,attr"`
		APIKey   string   `xml:"apikey,attr"`
	}
	if err := xml.Unmarshal(body, &reg); err != nil || reg.Username != "a@example.org" || len(reg.APIKey) != 32 {
		t.Fatalf("register: %s (%v)", body, err)
	}
	e.feed("t=search&apikey=" + reg.APIKey)
	if got, _ := e.apiErr("t=search&apikey=" + reg.APIKey); got.Code != 500 {
		t.Fatalf("a registered account's limit of 1: %+v", got)
	}
	for params, code := range map[string]int{
		"t=register&email=a@example.org":  105,
		"t=register&email=not-an-address": 106,
		"t=register":                      200,
	} {
		if got, _ := e.apiErr(params); got.Code != code {
			t.Errorf("%s: %+v, want %d", params, got, code)
		}
	}
	_, body = e.get("t=register&o=json&email=b@example.org")
	var j struct{ Username, APIKey string }
	if err := json.Unmarshal(body, &j); err != nil || j.Username != "b@example.org" || len(j.APIKey) != 32 {
		t.Fatalf("register o=json: %s (%v)", body, err)
	}
	if got, _ := e.apiErr("t=register&email=c@example.org"); got.Code != 103 {
		t.Fatalf("the third registration of a day allowing 2: %+v", got)
	}
	if n, _ := st.List(context.Background()); len(n) != 2 {
		t.Fatalf("%d accounts, want 2", len(n))
	}
}

// TestRegisterNamesTheAccountMade: the username of t=register's answer is
// the account's name as it was made, the address's domain in lower case
// (its local part as given), in XML and JSON alike, so that a client shows
// the account the operator finds in users list. (Was: the answer repeated
// the address as typed, alice@Example.org, while the account made was
// alice@example.org.)
func TestRegisterNamesTheAccountMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, st := newUsersEnv(t, progress.NewFakeClock(time.Now()))
	if err := st.SetRegistration(ctx, users.Registration{Open: true}); err != nil {
		t.Fatal(err)
	}
	var x struct {
		XMLName  xml.Name `xml:"register"`
		Username string   `xml:"username,attr"`
		APIKey   string   `xml:"apikey,attr"`
	}
	if _, body := e.get("t=register&email=" + url.QueryEscape("alice@Example.org")); xml.Unmarshal(body, &x) != nil || x.Username != "alice@example.org" {
		t.Fatalf("register alice@Example.org: %s, want username alice@example.org", body)
	}
	var j struct{ Username, APIKey string }
	if _, body := e.get("t=register&o=json&email=" + url.QueryEscape("Bob@EXAMPLE.Org")); json.Unmarshal(body, &j) != nil || j.Username != "Bob@example.org" {
		t.Fatalf("register Bob@EXAMPLE.Org: %s, want username Bob@example.org", body)
	}
	for _, name := range []string{x.Username, j.Username} {
		if _, err := st.User(ctx, name); err != nil {
			t.Errorf("the answer names %q, which is no account: %v", name, err)
		}
	}
}

// TestRegisterWithoutUsers: an API without a users store has no accounts to
// register: 104, and caps says registration is not available.
func TestRegisterWithoutUsers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if got, _ := e.apiErr("t=register&email=a@example.org"); got.Code != 104 {
		t.Fatalf("%+v", got)
	}
	_, body := e.get("t=caps")
	var caps struct {
		Registration struct {
			Available string `xml:"available,attr"`
		} `xml:"registration"`
	}
	if err := xml.Unmarshal(body, &caps); err != nil || caps.Registration.Available != "no" {
		t.Fatalf("caps: %s", body)
	}
}

// TestHeadAtGrabLimitAnswersAsGet: a HEAD answers the headers a GET of the
// same URL answers (RFC 9110 9.3.2): a user at its grab limit gets the
// GET's error 501 from it too. (Was: a HEAD skipped the limit with the
// count, and answered 200 with the NZB's headers: a client checking the
// link was told the download was there.)
func TestHeadAtGrabLimitAnswersAsGet(t *testing.T) {
	t.Parallel()
	e, st := newUsersEnv(t, progress.NewFakeClock(time.Now()))
	key, err := st.Add(context.Background(), "carol", users.Limits{GrabsPerDay: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.get("t=get&id=tv1&apikey=" + key) // the day's one grab
	u := e.server.URL + "/api?t=get&id=tv1&apikey=" + key
	g, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	g.Body.Close()
	h, err := http.Head(u)
	if err != nil {
		t.Fatal(err)
	}
	h.Body.Close()
	if h.StatusCode != g.StatusCode || h.Header.Get("Content-Type") != g.Header.Get("Content-Type") {
		t.Fatalf("over the grab limit: GET %d %q, HEAD %d %q: HEAD says the NZB is there",
			g.StatusCode, g.Header.Get("Content-Type"), h.StatusCode, h.Header.Get("Content-Type"))
	}
}
