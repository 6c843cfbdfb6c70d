package newznab_test

import (
	"context"
	"encoding/xml"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/progress"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/users"
)

// TestMaxAgePastADuration: maxage is "releases posted at most this many
// days ago" (docs/usenet-api.md), so a larger maxage can only widen the
// result. parseQuery (functions.go) computes time.Duration(days)*24*
// time.Hour without a bound: maxage=213504 wraps int64 nanoseconds to
// about +25 minutes, and the search then answers only releases of the
// last 25 minutes — here none of the fixture's (all 1 h to 30 days old).
// Expected: every release (a maxage beyond what a Duration holds means no
// age limit).
func TestMaxAgePastADuration(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	all := e.feed("t=search&apikey=" + testKey)
	for _, days := range []string{"213504", "1000"} {
		doc := e.feed("t=search&maxage=" + days + "&apikey=" + testKey)
		if len(doc.Channel.Items) != len(all.Channel.Items) || doc.Channel.Response.Total != all.Channel.Response.Total {
			t.Errorf("maxage=%s: %d items (total %d), want all %d", days, len(doc.Channel.Items), doc.Channel.Response.Total, len(all.Channel.Items))
		}
	}
}

// TestHugeLimitAndOffset: the docs say limit "is clamped to the
// server's maximum" and 201 is for a limit/offset that is "not a number
// >= 0"; the Newznab spec says "If offset query parameter is out of bounds
// an empty result set is returned". parseQuery's num (functions.go) uses
// strconv.Atoi, so a number past int64 (limit=100000000000000000000,
// offset likewise) is refused with 201 "want a number >= 0" although it
// is one. Expected: the limit clamped (a page of MaxLimit items), the
// offset past the end giving an empty feed with the total.
func TestHugeLimitAndOffset(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	const huge = "100000000000000000000"
	for _, p := range []string{"limit=" + huge, "offset=" + huge} {
		_, body := e.get("t=search&" + p + "&apikey=" + testKey)
		var er specError
		if xml.Unmarshal(body, &er) == nil {
			t.Errorf("%s: error %d %q, want a feed", p, er.Code, er.Description)
			continue
		}
		var doc specRSS
		if err := xml.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s: %v\n%s", p, err, body)
		}
		want := 5
		if p[0] == 'o' {
			want = 0
		}
		if len(doc.Channel.Items) != want || doc.Channel.Response.Total != 5 {
			t.Errorf("%s: %d items total %d, want %d total 5", p, len(doc.Channel.Items), doc.Channel.Response.Total, want)
		}
	}
}

// TestOptionalFunctionsAndAliases: the Newznab spec: "Any conforming
// implementation should support the CAPS and SEARCH functions. Other
// functions are optional and if not supported will return the '203
// Function Not Available' when invoked" (also
// /work/shared/reference/usenet-clients.md). The handler's functions map
// (handler.go:138) has no music or book, and serve (handler.go:121-127)
// answers every t it lacks with 202 "No such function", a code for a
// function that does not exist at all. Expected: 203 for the spec's
// functions this indexer does not implement.
func TestOptionalFunctionsAndAliases(t *testing.T) {
	e := newEnv(t)
	for _, fn := range []string{"music", "book"} {
		_, body := e.get("t=" + fn + "&q=x&apikey=" + testKey)
		var er specError
		if err := xml.Unmarshal(body, &er); err != nil {
			t.Fatalf("t=%s: %v\n%s", fn, err, body)
		}
		if er.Code != 203 {
			t.Errorf("t=%s: error %d %q, want 203 Function not available", fn, er.Code, er.Description)
		}
	}
	// An unknown function stays 202.
	_, body := e.get("t=nope&apikey=" + testKey)
	var er specError
	if err := xml.Unmarshal(body, &er); err != nil || er.Code != 202 {
		t.Errorf("t=nope: %s", body)
	}
	// The spec's short names are their functions.
	_, body = e.get("t=c")
	var caps struct {
		XMLName xml.Name `xml:"caps"`
	}
	if err := xml.Unmarshal(body, &caps); err != nil {
		t.Errorf("t=c: %v\n%s", err, body)
	}
	_, body = e.get("t=b&apikey=" + testKey)
	if err := xml.Unmarshal(body, &er); err != nil || er.Code != 203 {
		t.Errorf("t=b: %s, want 203", body)
	}
	_, body = e.get("t=s&apikey=" + testKey)
	var feed struct {
		XMLName xml.Name `xml:"rss"`
	}
	if err := xml.Unmarshal(body, &feed); err != nil {
		t.Errorf("t=s: %v\n%s", err, body)
	}
}

// TestNZBFileDateWithoutCopyDates: an NZB <file date> is the file's
// posting date in unix seconds. usenet.PostBinaries (usenet/nzb.go:205-212)
// keeps every segment of a record "written before copies had dates (all
// zero)" as its comment promises, but then sets b.Date = f.From, which
// for such a record is 0: t=get answers date="0" (1 January 1970) for
// every file although each binary has its real Date. Expected: the
// binary's own date when the file summary has no From.
func TestNZBFileDateWithoutCopyDates(t *testing.T) {
	e := newEnv(t)
	date := e.now.Add(-2 * time.Hour).Unix()
	// e.add writes binaries dated r.Date whose segments and file summaries
	// carry no copy dates, as records written before copies had dates.
	e.add(usenet.Release{ID: "old", Name: "Old.Record.S01E01.720p", Category: usenet.CatTVHD, Date: date}, "old.rar", "old.par2")
	b, err := e.store.Binaries(context.Background(), []string{"old-b0", "old-b1"})
	if err != nil || len(b) != 2 || b[0].Date != date {
		t.Fatalf("stored binaries %+v (%v)", b, err)
	}
	_, body := e.get("t=get&id=old&apikey=" + testKey)
	var nzb struct {
		Files []struct {
			Date string `xml:"date,attr"`
		} `xml:"http://www.newzbin.com/DTD/2003/nzb file"`
	}
	if err := xml.Unmarshal(body, &nzb); err != nil || len(nzb.Files) != 2 {
		t.Fatalf("nzb: %v\n%s", err, body)
	}
	for i, f := range nzb.Files {
		if f.Date != strconv.FormatInt(date, 10) {
			t.Errorf("file %d date=%q, want %d (the binary's posting date)", i, f.Date, date)
		}
	}
}

// TestRegisterEmailDomainCase: 105 "Invalid registration (Email
// Address Taken)" is for "t=register of an address that has an account"
// (docs/usenet-api.md). The domain of an address is case-insensitive
// (RFC 5321 §2.4), so a@Example.org and a@example.org are one mailbox, but
// users.Register/insert (usenet/users/register.go, accounts.go:122) compare
// the name byte for byte and create a second account (and key) for it.
// Expected: 105 for the second registration.
func TestRegisterEmailDomainCase(t *testing.T) {
	e, st := newUsersEnv(t, progress.NewFakeClock(time.Now()))
	if err := st.SetRegistration(context.Background(), users.Registration{Open: true}); err != nil {
		t.Fatal(err)
	}
	_, body := e.get("t=register&email=" + url.QueryEscape("alice@Example.org"))
	var reg struct {
		XMLName xml.Name `xml:"register"`
	}
	if err := xml.Unmarshal(body, &reg); err != nil {
		t.Fatalf("first registration: %s", body)
	}
	_, body = e.get("t=register&email=" + url.QueryEscape("alice@example.org"))
	var got specError
	if err := xml.Unmarshal(body, &got); err != nil || got.Code != 105 {
		t.Errorf("the same address with its domain in lower case: %s\nwant error 105 (Email Address Taken)", body)
	}
}
