package fleet

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/search"
)

// TestDashReleasesFiles: the dashboard's files column is the count the
// Newznab feed shows, the announced count or the files present, whichever
// is higher (a release posted without [i/n] announces 0); and a release's
// password attr goes along, for the list to mark it. (Was: left out, so the
// dashboard showed passworded releases unmarked.)
func TestDashReleasesFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ix, err := search.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	bins := func(n int) []usenet.FileSummary {
		var out []usenet.FileSummary
		for i := range n {
			out = append(out, usenet.FileSummary{ID: "b" + string(rune('0'+i)), Name: "f" + string(rune('0'+i)), Parts: 1, Present: 1, Bytes: 10})
		}
		return out
	}
	rels := []usenet.Release{
		{ID: "unannounced", Name: "Unannounced", Files: 0, Binaries: bins(3), Date: 100},
		{ID: "partial", Name: "Partial", Files: 5, Binaries: bins(2), Date: 200, Password: 1},
	}
	var b search.Batch
	for i, r := range rels {
		r.Visible, r.Version, r.Poster, r.Groups, r.Size = true, 1, "p <p@example.com>", []string{"alt.binaries.test"}, 30
		b.Changes = append(b.Changes, search.Change{Seq: uint64(i + 1), Release: r})
	}
	b.LastSeq = uint64(len(rels))
	if err := ix.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	var d dashParts
	d.setIndex(ix)
	got, err := d.Releases(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"unannounced": 3, "partial": 5}
	wantPassword := map[string]int{"unannounced": 0, "partial": 1}
	if len(got.Items) != len(want) {
		t.Fatalf("releases: got %d, want %d: %+v", len(got.Items), len(want), got.Items)
	}
	for _, r := range got.Items {
		if r.Files != want[r.ID] {
			t.Errorf("%s: files %d, want %d", r.ID, r.Files, want[r.ID])
		}
		if r.Password != wantPassword[r.ID] {
			t.Errorf("%s: password %d, want %d", r.ID, r.Password, wantPassword[r.ID])
		}
	}
}

// TestFollowCheck: the search index's readiness check is nil while its
// follower follows, and once stopped says so in words (not "<nil>").
func TestFollowCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := startWeb(t, webConfig(t))
	st, err := usenet.NewStore(f.apiPersist, "")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := search.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	fl, err := ix.Follow(ctx, st.Releases())
	if err != nil {
		t.Fatal(err)
	}
	check := followCheck(fl)
	if err := check(); err != nil {
		t.Fatalf("following: %v", err)
	}
	if err := fl.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	err = check()
	if err == nil || strings.Contains(err.Error(), "<nil>") || !strings.Contains(err.Error(), "stopped following releases") {
		t.Fatalf("stopped: got %v, want why in words", err)
	}
}

// TestWatchersExported: the search index's follower and the WebSocket
// gateway's watchers (one per open connection) are exported as the
// switchyard_watch_* families and shown in the dashboard's Watchers; a
// closed connection's watcher leaves the count.
func TestWatchersExported(t *testing.T) {
	t.Parallel()
	f := startWeb(t, webConfig(t))
	watchers := func() string {
		resp, err := http.Get(f.HTTPURL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var lines []string
		for l := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(l, "switchyard_watch_watchers{") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "; ")
	}
	dash := func() map[string]int {
		out := map[string]int{}
		for _, w := range f.http.parts.Watchers() {
			out[w.Role] = w.Watchers
		}
		return out
	}
	ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(f.HTTPURL(), "http")+"/ws/watch?scope=hub&stream=log", nil)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "both roles' watchers exported", func() (bool, string) {
		got := watchers()
		return strings.Contains(got, `role="search-index"} 1`) && strings.Contains(got, `role="watch-gateway"} 1`), got
	})
	if got := dash(); got[watchRoleSearch] != 1 || got[watchRoleGateway] != 1 {
		t.Errorf("dashboard watchers: %v", got)
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	testwait.Until(t, "the gateway's watcher gone", func() (bool, string) {
		got := watchers()
		return strings.Contains(got, `role="watch-gateway"} 0`), got
	})
}

// TestNewznabMetricOK: an answered Newznab request is counted with
// code="ok", as the other request counters say, not "0".
func TestNewznabMetricOK(t *testing.T) {
	t.Parallel()
	f := startWeb(t, webConfig(t))
	get := func(path string) string {
		resp, err := http.Get(f.HTTPURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	get("/api?t=caps")
	body := get("/metrics")
	if !strings.Contains(body, `switchyard_newznab_requests_total{code="ok",function="caps"} 1`) || strings.Contains(body, `code="0"`) {
		t.Errorf("newznab requests: %q", grepLines(body, "switchyard_newznab_requests_total"))
	}
}

// grepLines is the lines of s that start with prefix.
func grepLines(s, prefix string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}
