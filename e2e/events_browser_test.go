//go:build unix

package e2e

import (
	"context"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchyard-dev/switchyard/bus/auth"

	"github.com/switchyard-dev/switchyard/internal/testbrowser"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestEventsPageInBrowser: on up's /events page in headless Chromium, a
// subscription made with the form shows a write below its anchor and not
// one beside it; after up is stopped and a new one started on the same
// ports and data, the page's client reconnects and subscribes again by
// itself, and the next write shows too. No console errors but the failed
// connects while no server listens.
func TestEventsPageInBrowser(t *testing.T) {
	t.Parallel()
	b := testbrowser.New(t)
	hport, data := testproc.FreePort(t), t.TempDir()
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	startUp := func() (*exec.Cmd, *persist.Stream) { return upOnHTTPPort(t, hport, data, "hub", "files") }
	set := func(s *persist.Stream, key, value string) {
		t.Helper()
		if _, err := s.Set(context.Background(), []byte(value), persist.SetOptions{Key: key}); err != nil {
			t.Fatalf("set %s: %v", key, err)
		}
	}
	logHas := func(text string) string {
		return `document.getElementById('log').textContent.includes(` + strconv.Quote(text) + `)`
	}

	up1, s1 := startUp()
	ctx, cancel := context.WithTimeout(b.Context(), pageWait)
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/events"),
		chromedp.WaitVisible(chromedp.ID("anchor")),
		chromedp.SendKeys(chromedp.ID("anchor"), "hub/files/docs"),
		chromedp.Click(chromedp.CSS(`#sub button[type=submit]`)),
	)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the subscription confirmed", logHas("s1: subscribed"))
	set(s1, "docs-old/x", "beside") // a sibling that shares a prefix
	set(s1, "docs/a/b.txt", "first")
	waitPage(t, b, "the write below the anchor", logHas("set hub/files/docs/a/b.txt")+` && `+logHas("= first"))
	if pageValue[bool](t, b, logHas("docs-old")) {
		t.Error("the page shows a write beside the anchor")
	}

	if err := up1.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, up1); code != 0 {
		t.Fatalf("up exited %d after SIGTERM", code)
	}
	waitPage(t, b, "the page shows the dropped connection", `document.getElementById('state').textContent !== 'open'`)
	_, s2 := startUp()
	waitPage(t, b, "the page reconnects", `document.getElementById('state').textContent === 'open'`)
	// Subscribed again: the gateway's second confirmation of s1.
	waitPage(t, b, "the subscription renewed", `document.getElementById('log').textContent.split('s1: subscribed').length === 3`)
	set(s2, "docs/c.txt", "second")
	waitPage(t, b, "the write after the restart", logHas("set hub/files/docs/c.txt")+` && `+logHas("= second"))

	b.CheckNoProblems(t, func(m chromedp.ConsoleMessage) bool {
		return strings.Contains(m.Text, "/ws/events") && (strings.Contains(m.Text, "ERR_CONNECTION_REFUSED") || strings.Contains(m.Text, "Unexpected response code: 503"))
	})
}

// TestEventsClientResendsAcks: the embedded client (/ws/events.js) keeps
// an ack its socket could not send and sends it again once it has
// reconnected; the region settles the `single` delivery on it, so the
// next delivery comes (one in flight at a time) and the first is never
// delivered again.
func TestEventsClientResendsAcks(t *testing.T) {
	t.Parallel()
	b := testbrowser.New(t)
	hport := testproc.FreePort(t)
	_, jobs := upOnHTTPPort(t, hport, t.TempDir(), "project-1", "jobs")
	// The client alone on a page of up's origin (the /events page has a
	// client of its own, a second session of the user that a single
	// delivery could go to): the script's own document, with the script.
	ctx, cancel := context.WithTimeout(b.Context(), pageWait)
	err := chromedp.Do(ctx, chromedp.Navigate("http://127.0.0.1:"+strconv.Itoa(hport)+"/ws/events.js"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	pageValue[bool](t, b, `const s = document.createElement("script"); s.src = "/ws/events.js"; document.head.appendChild(s); true`)
	waitPage(t, b, "the client loaded", `typeof SwitchyardEvents === "function"`)
	// It drops its socket on the first delivery and acks it at once,
	// while the socket is closing, so that the ack waits for the next
	// socket.
	pageValue[bool](t, b, `
window.tst = {values: [], errs: [], subscribed: false, dropped: false};
window.tev = new SwitchyardEvents({
  onSubscribed: (m) => { if (m.id === "jobs") tst.subscribed = true; },
  onEvent: (m) => {
    if (m.sub !== "jobs") return;
    tst.values.push(m.value + "#" + m.attempt);
    if (!tst.dropped) { tst.dropped = true; tev.ws.close(); }
    tev.ack(m.sub, m.entry);
  },
  onError: (m) => tst.errs.push(m.code + ": " + m.message),
});
tev.subscribe("jobs", "project-1/jobs", null, "single");
true`)
	waitPage(t, b, "the durable subscription stored", `tst.subscribed`)
	if _, err := jobs.Set(context.Background(), []byte("first"), persist.SetOptions{Key: "1"}); err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the ack sent again on the new socket and answered", `tst.dropped && tev.reconnects >= 1 && tev.ws && tev.ws.readyState === WebSocket.OPEN && tev.acks.size === 0`)
	if errs := pageValue[[]string](t, b, `tst.errs`); len(errs) > 0 {
		t.Fatalf("the client heard errors: %v", errs)
	}
	if _, err := jobs.Set(context.Background(), []byte("second"), persist.SetOptions{Key: "2"}); err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the next delivery", `tst.values.includes("second#1")`)
	if got := pageValue[[]string](t, b, `tst.values`); len(got) != 2 || got[0] != "first#1" {
		t.Fatalf("deliveries %q, want first#1 once, then second#1", got)
	}
	// The script's document names no icon, so the browser asks for one.
	b.CheckNoProblems(t, func(m chromedp.ConsoleMessage) bool { return strings.HasSuffix(m.URL, "/favicon.ico") })
}

// TestEventsPageInBrowserAuth: under up --auth the /events page, which a
// browser loads without credentials, connects with the key of its own URL
// (?apikey=, here the client user's bus password) and shows a write.
// (Was: the page's client sent no key, and under --auth it stayed
// "connecting" for good.)
func TestEventsPageInBrowserAuth(t *testing.T) {
	t.Parallel()
	b := testbrowser.New(t)
	a := startAuthUp(t)

	ctx, cancel := context.WithTimeout(b.Context(), pageWait)
	err := chromedp.Do(ctx,
		chromedp.Navigate(a.base+"/events?"+url.Values{"apikey": {a.creds.Password}}.Encode()),
		chromedp.WaitVisible(chromedp.ID("anchor")),
		chromedp.SendKeys(chromedp.ID("anchor"), "hub/files"),
		chromedp.Click(chromedp.CSS(`#sub button[type=submit]`)),
	)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the subscription confirmed", `document.getElementById('log').textContent.includes('s1: subscribed')`)
	set := cli(t, "kv", "set", "--nats", "nats://127.0.0.1:"+strconv.Itoa(a.port), "--creds", auth.CredsFile(a.dir, auth.RoleClient), "hub", "files", "a.txt", "hello")
	if _, stderr, code := testproc.Run(t, set); code != 0 {
		t.Fatalf("kv set: exit %d: %s", code, stderr)
	}
	waitPage(t, b, "the write", `document.getElementById('log').textContent.includes('set hub/files/a.txt')`)
	b.CheckNoProblems(t)
	if err := a.up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, a.up); code != 0 {
		t.Fatalf("up exit %d", code)
	}
}
