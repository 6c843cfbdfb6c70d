package newznab_test

import (
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/usenet"
)

// TestRepostAttr: a repost is an item of its own, at its own date, with a
// repost_of attribute naming the first post in search, details and JSON;
// the first post has none.
func TestRepostAttr(t *testing.T) {
	e := newEnv(t)
	h := func(hours int) int64 { return e.now.Unix() - int64(hours)*3600 }
	e.add(usenet.Release{ID: "orig", Name: "Some.Show.S01E02.720p.HDTV-GRP", Category: usenet.CatTVHD, Date: h(48)}, "a.rar")
	e.add(usenet.Release{ID: "again", Name: "Some.Show.S01E02.720p.HDTV-GRP", Category: usenet.CatTVHD, Date: h(1), RepostOf: "orig"}, "a.rar")
	k := "&apikey=" + testKey
	if got := titles(e.feed("t=search&q=some.show" + k)); len(got) != 2 {
		t.Fatalf("search lists %v, want the post and its repost", got)
	}
	for _, q := range []string{"t=search&q=some.show", "t=details&id=again"} {
		_, body := e.get(q + k)
		if !strings.Contains(string(body), `<newznab:attr name="repost_of" value="orig"></newznab:attr>`) &&
			!strings.Contains(string(body), `<newznab:attr name="repost_of" value="orig"/>`) {
			t.Errorf("%s: no repost_of attr:\n%s", q, body)
		}
		_, js := e.get(q + "&o=json" + k)
		if !strings.Contains(string(js), `{"_name":"repost_of","_value":"orig"}`) {
			t.Errorf("%s o=json: no repost_of attr:\n%s", q, js)
		}
	}
	_, body := e.get("t=details&id=orig" + k)
	if strings.Contains(string(body), "repost_of") {
		t.Errorf("the first post is marked a repost:\n%s", body)
	}
	// Newest first by the post's own date: the repost leads.
	if doc := e.feed("t=search&q=some.show" + k); doc.Channel.Items[0].GUID.Value != "again" {
		t.Errorf("first item %+v, want the repost", doc.Channel.Items[0])
	}
}
