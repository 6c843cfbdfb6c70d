//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/internal/testbrowser"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestWatchPageInBrowser: the /watch page of a running up, in headless
// Chromium, shows 1,000 writes to a stream in order and none twice, across
// a forced reconnect (up is stopped half-way and a new up started on the
// same HTTP port and data): the page resumes from its last seq + 1. No
// console errors but the failed connects while no server listens.
func TestWatchPageInBrowser(t *testing.T) {
	t.Parallel()
	b := testbrowser.New(t)
	hport, data := testproc.FreePort(t), t.TempDir()
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	startUp := func() (*exec.Cmd, *persist.Stream) { return upOnHTTPPort(t, hport, data, "hub", "browser-log") }
	write := func(s *persist.Stream, from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if _, err := s.Set(context.Background(), []byte(fmt.Sprintf("event %d", i)), persist.SetOptions{}); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
	}

	up1, s1 := startUp()
	ctx, cancel := context.WithTimeout(b.Context(), pageWait)
	_, err := chromedp.Run(ctx, chromedp.Navigate(base+"/watch?scope=hub&stream=browser-log&from=1"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the page connects", `document.querySelector('#watch').dataset.state === 'open'`)
	write(s1, 1, 500)
	waitPage(t, b, "500 writes arrive", `document.querySelector('#watch').dataset.received === '500'`)

	if err := up1.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, up1); code != 0 {
		t.Fatalf("up exited %d after SIGTERM", code)
	}
	waitPage(t, b, "the page shows the dropped connection", `document.querySelector('#watch').dataset.state !== 'open'`)
	_, s2 := startUp()
	write(s2, 501, 1000)
	waitPage(t, b, "all 1,000 writes arrive after the reconnect", `document.querySelector('#watch').dataset.received === '1000' && document.querySelector('#watch').dataset.state === 'open'`)

	ds := pageValue[map[string]string](t, b, `Object.assign({}, document.querySelector('#watch').dataset)`)
	// The client counts a message as received only when its seq is above
	// the last one (else as a duplicate), so 1,000 received with the last
	// at 1,000 is seqs 1 to 1,000, each once, in order.
	// One restart is one reconnect, however many attempts it took.
	if ds["lastSeq"] != "1000" || ds["duplicates"] != "0" || ds["reconnects"] != "1" {
		t.Errorf("page state %v: want last seq 1000, no duplicates, one reconnect", ds)
	}
	// A message deleted afterwards stays on the page, marked.
	if _, err := s2.Delete(context.Background(), persist.Delete{Seqs: []uint64{1000}}); err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the deleted row marked", `document.querySelector('#log li[data-seq="1000"]').dataset.deleted === 'true'`)
	if n := pageValue[float64](t, b, `document.querySelectorAll('noscript').length`); n == 0 {
		t.Error("the page has no <noscript>")
	}
	b.CheckNoProblems(t, func(m chromedp.ConsoleMessage) bool {
		// While no server listens (or the stopping one refuses new
		// connections), Chromium logs each failed WebSocket connect as a
		// console error: the scenario causes exactly those.
		return strings.Contains(m.Text, "/ws/watch") && (strings.Contains(m.Text, "ERR_CONNECTION_REFUSED") || strings.Contains(m.Text, "Unexpected response code: 503"))
	})
}

// TestWatchPageRefusedInBrowser: a /watch page whose request the gateway
// refuses (a scope that is not a scope name) shows the gateway's 400
// answer and stops, instead of reconnecting for ever.
func TestWatchPageRefusedInBrowser(t *testing.T) {
	t.Parallel()
	b := testbrowser.New(t)
	hport := testproc.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	up := cli(t, "up", "--nats-port", strconv.Itoa(testproc.FreePort(t)), "--data", t.TempDir(), "--servers", "1", "--no-work", "--http", "127.0.0.1:"+strconv.Itoa(hport))
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })

	ctx, cancel := context.WithTimeout(b.Context(), pageWait)
	_, err := chromedp.Run(ctx, chromedp.Navigate(base+"/watch?scope=Bad%20Scope&stream=log"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the refusal shown", `document.querySelector('#watch').dataset.error === 'bad-request'`)
	if n := pageValue[float64](t, b, `document.querySelectorAll('noscript').length`); n == 0 {
		t.Error("the page has no <noscript>")
	}
	ds := pageValue[map[string]string](t, b, `Object.assign({}, document.querySelector('#watch').dataset)`)
	text := pageValue[string](t, b, `document.getElementById('status').textContent`)
	if ds["state"] != "closed" || !strings.Contains(text, "HTTP 400") || !strings.Contains(text, "scope") || strings.Contains(text, "reconnecting") {
		t.Errorf("page state %v, status %q: want closed, the gateway's 400 message, no reconnecting", ds, text)
	}
	b.CheckNoProblems(t, func(m chromedp.ConsoleMessage) bool {
		// The refused handshake and the page's plain GET asking why, both
		// answered 400 on purpose.
		return strings.Contains(m.Text, "Unexpected response code: 400") || strings.Contains(m.Text, "status of 400")
	})
}

// upOnHTTPPort starts an up (one persist server, no work) on HTTP port
// hport and data, on a NATS port of its own, and returns it with a persist
// client's stream scope/stream on its bus: a browser test's server, which
// it may stop and start again on the same HTTP port and data.
func upOnHTTPPort(t *testing.T, hport int, data, scope, stream string) (*exec.Cmd, *persist.Stream) {
	t.Helper()
	port := testproc.FreePort(t)
	up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", data, "--servers", "1", "--no-work", "--http", "127.0.0.1:"+strconv.Itoa(hport))
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })
	nc, err := nats.Connect("nats://127.0.0.1:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return up, c.Stream(scope, stream)
}
