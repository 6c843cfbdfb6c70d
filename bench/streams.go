package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/persist"
)

// StreamsConfig configures the many-streams benchmark (bench persist
// --streams): N small streams on each side, each server in a process of
// its own.
type StreamsConfig struct {
	// Streams is N, the streams on each side. Required.
	Streams int
	// Keys is the keys each stream holds. Zero means 3.
	Keys int
	// Clients is the concurrency of create and spread writes. Zero means 16.
	Clients int
	// Duration is how long the spread writes run on each side. Zero means 3s.
	Duration time.Duration
	// ValueSize is the size of each value. Zero means 128 bytes.
	ValueSize int
	// Window is the gets whose 99th percentile is compared after a restart.
	// Zero means 200.
	Window int
	// BaselineWindows is how many windows make the p99 before the restart.
	// Zero means 5.
	BaselineWindows int
	// Settle is the pause after a restart's first get and after the touch of
	// 1 % of the streams before RSS is read. Zero means 2s.
	Settle time.Duration
	// JSTimeout bounds JetStream's create phase and each wait after a
	// restart (the persist side's waits too). Zero means 5m.
	JSTimeout time.Duration
	// SkipJS measures the persist side alone.
	SkipJS bool
	// NATSServer is the nats-server binary. Required.
	NATSServer string
	// Switchyard is the command that runs this switchyard (its first element
	// the binary), for persist serve and balancer. Required.
	Switchyard []string
	// SwitchyardEnv is added to the environment of those processes.
	SwitchyardEnv []string
	// MaxOpenStreams is passed to persist serve --max-open-streams. Zero
	// means the server's default.
	MaxOpenStreams int
	// ExclusiveFiles passes persist serve --exclusive-files.
	ExclusiveFiles bool
	// Packs passes persist serve --packs: the streams share that many
	// files. Zero gives each stream a file.
	Packs int
	// HotStreams is how many streams the second spread-write figure writes
	// to: few enough that persist holds every one of them open, so that
	// figure is what persist reaches without opening or closing a stream
	// (the ceiling of its file per stream). Zero means half of
	// MaxOpenStreams, or hotStreamsDefault when that is the server's
	// default; never more than Streams.
	HotStreams int
	// Dir holds the data and logs. Empty means a temp dir, removed afterwards.
	Dir string
	// Progress shows each phase as it runs. Nil means none.
	Progress Progress
}

func (c StreamsConfig) withDefaults() StreamsConfig {
	if c.Keys == 0 {
		c.Keys = 3
	}
	if c.Clients == 0 {
		c.Clients = 16
	}
	if c.Duration == 0 {
		c.Duration = 3 * time.Second
	}
	if c.ValueSize == 0 {
		c.ValueSize = 128
	}
	if c.Window == 0 {
		c.Window = 200
	}
	if c.BaselineWindows == 0 {
		c.BaselineWindows = 5
	}
	if c.Settle == 0 {
		c.Settle = 2 * time.Second
	}
	if c.JSTimeout == 0 {
		c.JSTimeout = 5 * time.Minute
	}
	if c.HotStreams == 0 {
		c.HotStreams = hotStreamsDefault
		if c.MaxOpenStreams > 0 {
			c.HotStreams = max(c.MaxOpenStreams/2, 1)
		}
	}
	c.HotStreams = min(c.HotStreams, c.Streams)
	return c
}

// StreamsSide is one side's figures. Times are seconds, sizes bytes; a
// figure whose phase timed out or never ran is zero with its flag set.
type StreamsSide struct {
	Name           string  `json:"name"`
	Streams        int     `json:"streams"` // created and written; under N when create timed out
	CreateSeconds  float64 `json:"create_seconds"`
	CreateErrors   int64   `json:"create_errors"`
	CreateTimedOut bool    `json:"create_timed_out,omitempty"`
	// WritesPerSecond is the sets of the spread writes that succeeded.
	WritesPerSecond float64 `json:"writes_per_second"`
	WriteErrors     int64   `json:"write_errors"`
	WriteError      string  `json:"write_error,omitempty"` // the first one
	// HotWritesPerSecond is the same spread writes to random streams among
	// the first StreamsConfig.HotStreams only (errors counted in
	// WriteErrors).
	HotWritesPerSecond float64 `json:"hot_writes_per_second"`
	// GetP99Before is the p99 of gets over random streams before the restart.
	GetP99Before float64 `json:"get_p99_before_seconds"`
	StopSeconds  float64 `json:"stop_seconds"` // SIGTERM to exit
	// FirstGet is from the new process's start to the first get answered.
	FirstGet float64 `json:"restart_first_get_seconds"`
	// P99Back is from the new process's start to the end of the first
	// window of gets with no error and a p99 within 1.5x GetP99Before.
	P99Back         float64 `json:"restart_p99_back_seconds"`
	P99BackWindow   float64 `json:"restart_p99_back_window_seconds"` // that window's p99
	RestartTimedOut bool    `json:"restart_timed_out,omitempty"`
	// GetErrors counts the gets that failed before the restart and in the
	// touch of 1 %; those of the windows while the server came back are
	// RestartGetErrors (P99Back waits for a window without them).
	GetErrors        int64  `json:"get_errors"`
	GetError         string `json:"get_error,omitempty"` // the first one
	RestartGetErrors int64  `json:"restart_get_errors"`
	RestartGetError  string `json:"restart_get_error,omitempty"` // the first one
	// The memory restart: a second one, so the timing windows above do not
	// open streams before the idle figure.
	FirstGetMemory float64 `json:"memory_restart_first_get_seconds"`
	RSSIdle        int64   `json:"rss_idle_bytes"`
	RSSTouched     int64   `json:"rss_touched_bytes"` // after a get of 1 % of the streams
	Touched        int     `json:"touched"`
	// BusRSS* are persist's own nats-server, not counted in RSS*.
	BusRSSIdle    int64   `json:"bus_rss_idle_bytes,omitempty"`
	BusRSSTouched int64   `json:"bus_rss_touched_bytes,omitempty"`
	DiskBytes     int64   `json:"disk_bytes"`
	DiskPerStream float64 `json:"disk_per_stream_bytes"`
	// Error is why the side stopped early, if it did.
	Error string `json:"error,omitempty"`
}

// StreamsResult is both sides of one run.
type StreamsResult struct {
	Streams   int          `json:"streams"`
	Keys      int          `json:"keys_per_stream"`
	Clients   int          `json:"clients"`
	Duration  float64      `json:"spread_write_seconds"`
	Hot       int          `json:"hot_streams"`     // StreamsConfig.HotStreams
	Packs     int          `json:"packs,omitempty"` // StreamsConfig.Packs
	Persist   StreamsSide  `json:"persist"`
	JetStream *StreamsSide `json:"jetstream,omitempty"`
}

// streamsSide is what the run does to one side; its servers run as
// processes of their own.
type streamsSide struct {
	name    string
	server  func() (*child, error) // starts the restarted process and waits until it listens
	proc    *child
	bus     *child // persist's nats-server (not restarted); nil for JetStream
	url     string // the NATS server clients connect to
	dirs    []string
	create  func(ctx context.Context, w, i int) error
	get     func(ctx context.Context, i int) error // on the probing client
	set     func(ctx context.Context, w, i, key int) error
	close   func()
	created []int // the streams that exist
}

// RunStreams runs the many-streams benchmark and writes its table (or,
// with asJSON, the result as JSON) to w. When a phase of a side failed it
// still writes what was measured, and returns the result and an error
// that says what failed.
func RunStreams(ctx context.Context, cfg StreamsConfig, w io.Writer, asJSON bool) (*StreamsResult, error) {
	cfg = cfg.withDefaults()
	if cfg.Streams < 1 {
		return nil, errors.New("streams: want at least one")
	}
	if cfg.NATSServer == "" || len(cfg.Switchyard) == 0 {
		return nil, errors.New("streams: NATSServer and Switchyard are required")
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "switchyard-bench-streams-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := &StreamsResult{Streams: cfg.Streams, Keys: cfg.Keys, Clients: cfg.Clients, Duration: cfg.Duration.Seconds(), Hot: cfg.HotStreams, Packs: cfg.Packs}
	value := testValue(cfg.ValueSize)

	ps, err := startPersistSide(ctx, cfg, filepath.Join(dir, "persist"), value)
	if err != nil {
		return nil, fmt.Errorf("persist side: %w", err)
	}
	res.Persist = runSide(ctx, cfg, ps, false)
	if !cfg.SkipJS {
		// A JetStream that does not start is that side's failure, not the
		// run's: persist's figures are measured, and printed.
		side := StreamsSide{Name: "JetStream"}
		if js, err := startJetStreamSide(ctx, cfg, filepath.Join(dir, "jetstream"), value); err != nil {
			side.Error = "start: " + err.Error()
		} else {
			side = runSide(ctx, cfg, js, true)
		}
		res.JetStream = &side
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return res, err
		}
	} else {
		PrintStreams(w, res)
	}
	return res, res.failed()
}

// failed is nil when every phase of both sides went through, else an
// error naming each side's failures: the figures are printed either way,
// and a script that reads the exit code must not take such a run for a
// good one. The gets that fail while a server comes back after its
// restart (RestartGetErrors) are part of that figure, not failures.
func (r *StreamsResult) failed() error {
	var parts []string
	for _, s := range []*StreamsSide{&r.Persist, r.JetStream} {
		if s == nil {
			continue
		}
		var p []string
		if s.Error != "" {
			p = append(p, s.Error)
		}
		if s.CreateTimedOut {
			p = append(p, fmt.Sprintf("create passed the timeout with %d of %d streams", s.Streams, r.Streams))
		}
		if s.RestartTimedOut {
			p = append(p, "a wait after a restart passed the timeout")
		}
		if s.CreateErrors > 0 {
			p = append(p, fmt.Sprintf("%d streams failed to create", s.CreateErrors))
		}
		if s.WriteErrors > 0 {
			p = append(p, fmt.Sprintf("%d spread writes failed (first: %s)", s.WriteErrors, s.WriteError))
		}
		if s.GetErrors > 0 {
			p = append(p, fmt.Sprintf("%d gets failed (first: %s)", s.GetErrors, s.GetError))
		}
		if len(p) > 0 {
			parts = append(parts, s.Name+": "+strings.Join(p, ", "))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("streams: a phase failed (the figures printed are what was measured): %s", strings.Join(parts, "; "))
}

// runSide measures one side in order: create, spread writes, the p99
// before, the timing restart, the memory restart, disk. A phase that fails
// ends the side (its figures so far are kept, Error says why).
func runSide(ctx context.Context, cfg StreamsConfig, s *streamsSide, bounded bool) (out StreamsSide) {
	out.Name = s.name
	defer func() {
		s.close()
		if s.proc != nil {
			if _, err := s.proc.stop(time.Minute); err != nil && out.Error == "" {
				out.Error = err.Error()
			}
		}
		if s.bus != nil {
			_, _ = s.bus.stop(time.Minute)
		}
		if out.Streams > 0 {
			if n, err := diskUsage(s.dirs...); err == nil {
				out.DiskBytes = n
				out.DiskPerStream = float64(n) / float64(out.Streams)
			} else if out.Error == "" {
				out.Error = err.Error()
			}
		}
	}()
	fail := func(phase string, err error) StreamsSide {
		out.Error = phase + ": " + err.Error()
		return out
	}

	// create
	cctx := ctx
	if bounded {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, cfg.JSTimeout)
		defer cancel()
	}
	secs, errs, timedOut := createAll(cctx, cfg, s)
	out.CreateSeconds, out.CreateErrors, out.CreateTimedOut, out.Streams = secs, errs, timedOut, len(s.created)
	if len(s.created) == 0 {
		return fail("create", errors.New("no stream was created"))
	}
	if ctx.Err() != nil {
		return fail("create", ctx.Err())
	}

	// spread writes: over every stream, then over the few that persist
	// holds open (the first ones created: the same on both sides), each
	// read once before, untimed, so that the timed writes open none
	out.WritesPerSecond, out.WriteErrors, out.WriteError = spreadWrites(ctx, cfg, s, s.created, "spread writes")
	hot := s.created[:min(cfg.HotStreams, len(s.created))]
	touchAll(ctx, cfg, s, hot)
	var hotErrs int64
	var hotErr string
	out.HotWritesPerSecond, hotErrs, hotErr = spreadWrites(ctx, cfg, s, hot, fmt.Sprintf("spread writes over %d streams", len(hot)))
	out.WriteErrors += hotErrs
	if out.WriteError == "" {
		out.WriteError = hotErr
	}

	// the p99 before
	var before []time.Duration
	for range cfg.BaselineWindows {
		lat, errs := getWindow(ctx, cfg.Window, s, &out)
		out.GetErrors += errs
		before = append(before, lat...)
	}
	if len(before) == 0 {
		return fail("gets before the restart", errors.New("every get failed"))
	}
	p99 := percentile(before, 0.99)
	out.GetP99Before = p99.Seconds()

	// the timing restart
	stopped, started, err := restart(s)
	out.StopSeconds = stopped.Seconds()
	if err != nil {
		return fail("restart", err)
	}
	first, ok, err := firstGet(ctx, cfg, s, started)
	if err != nil {
		return fail("restart", err)
	}
	if !ok {
		out.RestartTimedOut = true
		return out
	}
	out.FirstGet = first.Seconds()
	m := cfg.Progress.start(s.name+": gets until p99 <= 1.5x before", 0, "windows")
	for {
		var rec StreamsSide // the window's first error
		lat, errs := getWindow(ctx, cfg.Window, s, &rec)
		m.Add(1)
		out.RestartGetErrors += errs
		if out.RestartGetError == "" {
			out.RestartGetError = rec.GetError
		}
		if errs == 0 && len(lat) > 0 {
			if w := percentile(lat, 0.99); w <= p99*3/2 {
				out.P99Back, out.P99BackWindow = time.Since(started).Seconds(), w.Seconds()
				break
			}
		}
		if time.Since(started) > cfg.JSTimeout || ctx.Err() != nil {
			out.RestartTimedOut = true
			break
		}
	}
	m.Done()

	// the memory restart
	if _, started, err = restart(s); err != nil {
		return fail("memory restart", err)
	}
	if first, ok, err = firstGet(ctx, cfg, s, started); err != nil {
		return fail("memory restart", err)
	}
	if !ok {
		out.RestartTimedOut = true
		return out
	}
	out.FirstGetMemory = first.Seconds()
	pause(ctx, cfg.Settle)
	if out.RSSIdle, err = procRSS(s.proc.pid()); err != nil {
		return fail("rss", err)
	}
	if s.bus != nil {
		out.BusRSSIdle, _ = procRSS(s.bus.pid())
	}
	out.Touched = max(1, len(s.created)/100)
	tm := cfg.Progress.start(s.name+": touch 1 % of the streams", int64(out.Touched), "gets")
	for _, j := range rand.Perm(len(s.created))[:out.Touched] {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := s.get(gctx, s.created[j]); err != nil {
			out.GetErrors++
			if out.GetError == "" {
				out.GetError = err.Error()
			}
		}
		cancel()
		tm.Add(1)
	}
	tm.Done()
	pause(ctx, cfg.Settle)
	if out.RSSTouched, err = procRSS(s.proc.pid()); err != nil {
		return fail("rss", err)
	}
	if s.bus != nil {
		out.BusRSSTouched, _ = procRSS(s.bus.pid())
	}
	return out
}

// pause waits for d (or until ctx ends): the server's work of the last
// phase (its first requests, its garbage) is over when RSS is read.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// createAll creates every stream with its keys, cfg.Clients at a time. A
// stream whose create or writes failed is not in s.created.
func createAll(ctx context.Context, cfg StreamsConfig, s *streamsSide) (secs float64, errs int64, timedOut bool) {
	m := cfg.Progress.start(s.name+": create", int64(cfg.Streams), "streams")
	defer m.Done()
	ok := make([]bool, cfg.Streams)
	var next, nerr atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= cfg.Streams {
					return
				}
				if err := s.create(ctx, w, i); err != nil {
					if ctx.Err() == nil {
						nerr.Add(1)
					}
				} else {
					ok[i] = true
				}
				m.Add(1)
			}
		}()
	}
	wg.Wait()
	secs = time.Since(start).Seconds()
	for i, c := range ok {
		if c {
			s.created = append(s.created, i)
		}
	}
	return secs, nerr.Load(), ctx.Err() != nil
}

// touchAll gets key 0 of each of streams, cfg.Clients at a time, so that
// persist opens them; a get that fails leaves its stream to the timed
// writes.
func touchAll(ctx context.Context, cfg StreamsConfig, s *streamsSide, streams []int) {
	m := cfg.Progress.start(s.name+": open the streams of the next writes", int64(len(streams)), "streams")
	defer m.Done()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(streams) {
					return
				}
				_ = s.get(ctx, streams[i])
				m.Add(1)
			}
		})
	}
	wg.Wait()
}

// hotStreamsDefault is StreamsConfig.HotStreams with the server's default
// open-stream cap: well under that cap (1,248 streams when the process may
// open files enough; docs/persist.md), so they all stay open.
const hotStreamsDefault = 500

// spreadWrites is the successful sets per second of cfg.Clients clients
// each setting a random key of a random stream among streams, for
// cfg.Duration; errors are counted, not fatal (JetStream meets the
// descriptor limit here).
func spreadWrites(ctx context.Context, cfg StreamsConfig, s *streamsSide, streams []int, what string) (float64, int64, string) {
	m := cfg.Progress.start(s.name+": "+what, 0, "sets")
	defer m.Done()
	var done, nerr atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	wctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	for w := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for wctx.Err() == nil {
				i := streams[r.IntN(len(streams))]
				if err := s.set(wctx, w, i, r.IntN(cfg.Keys)); err != nil {
					if wctx.Err() == nil {
						nerr.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				done.Add(1)
				m.Add(1)
			}
		}()
	}
	wg.Wait()
	first, _ := firstErr.Load().(string)
	return float64(done.Load()) / time.Since(start).Seconds(), nerr.Load(), first
}

// getWindow is the latencies of n gets, one after the other, of key 0 of
// random streams, and how many failed (not in the latencies).
func getWindow(ctx context.Context, n int, s *streamsSide, out *StreamsSide) ([]time.Duration, int64) {
	lat := make([]time.Duration, 0, n)
	var errs int64
	for range n {
		i := s.created[rand.IntN(len(s.created))]
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t := time.Now()
		err := s.get(gctx, i)
		d := time.Since(t)
		cancel()
		if err != nil {
			errs++
			if out.GetError == "" {
				out.GetError = err.Error()
			}
			continue
		}
		lat = append(lat, d)
	}
	return lat, errs
}

// percentile is the nearest-rank q-quantile of lat (which it sorts), as
// pct; 0 for none.
func percentile(lat []time.Duration, q float64) time.Duration {
	slices.Sort(lat)
	return pct(lat, q)
}

// restart stops s's server process with SIGTERM and starts it again on
// the same data, returning how long the stop took and when the new
// process started.
func restart(s *streamsSide) (time.Duration, time.Time, error) {
	return restartProc(&s.proc, s.server)
}

// firstGet polls gets of random streams until one answers, and returns
// the time since started; false when cfg.JSTimeout passed first, an
// error when the server exited.
func firstGet(ctx context.Context, cfg StreamsConfig, s *streamsSide, started time.Time) (time.Duration, bool, error) {
	m := cfg.Progress.start(s.name+": restart, waiting for a get", 0, "tries")
	defer m.Done()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		gctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		err := s.get(gctx, s.created[rand.IntN(len(s.created))])
		cancel()
		if err == nil {
			return time.Since(started), true, nil
		}
		m.Add(1)
		if e := s.proc.exited(); e != nil {
			return 0, false, e
		}
		if time.Since(started) > cfg.JSTimeout || ctx.Err() != nil {
			return 0, false, nil
		}
		<-tick.C
	}
}

// probeRetry is the retry policy of the persist client whose gets find
// the restarted server (firstGet, firstKeyGet): while the server is not
// subscribed yet its requests fail at once (no responders), and the
// client's own backoff (20 ms, 40 ms, 80 ms...) would then add up to its
// step to the figure, where JetStream's side is asked again at the poll's
// 2 ms. The same 2 ms here, so both figures are the server's.
var probeRetry = bus.Retry{Min: 2 * time.Millisecond, Max: 2 * time.Millisecond, Jitter: -1}

// clientOptions make a connection that comes back within milliseconds of
// its server and fails requests at once while it is away (no buffering),
// so the polls after a restart measure the server, not the client.
func clientOptions(name string) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(10 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.ReconnectBufSize(-1),
		nats.RetryOnFailedConnect(false),
	}
}

// startPersistSide starts persist's nats-server, a balancer and persist
// serve as three processes, and the clients.
func startPersistSide(ctx context.Context, cfg StreamsConfig, dir string, value []byte) (*streamsSide, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	s := &streamsSide{name: "persist", url: url, dirs: []string{data}}
	var parts []func()
	s.close = func() {
		for i := len(parts) - 1; i >= 0; i-- {
			parts[i]()
		}
	}
	ok := false
	defer func() {
		if !ok {
			s.close()
			if s.proc != nil {
				_, _ = s.proc.stop(time.Minute)
			}
			if s.bus != nil {
				_, _ = s.bus.stop(time.Minute)
			}
		}
	}()
	if s.bus, err = startChild("persist's nats-server", filepath.Join(dir, "nats-server.log"), cfg.NATSServer, []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}, nil); err != nil {
		return nil, err
	}
	if err := waitPort(s.bus, port, time.Minute); err != nil {
		return nil, err
	}
	bal, err := startChild("balancer", filepath.Join(dir, "balancer.log"), cfg.Switchyard[0], append(slices.Clone(cfg.Switchyard[1:]), "balancer", "--ids", "0", "--nats", url), cfg.SwitchyardEnv)
	if err != nil {
		return nil, err
	}
	parts = append(parts, func() { _, _ = bal.stop(time.Minute) })
	serve := append(slices.Clone(cfg.Switchyard[1:]), "persist", "serve", "--id", "0", "--ids", "0", "--data", data, "--nats", url)
	if cfg.MaxOpenStreams > 0 {
		serve = append(serve, "--max-open-streams", strconv.Itoa(cfg.MaxOpenStreams))
	}
	if cfg.ExclusiveFiles {
		serve = append(serve, "--exclusive-files")
	}
	if cfg.Packs > 0 {
		serve = append(serve, "--packs", strconv.Itoa(cfg.Packs))
	}
	s.server = func() (*child, error) {
		return startChild("persist serve", filepath.Join(dir, "persist-serve.log"), cfg.Switchyard[0], serve, cfg.SwitchyardEnv)
	}
	if s.proc, err = s.server(); err != nil {
		return nil, err
	}

	clients := make([]*persist.Client, cfg.Clients+1) // the last one probes
	for i := range clients {
		nc, err := nats.Connect(url, clientOptions("bench-streams-"+strconv.Itoa(i))...)
		if err != nil {
			return nil, fmt.Errorf("connect to persist's nats-server: %w", err)
		}
		parts = append(parts, nc.Close)
		cc := persist.ClientConfig{Conn: nc, OwnerCache: cfg.Streams + 1}
		if i == cfg.Clients {
			cc.Retry = probeRetry
		}
		if clients[i], err = persist.NewClient(cc); err != nil {
			return nil, err
		}
	}
	probe := clients[cfg.Clients]
	kv := func(c *persist.Client, i int) *persist.KV { return c.KV("s"+strconv.Itoa(i), "kv") }
	keys := make([]string, cfg.Keys)
	for k := range keys {
		keys[k] = "k" + strconv.Itoa(k)
	}
	s.create = func(ctx context.Context, w, i int) error {
		for _, k := range keys {
			if _, err := kv(clients[w], i).Set(ctx, k, value, persist.SetOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	s.get = func(ctx context.Context, i int) error {
		_, err := kv(probe, i).Get(ctx, keys[0])
		return err
	}
	s.set = func(ctx context.Context, w, i, key int) error {
		_, err := kv(clients[w], i).Set(ctx, keys[key], value, persist.SetOptions{})
		return err
	}
	// The first start: ready when a get is answered (not found is an answer).
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := kv(probe, 0).Get(gctx, keys[0])
		cancel()
		if err == nil || errors.Is(err, persist.ErrNotFound) {
			break
		}
		if e := s.proc.exited(); e != nil {
			return nil, e
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("persist serve not answering after a minute: %w", err)
		}
		<-tick.C
	}
	ok = true
	return s, nil
}

// startJetStreamSide starts nats-server -js as a process and the clients.
func startJetStreamSide(ctx context.Context, cfg StreamsConfig, dir string, value []byte) (*streamsSide, error) {
	j, err := startJetStreamProc(cfg.NATSServer, dir, "bench-streams", cfg.Clients)
	if err != nil {
		return nil, err
	}
	s := &streamsSide{name: "JetStream", dirs: []string{j.store}, server: j.server, proc: j.proc, close: j.closeConns}
	jss := j.jss
	// The probing client gets through the handles create made: a KV handle
	// is a bucket's name and its connection, like persist's KV.
	handles := make([]jetstream.KeyValue, cfg.Streams)
	bucket := func(i int) string { return "b" + strconv.Itoa(i) }
	keys := make([]string, cfg.Keys)
	for k := range keys {
		keys[k] = "k" + strconv.Itoa(k)
	}
	s.create = func(ctx context.Context, w, i int) error {
		kv, err := jss[w].CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket(i), Storage: jetstream.FileStorage})
		if err != nil {
			return fmt.Errorf("create bucket: %w", err)
		}
		for _, k := range keys {
			if _, err := kv.Put(ctx, k, value); err != nil {
				return err
			}
		}
		handles[i] = kv
		return nil
	}
	s.get = func(ctx context.Context, i int) error {
		_, err := handles[i].Get(ctx, keys[0])
		return err
	}
	// A KV put is a JetStream publish to $KV.<bucket>.<key>: the same
	// request, without a handle (whose creation asks for the bucket's info).
	s.set = func(ctx context.Context, w, i, key int) error {
		_, err := jss[w].Publish(ctx, "$KV."+bucket(i)+"."+keys[key], value)
		return err
	}
	return s, nil
}

// PrintStreams writes res as a table: each figure for both sides and the
// ratio, with the direction of the ratio and the target.
func PrintStreams(w io.Writer, res *StreamsResult) {
	packs := ""
	if res.Packs > 0 {
		packs = fmt.Sprintf(" (persist's in %d packs)", res.Packs)
	}
	fmt.Fprintf(w, "persist vs JetStream, %d streams of %d keys each%s, servers in processes of their own; %d clients; spread writes for %.1fs\n",
		res.Streams, res.Keys, packs, res.Clients, res.Duration)
	p, j := res.Persist, res.JetStream
	if j == nil {
		j = &StreamsSide{Name: "JetStream"}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tpersist\tJetStream\tratio\ttarget")
	secs := func(v float64, timedOut bool) string {
		if timedOut && v == 0 {
			return "> timeout"
		}
		if v == 0 {
			return "-"
		}
		return fmtSeconds(v)
	}
	faster := func(ours, anchor float64) string { // anchor/ours: "x faster"
		if ours == 0 || anchor == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1fx faster", anchor/ours)
	}
	over := func(ours, anchor float64) string {
		if ours == 0 || anchor == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", ours/anchor)
	}
	created := func(s *StreamsSide) string {
		if s.Streams == res.Streams {
			return secs(s.CreateSeconds, false)
		}
		return fmt.Sprintf("%s (%d created)", secs(s.CreateSeconds, s.CreateTimedOut), s.Streams)
	}
	fmt.Fprintf(tw, "create %d streams + %d keys each (s)\t%s\t%s\t%s\t\n", res.Streams, res.Keys, created(&p), created(j), faster(p.CreateSeconds, j.CreateSeconds))
	fmt.Fprintf(tw, "spread writes, %d clients (sets/s)\t%.0f\t%.0f\t%s\t>= 1.0x\n", res.Clients, p.WritesPerSecond, j.WritesPerSecond, over(p.WritesPerSecond, j.WritesPerSecond))
	fmt.Fprintf(tw, "  the same over %d streams, all open (sets/s)\t%.0f\t%.0f\t%s\t\n", res.Hot, p.HotWritesPerSecond, j.HotWritesPerSecond, over(p.HotWritesPerSecond, j.HotWritesPerSecond))
	fmt.Fprintf(tw, "get p99 before restart\t%s\t%s\t\t\n", secs(p.GetP99Before, false), secs(j.GetP99Before, false))
	fmt.Fprintf(tw, "stop (SIGTERM to exit)\t%s\t%s\t\t\n", secs(p.StopSeconds, false), secs(j.StopSeconds, false))
	fmt.Fprintf(tw, "restart -> first get\t%s\t%s\t%s\t>= 100x faster\n", secs(p.FirstGet, p.RestartTimedOut), secs(j.FirstGet, j.RestartTimedOut), faster(p.FirstGet, j.FirstGet))
	fmt.Fprintf(tw, "restart -> p99 within 1.5x before\t%s\t%s\t%s\t\n", secs(p.P99Back, p.RestartTimedOut), secs(j.P99Back, j.RestartTimedOut), faster(p.P99Back, j.P99Back))
	fmt.Fprintf(tw, "RSS after restart, idle (MiB)\t%s\t%s\t%s\t<= 0.1x\n", mib(p.RSSIdle), mib(j.RSSIdle), over(float64(p.RSSIdle), float64(j.RSSIdle)))
	fmt.Fprintf(tw, "RSS after get of 1 %% (%d / %d streams) (MiB)\t%s\t%s\t%s\t\n", p.Touched, j.Touched, mib(p.RSSTouched), mib(j.RSSTouched), over(float64(p.RSSTouched), float64(j.RSSTouched)))
	fmt.Fprintf(tw, "disk per stream (KiB)\t%s\t%s\t%s\t<= 1.0x\n", kib(p.DiskPerStream), kib(j.DiskPerStream), over(p.DiskPerStream, j.DiskPerStream))
	tw.Flush()
	if p.HotWritesPerSecond > 0 && j.WritesPerSecond > 0 && res.Hot < res.Streams {
		// What no open or close costs: the most this layout gets from the
		// cache, whatever its cap or its open and close cost.
		layout := "a stream file each"
		if res.Packs > 0 {
			layout = fmt.Sprintf("streams in %d packs", res.Packs)
		}
		fmt.Fprintf(w, "persist's spread writes over %d streams it holds open are %s JetStream's over all %d: the ceiling of %s, with no open or close to pay.\n",
			res.Hot, over(p.HotWritesPerSecond, j.WritesPerSecond), res.Streams, layout)
	}
	fmt.Fprintf(w, "persist's RSS is the persist serve process; its own nats-server held %s MiB idle, %s MiB after the touch (not counted). JetStream is one process.\n", mib(p.BusRSSIdle), mib(p.BusRSSTouched))
	for _, s := range []*StreamsSide{&p, res.JetStream} {
		if s == nil {
			continue
		}
		if s.CreateErrors+s.WriteErrors+s.GetErrors > 0 {
			fmt.Fprintf(w, "%s errors: create %d, spread writes %d, gets %d", s.Name, s.CreateErrors, s.WriteErrors, s.GetErrors)
			if s.WriteError != "" {
				fmt.Fprintf(w, " (first write error: %s)", s.WriteError)
			}
			if s.GetError != "" {
				fmt.Fprintf(w, " (first get error: %s)", s.GetError)
			}
			fmt.Fprintln(w)
		}
		if s.RestartGetErrors > 0 {
			fmt.Fprintf(w, "%s: %d gets failed while it came back after the restart (first: %s)\n", s.Name, s.RestartGetErrors, s.RestartGetError)
		}
		if s.CreateTimedOut {
			fmt.Fprintf(w, "%s: create stopped at the timeout with %d of %d streams; the other figures are over those\n", s.Name, s.Streams, res.Streams)
		}
		if s.RestartTimedOut {
			fmt.Fprintf(w, "%s: a wait after a restart passed the timeout\n", s.Name)
		}
		if s.Error != "" {
			fmt.Fprintf(w, "%s stopped early: %s\n", s.Name, s.Error)
		}
	}
}

func fmtSeconds(v float64) string {
	switch {
	case v < 0.001:
		return fmt.Sprintf("%.0f µs", v*1e6)
	case v < 1:
		return fmt.Sprintf("%.1f ms", v*1e3)
	default:
		return fmt.Sprintf("%.2f s", v)
	}
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}

func kib(b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", b/1024)
}
