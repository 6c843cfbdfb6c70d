package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/persist/store"
	"github.com/switchyard-dev/switchyard/usenet/users"
	"github.com/switchyard-dev/switchyard/work"
)

// upConfig is what `switchyard up` runs, small: every role on.
func upConfig(t *testing.T) Config {
	dir := t.TempDir()
	groups, err := work.ParseGroups("alt.binaries.*")
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		NATS:     NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist:  PersistConfig{IDs: []string{"0", "1"}, Serve: []string{"0", "1"}, DataDir: dir},
		Balancer: true,
		Work: WorkConfig{
			Demo:        &DemoConfig{Groups: 1, Articles: 200},
			Coordinator: &work.CoordinatorConfig{Shard: work.Shard{Index: 1, Count: 1}, Planner: work.PlannerConfig{Groups: groups, RangeSize: 50}, Share: work.ShareConfig{Limit: 2, Max: 2}},
			Workers:     []string{"w1", "w2"},
		},
		API:  APIConfig{Dir: dir + "/_usenet-api"},
		HTTP: HTTPConfig{Addr: "127.0.0.1:0", Dashboard: true, Watch: true},
	}
}

// TestUpStartsEveryRoleInOneOrderAndStopsInReverse runs up's set: the
// roles are the documented list, they serve (a write through the balancer,
// the demo's articles indexed, /readyz), and Stop leaves nothing.
func TestUpStartsEveryRoleInOneOrderAndStopsInReverse(t *testing.T) {
	ctx := context.Background()
	f, err := Start(ctx, upConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = f.Stop(ctx)
		}
	})
	want := []string{
		"http", "dashboard", "nats",
		"conn switchyard-persist-0", "persist-0", "conn switchyard-persist-1", "persist-1",
		"conn switchyard-balancer", "balancer",
		"conn switchyard-coordinator-1/1", "client switchyard-coordinator-1/1", "demo-nntp", "coordinator-1/1",
		"conn switchyard-w1", "client switchyard-w1", "conn switchyard-w2", "client switchyard-w2", "settle", "workers",
		"conn switchyard-usenet-api", "client switchyard-usenet-api", "newznab", "watch",
	}
	if got := f.Roles(); !slices.Equal(got, want) {
		t.Fatalf("roles\n got %q\nwant %q", got, want)
	}
	if f.NNTPAddr() == "" || f.HTTPURL() == "" || f.NATS() == nil {
		t.Fatalf("started without its addresses: nntp %q http %q", f.NNTPAddr(), f.HTTPURL())
	}
	if key, created := f.APIKey(); len(key) < 16 || !created {
		t.Fatalf("api key %q created %v", key, created)
	}
	// A user added beside the running API (as `usenet users add` does)
	// can use it at once; the admin's key still can.
	us, err := users.Open(filepath.Join(f.cfg.API.Dir, users.File), users.Config{})
	if err != nil {
		t.Fatal(err)
	}
	userKey, err := us.Add(ctx, "alice", users.Limits{RequestsPerDay: 1})
	us.Close()
	if err != nil {
		t.Fatal(err)
	}
	if admin, _ := f.APIKey(); !f.ValidAPIKey(ctx, userKey) || !f.ValidAPIKey(ctx, admin) || f.ValidAPIKey(ctx, "wrong") {
		t.Fatal("ValidAPIKey: want the user's and the admin's key valid, another not")
	}
	// The releases page takes the user's key as /api does (and counts no
	// request for it).
	for key, want := range map[string]int{userKey: http.StatusOK, "wrong-key-wrong-key": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodGet, f.HTTPURL()+"/releases/api/search", nil)
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("the releases page with key %.8s…: %d, want %d", key, resp.StatusCode, want)
		}
	}
	// Its limit of 1 request: the first search answers, the second is 500.
	for _, want := range []string{`<rss`, `<error code="500" description="Request limit reached"`} {
		resp, err := http.Get(f.HTTPURL() + "/api?t=search&apikey=" + userKey)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Fatalf("a user's search: %s, want %s", body, want)
		}
	}

	nc, err := f.NATS().ConnectInProcess(bus.ConnectConfig{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV("hub", "demo").Set(ctx, "greeting", []byte("hello"), persist.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "readyz 200", func() (bool, string) {
		resp, err := http.Get(f.HTTPURL() + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	// The work pipeline runs: the demo group's ranges get finished.
	st, err := work.NewStore(c, "default")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a range of the demo provider finished", func() (bool, string) {
		s, err := st.Status(ctx)
		if err != nil {
			return false, err.Error()
		}
		return s.Ranges[work.StateDone] > 0, "not yet"
	})

	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := f.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	if got := f.Roles(); len(got) != 0 {
		t.Fatalf("members left after Stop: %q", got)
	}
	if err := f.Stop(sctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(f.HTTPURL(), "http://"), time.Second); err == nil {
		t.Fatal("the HTTP side still listens after Stop")
	}
}

// TestFailedStartStopsWhatStarted: a role that cannot start (the HTTP
// address is taken) fails Start, and what started before it is stopped.
func TestFailedStartStopsWhatStarted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := upConfig(t)
	cfg.HTTP.Addr = ln.Addr().String()
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "http") {
		t.Fatalf("Start on a taken address: %v", err)
	}

	// A persist server id outside the ids is refused before anything runs.
	cfg = upConfig(t)
	cfg.Persist.Serve = []string{"7"}
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `"7"`) {
		t.Fatalf("Start with a foreign id: %v", err)
	}
	cfg = upConfig(t)
	cfg.Work.Indexer = "grep"
	if _, err := Start(context.Background(), cfg); err == nil {
		t.Fatal("Start with an unknown indexer succeeded")
	}
}

// closeFails is SQLite storage whose Close fails (after closing): the
// persist server's Stop then fails, as on a disk that went away.
type closeFails struct{ store.Storage }

func (c closeFails) Close() error {
	_ = c.Storage.Close()
	return errors.New("close storage: the disk went away")
}

// cleanupFailsConfig is a fleet whose Start fails (the API's directory
// is a regular file) after its persist server started, and whose cleanup
// then fails (the server's storage cannot close).
func cleanupFailsConfig(t *testing.T) Config {
	t.Helper()
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return Config{
		NATS: NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist: PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: t.TempDir(), Tune: func(c *server.Config) {
			c.Storage = closeFails{store.NewSQLite(store.SQLiteConfig{Dir: c.DataDir})}
		}},
		HTTP: HTTPConfig{Addr: "127.0.0.1:0"},
		API:  APIConfig{Dir: file},
	}
}

// TestFailedStartReportsFailedCleanup: when stopping what had started
// after a failed start fails too, Start's error says so (a CleanupError)
// beside the start's own. (Was: the stop's error was only logged, and a
// command stopped by a signal while starting exited 0 whatever it left.)
func TestFailedStartReportsFailedCleanup(t *testing.T) {
	_, err := Start(context.Background(), cleanupFailsConfig(t))
	var ce *CleanupError
	if !errors.As(err, &ce) || !strings.Contains(ce.Error(), "persist-0") || !strings.Contains(ce.Error(), "the disk went away") {
		t.Fatalf("Start: %v, want a CleanupError naming persist-0's failed stop", err)
	}
	if !strings.Contains(err.Error(), "api key") {
		t.Fatalf("Start: %v, want the start's own error too", err)
	}
}

// TestRoleAlone is a role command's fleet: one persist server on an
// external bus, no HTTP side.
func TestRoleAlone(t *testing.T) {
	ctx := context.Background()
	hub, err := Start(ctx, Config{NATS: NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}}})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Stop(ctx)
	if got := hub.Roles(); !slices.Equal(got, []string{"nats"}) {
		t.Fatalf("bus roles %q", got)
	}
	f, err := Start(ctx, Config{
		NATS:    NATSConfig{URL: hub.BusURL()},
		Persist: PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Roles(); !slices.Equal(got, []string{"conn switchyard-persist-0", "persist-0"}) {
		t.Fatalf("roles %q", got)
	}
	if len(f.Servers()) != 1 || f.HTTPURL() != "" {
		t.Fatalf("servers %d, http %q", len(f.Servers()), f.HTTPURL())
	}
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Nobody answers the scope any more.
	nc, err := nats.Connect(hub.BusURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := persist.NewClient(persist.ClientConfig{Conn: nc, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV("hub", "demo").Get(ctx, "k"); err == nil {
		t.Fatal("a get answered after the server stopped")
	}
}

// TestPersistTuneAndOnNew: Tune changes each server's config before it is
// made and OnNew sees each server made but not yet serving, in Serve order.
func TestPersistTuneAndOnNew(t *testing.T) {
	ctx := context.Background()
	var tuned []string
	var made []*server.Server
	f, err := Start(ctx, Config{
		NATS: NATSConfig{Embedded: &embedded.Config{Host: "127.0.0.1", Port: embedded.RandomPort}},
		Persist: PersistConfig{
			IDs: []string{"0", "1"}, Serve: []string{"1", "0"}, DataDir: t.TempDir(),
			Tune: func(c *server.Config) { tuned = append(tuned, c.ID) },
			OnNew: func(srv *server.Server) {
				if err := srv.Ready(); !errors.Is(err, server.ErrNotServing) {
					t.Errorf("OnNew on a server that serves: Ready %v", err)
				}
				made = append(made, srv)
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop(ctx)
	if !slices.Equal(tuned, []string{"1", "0"}) {
		t.Fatalf("tuned %q", tuned)
	}
	if !slices.Equal(made, f.Servers()) || len(made) != 2 {
		t.Fatalf("OnNew saw %d servers, not the %d of Servers in order", len(made), len(f.Servers()))
	}
	for _, srv := range f.Servers() {
		if err := srv.Ready(); err != nil {
			t.Fatalf("server after Start: %v", err)
		}
	}
}

// TestUnreachableBus: a role that cannot reach an external NATS server
// fails Start with an UnreachableError naming the URL.
func TestUnreachableBus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = Start(context.Background(), Config{
		NATS:    NATSConfig{URL: url},
		Persist: PersistConfig{IDs: []string{"0"}, Serve: []string{"0"}, DataDir: t.TempDir()},
	})
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.URL != url {
		t.Fatalf("Start on a dead bus: %v, want an UnreachableError for %s", err, url)
	}
}

// TestDemoRestartKeepsGroups: started again on the same data, the demo
// provider's groups begin where the work state left them, not at the
// configured size: a fresh demo smaller than what was planned (it grew
// while the first ran; here the second is configured smaller) would sit
// below the planned articles, and nothing would be fetched.
func TestDemoRestartKeepsGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := upConfig(t)
	f1, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var planned int64
	testwait.Until(t, "the demo group planned", func() (bool, string) {
		gs, err := f1.work.coord.Groups(ctx)
		if err != nil || len(gs) == 0 {
			return false, fmt.Sprint(err)
		}
		planned = gs[0].Val.PlannedThrough
		return planned >= cfg.Work.Demo.Articles, fmt.Sprintf("planned through %d", planned)
	})
	if err := f1.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	cfg.Work.Demo = &DemoConfig{Groups: 1, Articles: planned / 2}
	f2 := startWeb(t, cfg)
	nc, err := nntp.Dial(ctx, nntp.Config{Addr: f2.NNTPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	g, err := nc.Group(ctx, "alt.binaries.demo.1")
	if err != nil {
		t.Fatal(err)
	}
	if g.High < planned {
		t.Fatalf("after the restart the demo group's high is %d, below the %d planned", g.High, planned)
	}
}
