package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/web"
	"github.com/switchyard-dev/switchyard/web/watch"
)

// WSConfig configures the WebSocket gateway benchmark.
type WSConfig struct {
	// Watchers is the number of WebSocket watchers, and of Stream.Watch
	// watchers on the Go side. Zero means 1000.
	Watchers int
	// Duration is how long the writer writes on each side. Zero means 2s.
	Duration time.Duration
	// Rate is the writer's sets per second. Zero means 100.
	Rate int
	// ValueSize is the size of each value. Zero means 128 bytes.
	ValueSize int
	// Idle is the number of idle WebSocket connections whose server-side
	// memory is measured. Zero means 1000.
	Idle int
	// ClientCmd, when set, is the command (argv) that runs the idle
	// clients in a child process (`switchyard bench ws-clients`), so the
	// memory measured in this process is the server side's alone. Empty:
	// the clients run in this process and the figure counts both sides.
	ClientCmd []string
	// Dir holds the SQLite files. Empty means a temp dir.
	Dir string
}

func (c WSConfig) withDefaults() WSConfig {
	if c.Watchers == 0 {
		c.Watchers = 1000
	}
	if c.Duration == 0 {
		c.Duration = 2 * time.Second
	}
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.ValueSize == 0 {
		c.ValueSize = 128
	}
	if c.Idle == 0 {
		c.Idle = 1000
	}
	return c
}

// WSResult is what RunWS measured.
type WSResult struct {
	Watchers       int
	WSRate, GoRate float64 // writes per second the writer reached
	WSP50, WSP99   time.Duration
	GoP50, GoP99   time.Duration
	// WSCPU and GoCPU are this process's CPU time per delivery (one
	// change reaching one watcher), writer and watchers together; on the
	// WebSocket side that is the gateway and its clients.
	WSCPU, GoCPU     time.Duration
	Idle             int
	BytesPerIdle     float64 // heap + stacks per idle WebSocket watcher
	ServerSideOnly   bool    // the clients ran in another process
	GatewayQueueHigh int64   // the most bytes any connection queued
}

// P99Ratio is the WebSocket p99 over the Go watcher's; the target is <= 2.
func (r WSResult) P99Ratio() float64 {
	if r.GoP99 == 0 {
		return 0
	}
	return float64(r.WSP99) / float64(r.GoP99)
}

// RunWS measures the watch gateway: latency from a write returning to a
// WebSocket client receiving it, beside Stream.Watch in Go with as many
// watchers in the same run, and the memory of idle WebSocket watchers.
func RunWS(ctx context.Context, cfg WSConfig, w io.Writer) (WSResult, error) {
	cfg = cfg.withDefaults()
	res := WSResult{Watchers: cfg.Watchers, Idle: cfg.Idle}
	env, err := StartPersistEnv(cfg.Dir)
	if err != nil {
		return res, err
	}
	defer env.Close()
	gc, err := env.Client()
	if err != nil {
		return res, err
	}
	gw, err := watch.New(watch.Config{Client: gc, Authorizer: web.Open()})
	if err != nil {
		return res, err
	}
	if err := gw.Start(ctx); err != nil {
		return res, err
	}
	srv := web.New("127.0.0.1:0")
	gw.Mount(srv)
	if err := srv.Start(ctx); err != nil {
		return res, err
	}
	defer func() {
		_ = gw.Stop(context.Background())
		_ = srv.Stop(context.Background())
	}()
	base := "ws://" + srv.Addr() + "/ws/watch"
	value := testValue(cfg.ValueSize)
	fmt.Fprintf(w, "watch gateway, set returned -> client received: %d WebSocket watchers (Go WebSocket clients standing in for browsers, in this process) vs %d Stream.Watch watchers in Go, one persist client each side, %d-byte values, %d sets/s for %s\n",
		cfg.Watchers, cfg.Watchers, cfg.ValueSize, cfg.Rate, cfg.Duration)

	wsSide, err := newWSSide(env, base, "ws-latency")
	if err != nil {
		return res, err
	}
	wsRun, err := measureFeedRun(ctx, nopMeter{}, warmSide{wsSide}, cfg.Watchers, cfg.Rate, cfg.Duration, value)
	if err != nil {
		return res, fmt.Errorf("websocket watchers: %w", err)
	}
	res.WSRate, res.WSP50, res.WSP99, res.WSCPU = wsRun.rate, wsRun.p50, wsRun.p99, wsRun.cpuPerDelivery
	res.GatewayQueueHigh = gw.Stats().QueueHighBytes
	goSide, err := newOursSide(env, "ws-go", 1)
	if err != nil {
		return res, err
	}
	goRun, err := measureFeedRun(ctx, nopMeter{}, warmSide{goSide}, cfg.Watchers, cfg.Rate, cfg.Duration, value)
	if err != nil {
		return res, fmt.Errorf("go watchers: %w", err)
	}
	res.GoRate, res.GoP50, res.GoP99, res.GoCPU = goRun.rate, goRun.p50, goRun.p99, goRun.cpuPerDelivery

	res.ServerSideOnly = len(cfg.ClientCmd) > 0
	if res.BytesPerIdle, err = idleMemory(ctx, base+"?"+url.Values{"scope": {"bench"}, "stream": {"ws-idle"}}.Encode(), cfg.Idle, cfg.ClientCmd); err != nil {
		return res, fmt.Errorf("idle memory: %w", err)
	}
	PrintWSResult(w, res)
	return res, nil
}

// PrintWSResult writes res as two small tables.
func PrintWSResult(w io.Writer, r WSResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "watchers\tWebSocket sets/s\tWebSocket p50\tWebSocket p99\tGo sets/s\tGo p50\tGo p99\tp99 WebSocket/Go\ttarget\tCPU/delivery WebSocket\tCPU/delivery Go")
	fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%.0f\t%s\t%s\t%.2fx\t<= 2.0x\t%.1fµs\t%.1fµs\n", r.Watchers, r.WSRate, fmtDur(r.WSP50), fmtDur(r.WSP99), r.GoRate, fmtDur(r.GoP50), fmtDur(r.GoP99), r.P99Ratio(),
		float64(r.WSCPU)/float64(time.Microsecond), float64(r.GoCPU)/float64(time.Microsecond))
	tw.Flush()
	side := "server side only (clients in a child process)"
	if !r.ServerSideOnly {
		side = "both sides (clients in this process): an upper bound for the server side"
	}
	fmt.Fprintf(tw, "idle WebSocket watchers\tmemory per watcher (heap + stacks)\tmeasured\ttarget\n")
	fmt.Fprintf(tw, "%d\t%.1f KiB\t%s\t<= 64 KiB\n", r.Idle, r.BytesPerIdle/1024, side)
	tw.Flush()
}

// wsSide is the gateway: Stream.Set, and WebSocket clients on /ws/watch.
type wsSide struct {
	writer *persist.Stream
	url    string
	k      int
}

func newWSSide(env *PersistEnv, base, name string) (*wsSide, error) {
	wc, err := env.Client()
	if err != nil {
		return nil, err
	}
	q := url.Values{"scope": {"bench"}, "stream": {name}}
	return &wsSide{writer: wc.Stream("bench", name), url: base + "?" + q.Encode()}, nil
}

func (s *wsSide) watch(ctx context.Context, n int, got func(int, uint64, time.Time)) (func(), error) {
	var (
		wg    sync.WaitGroup
		conns []*websocket.Conn
	)
	stop := func() {
		for _, c := range conns {
			_ = c.CloseNow()
		}
		wg.Wait()
	}
	for i := range n {
		// No from: only changes after the connection; the ready message
		// says the watch is in place.
		c, err := dialReady(ctx, s.url)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, b, err := c.Read(context.Background())
				if err != nil {
					return
				}
				at := time.Now()
				if seq, ok := msgSeq(b); ok {
					got(i, seq, at)
				}
			}
		}()
	}
	return stop, nil
}

func (s *wsSide) write(ctx context.Context, value []byte) (uint64, error) {
	// Keys cycle as on the Go side.
	s.k++
	res, err := s.writer.Set(ctx, value, persist.SetOptions{Key: "k" + strconv.Itoa(s.k%1000)})
	return res.Seq, err
}

// msgPrefix is how the gateway's "msg" messages begin: the fields of its
// wire struct in order, type then seq.
var msgPrefix = []byte(`{"type":"` + watch.TypeMsg + `","seq":`)

// msgSeq returns the seq of a "msg" message. The clients stand in for
// browsers, but a full JSON decode of every message on the benchmark's own
// cores would be charged to the gateway's latency; the seq is all the
// measurement needs, so only it is read. web's TestEncodeMsgStartsWithSeq
// keeps the gateway's encoding starting with msgPrefix.
func msgSeq(b []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(b, msgPrefix)
	if !ok {
		return 0, false
	}
	var n uint64
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		n = n*10 + uint64(rest[i]-'0')
	}
	return n, i > 0
}

// dialReady opens a watch and reads its ready message.
func dialReady(ctx context.Context, u string) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, u, nil)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c.SetReadLimit(-1)
	_, b, err := c.Read(dctx)
	if err != nil || !strings.Contains(string(b), `"ready"`) {
		_ = c.CloseNow()
		return nil, fmt.Errorf("first message %q: %v", b, err)
	}
	return c, nil
}

// idleMemory opens n idle watches of one stream and returns the heap and
// stack growth of this process per watch, after a GC on either side.
func idleMemory(ctx context.Context, u string, n int, clientCmd []string) (float64, error) {
	before := liveBytes()
	var stop func() error
	if len(clientCmd) > 0 {
		var err error
		if stop, err = spawnClients(ctx, clientCmd, u, n); err != nil {
			return 0, err
		}
	} else {
		var conns []*websocket.Conn
		stop = func() error {
			for _, c := range conns {
				_ = c.CloseNow()
			}
			return nil
		}
		for range n {
			c, err := dialReady(ctx, u)
			if err != nil {
				_ = stop()
				return 0, err
			}
			// A client's read goroutine, as a browser's connection has.
			go func() { _, _, _ = c.Read(context.Background()) }()
			conns = append(conns, c)
		}
	}
	after := liveBytes()
	if err := stop(); err != nil {
		return 0, err
	}
	return float64(int64(after)-int64(before)) / float64(n), nil
}

func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// spawnClients runs clientCmd --url u --n n, waits for its "ready" line and
// returns a func that ends it (by closing its stdin).
func spawnClients(ctx context.Context, clientCmd []string, u string, n int) (func() error, error) {
	cmd := exec.CommandContext(ctx, clientCmd[0], append(clientCmd[1:], "--url", u, "--n", strconv.Itoa(n))...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start clients: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		_ = in.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("clients: %q: %v", line, err)
	}
	return func() error {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("clients: %w", err)
		}
		return nil
	}, nil
}

// WSClients is the child process of RunWS's idle measurement: it opens n
// watches on u, prints "ready" to out, and holds them until stdin ends.
func WSClients(ctx context.Context, u string, n int, stdin io.Reader, out io.Writer) error {
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			_ = c.CloseNow()
		}
	}()
	for range n {
		c, err := dialReady(ctx, u)
		if err != nil {
			return err
		}
		go func() { _, _, _ = c.Read(context.Background()) }()
		conns = append(conns, c)
	}
	fmt.Fprintln(out, "ready")
	if _, err := io.Copy(io.Discard, stdin); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// warmSide writes one value after its watchers are in place and waits
// until every watcher has it before measuring: a watcher takes the first
// feed message after its history read from the server rather than on the
// feed's word (see persist's Watcher.apply), so 1,000 watchers' first
// change costs 1,000 reads, a start-up cost both sides pay that is not
// the latency measured.
type warmSide struct{ feedSide }

func (s warmSide) watch(ctx context.Context, n int, got func(int, uint64, time.Time)) (func(), error) {
	// warmID is read on every delivery, so without a lock once known;
	// until then a delivery waits on mu, which the writer holds until it
	// has stored the id.
	var mu sync.Mutex
	var warmID atomic.Uint64
	warmed := make(chan struct{}, n)
	stop, err := s.feedSide.watch(ctx, n, func(w int, id uint64, at time.Time) {
		wid := warmID.Load()
		if wid == 0 {
			mu.Lock()
			wid = warmID.Load()
			mu.Unlock()
		}
		if wid == 0 || id > wid {
			got(w, id, at)
			return
		}
		if id == wid {
			warmed <- struct{}{}
		}
	})
	if err != nil {
		return nil, err
	}
	mu.Lock() // held across the write: got must not see its id before warmID is set
	id, err := s.feedSide.write(ctx, []byte("warm-up"))
	warmID.Store(id)
	mu.Unlock()
	if err != nil {
		stop()
		return nil, err
	}
	for range n {
		select {
		case <-warmed:
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
	}
	return stop, nil
}
