package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"

	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// httpGet fetches url; a failed connection is status 0, so pollers can
// wait through it.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// pollUntil polls cond every 50ms until it holds or 60s pass.
func pollUntil(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, last)
		}
		<-tick.C
	}
}

// scrape reads url's /metrics, indexed by family name.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sum adds the values of family name's series whose labels include the
// given name=value pairs (histograms: their sample counts).
func sum(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var total float64
	found := false
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			ok := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					ok = true
				}
			}
			if !ok {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total, found
}

// TestUpMetrics scrapes a running up after some writes and its work
// pipeline's first ranges: every family of the parts up runs is there with
// sane values, no series has an unbounded label, /healthz and /readyz
// answer 200.
func TestUpMetrics(t *testing.T) {
	t.Parallel()
	port, hport := testproc.FreePort(t), testproc.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	data := t.TempDir()
	// The feeds' links start with --base-url, as behind a proxy.
	const proxied = "https://indexer.example.org/sy"
	up := cli(t, "up", "--nats-port", strconv.Itoa(port), "--data", data, "--http", "127.0.0.1:"+strconv.Itoa(hport), "--base-url", proxied)
	testproc.Start(t, up, "Stop with Ctrl-C")
	t.Cleanup(func() { _ = up.Process.Kill() })

	// The events API hears the writes of the nats-side CLI.
	events := dialEvents(t, base, "hub/demo")
	for i := range 3 {
		if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "hub", "demo", "k"+strconv.Itoa(i), "v", "--nats", url)); code != 0 {
			t.Fatalf("kv set: exit %d: %s", code, stderr)
		}
	}
	events.waitSubjects("hub/demo/k0", "hub/demo/k1", "hub/demo/k2")
	// The socket's connection is a presence row of its user (anonymous on
	// an open bus), app web, up's region.
	if out, stderr, code := testproc.Run(t, cli(t, "events", "presence", "anonymous", "--nats", url)); code != 0 || !regexp.MustCompile(`(?m)^web +local +20\d\d-`).MatchString(out) {
		t.Errorf("events presence anonymous: exit %d: %s%s", code, out, stderr)
	}
	if _, stderr, code := testproc.Run(t, cli(t, "events", "presence", "nobody", "--nats", url)); code != exitNotFound || !strings.Contains(stderr, "not connected in this region") || strings.Contains(stderr, "not-found") {
		t.Errorf("events presence nobody: exit %d (%s), want %d", code, stderr, exitNotFound)
	}
	// A durable subscription stored through the socket is a row that
	// events subs lists; events tail follows the anchor from the command line.
	events.send(map[string]string{"type": "subscribe", "id": "b1", "anchor": "hub/demo", "mode": "broadcast"})
	if m := events.read(); m["type"] != "subscribed" || m["mode"] != "broadcast" {
		t.Fatalf("durable subscribe: %v", m)
	}
	if out, stderr, code := testproc.Run(t, cli(t, "events", "subs", "anonymous", "--nats", url)); code != 0 || !regexp.MustCompile(`(?m)^b1 +broadcast +hub/demo +- +20\S+ +- +-$`).MatchString(out) {
		t.Errorf("events subs anonymous: exit %d: %s%s", code, out, stderr)
	}
	if _, stderr, code := testproc.Run(t, cli(t, "events", "tail", "hub/demo", "--window", "-1s", "--nats", url)); code != exitUsage || !strings.Contains(stderr, "--window") {
		t.Errorf("events tail --window -1s: exit %d (%s), want a usage error", code, stderr)
	}
	tailLines(t, cli(t, "events", "tail", "hub/demo", "--window", "0", "--nats", url), func() {
		if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "hub", "demo", "tailed", "v9", "--nats", url)); code != 0 {
			t.Fatalf("kv set: exit %d: %s", code, stderr)
		}
	}, regexp.MustCompile(`^set +hub/demo/tailed +#\d+ += v9$`))
	// A single row shows the seq its router resumes it from once started.
	events.send(map[string]string{"type": "subscribe", "id": "s1", "anchor": "hub/demo", "mode": "single"})
	m := events.read()
	for m["type"] == "event" { // b1's of the tailed write, on its way
		m = events.read()
	}
	if m["type"] != "subscribed" || m["mode"] != "single" {
		t.Fatalf("durable subscribe: %v", m)
	}
	// Settled where it started: nothing behind. Then a change it is
	// delivered and this socket does not ack: one behind, settled still.
	row := regexp.MustCompile(`(?m)^s1 +single +hub/demo +- +20\S+ +(\d+) +(\d+)$`)
	var start string
	testwait.Until(t, "the single row's cursor listed, nothing behind", func() (bool, string) {
		out, stderr, _ := testproc.Run(t, cli(t, "events", "subs", "anonymous", "--nats", url))
		m := row.FindStringSubmatch(out)
		if m != nil && m[2] == "0" {
			start = m[1]
		}
		return start != "", out + stderr
	})
	if _, stderr, code := testproc.Run(t, cli(t, "kv", "set", "hub", "demo", "unacked", "v10", "--nats", url)); code != 0 {
		t.Fatalf("kv set: exit %d: %s", code, stderr)
	}
	testwait.Until(t, "the unacked change listed as behind", func() (bool, string) {
		out, stderr, _ := testproc.Run(t, cli(t, "events", "subs", "anonymous", "--nats", url))
		m := row.FindStringSubmatch(out)
		return m != nil && m[1] == start && m[2] == "1", out + stderr
	})
	if code, body := httpGet(t, base+"/events"); code != 200 || !strings.Contains(body, "/ws/events.js") {
		t.Fatalf("/events: %d %.200s", code, body)
	}
	if code, body := httpGet(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	pollUntil(t, "/readyz 200", func() (bool, string) {
		code, body := httpGet(t, base+"/readyz")
		return code == 200, body
	})

	// The worker has indexed a range and finished it: the work and usenet
	// counters moved. The indexer counts a range when it reaches its end,
	// before the worker records the range read and finished (persist round
	// trips), and only then do the worker's counters and the range's state
	// move: wait for the last of them, not the first.
	var fams map[string]*dto.MetricFamily
	testwait.Until(t, "a range indexed and finished", func() (bool, string) {
		fams = scrape(t, base)
		last := ""
		ok := true
		for _, c := range []struct {
			name   string
			labels []string
		}{
			{"switchyard_usenet_ranges_indexed_total", nil},
			{"switchyard_work_ranges_finished_total", nil},
			{"switchyard_work_worker_articles_total", nil},
			{"switchyard_work_ranges", []string{"source", "demo", "state", "done"}},
		} {
			n, _ := sum(fams, c.name, c.labels...)
			ok = ok && n > 0
			last += fmt.Sprintf("%s%v=%v ", c.name, c.labels, n)
		}
		return ok, last
	})

	// The Newznab API on the same port: caps needs no key, a wrong key is
	// error 100, and the demo provider's releases show up in a search.
	keyb, err := os.ReadFile(filepath.Join(data, upAPIDir, "apikey"))
	if err != nil {
		t.Fatalf("up stored no API key: %v", err)
	}
	key := strings.TrimSpace(string(keyb))
	if code, body := httpGet(t, base+"/watch?scope=hub&stream=log"); code != 200 || !strings.Contains(body, "<html") {
		t.Fatalf("/watch: %d %.200s", code, body)
	}
	if code, body := httpGet(t, base+"/api?t=caps"); code != 200 || !strings.Contains(body, "<caps>") {
		t.Fatalf("/api?t=caps: %d %s", code, body)
	}
	if _, body := httpGet(t, base+"/api?t=search&apikey=wrong"); !strings.Contains(body, `code="100"`) {
		t.Fatalf("/api with a wrong key: %s", body)
	}
	pollUntil(t, "a demo release searchable", func() (bool, string) {
		_, body := httpGet(t, base+"/api?t=search&apikey="+key)
		return strings.Contains(body, "<item>"), body
	})
	// (Was: up had no --base-url; only usenet serve did.)
	if _, body := httpGet(t, base+"/api?t=search&apikey="+key); !strings.Contains(body, proxied+"/api?apikey=") {
		t.Fatalf("search under --base-url %s: no link starting with it in %.600s", proxied, body)
	}
	// What Sonarr's and Radarr's "Test" and RSS sync send: an empty search
	// in their default categories must find items on the demo data, or the
	// app refuses the indexer.
	for _, q := range []string{
		"t=tvsearch&cat=5030,5040&extended=1&offset=0&limit=100",
		"t=movie&cat=2000,2010,2020,2030,2040,2045,2050,2060&extended=1&offset=0&limit=100",
	} {
		pollUntil(t, "an item for "+q, func() (bool, string) {
			_, body := httpGet(t, base+"/api?"+q+"&apikey="+key)
			return strings.Contains(body, "<item>"), body
		})
	}
	fams = scrape(t, base)

	positive := []struct {
		name   string
		labels []string
	}{
		{"switchyard_persist_requests_total", []string{"cmd", "set", "code", "ok"}},
		{"switchyard_persist_request_duration_seconds", []string{"cmd", "set"}},
		{"switchyard_persist_commit_duration_seconds", nil},
		{"switchyard_persist_commit_batch_messages", nil},
		{"switchyard_persist_commits_total", nil},
		{"switchyard_persist_open_streams", nil},
		{"switchyard_persist_open_stream_bytes", nil},
		{"switchyard_persist_feed_messages_total", nil},
		{"switchyard_persist_ready", nil},
		{"switchyard_balancer_lookups_total", nil},
		{"switchyard_nntp_pool_size", nil},
		{"switchyard_nntp_pool_grant", nil},
		{"switchyard_nntp_commands_total", nil},
		{"switchyard_nntp_read_bytes_total", nil},
		{"switchyard_work_ranges", nil},
		{"switchyard_work_status_up", nil},
		{"switchyard_work_leases_acquired_total", nil},
		{"switchyard_work_prefetch_ranges_total", nil},
		{"switchyard_work_prefetch_articles_total", nil},
		{"switchyard_work_ranges_finished_total", nil},
		{"switchyard_work_worker_articles_total", nil},
		{"switchyard_usenet_articles_indexed_total", nil},
		{"switchyard_usenet_ranges_indexed_total", nil},
		{"switchyard_newznab_requests_total", []string{"function", "search", "code", "ok"}},
		{"switchyard_newznab_requests_total", []string{"function", "search", "code", "100"}},
		{"switchyard_newznab_requests_total", []string{"function", "caps"}},
		// The search index's follower, exported as operations.md promises.
		{"switchyard_watch_watchers", []string{"role", "search-index"}},
		{"switchyard_events_changes_total", nil},
		{"switchyard_events_deliveries_total", nil},
		{"switchyard_events_subscriptions", nil},
		// The events socket above wrote its user's presence row.
		{"switchyard_events_presence_writes_total", nil},
	}
	for _, c := range positive {
		if v, ok := sum(fams, c.name, c.labels...); !ok || v <= 0 {
			t.Errorf("%s%v = %v (present %v), want > 0", c.name, c.labels, v, ok)
		}
	}
	present := []string{
		"switchyard_persist_dedup_hits_total", "switchyard_persist_expired_messages_total",
		"switchyard_persist_commit_failures_total", "switchyard_persist_feed_publish_failures_total",
		"switchyard_nntp_errors_total", "switchyard_nntp_too_many_connections_total", "switchyard_nntp_pool_connections",
		"switchyard_work_lease_expiries_total", "switchyard_work_fence_rejections_total", "switchyard_work_prefetch_in_flight",
		"switchyard_work_articles_per_second", "switchyard_work_leases", "switchyard_work_range_articles",
		"switchyard_work_ranges_retired", "switchyard_work_broken_records",
		"switchyard_usenet_releases_published_total", "switchyard_usenet_binaries_changed_total",
		"switchyard_events_gaps_total", "switchyard_events_single_leases", "switchyard_events_single_backlog",
		"switchyard_events_presence_present", "switchyard_events_presence_connections", "switchyard_events_presence_removes_total",
		"switchyard_events_presence_reloads_total", "switchyard_events_presence_failures_total", "switchyard_events_presence_refused_total",
	}
	for _, name := range present {
		if _, ok := sum(fams, name); !ok {
			t.Errorf("no %s", name)
		}
	}
	if v, _ := sum(fams, "switchyard_persist_ready"); v != 2 {
		t.Errorf("persist_ready sums to %v, want 2 (both servers)", v)
	}
	if v, _ := sum(fams, "switchyard_work_ranges", "source", "demo", "state", "done"); v <= 0 {
		t.Errorf("work_ranges{source=demo,state=done} = %v, want > 0", v)
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "scope", "stream", "key", "group", "subject":
					t.Errorf("%s carries a %s label (%q)", name, l.GetName(), l.GetValue())
				}
			}
		}
	}

	if err := up.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, up); code != 0 {
		t.Fatalf("up exit %d", code)
	}
}

// TestReadyzFollowsTheBus runs persist serve --http against a NATS server
// the test stops and starts again: /readyz is 200 while the bus is up, 503
// naming the bus while it is down, and 200 again once it is back.
func TestReadyzFollowsTheBus(t *testing.T) {
	t.Parallel()
	port, hport := testproc.FreePort(t), testproc.FreePort(t)
	startNATS := func() *embedded.Server {
		e, err := embedded.Start(embedded.Config{Host: "127.0.0.1", Port: port})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := startNATS()
	t.Cleanup(func() { e.Shutdown() })
	base := "http://127.0.0.1:" + strconv.Itoa(hport)
	srv := cli(t, "persist", "serve", "--id", "0", "--ids", "0", "--data", t.TempDir(),
		"--nats", "nats://127.0.0.1:"+strconv.Itoa(port), "--http", "127.0.0.1:"+strconv.Itoa(hport))
	testproc.Start(t, srv, "ready on")
	t.Cleanup(func() { _ = srv.Process.Kill() })

	ready := func(want int, mention string) func() (bool, string) {
		return func() (bool, string) {
			code, body := httpGet(t, base+"/readyz")
			return code == want && strings.Contains(body, mention), strconv.Itoa(code) + " " + body
		}
	}
	pollUntil(t, "/readyz 200 with the bus up", ready(200, "ready"))
	e.Shutdown()
	pollUntil(t, "/readyz 503 with the bus down", ready(http.StatusServiceUnavailable, "bus switchyard-persist-0"))
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz with the bus down: %d, want 200 (the process is up)", code)
	}
	e = startNATS()
	pollUntil(t, "/readyz 200 with the bus back", ready(200, "ready"))

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := testproc.Wait(t, srv); code != 0 {
		t.Fatalf("persist serve exit %d", code)
	}
}

// TestHTTPNonLoopbackRefused: a non-loopback --http needs --http-insecure.
func TestHTTPNonLoopbackRefused(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"up", "--http", "0.0.0.0:0"},
		{"balancer", "--http", "0.0.0.0:0"},
		{"persist", "serve", "--http", "0.0.0.0:0"},
	} {
		_, stderr, code := execute(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "--http-insecure") {
			t.Errorf("%v: exit %d, %q; want a usage error naming --http-insecure", args, code, stderr)
		}
	}
}

// TestHTTPInsecureHelpSaysWhatItAccepts: every command's --http-insecure
// says what serving plain HTTP off loopback gives away (data and
// credentials in the clear) and what to do (a TLS proxy). It said "the
// endpoints have no authentication yet", untrue under up --auth, whose
// HTTP side then asks for credentials.
func TestHTTPInsecureHelpSaysWhatItAccepts(t *testing.T) {
	t.Parallel()
	var seen int
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup("http-insecure"); f != nil {
			seen++
			if strings.Contains(f.Usage, "no authentication") || !strings.Contains(f.Usage, "credentials") || !strings.Contains(f.Usage, "in the clear") || !strings.Contains(f.Usage, "TLS proxy") {
				t.Errorf("%s --http-insecure: %q; want credentials and data in the clear, behind a TLS proxy", c.CommandPath(), f.Usage)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if seen < 3 {
		t.Fatalf("found --http-insecure on %d commands, want up, balancer, persist serve and more", seen)
	}
}

// TestHTTPPortChecked: --http's port must be a number in 0-65535, else a
// usage error naming --http comes before anything connects. Before, only
// the form host:port was checked, and a bad port failed as a listener
// error after the role had started.
func TestHTTPPortChecked(t *testing.T) {
	t.Parallel()
	dead := deadNATS(t)
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:abc", "127.0.0.1:"} {
		args := []string{"balancer", "--http", addr, "--nats", dead}
		_, stderr, code := execute(t, args...)
		wantUsage(t, args, stderr, code, "--http")
	}
}

// TestHTTPHostFlag: --http-host must be a name or an IP (a usage error
// otherwise), and --http-host and --metrics-open reach the fleet's HTTP
// side.
func TestHTTPHostFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"up", "--http-host", "box.lan:8080"},
		{"balancer", "--http", "127.0.0.1:0", "--http-host", "http://box.lan"},
		{"usenet", "serve", "--http-host", "*.lan"},
	} {
		_, stderr, code := execute(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "--http-host") {
			t.Errorf("%v: exit %d, %q; want a usage error naming --http-host", args, code, stderr)
		}
	}
	fc, err := upConfig{work: upWork{off: true}, http: httpFlags{addr: "0.0.0.0:8080", hosts: []string{"box.lan", "10.0.0.5"}, metricsOpen: true}}.fleetConfig()
	if err != nil {
		t.Fatal(err)
	}
	if h := fc.HTTP; h.Addr != "0.0.0.0:8080" || !slices.Equal(h.Hosts, []string{"box.lan", "10.0.0.5"}) || !h.MetricsOpen || !h.Dashboard || !h.Watch {
		t.Errorf("up's HTTP side: %+v", h)
	}
}

// TestShownURL: the URL a command prints for its HTTP side names a host a
// client can call: a wildcard --http becomes the first --http-host, or
// 127.0.0.1 without one; any other address is printed as it listens.
func TestShownURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, base string
		hosts      []string
		want       string
	}{
		{"loopback", "http://127.0.0.1:8080", []string{"box.lan"}, "http://127.0.0.1:8080"},
		{"named address", "http://10.0.0.5:8080", nil, "http://10.0.0.5:8080"},
		{"ipv4 wildcard", "http://0.0.0.0:8080", nil, "http://127.0.0.1:8080"},
		{"ipv6 wildcard", "http://[::]:8080", nil, "http://127.0.0.1:8080"},
		{"wildcard with --http-host", "http://[::]:8080", []string{"indexer.lan", "10.0.0.5"}, "http://indexer.lan:8080"},
		{"wildcard with an ipv6 --http-host", "http://[::]:8080", []string{"fd00::5"}, "http://[fd00::5]:8080"},
		{"no HTTP side", "", []string{"box.lan"}, ""},
	} {
		if got := (httpFlags{hosts: c.hosts}).shownURL(c.base); got != c.want {
			t.Errorf("%s: shownURL(%q) with --http-host %v = %q, want %q", c.name, c.base, c.hosts, got, c.want)
		}
	}
}

// TestUpWildcardHTTPPrintsCallableURLs: every URL up prints for its HTTP
// side answers when called as printed. Before, with --http 0.0.0.0:PORT up
// printed http://[::]:PORT/..., whose Host the HTTP side refuses (421), so
// the newznab URL copied into an app, or the events page opened from the
// summary, failed.
func TestUpWildcardHTTPPrintsCallableURLs(t *testing.T) {
	t.Parallel()
	port, hport := testproc.FreePort(t), testproc.FreePort(t)
	up := startWatched(t, cli(t, "up", "--no-work", "--nats-port", strconv.Itoa(port), "--data", t.TempDir(),
		"--http", "0.0.0.0:"+strconv.Itoa(hport), "--http-insecure"))
	if up.waitExitOrLine(t, "Stop with Ctrl-C") {
		t.Fatalf("up exited %d: %s", up.code, up.stderr.String())
	}
	urls := regexp.MustCompile(`http://\S+`).FindAllString(up.stdout(), -1)
	if len(urls) < 5 {
		t.Fatalf("want the HTTP, newznab, releases, watch and events URLs, found %q in:\n%s", urls, up.stdout())
	}
	for _, u := range urls {
		if code, body := httpGet(t, u); code != http.StatusOK {
			t.Errorf("GET %s (as up printed it): %d %s", u, code, strings.TrimSpace(body))
		}
	}
	if err := up.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := up.waitExit(t); code != 0 {
		t.Fatalf("up exit %d: %s", code, up.stderr.String())
	}
}
