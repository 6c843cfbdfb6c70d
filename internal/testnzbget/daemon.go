package testnzbget

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testproc"
	"github.com/switchyard-dev/switchyard/internal/testwait"
)

// Feed is one RSS feed of the daemon's configuration (FeedN.* in
// nzbget.conf). It is fetched only when asked (FetchFeed): its interval is
// 0, and every item counts on the first fetch (no backlog).
type Feed struct {
	// Name is the feed's name. Empty means "feedN".
	Name string
	// URL is the feed's address.
	URL string
	// Filter is NZBGet's filter (FeedN.Filter): rules such as
	// "Accept: title:S01E02", several separated by '%' as NZBGet writes
	// them. Empty accepts every item.
	Filter string
}

// DaemonConfig is what StartDaemon runs.
type DaemonConfig struct {
	// Server is the news server NZBGet downloads from.
	Server Server
	// Feeds are Feed1, Feed2... in this order.
	Feeds []Feed
}

// Daemon is NZBGet running in server mode (`nzbget -s`, in the
// foreground, owned by the test) on a private configuration under the
// test's temporary directory, with its control server on a loopback port.
// It is driven over its JSON-RPC API and stopped when the test ends.
type Daemon struct {
	main       string // MainDir
	rpcURL     string // http://127.0.0.1:PORT/jsonrpc
	user, pass string
	client     *http.Client
	exited     chan struct{} // closed once the process was waited for
	waitErr    error         // the process's exit, valid after exited
}

// StartDaemon starts NZBGet in server mode with cfg and returns once its
// JSON-RPC API answers; the process is interrupted (then killed) when t
// ends. The caller has called Require.
func StartDaemon(t testing.TB, cfg DaemonConfig) *Daemon {
	t.Helper()
	bin, why := Available()
	if bin == "" {
		t.Fatal("testnzbget: " + why)
	}
	main := t.TempDir()
	d := &Daemon{
		main: main, user: "switchyard", pass: randomHex(t),
		// No idle connections: nothing is left running after the test.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute},
		exited: make(chan struct{}),
	}
	port := testproc.FreePort(t)
	d.rpcURL = "http://127.0.0.1:" + strconv.Itoa(port) + "/jsonrpc"
	conf, err := writeConfig(main, d.options(cfg, port))
	if err != nil {
		t.Fatal(err)
	}
	// The console output goes to a file: a file needs no copying goroutine,
	// and the log of a failed test can be read from it.
	console, err := os.Create(filepath.Join(main, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-c", conf, "-s")
	cmd.Dir = main
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, console, console
	// Stopping asks NZBGet to save its queue and exit; a daemon that does
	// not is killed after WaitDelay.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("testnzbget: start nzbget: %v", err)
	}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-d.exited
	})
	testwait.Until(t, "nzbget's JSON-RPC API to answer", func() (bool, string) {
		select {
		case <-d.exited:
			t.Fatalf("testnzbget: nzbget exited at start: %v\n%s", d.waitErr, d.LogTail())
		default:
		}
		var version string
		err := d.Call(context.Background(), "version", nil, &version)
		return err == nil, fmt.Sprint(err)
	})
	return d
}

// options are the standalone options with the control server on port,
// behind a user and password, and cfg's feeds.
func (d *Daemon) options(cfg DaemonConfig, port int) [][2]string {
	opts := options(d.main, cfg.Server)
	for i, o := range opts {
		if o[0] == "ControlPort" {
			opts[i][1] = strconv.Itoa(port)
		}
	}
	opts = append(opts, [][2]string{
		{"ControlUsername", d.user},
		{"ControlPassword", d.pass},
		{"RestrictedUsername", ""},
		{"AddUsername", ""},
		{"SecureControl", "no"},
		// Every caller logs in, loopback ones too.
		{"AuthorizedIP", ""},
	}...)
	for i, f := range cfg.Feeds {
		n := "Feed" + strconv.Itoa(i+1) + "."
		name := f.Name
		if name == "" {
			name = "feed" + strconv.Itoa(i+1)
		}
		opts = append(opts, [][2]string{
			{n + "Name", name},
			{n + "URL", f.URL},
			{n + "Filter", f.Filter},
			{n + "Backlog", "no"},
			{n + "PauseNzb", "no"},
			{n + "Category", ""},
			{n + "Priority", "0"},
			{n + "Interval", "0"},
		}...)
	}
	return opts
}

// randomHex is a fresh control password.
func randomHex(t testing.TB) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// RPCError is an error NZBGet's JSON-RPC API answered.
type RPCError struct {
	Method  string
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("nzbget %s: error %d: %s", e.Method, e.Code, e.Message)
}

// Call calls method with params (nil for none) and decodes its result
// into result (nil to drop it).
func (d *Daemon) Call(ctx context.Context, method string, params []any, result any) error {
	if params == nil {
		params = []any{}
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	// NZBGet's JSON reader knows no \u escapes: a URL's '&' must stay '&'.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"method": method, "params": params, "id": 1}); err != nil {
		return fmt.Errorf("nzbget %s: encode: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.rpcURL, &body)
	if err != nil {
		return fmt.Errorf("nzbget %s: %w", method, err)
	}
	req.SetBasicAuth(d.user, d.pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("nzbget %s: %w", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("nzbget %s: read answer: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("nzbget %s: HTTP %s: %.200s", method, resp.Status, b)
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		return fmt.Errorf("nzbget %s: decode answer: %w: %.200s", method, err, b)
	}
	if answer.Error != nil {
		answer.Error.Method = method
		return answer.Error
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(answer.Result, result); err != nil {
		return fmt.Errorf("nzbget %s: decode result: %w: %.200s", method, err, answer.Result)
	}
	return nil
}

// FeedItem is one item of a feed as NZBGet read it (previewfeed,
// viewfeed).
type FeedItem struct {
	Title    string
	Filename string
	URL      string
	SizeLo   uint32
	SizeHi   uint32
	Category string
	// Time is the item's date (its pubDate), unix seconds.
	Time int64
	// Match is ACCEPTED, REJECTED or IGNORED by the feed's filter; Rule is
	// the number of the rule that decided (0 for none).
	Match string
	Rule  int
	// Status is UNKNOWN, BACKLOG, FETCHED or NEW.
	Status string
}

// Size is the item's size in bytes, as NZBGet read it.
func (it FeedItem) Size() int64 { return int64(it.SizeHi)<<32 | int64(it.SizeLo) }

// PreviewFeed has NZBGet fetch url now and read it with filter, as its web
// interface's "Preview Feed" does, and returns every item with how the
// filter matched it.
func (d *Daemon) PreviewFeed(ctx context.Context, url, filter string) ([]FeedItem, error) {
	// previewfeed(id, name, url, filter, backlog, pauseNzb, category,
	// priority, interval, feedFilter, includeNonMatching, cacheTimeSec,
	// cacheId): NZBGet 16's signature, no cache.
	params := []any{0, "preview", url, filter, false, false, "", 0, 0, "", true, 0, ""}
	var items []FeedItem
	err := d.Call(ctx, "previewfeed", params, &items)
	return items, err
}

// ViewFeed returns the items of configured feed id (1 for Feed1) as
// NZBGet last fetched them, with their match and status.
func (d *Daemon) ViewFeed(ctx context.Context, id int) ([]FeedItem, error) {
	var items []FeedItem
	err := d.Call(ctx, "viewfeed", []any{id, true}, &items)
	return items, err
}

// FetchFeed asks NZBGet to fetch configured feed id now and queue the
// items its filter accepts; it returns before the fetch is done.
func (d *Daemon) FetchFeed(ctx context.Context, id int) error {
	var ok bool
	if err := d.Call(ctx, "fetchfeed", []any{id}, &ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("nzbget fetchfeed: answered false")
	}
	return nil
}

// HistoryItem is one finished job (history).
type HistoryItem struct {
	NZBID int
	// Kind is NZB for a download, URL for an NZB that could not be
	// fetched.
	Kind string
	Name string
	URL  string
	// Status is the outcome, such as SUCCESS/PAR or FAILURE/HEALTH.
	Status  string
	DestDir string
}

// History returns NZBGet's history, newest first.
func (d *Daemon) History(ctx context.Context) ([]HistoryItem, error) {
	var items []HistoryItem
	err := d.Call(ctx, "history", []any{false}, &items)
	return items, err
}

// Queue returns the names of the jobs still queued (listgroups), for
// saying what a wait for the history was stuck on.
func (d *Daemon) Queue(ctx context.Context) ([]string, error) {
	var groups []struct {
		NZBName string
		Status  string
	}
	if err := d.Call(ctx, "listgroups", []any{0}, &groups); err != nil {
		return nil, err
	}
	var names []string
	for _, g := range groups {
		names = append(names, g.NZBName+" "+g.Status)
	}
	return names, nil
}

// LogTail is the end of NZBGet's log, for a failure's message.
func (d *Daemon) LogTail() string {
	console, _ := os.ReadFile(filepath.Join(d.main, "console.log"))
	return tail(filepath.Join(d.main, "nzbget.log"), console)
}
