//go:build unix

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/internal/testbrowser"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// TestTwoRegionsInBrowser: two ups, regions eu and us, each with its own
// bus and data, joined by signed forward batches. The /events page of us
// in headless Chromium, subscribed to project-1/notes, shows a kv set
// made through eu's bus; a write beside the anchor does not show.
func TestTwoRegionsInBrowser(t *testing.T) {
	t.Parallel()
	b := testbrowser.New(t)
	eu, us := startTwoRegions(t)
	logHas := func(text string) string {
		return `document.getElementById('log').textContent.includes(` + strconv.Quote(text) + `)`
	}
	ctx, cancel := context.WithTimeout(b.Context(), pageWait)
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+us.http+"/events"),
		chromedp.WaitVisible(chromedp.ID("anchor")),
		chromedp.SendKeys(chromedp.ID("anchor"), "project-1/notes"),
		chromedp.Click(chromedp.CSS(`#sub button[type=submit]`)),
	)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the subscription confirmed", logHas("s1: subscribed"))
	// eu hears of us's watch with its announcement; until then a write in
	// eu is not sent to us, so write again until one arrives.
	kvSet := func(stream, key, value string) {
		t.Helper()
		if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "project-1", stream, key, value, "--nats", "nats://127.0.0.1:"+eu.nats)); code != 0 {
			t.Fatalf("kv set in eu: exit %d: %s", code, stderr)
		}
	}
	kvSet("other", "k", "beside")
	n := 0
	testwait.Until(t, "a write in eu on us's page", func() (bool, string) {
		n++
		kvSet("notes", "today", "hello from eu "+strconv.Itoa(n))
		ok := pageValue[bool](t, b, logHas("set project-1/notes/today"))
		return ok, "the page shows no write of eu's"
	})
	if pageValue[bool](t, b, logHas("project-1/other")) {
		t.Error("the page shows a write outside its anchor")
	}
	text := pageValue[string](t, b, `document.getElementById('log').textContent`)
	if !strings.Contains(text, "= hello from eu ") {
		t.Errorf("the event lacks its value: %.300s", text)
	}
	// An anchor on a path: project-1/files/a hears a/b/c.txt, not a2/x.
	// Once a write below it has crossed (eu knows the watch), a2/x is
	// written and then a last key below the anchor: the stream's events
	// come in order, so when that one shows, a2/x would have too.
	pageValue[bool](t, b, `document.getElementById('anchor').value = ''; true`)
	ctx, cancel = context.WithTimeout(b.Context(), pageWait)
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("anchor"), "project-1/files/a"),
		chromedp.Click(chromedp.CSS(`#sub button[type=submit]`)),
	)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the second subscription confirmed", logHas("s2: subscribed"))
	testwait.Until(t, "a write below project-1/files/a in eu on us's page", func() (bool, string) {
		kvSet("files", "a/b/c.txt", "deep")
		return pageValue[bool](t, b, logHas("set project-1/files/a/b/c.txt")), "the page shows no write below the anchor"
	})
	kvSet("files", "a2/x", "beside")
	kvSet("files", "a/last", "fence")
	waitPage(t, b, "the last write below the anchor", logHas("set project-1/files/a/last"))
	if pageValue[bool](t, b, logHas("project-1/files/a2")) {
		t.Error("the page shows a2/x, which is beside project-1/files/a, not below it")
	}
	// Presence crosses too: a join in us is an event on presence/USER,
	// which a subscriber in eu hears. Its announcement must reach us first:
	// open probe sockets in us (each a new app, so each writes a row) until
	// one is heard.
	ctx2, cancel2 := context.WithTimeout(context.Background(), testwait.Timeout)
	defer cancel2()
	watcher, _, err := websocket.Dial(ctx2, "ws://"+eu.http+"/ws/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.CloseNow()
	heard := messages(watcher)
	if err := watcher.Write(ctx2, websocket.MessageText, []byte(`{"type":"subscribe","id":"p","anchor":"presence/anonymous"}`)); err != nil {
		t.Fatal(err)
	}
	joined := false
	for i := 0; !joined; i++ {
		probe, _, err := websocket.Dial(ctx2, "ws://"+us.http+"/ws/events?app=probe"+strconv.Itoa(i), nil)
		if err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
		wait := time.After(500 * time.Millisecond) // one probe's turn, not a condition: the next probe is the retry
		for !joined {
			var m map[string]any
			select {
			case m = <-heard:
			case <-wait:
			case <-ctx2.Done():
				t.Fatal("eu never heard a join in us")
			}
			if m == nil {
				break
			}
			joined = m["type"] == "presence" && m["op"] == "join" && m["region"] == "us" && m["app"] == "probe"+strconv.Itoa(i)
		}
		_ = probe.CloseNow()
	}

	// What crossed is counted: eu sent events, us took them, and eu's
	// queue to us is exported by peer.
	for _, c := range []struct{ base, series string }{
		{eu.http, "events_region_events_out_total"},
		{us.http, "events_region_events_in_total"},
		{eu.http, `forward_batches_sent_total{peer="us"}`},
	} {
		if v := metric(t, c.base, c.series); v == "" || v == "0" {
			t.Errorf("%s/metrics: switchyard_%s = %q, want > 0", c.base, c.series, v)
		}
	}
	// eu's dashboard shows its region, the peer and the queue to it.
	ctx3, cancel3 := context.WithTimeout(b.Context(), pageWait)
	err = chromedp.Do(ctx3, chromedp.Navigate("http://"+eu.http+"/"))
	cancel3()
	if err != nil {
		t.Fatal(err)
	}
	waitPage(t, b, "the Regions section", `!document.getElementById('sec-peers').hidden && document.getElementById('region-name').textContent === 'this is eu' && document.getElementById('peers').textContent.includes('http://`+us.forward+`')`)
	b.CheckNoProblems(t)
}

// region is one up --region of a two-region test: its NATS port, HTTP
// address and forward receiver's address, and how to start its process
// (again, after a kill: the same flags on the same data).
type region struct {
	name, nats, http, forward string
	start                     func() *exec.Cmd
	proc                      *exec.Cmd // the process running now
}

// restart kills the region's process (SIGKILL: nothing of it is closed
// cleanly) and starts it again on the same data and addresses.
func (r *region) restart(t *testing.T) {
	t.Helper()
	_ = r.proc.Process.Kill()
	_ = r.proc.Wait()
	r.proc = r.start()
}

// startTwoRegions runs two ups, regions eu and us, each with its own bus
// and data, joined by signed forward batches.
func startTwoRegions(t *testing.T) (eu, us *region) {
	t.Helper()
	dir := t.TempDir()
	secrets := filepath.Join(dir, "regions.secrets")
	out, stderr, code := testproc.Run(t, cli(t, "events", "secrets", "eu", "us"))
	if code != 0 {
		t.Fatalf("events secrets: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(secrets, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	var regions []*region
	for _, name := range []string{"eu", "us"} {
		regions = append(regions, &region{name: name, nats: strconv.Itoa(testproc.FreePort(t)),
			http: "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t)), forward: "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))})
	}
	for i, r := range regions {
		peer := regions[1-i]
		r.start = func() *exec.Cmd {
			up := cli(t, "up", "--no-work", "--servers", "1", "--data", filepath.Join(dir, r.name), "--nats-port", r.nats, "--http", r.http,
				"--region", r.name, "--forward-listen", r.forward, "--peer", peer.name+"=http://"+peer.forward, "--forward-secrets", secrets)
			testproc.Start(t, up, "Stop with Ctrl-C")
			t.Cleanup(func() { _ = up.Process.Kill() })
			return up
		}
		r.proc = r.start()
	}
	return regions[0], regions[1]
}

// TestRegionRestart: us is killed and started again on its data. A
// write in eu to what us's sessions watched before goes to us, whose
// sessions died with it: us answers noWatch and eu prunes the watch. A
// session of the new us process then subscribes, us announces its watch,
// and eu's writes reach it again.
func TestRegionRestart(t *testing.T) {
	t.Parallel()
	eu, us := startTwoRegions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testwait.Timeout)
	defer cancel()
	kvSet := func(value string) {
		t.Helper()
		if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "project-1", "notes", "today", value, "--nats", "nats://127.0.0.1:"+eu.nats)); code != 0 {
			t.Fatalf("kv set in eu: exit %d: %s", code, stderr)
		}
	}
	// subscribed is a socket of us on project-1/notes, and a channel of
	// the values of the events it hears.
	subscribed := func() <-chan string {
		t.Helper()
		ws, _, err := websocket.Dial(ctx, "ws://"+us.http+"/ws/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ws.CloseNow() })
		if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","id":"n","anchor":"project-1/notes"}`)); err != nil {
			t.Fatal(err)
		}
		values := make(chan string, 64)
		go func() {
			defer close(values)
			for m := range messages(ws) {
				if v, ok := m["value"].(string); ok && m["type"] == "event" {
					values <- v
				}
			}
		}()
		return values
	}
	// crosses writes in eu until values hears one of them.
	crosses := func(what string, values <-chan string) {
		t.Helper()
		for i := 0; ; i++ {
			v := what + " " + strconv.Itoa(i)
			kvSet(v)
			select {
			case got, ok := <-values:
				if !ok {
					t.Fatalf("the socket of us ended before %s", what)
				}
				if strings.HasPrefix(got, what+" ") {
					return
				}
			case <-time.After(time.Second): // this write's turn, not a condition: the next write is the retry
			case <-ctx.Done():
				t.Fatalf("no %s in us", what)
			}
		}
	}
	crosses("before", subscribed())
	if v := metric(t, eu.http, "events_region_remote_watches"); v != "1" {
		t.Fatalf("eu holds %s remote watches with us's session subscribed, want 1", v)
	}

	us.restart(t)
	// A write in eu to the watch us had: us, back without sessions,
	// answers noWatch and eu prunes it.
	testwait.Until(t, "eu pruning us's watch on its noWatch", func() (bool, string) {
		kvSet("orphan")
		n, _ := strconv.Atoi(metric(t, eu.http, "events_region_nowatch_total"))
		return n >= 1 && metric(t, eu.http, "events_region_remote_watches") == "0", "nowatch " + metric(t, eu.http, "events_region_nowatch_total") + ", remote watches " + metric(t, eu.http, "events_region_remote_watches")
	})
	crosses("after", subscribed())
}
