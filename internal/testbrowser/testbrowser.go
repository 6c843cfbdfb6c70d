// Package testbrowser runs a headless Chromium for browser tests of the
// pages switchyard serves, and collects what the page reports as wrong:
// console errors, uncaught exceptions and error entries of the browser log.
//
// Chromium is the Debian package chromium; scripts/test.sh installs it when
// run as root. Without it Require skips, except under CI=true, where it
// fails: CI must run the browser tests.
package testbrowser

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchyard-dev/switchyard/internal/testci"
)

// Binaries are the names Chromium goes by, in the order looked for.
var Binaries = []string{"chromium", "chromium-browser", "google-chrome"}

// Available returns the browser's path, or why there is none.
func Available() (path, why string) {
	for _, b := range Binaries {
		if p, err := exec.LookPath(b); err == nil {
			return p, ""
		}
	}
	return "", "chromium is not installed (Debian package chromium; scripts/test.sh installs it when run as root)"
}

// Require returns the browser's path, or skips t saying why when it is
// missing; under CI=true a missing browser fails t instead.
func Require(t testing.TB) string {
	t.Helper()
	return testci.Require(t, Available)
}

// PinLoopback makes every host name but 127.0.0.1 fail to resolve: a page
// under test that reaches for another origin (a CDN, a font) gets an error
// instead of the network, so nothing leaves the machine and a test that
// records the page's requests sees the attempt.
var PinLoopback = chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")

// Browser is one headless Chromium with one tab, closed when the test
// ends.
type Browser struct {
	ctx context.Context

	mu       sync.Mutex // protects problems
	problems []chromedp.ConsoleMessage
}

// New starts a headless Chromium (after Require) with a profile of its own
// in a temporary directory, opens a tab, and starts collecting the tab's
// problems. Everything stops at the end of the test. extra are more
// options of Chromium (flags such as PinLoopback).
func New(t testing.TB, extra ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	bin := Require(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()), // made before the cleanup below, so removed after Chromium exits
	)
	opts = append(opts, extra...)
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its sandbox on (the
		// sandbox relies on dropping privileges, which root in a
		// container often cannot do); CI and containers run tests as
		// root. The pages tested are our own, served on loopback.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &Browser{ctx: ctx}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel() // closes the tab and ends the collector
		wg.Wait()
		cancelAlloc() // stops Chromium and waits for it
	})
	// The first Run starts the browser (on ctx: no timeout, which would
	// end the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, m)
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// Context is the tab's chromedp context, for chromedp.Run and Do. Derive a
// timeout from it for single actions; never cancel it.
func (b *Browser) Context() context.Context { return b.ctx }

// Problems returns the console errors, uncaught exceptions and error log
// entries of the tab so far.
func (b *Browser) Problems() []chromedp.ConsoleMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), b.problems...)
}

// CheckNoProblems fails t for every problem the tab reported that no
// expected func accepts (expected ones let a test name the errors its
// scenario causes on purpose, such as a failed connect while a server is
// down).
func (b *Browser) CheckNoProblems(t testing.TB, expected ...func(chromedp.ConsoleMessage) bool) {
	t.Helper()
next:
	for _, p := range b.Problems() {
		for _, ok := range expected {
			if ok(p) {
				continue next
			}
		}
		where := p.URL
		if where != "" {
			where = " (" + where + ")"
		}
		t.Errorf("browser reported %s%s", strings.TrimSpace(p.String()), where)
	}
}
