package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/persist"
)

// eventsServer is one side of bench events: a server in its own process
// that WebSocket subscribers subscribe to channels of and a publisher
// publishes on.
type eventsServer interface {
	// pid is the server's process, whose CPU and RSS are measured.
	pid() int
	// subscribe dials one subscriber of channel ch and returns once the
	// server has confirmed the subscription.
	subscribe(ctx context.Context, ch string) (*websocket.Conn, error)
	// publish publishes payload on channel ch under a key no other
	// publish uses (so nothing is coalesced).
	publish(ctx context.Context, ch string, seq int64, payload []byte) error
	close() error
}

// serverProc is a server process bench events started, with its output
// kept in a file for the error when it fails.
type serverProc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

func startProc(ctx context.Context, dir, name string, argv []string, env []string) (*serverProc, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &serverProc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// waitHTTP polls u until it answers 200, the process exits or 60 s pass.
func (p *serverProc) waitHTTP(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready: %s", p.cmd.Path, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w: %s", p.cmd.Path, u, ctx.Err(), p.tail())
		case <-t.C:
		}
	}
}

// tail is the end of the process's output.
func (p *serverProc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// stop ends the process with SIGTERM (SIGKILL after 20 s) and waits.
func (p *serverProc) stop() error {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// oursServer is `switchyard up --no-work --servers 1` and its /ws/events;
// publishing is a keyed set through a persist client on up's NATS.
type oursServer struct {
	proc   *serverProc
	http   string
	nc     *nats.Conn
	client *persist.Client
	stream string
	users  *eventsUsers // nil: up runs without --auth, every socket anonymous
}

// eventsUsers are the bus users bench events logs its subscribers in as,
// under `up --auth`: the events layer delivers one event to at most
// events.MaxMatchedPerOwner subscriptions of one owner, so 1,000
// subscribers of one anchor need many owners. Subscribers take them round
// robin.
type eventsUsers struct {
	dir    string        // the auth directory (auth init's)
	client []nats.Option // the publisher's login: the client role
	basic  []string      // each tenant's Authorization header
	next   atomic.Int64
}

// eventsUserName is the tenant name of the i-th subscriber's user.
func eventsUserName(i int) string { return "u" + strconv.Itoa(i) }

// makeEventsUsers writes an auth directory in dir with n tenants of the
// bench scope (and the roles of one persist server, as up --servers 1 runs).
func makeEventsUsers(dir string, n int) (*eventsUsers, error) {
	plan := auth.Plan{IDs: []string{"0"}, Tenants: make(map[string][]string, n)}
	for i := range n {
		plan.Tenants[eventsUserName(i)] = []string{eventsScope}
	}
	authDir := filepath.Join(dir, "auth")
	if _, err := auth.Init(authDir, plan, false); err != nil {
		return nil, fmt.Errorf("auth init: %w", err)
	}
	u := &eventsUsers{dir: authDir, basic: make([]string, n)}
	var err error
	if u.client, err = auth.ClientOptions(auth.CredsFile(authDir, auth.RoleClient), ""); err != nil {
		return nil, err
	}
	for i := range n {
		c, err := auth.LoadCreds(auth.CredsFile(authDir, eventsUserName(i)))
		if err != nil {
			return nil, err
		}
		u.basic[i] = "Basic " + base64.StdEncoding.EncodeToString([]byte(c.User+":"+c.Password))
	}
	return u, nil
}

// header is the next subscriber's login.
func (u *eventsUsers) header() http.Header {
	i := int(u.next.Add(1)-1) % len(u.basic)
	return http.Header{"Authorization": {u.basic[i]}}
}

// startOurs runs upCmd (the switchyard binary's argv up to "up") with a
// data directory in dir, and extra flags after up's; with users, up runs
// with --auth and every connection logs in.
func startOurs(ctx context.Context, upCmd []string, dir, name, stream, cpuProfile string, users *eventsUsers, extra ...string) (*oursServer, error) {
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, natsPort, _ := net.SplitHostPort(natsAddr)
	argv := append(append([]string(nil), upCmd...), "up", "--no-work", "--servers", "1",
		"--http", httpAddr, "--nats-port", natsPort, "--data", filepath.Join(dir, name+"-data"), "--log-level", "warn")
	if cpuProfile != "" {
		argv = append(argv, "--cpuprofile", cpuProfile)
	}
	var natsOpts []nats.Option
	if users != nil {
		// --metrics-open: the cross-region run reads a gauge of /metrics.
		argv = append(argv, "--auth", users.dir, "--metrics-open")
		natsOpts = users.client
	}
	argv = append(argv, extra...)
	// SWITCHYARD_NATS_URL would point the child's clients elsewhere.
	p, err := startProc(ctx, dir, name, argv, []string{"SWITCHYARD_NATS_URL="})
	if err != nil {
		return nil, err
	}
	s := &oursServer{proc: p, http: httpAddr, stream: stream, users: users}
	if err := p.waitHTTP(ctx, "http://"+httpAddr+"/readyz"); err != nil {
		_ = p.stop()
		return nil, err
	}
	if s.nc, err = nats.Connect("nats://"+natsAddr, natsOpts...); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("connect to up's NATS: %w", err)
	}
	if s.client, err = persist.NewClient(persist.ClientConfig{Conn: s.nc}); err != nil {
		s.nc.Close()
		_ = p.stop()
		return nil, err
	}
	return s, nil
}

func (s *oursServer) pid() int { return s.proc.cmd.Process.Pid }

// eventsScope is the persist scope bench events writes in.
const eventsScope = "bench"

// subscribe opens /ws/events and subscribes to the anchor of ch:
// bench/STREAM/ch, under which each publish is a new key.
func (s *oursServer) subscribe(ctx context.Context, ch string) (*websocket.Conn, error) {
	var opts *websocket.DialOptions
	if s.users != nil {
		opts = &websocket.DialOptions{HTTPHeader: s.users.header()}
	}
	c, _, err := websocket.Dial(ctx, "ws://"+s.http+"/ws/events", opts)
	if err != nil {
		return nil, fmt.Errorf("dial /ws/events: %w", err)
	}
	c.SetReadLimit(-1)
	if err := expectMsg(ctx, c, `"type":"ready"`); err != nil {
		_ = c.CloseNow()
		return nil, err
	}
	req := `{"type":"subscribe","id":"1","anchor":"` + eventsScope + "/" + s.stream + "/" + ch + `"}`
	if err := c.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
		_ = c.CloseNow()
		return nil, err
	}
	if err := expectMsg(ctx, c, `"type":"subscribed"`); err != nil {
		_ = c.CloseNow()
		return nil, err
	}
	return c, nil
}

func (s *oursServer) publish(ctx context.Context, ch string, seq int64, payload []byte) error {
	_, err := s.client.Stream(eventsScope, s.stream).Set(ctx, payload, persist.SetOptions{Key: ch + "/m" + strconv.FormatInt(seq, 10)})
	return err
}

func (s *oursServer) close() error {
	s.nc.Close()
	return s.proc.stop()
}

// crossServer is two regions of ours on loopback, each its own `up
// --region` (its own NATS, persist and data) joined by the forward queue:
// the subscribers are on region b, the publishes go through region a's
// persist, and every delivery crosses from a to b.
type crossServer struct {
	a, b *oursServer
}

// Region names of the cross-region run.
const (
	crossPublisher  = "a"
	crossSubscriber = "b"
)

func startCross(ctx context.Context, upCmd []string, dir, stream, cpuProfile string, users *eventsUsers, extra ...string) (*crossServer, error) {
	secrets := exec.CommandContext(ctx, upCmd[0], append(upCmd[1:], "events", "secrets", crossPublisher, crossSubscriber)...)
	out, err := secrets.Output()
	if err != nil {
		return nil, fmt.Errorf("events secrets: %w", err)
	}
	secretsPath := filepath.Join(dir, "regions.secrets")
	if err := os.WriteFile(secretsPath, out, 0o600); err != nil {
		return nil, err
	}
	fwdA, err := freeAddr()
	if err != nil {
		return nil, err
	}
	fwdB, err := freeAddr()
	if err != nil {
		return nil, err
	}
	region := func(self, listen, peer, peerAddr string) []string {
		return append([]string{"--region", self, "--forward-listen", listen, "--peer", peer + "=http://" + peerAddr, "--forward-secrets", secretsPath}, extra...)
	}
	a, err := startOurs(ctx, upCmd, dir, "switchyard-up-"+crossPublisher, stream, "", users, region(crossPublisher, fwdA, crossSubscriber, fwdB)...)
	if err != nil {
		return nil, fmt.Errorf("region %s: %w", crossPublisher, err)
	}
	b, err := startOurs(ctx, upCmd, dir, "switchyard-up-"+crossSubscriber, stream, cpuProfile, users, region(crossSubscriber, fwdB, crossPublisher, fwdA)...)
	if err != nil {
		_ = a.close()
		return nil, fmt.Errorf("region %s: %w", crossSubscriber, err)
	}
	return &crossServer{a: a, b: b}, nil
}

// pid is the subscribers' region, whose memory is measured; the CPU is
// both regions' (morePIDs).
func (s *crossServer) pid() int        { return s.b.pid() }
func (s *crossServer) morePIDs() []int { return []int{s.a.pid()} }

func (s *crossServer) subscribe(ctx context.Context, ch string) (*websocket.Conn, error) {
	return s.b.subscribe(ctx, ch)
}

// ready waits until region a holds a stand-in of every channel's anchor
// (b announced its subscriptions): before that a's changes are not sent
// to b. Its gauge events_subscriptions counts them, a having no sockets.
func (s *crossServer) ready(ctx context.Context, channels int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := metricValue(ctx, "http://"+s.a.http+"/metrics", "switchyard_events_subscriptions")
		if err == nil && n >= float64(channels) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("region %s watches %v of the %d anchors of region %s's subscribers (%v): %w", crossPublisher, n, channels, crossSubscriber, err, ctx.Err())
		case <-t.C:
		}
	}
}

// metricValue reads one unlabelled sample from a Prometheus text page.
func metricValue(ctx context.Context, u, name string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	_, rest, ok := strings.Cut(string(b), "\n"+name+" ")
	if !ok {
		return 0, fmt.Errorf("%s has no %s", u, name)
	}
	v, _, _ := strings.Cut(rest, "\n")
	return strconv.ParseFloat(strings.TrimSpace(v), 64)
}

func (s *crossServer) publish(ctx context.Context, ch string, seq int64, payload []byte) error {
	return s.a.publish(ctx, ch, seq, payload)
}

func (s *crossServer) close() error {
	errB := s.b.close()
	errA := s.a.close()
	return errors.Join(errB, errA)
}

// expectMsg reads one message and fails unless it holds want.
func expectMsg(ctx context.Context, c *websocket.Conn, want string) error {
	_, b, err := c.Read(ctx)
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", want, err)
	}
	if !bytes.Contains(b, []byte(want)) {
		return fmt.Errorf("got %q, want %s", b, want)
	}
	return nil
}

// centrifugoServer is Centrifugo with its memory engine, anonymous
// clients (insecure mode, for loopback only) and its HTTP server API for
// publishing, without or with channel history.
type centrifugoServer struct {
	proc *serverProc
	addr string
	hc   *http.Client
}

// CentrifugoVersion is the Centrifugo bench events installs.
const CentrifugoVersion = "v6.9.1"

// InstallCentrifugo builds Centrifugo into dir with go install and
// returns the binary's path.
func InstallCentrifugo(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/centrifugal/centrifugo/v6@"+CentrifugoVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install centrifugo %s: %w: %s", CentrifugoVersion, err, bytes.TrimSpace(out))
	}
	return filepath.Join(dir, "centrifugo"), nil
}

// historySize is how many publications a channel keeps with history on.
const historySize = 100

func startCentrifugo(ctx context.Context, bin, dir string, history bool, workers int) (*centrifugoServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	portN, _ := strconv.Atoi(port)
	ch := map[string]any{}
	if history {
		ch = map[string]any{"history_size": historySize, "history_ttl": "300s"}
	}
	conf := map[string]any{
		"http_server": map[string]any{"address": host, "port": portN},
		"log":         map[string]any{"level": "error"},
		"client":      map[string]any{"insecure": true, "allowed_origins": []string{"*"}},
		"http_api":    map[string]any{"insecure": true},
		"health":      map[string]any{"enabled": true},
		"channel":     map[string]any{"without_namespace": ch},
	}
	name := "centrifugo"
	if history {
		name += "-history"
	}
	path := filepath.Join(dir, name+".json")
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	p, err := startProc(ctx, dir, name, []string{bin, "--config", path}, nil)
	if err != nil {
		return nil, err
	}
	if err := p.waitHTTP(ctx, "http://"+addr+"/health"); err != nil {
		_ = p.stop()
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	return &centrifugoServer{proc: p, addr: addr, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

func (s *centrifugoServer) pid() int { return s.proc.cmd.Process.Pid }

// subscribe speaks Centrifugo's JSON client protocol (v2): a connect
// command, then a subscribe command, each answered by a reply of its id.
func (s *centrifugoServer) subscribe(ctx context.Context, ch string) (*websocket.Conn, error) {
	c, _, err := websocket.Dial(ctx, "ws://"+s.addr+"/connection/websocket", nil)
	if err != nil {
		return nil, fmt.Errorf("dial centrifugo: %w", err)
	}
	c.SetReadLimit(-1)
	for _, step := range []struct{ cmd, want string }{
		{`{"id":1,"connect":{}}`, `"id":1,"connect":`},
		{`{"id":2,"subscribe":{"channel":"` + ch + `"}}`, `"id":2,"subscribe":`},
	} {
		if err := c.Write(ctx, websocket.MessageText, []byte(step.cmd)); err != nil {
			_ = c.CloseNow()
			return nil, err
		}
		if err := expectMsg(ctx, c, step.want); err != nil {
			_ = c.CloseNow()
			return nil, err
		}
	}
	return c, nil
}

func (s *centrifugoServer) publish(ctx context.Context, ch string, _ int64, payload []byte) error {
	body := `{"channel":"` + ch + `","data":{"p":"` + string(payload) + `"}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.addr+"/api/publish", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("centrifugo publish: %w", err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || bytes.Contains(rb, []byte(`"error"`)) {
		return fmt.Errorf("centrifugo publish: %s: %s", resp.Status, rb)
	}
	return nil
}

func (s *centrifugoServer) close() error {
	s.hc.CloseIdleConnections()
	return s.proc.stop()
}
