package releases_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/switchyard-dev/switchyard/internal/testbrowser"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/web/releases"
)

// pageWait bounds one wait for the page to show something.
const pageWait = 30 * time.Second

// tab is the browser's tab and the URLs of every request it made (HTTP
// and WebSocket).
type tab struct {
	t *testing.T
	b *testbrowser.Browser

	mu   sync.Mutex // protects urls
	urls []string
}

func newTab(t *testing.T) *tab {
	t.Helper()
	// Pinned to loopback: a request to another origin fails rather than
	// leaving the machine, and is still recorded below.
	b := testbrowser.New(t, testbrowser.PinLoopback)
	tb := &tab{t: t, b: b}
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	sockets := chromedp.Events(ctx, network.WebSocketCreated)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev, err := range requests {
			if err != nil {
				return
			}
			tb.note(ev.Request.URL)
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range sockets {
			if err != nil {
				return
			}
			tb.note(ev.URL)
		}
	}()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) note(u string) {
	tb.mu.Lock()
	tb.urls = append(tb.urls, u)
	tb.mu.Unlock()
}

func (tb *tab) requested() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.urls...)
}

func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.b.Context(), pageWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatal(err)
	}
}

// wait polls the JavaScript predicate expr in the page until it holds.
func (tb *tab) wait(what, expr string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.b.Context(), pageWait+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(pageWait))); err != nil {
		tb.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

func value[T any](tb *tab, expr string, opts ...chromedp.EvaluateOption) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.b.Context(), pageWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// rows is the expression of the ids of the listed releases, in order.
const rows = `[...document.querySelectorAll("#results tbody tr")].map((tr) => tr.dataset.id).join(",")`

// checkPhoneWidth fails the test if the page scrolls sideways.
func (tb *tab) checkPhoneWidth(where string) {
	tb.t.Helper()
	if w := value[float64](tb, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
		tb.t.Errorf("%s: the page is %v px wider than a 375 px phone", where, w)
	}
}

// TestBrowser uses the page in headless Chromium at a phone's width as a
// person would: signs in with the key, searches, filters by category,
// sees a release posted meanwhile appear at the top without a reload,
// opens a release and downloads its NZB. The page reports no error,
// requests nothing of another origin and never puts the key in a URL.
func TestBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.standard()
	tb := newTab(t)
	tb.do(chromedp.EmulateViewport(375, 800), chromedp.Navigate(e.srv.URL+"/releases"))

	tb.wait("the key asked for", `document.body.dataset.view === "key"`)
	tb.do(chromedp.SendKeys(chromedp.ID("key"), testKey), chromedp.Click(chromedp.CSS("#key-form button")))
	tb.wait("the newest releases", rows+` === "tv,film,album"`)
	files := value[[]string](tb, `[...document.querySelectorAll("#results tbody tr")].map((tr) => tr.children[3].textContent)`)
	if strings.Join(files, ",") != "2,1,1" {
		t.Errorf("files column %q, want each release's FileCount", files)
	}
	tb.checkPhoneWidth("the list")

	// A search: the same words as t=search; the URL says what is shown.
	tb.do(chromedp.Click(chromedp.ID("q")), chromedp.SendKeys(chromedp.ID("q"), "film title"), chromedp.Click(chromedp.CSS("#search-form button")))
	tb.wait("the search's answer", rows+` === "film"`)
	if s := value[string](tb, `location.search`); !strings.Contains(s, "q=film") {
		t.Errorf("after a search the URL is %q", s)
	}
	// A category filter (a parent takes its subcategories) applies as it
	// is chosen.
	value[bool](tb, `(() => { document.getElementById("q").value = ""; const c = document.getElementById("cat"); c.value = "5000"; c.dispatchEvent(new Event("change")); return true; })()`)
	tb.wait("the TV releases", rows+` === "tv"`)
	value[bool](tb, `(() => { const c = document.getElementById("cat"); c.value = ""; c.dispatchEvent(new Event("change")); return true; })()`)
	tb.wait("every release again", rows+` === "tv,film,album"`)

	// Live: a release posted now appears at the top, marked new, in the
	// same document (the marker set here survives).
	tb.wait("the page live", `document.getElementById("conn").dataset.state === "open"`)
	value[bool](tb, `window.noReload = true`)
	e.post(release("live", "Live.Show.S02E01.1080p.WEB-DL-GRP", usenet.CatTVWebDL, 0, 2, "live.mkv"))
	tb.wait("the new release on top", rows+` === "live,tv,film,album" && document.querySelector("#results tbody tr").classList.contains("new") && window.noReload === true`)

	// One release: its files with their completion, and its NZB.
	tb.do(chromedp.Click(chromedp.CSS(`#results a[href="/releases?id=film"]`)))
	tb.wait("the release's page", `document.body.dataset.view === "release" && document.querySelectorAll("#rel-files tbody tr").length === 1`)
	if c := value[string](tb, `document.getElementById("rel-complete").textContent`); c != "50%" {
		t.Errorf("completion %q, want 50%% (1 of 2 parts)", c)
	}
	tb.checkPhoneWidth("the release")
	href := value[string](tb, `document.getElementById("rel-nzb").href`)
	if href != e.srv.URL+"/releases/nzb/film" {
		t.Errorf("NZB link %q", href)
	}
	nzb := value[string](tb, `fetch(document.getElementById("rel-nzb").href).then((r) => r.text()).then((t) => {
		const d = new DOMParser().parseFromString(t, "application/xml");
		return d.documentElement.localName + " " + d.getElementsByTagName("file").length;
	})`, chromedp.EvalAwaitPromise)
	if nzb != "nzb 1" {
		t.Errorf("the NZB link gave %q, want root nzb with 1 file", nzb)
	}

	origin, _ := url.Parse(e.srv.URL)
	for _, u := range tb.requested() {
		p, err := url.Parse(u)
		if err != nil || p.Host != origin.Host || (p.Scheme != "http" && p.Scheme != "ws") {
			if !strings.HasPrefix(u, "data:") {
				t.Errorf("the page requested %s, of another origin", u)
			}
		}
		if strings.Contains(strings.ToLower(u), "apikey") || strings.Contains(u, testKey) {
			t.Errorf("the page put the key in a URL: %s", u)
		}
	}
	if n := len(tb.requested()); n == 0 {
		t.Error("no request recorded: the recorder is broken")
	}
	tb.b.CheckNoProblems(t)
}

// TestFreshCountsArrivalsOnly: on a later page the page says how many
// releases arrived instead of moving the list: a row that leaves the
// releases stream (a delete: retention, or the older row of an updated
// release) is no arrival, nor is a newer row of a release counted already.
// (Was: every delete and skipped run counted as a new release, and so did
// every update of one.)
func TestFreshCountsArrivalsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *releases.Config) { c.PageSize = 1 })
	e.standard()
	tb := newTab(t)
	tb.do(chromedp.Navigate(e.srv.URL + "/releases?offset=1"))
	tb.wait("the key asked for", `document.body.dataset.view === "key"`)
	// Before the page connects: note the highest msg seq its WebSocket
	// delivered, to know when it has handled a given change.
	value[bool](tb, `(() => {
		const W = window.WebSocket;
		window.lastMsgSeq = 0;
		window.WebSocket = function (u, p) {
			const ws = p === undefined ? new W(u) : new W(u, p);
			ws.addEventListener("message", (ev) => {
				try { const m = JSON.parse(ev.data); if (m.type === "msg") window.lastMsgSeq = Math.max(window.lastMsgSeq, m.seq); } catch (x) {}
			});
			return ws;
		};
		window.WebSocket.prototype = W.prototype;
		return true;
	})()`)
	tb.do(chromedp.SendKeys(chromedp.ID("key"), testKey), chromedp.Click(chromedp.CSS("#key-form button")))
	tb.wait("the second page", rows+` === "film"`)
	tb.wait("the page live", `document.getElementById("conn").dataset.state === "open"`)

	seq1 := e.post(release("live1", "Live.One.S01E01.1080p.WEB-DL-GRP", usenet.CatTVWebDL, 0, 2, "one.mkv"))
	tb.wait("the first arrival counted", `window.lastMsgSeq >= `+strconv.FormatUint(seq1, 10))
	// That release's row leaves the stream: nothing arrives.
	if _, err := e.store.Releases().Delete(context.Background(), persist.Delete{Seqs: []uint64{seq1}}); err != nil {
		t.Fatal(err)
	}
	e.post(release("live2", "Live.Two.S01E02.1080p.WEB-DL-GRP", usenet.CatTVWebDL, 0, 1, "two.mkv"))
	// More of it posted: the same release updated, no new one.
	seq4 := e.post(release("live2", "Live.Two.S01E02.1080p.WEB-DL-GRP", usenet.CatTVWebDL, 0, 2, "two.mkv"))
	tb.wait("the update handled", `window.lastMsgSeq >= `+strconv.FormatUint(seq4, 10))
	got := value[string](tb, `document.getElementById("fresh-show").textContent`)
	if want := "2 new releases — show the newest"; got != want {
		t.Fatalf("after two releases posted, one row deleted and one release updated the page says %q, want %q", got, want)
	}
}

// TestLiveSearchDoesNotOverwriteANewerSearch: a live re-search (sent after
// a change on the releases stream, and waiting up to 2 s for the index on
// the server) that answers after the person searched for something else
// does not replace the newer search's list: the list is what the page's
// URL says is shown. (Was: the page drew whichever answer came back last,
// and a release's page likewise.)
func TestLiveSearchDoesNotOverwriteANewerSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.standard()
	tb := newTab(t)
	tb.do(chromedp.Navigate(e.srv.URL + "/releases"))
	tb.wait("the key asked for", `document.body.dataset.view === "key"`)
	tb.do(chromedp.SendKeys(chromedp.ID("key"), testKey), chromedp.Click(chromedp.CSS("#key-form button")))
	tb.wait("the newest releases", rows+` === "tv,film,album"`)
	tb.wait("the page live", `document.getElementById("conn").dataset.state === "open"`)
	// A slow answer to the live re-search (as when the server waits for
	// its index): held until the test lets it go.
	value[bool](tb, `(() => {
		const f = window.fetch;
		window.liveHeld = 0;
		let release;
		const gate = new Promise((r) => { release = r; });
		window.releaseLive = () => release();
		window.fetch = function (u, o) {
			const p = f.call(this, u, o);
			if (String(u).indexOf("seen=") < 0) return p;
			window.liveHeld++;
			// Settled once the page has done with the answer, or with its
			// failure (an aborted request): its awaits are microtasks,
			// this timer runs after them.
			const settle = () => setTimeout(() => { window.liveSettled = true; }, 0);
			return p.then((r) => gate.then(() => {
				r.json = () => Response.prototype.json.call(r).then((v) => { settle(); return v; }, (e) => { settle(); throw e; });
				return r;
			}), (e) => { settle(); throw e; });
		};
		return true;
	})()`)
	e.post(release("live", "Live.Show.S02E01.1080p.WEB-DL-GRP", usenet.CatTVWebDL, 0, 2, "live.mkv"))
	tb.wait("the live re-search sent", `window.liveHeld === 1`)

	// The person searches meanwhile.
	tb.do(chromedp.Click(chromedp.ID("q")), chromedp.SendKeys(chromedp.ID("q"), "film title"), chromedp.Click(chromedp.CSS("#search-form button")))
	tb.wait("the search's answer", rows+` === "film"`)
	value[bool](tb, `(window.releaseLive(), true)`)
	tb.wait("the held answer handled", `window.liveSettled === true`)
	url := value[string](tb, `location.search`)
	got := value[string](tb, rows)
	if got != "film" {
		t.Fatalf("the URL says %q but the list shows %q: an older live search's answer replaced the newer search's", url, got)
	}
}

// TestHostileNamesAndPastTheEnd: names of markup show as text, nothing in
// them runs; a page past the last release (a stale link, or releases gone
// since) says so and offers the way back, and an offset that is not a
// whole number is read as the page it falls in, not refused.
// (Was: past the end the page said "3–2 of 2 releases" and "page 3 of
// 2", Newer went one page back (still past the end), and offset=1.5
// answered a bad-request error.)
func TestHostileNamesAndPastTheEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *releases.Config) { c.PageSize = 1 })
	xss := `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`
	attr := `x" onmouseover="window.pwned=3" data-x="`
	e.add(release("xss", xss, usenet.CatOtherMisc, 2, 2, "a.bin"))
	e.add(release("attr", attr, usenet.CatOtherMisc, 1, 2, "b.bin"))
	tb := newTab(t)
	tb.do(chromedp.Navigate(e.srv.URL + "/releases"))
	tb.wait("the key asked for", `document.body.dataset.view === "key"`)
	tb.do(chromedp.SendKeys(chromedp.ID("key"), testKey), chromedp.Click(chromedp.CSS("#key-form button")))
	tb.wait("the newest release", rows+` === "attr"`)

	tb.do(chromedp.Navigate(e.srv.URL + "/releases?offset=1.5"))
	tb.wait("the older release", rows+` === "xss"`)
	if got := value[string](tb, `document.querySelector("#results tbody a").textContent`); got != xss {
		t.Errorf("name shown %q, want %q", got, xss)
	}
	value[bool](tb, `(() => { document.querySelector("#results tbody a").dispatchEvent(new MouseEvent("mouseover", {bubbles: true})); return true; })()`)
	tb.do(chromedp.Click(chromedp.CSS(`#results tbody a`)))
	tb.wait("the release's page", `document.body.dataset.view === "release" && document.getElementById("rel-name").textContent === `+strconv.Quote(xss))
	if n := value[int](tb, `document.querySelectorAll("img, script:not([src])").length`); n != 0 {
		t.Errorf("%d elements made of a name", n)
	}

	tb.do(chromedp.Navigate(e.srv.URL + "/releases?offset=2"))
	tb.wait("the page past the end", `document.getElementById("summary").dataset.total === "2"`)
	summary := value[string](tb, `document.getElementById("summary").textContent + " | " + document.getElementById("page-of").textContent`)
	if strings.Contains(summary, "3–2") || strings.Contains(summary, "page 3") || !strings.Contains(summary, "2") {
		t.Errorf("past the end the page says %q", summary)
	}
	if !value[bool](tb, `document.getElementById("older").disabled && !document.getElementById("newer").disabled`) {
		t.Error("past the end: Older should be disabled, Newer enabled")
	}
	tb.do(chromedp.Navigate(e.srv.URL + "/releases?offset=5"))
	tb.wait("the page past the end", `document.getElementById("summary").dataset.total === "2" && !document.getElementById("newer").disabled`)
	tb.do(chromedp.Click(chromedp.ID("newer")))
	tb.wait("the last page", rows+` === "xss" && location.search === "?offset=1"`)
	if p := value[any](tb, `window.pwned || null`); p != nil {
		t.Errorf("a name ran: window.pwned = %v", p)
	}
	tb.b.CheckNoProblems(t)
}
