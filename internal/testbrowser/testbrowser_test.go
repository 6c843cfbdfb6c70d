package testbrowser

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProblemsCollected: a page's console.error and uncaught exception are
// collected (so a test asserting none can fail), and an expected one can
// be let through.
func TestProblemsCollected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><body><p id="ok">ok</p><script>
console.error("expected trouble");
setTimeout(() => { throw new Error("boom"); }, 0);
</script></body>`))
	}))
	defer srv.Close()
	b := New(t)
	ctx, cancel := context.WithTimeout(b.Context(), 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.ID("ok"))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(b.Problems()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("problems: %v", b.Problems())
		}
		<-tick.C
	}
	var got []string
	for _, p := range b.Problems() {
		got = append(got, p.String())
	}
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "expected trouble") || !strings.Contains(all, "boom") {
		t.Fatalf("problems:\n%s", all)
	}
	b.CheckNoProblems(t, func(m chromedp.ConsoleMessage) bool {
		return strings.Contains(m.Text, "expected trouble") || strings.Contains(m.Text, "boom")
	})
}
