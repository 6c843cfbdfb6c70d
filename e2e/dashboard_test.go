package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/testbrowser"
	"github.com/switchyard-dev/switchyard/internal/testproc"
)

// pageWait bounds one wait for the page to show something.
const pageWait = 30 * time.Second

// waitPage polls the JavaScript predicate expr in the page until it holds.
func waitPage(t *testing.T, b *testbrowser.Browser, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), pageWait+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(pageWait))); err != nil {
		t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// pageValue evaluates expr in the page.
func pageValue[T any](t *testing.T, b *testbrowser.Browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// figure is the page's expression for the data-value of figure id.
func figure(id string) string {
	return fmt.Sprintf(`Number(document.getElementById(%q).dataset.value || "0")`, id)
}

// TestDashboardBrowser opens up's dashboard in headless Chromium: it goes
// live and its figures move (the demo work, a kv write), it says so when
// up stops, and it comes back by itself when a new up starts on the same
// ports and data directory. The page reports no error but the failed
// reconnects while no server listens.
func TestDashboardBrowser(t *testing.T) {
	t.Parallel() // its up owns its ports and data directory, as the watch page's does
	b := testbrowser.New(t)
	port, hport := testproc.FreePort(t), testproc.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	data := t.TempDir()
	startUp := func() func() {
		up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", data, "--http", "127.0.0.1:"+strconv.Itoa(hport))
		testproc.Start(t, up, "Stop with Ctrl-C")
		t.Cleanup(func() { _ = up.Process.Kill() })
		return func() {
			t.Helper()
			if err := up.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := testproc.Wait(t, up); code != 0 {
				t.Fatalf("up exit %d", code)
			}
		}
	}
	stop := startUp()

	// A phone's width: the sections stack and the wide tables scroll
	// inside them, so the page itself never scrolls sideways.
	ctx, cancel := context.WithTimeout(b.Context(), pageWait)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the connection open", `document.getElementById("conn").dataset.state === "open"`)
	waitPage(t, b, "a range done", figure("articles-done")+` > 0 && `+figure("ranges-done")+` > 0`)
	waitPage(t, b, "the fleet shown", figure("members-count")+` === 2`)
	waitPage(t, b, "releases shown", `document.querySelectorAll("#releases tbody tr").length > 0`)
	// Each release shows its files (the count the Newznab feed gives, never
	// 0 for a release that has some), and its date in UTC, said, as the
	// header's time is.
	rows := pageValue[[][]string](t, b, `[...document.querySelectorAll("#releases tbody tr")].map((tr) => [...tr.children].map((td) => td.textContent))`)
	for _, r := range rows {
		if len(r) < 5 || r[3] == "0" || r[3] == "" || !strings.HasSuffix(r[4], " UTC") {
			t.Errorf("release row %q: want files > 0 and a date in UTC", r)
		}
	}
	// Each release links to its page on /releases, and the header to the
	// releases page itself.
	links := pageValue[[]string](t, b, `[...document.querySelectorAll("#releases tbody tr")].map((tr) => (tr.querySelector("a") || {}).getAttribute?.("href") || "")`)
	for i, l := range links {
		if !strings.HasPrefix(l, "/releases?id=") {
			t.Errorf("release row %d links to %q, want /releases?id=ID", i, l)
		}
	}
	if n := pageValue[float64](t, b, `document.querySelectorAll('header nav a[href="/releases"]').length`); n == 0 {
		t.Error("the dashboard's header has no link to /releases")
	}
	if u := pageValue[string](t, b, `document.getElementById("updated").textContent`); !strings.HasSuffix(u, " UTC") {
		t.Errorf("header time %q: want it in UTC, said", u)
	}
	if n := pageValue[float64](t, b, `document.querySelectorAll("noscript").length`); n == 0 {
		t.Error("the dashboard has no <noscript>")
	}
	if w := pageValue[float64](t, b, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
		t.Errorf("the page is %v px wider than a phone's screen", w)
	}

	// A desktop's width: the Fleet and NNTP tables fit, none cut.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the NNTP connections shown", `document.querySelectorAll("#pools tbody tr").length > 0`)
	for _, id := range []string{"members", "pools"} {
		if w := pageValue[float64](t, b, fmt.Sprintf(`(() => { const tb = document.getElementById(%q); return tb.scrollWidth - tb.parentElement.clientWidth; })()`, id)); w > 0 {
			t.Errorf("at 1280 px the %s table is cut by %v px", id, w)
		}
	}
	// The chart has a scale (its robust maximum) and redraws on resize.
	waitPage(t, b, "the chart drawn", `Number(document.getElementById("chart").dataset.max) > 0`)

	// Snapshots keep coming.
	seq := pageValue[float64](t, b, `Number(document.body.dataset.seq)`)
	waitPage(t, b, "a later snapshot", fmt.Sprintf(`Number(document.body.dataset.seq) > %v`, seq))

	// A write is committed by a persist server: the members' commit counts
	// (monotonic, unlike open streams, which idle streams leave) grow. The
	// demo work commits too, so this shows the figures are live, not which
	// write moved them.
	commits := `[...document.querySelectorAll('#members tbody tr')].reduce((n, tr) => n + Number(tr.children[4].textContent.replace(/\D/g, '')), 0)`
	before := pageValue[float64](t, b, commits)
	if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "dash", "probe", "k", "v", "--nats", url)); code != 0 {
		t.Fatalf("kv set: exit %d: %s", code, stderr)
	}
	waitPage(t, b, "the write committed", fmt.Sprintf(`%s > %v`, commits, before))

	// up stops: the page says it lost the connection and keeps retrying.
	instance := pageValue[string](t, b, `document.body.dataset.instance`)
	stop()
	waitPage(t, b, "the connection shown lost", `["closed", "connecting"].includes(document.getElementById("conn").dataset.state)`)
	// The drop, then at least one reconnect refused while nothing listens.
	waitPage(t, b, "a reconnect refused", `Number(document.getElementById("conn").dataset.failures) >= 2`)
	// Disconnected, the figures are marked stale without fading the page:
	// the muted text keeps its contrast (nothing on the page is translucent).
	if o := pageValue[string](t, b, `[...document.querySelectorAll("main, main section")].map((e) => getComputedStyle(e).opacity).find((o) => o !== "1") || "1"`); o != "1" {
		t.Errorf("disconnected, part of the page has opacity %s: its muted text drops below AA contrast", o)
	}

	// A new up on the same ports and data: the page reconnects by itself
	// and shows the new process's snapshots.
	stop = startUp()
	waitPage(t, b, "the connection open again", `document.getElementById("conn").dataset.state === "open"`)
	waitPage(t, b, "snapshots of the new process", fmt.Sprintf(`document.body.dataset.instance !== %q && Number(document.body.dataset.seq) > 1`, instance))
	waitPage(t, b, "the work shown again", figure("articles-done")+` > 0`)
	stop()

	// Chromium logs every failed WebSocket handshake as an error of its
	// own, and the page's reconnects failed twice over on purpose: refused
	// while no server listened, and 503 while the stopping up still served
	// HTTP (its /readyz answers to the end) but its dashboard had closed.
	// Those two, and nothing else, are expected.
	ws := "WebSocket connection to 'ws://127.0.0.1:" + strconv.Itoa(hport) + "/ws/dashboard' failed: "
	expected := []string{ws + "Error in connection establishment: net::ERR_CONNECTION_REFUSED", ws + "Error during WebSocket handshake: Unexpected response code: 503"}
	b.CheckNoProblems(t, func(m chromedp.ConsoleMessage) bool { return slices.Contains(expected, m.Text) })
	for _, p := range b.Problems() {
		t.Logf("expected: %s", p)
	}
}

// authUp is an up --auth of startAuthUp: its auth directory, the client
// user's creds, its NATS port, its HTTP side's base URL and its process.
type authUp struct {
	dir   string
	creds auth.Creds
	port  int
	base  string
	up    *exec.Cmd
}

// startAuthUp runs auth init into a temp directory and an up --auth on it
// (one persist server, no work, an HTTP side), owned by t.
func startAuthUp(t *testing.T) authUp {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, stderr, code := testproc.Run(t, cli(t, "auth", "init", dir)); code != 0 {
		t.Fatalf("auth init: exit %d: %s", code, stderr)
	}
	creds, err := auth.LoadCreds(auth.CredsFile(dir, auth.RoleClient))
	if err != nil {
		t.Fatal(err)
	}
	port, hport := testproc.FreePort(t), testproc.FreePort(t)
	up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", t.TempDir(), "--servers", "1", "--no-work", "--auth", dir, "--http", "127.0.0.1:"+strconv.Itoa(hport))
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })
	return authUp{dir: dir, creds: creds, port: port, base: "http://127.0.0.1:" + strconv.Itoa(hport), up: up}
}

// TestDashboardBrowserAuth opens the dashboard of up --auth in headless
// Chromium as a user would: the page answers 401 with a Basic challenge,
// the browser is given the client user's bus password when it asks, and
// the page's WebSocket goes live with the credentials the browser then
// holds.
func TestDashboardBrowserAuth(t *testing.T) {
	t.Parallel()
	b := testbrowser.New(t)
	a := startAuthUp(t)
	creds, base, up := a.creds, a.base, a.up

	// The browser's prompt, answered with the bus user; every other
	// request paused by the Fetch domain goes on unchanged. The two
	// readers end with the test.
	var asked atomic.Int32
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	challenges := chromedp.Events(ctx, fetch.AuthRequired)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev, err := range challenges {
			if err != nil {
				return
			}
			asked.Add(1)
			_, _ = chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: &fetch.AuthChallengeResponse{
				Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: auth.RoleClient, Password: creds.Password,
			}})
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	handle := true
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle}); err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithTimeout(ctx, pageWait)
	defer ncancel()
	if err := chromedp.Do(nctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the connection open", `document.getElementById("conn").dataset.state === "open"`)
	waitPage(t, b, "the fleet shown", figure("members-count")+` === 1`)
	if asked.Load() == 0 {
		t.Error("the browser was never asked for credentials: the page is open under --auth")
	}
	b.CheckNoProblems(t)
	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, up); code != 0 {
		t.Fatalf("up exit %d", code)
	}
}
