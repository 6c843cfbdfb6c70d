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

	"github.com/switchyard-dev/switchyard/persist"
)

// KeysConfig configures the many-keys benchmark (bench persist --keys): N
// keys in one persist stream against the same N keys in one JetStream KV
// bucket, each server a process of its own.
type KeysConfig struct {
	// Keys is N. Required.
	Keys int
	// Batch is the keys of one setMany on persist and of one window of
	// async KV puts on JetStream. Zero means 1000.
	Batch int
	// Loaders is how many batches are in flight at once during the load,
	// one connection each. Zero means 4.
	Loaders int
	// Gets is the gets of random keys after the restart. Zero means 20,000.
	Gets int
	// GetClients is the concurrency of those gets. Zero means 16.
	GetClients int
	// Settle is the pause before each RSS reading. Zero means 2s.
	Settle time.Duration
	// Timeout bounds each side's load and each wait after a restart.
	// Zero means 10m.
	Timeout time.Duration
	// SkipJS measures the persist side alone.
	SkipJS bool
	// NATSServer is the nats-server binary. Required.
	NATSServer string
	// Switchyard is the command that runs this switchyard (its first element
	// the binary), for persist serve and balancer. Required.
	Switchyard []string
	// SwitchyardEnv is added to the environment of those processes.
	SwitchyardEnv []string
	// Dir holds the data and logs. Empty means a temp dir, removed afterwards.
	Dir string
	// Progress shows each phase as it runs. Nil means none.
	Progress Progress
}

func (c KeysConfig) withDefaults() KeysConfig {
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Loaders == 0 {
		c.Loaders = 4
	}
	if c.Gets == 0 {
		c.Gets = 20000
	}
	if c.GetClients == 0 {
		c.GetClients = 16
	}
	if c.Settle == 0 {
		c.Settle = 2 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	return c
}

// Value sizes of the many-keys benchmark: key i holds keyValueMin +
// (i*7919 mod (keyValueMax-keyValueMin+1)) bytes, spread evenly over the
// range and the same on both sides.
const (
	keyValueMin = 32
	keyValueMax = 100
)

func keyValueSize(i int) int { return keyValueMin + i*7919%(keyValueMax-keyValueMin+1) }

func keyName(i int) string { return "k" + strconv.Itoa(i) }

// KeysSide is one side's figures. Times are seconds, sizes bytes.
type KeysSide struct {
	Name        string  `json:"name"`
	Loaded      int     `json:"loaded"` // keys acknowledged
	LoadSeconds float64 `json:"load_seconds"`
	LoadErrors  int64   `json:"load_errors"`
	LoadError   string  `json:"load_error,omitempty"` // the first one
	// RSSLoaded is read after the load, RSSIdle after a restart and the
	// first get, RSSGets after the gets of random keys.
	RSSLoaded int64 `json:"rss_loaded_bytes"`
	RSSIdle   int64 `json:"rss_idle_bytes"`
	RSSGets   int64 `json:"rss_gets_bytes"`
	// BusRSS* are persist's own nats-server, not counted in RSS*.
	BusRSSLoaded int64   `json:"bus_rss_loaded_bytes,omitempty"`
	BusRSSIdle   int64   `json:"bus_rss_idle_bytes,omitempty"`
	BusRSSGets   int64   `json:"bus_rss_gets_bytes,omitempty"`
	StopSeconds  float64 `json:"stop_seconds"` // SIGTERM to exit, after the load
	// FirstGet is from the new process's start to the first get answered.
	FirstGet      float64 `json:"restart_first_get_seconds"`
	Gets          int     `json:"gets"` // answered with the right value
	GetErrors     int64   `json:"get_errors"`
	GetError      string  `json:"get_error,omitempty"` // the first one
	GetsPerSecond float64 `json:"gets_per_second"`
	GetP50        float64 `json:"get_p50_seconds"`
	GetP99        float64 `json:"get_p99_seconds"`
	DiskBytes     int64   `json:"disk_bytes"` // after the last stop
	DiskPerKey    float64 `json:"disk_per_key_bytes"`
	TimedOut      bool    `json:"timed_out,omitempty"`
	// Error is why the side stopped early, if it did.
	Error string `json:"error,omitempty"`
}

// KeysResult is both sides of one run.
type KeysResult struct {
	Keys       int       `json:"keys"`
	ValueMin   int       `json:"value_min_bytes"`
	ValueMax   int       `json:"value_max_bytes"`
	ValueBytes int64     `json:"value_bytes"` // the sum over all keys
	Batch      int       `json:"batch"`
	Loaders    int       `json:"loaders"`
	GetClients int       `json:"get_clients"`
	Persist    KeysSide  `json:"persist"`
	JetStream  *KeysSide `json:"jetstream,omitempty"`
}

// keysSide is what the run does to one side.
type keysSide struct {
	name   string
	server func() (*child, error) // starts the restarted process, waits until it listens
	proc   *child
	bus    *child // persist's nats-server (not restarted); nil for JetStream
	dirs   []string
	// load writes keys [from, to) on loader w and returns how many were
	// acknowledged and the first failure.
	load func(ctx context.Context, w, from, to int) (int, error)
	// get reads key i on get client c and returns its value's length.
	get   func(ctx context.Context, c, i int) (int, error)
	close func()
}

// RunKeys runs the many-keys benchmark and writes its table (or, with
// asJSON, the result as JSON) to w. When a phase of a side failed it still
// writes what was measured, and returns the result and an error that says
// what failed.
func RunKeys(ctx context.Context, cfg KeysConfig, w io.Writer, asJSON bool) (*KeysResult, error) {
	cfg = cfg.withDefaults()
	if cfg.Keys < 1 {
		return nil, errors.New("keys: want at least one")
	}
	if cfg.NATSServer == "" || len(cfg.Switchyard) == 0 {
		return nil, errors.New("keys: NATSServer and Switchyard are required")
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "switchyard-bench-keys-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := &KeysResult{Keys: cfg.Keys, ValueMin: keyValueMin, ValueMax: keyValueMax, Batch: cfg.Batch, Loaders: cfg.Loaders, GetClients: cfg.GetClients}
	for i := range cfg.Keys {
		res.ValueBytes += int64(keyValueSize(i))
	}
	ps, err := startPersistKeys(ctx, cfg, filepath.Join(dir, "persist"))
	if err != nil {
		return nil, fmt.Errorf("persist side: %w", err)
	}
	res.Persist = runKeysSide(ctx, cfg, ps)
	if !cfg.SkipJS {
		// A JetStream that does not start is that side's failure, not the
		// run's: persist's figures are measured, and printed.
		side := KeysSide{Name: "JetStream"}
		if js, err := startJetStreamKeys(ctx, cfg, filepath.Join(dir, "jetstream")); err != nil {
			side.Error = "start: " + err.Error()
		} else {
			side = runKeysSide(ctx, cfg, js)
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
		PrintKeys(w, res)
	}
	return res, res.failed()
}

// failed is nil when every phase of both sides went through, else an
// error naming each side's failures: the figures are printed either way,
// and a script that reads the exit code must not take such a run for a
// good one.
func (r *KeysResult) failed() error {
	var parts []string
	for _, s := range []*KeysSide{&r.Persist, r.JetStream} {
		if s == nil {
			continue
		}
		var p []string
		if s.Error != "" {
			p = append(p, s.Error) // a timeout's too
		}
		if s.LoadErrors > 0 {
			p = append(p, fmt.Sprintf("%d keys failed to load (first: %s)", s.LoadErrors, s.LoadError))
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
	return fmt.Errorf("keys: a phase failed (the figures printed are what was measured): %s", strings.Join(parts, "; "))
}

// runKeysSide measures one side in order: load, RSS, restart to the first
// get, RSS idle, gets of random keys, RSS, disk after the last stop.
func runKeysSide(ctx context.Context, cfg KeysConfig, s *keysSide) (out KeysSide) {
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
		if n, err := diskUsage(s.dirs...); err == nil {
			out.DiskBytes = n
			if out.Loaded > 0 {
				out.DiskPerKey = float64(n) / float64(out.Loaded)
			}
		} else if out.Error == "" {
			out.Error = err.Error()
		}
	}()
	fail := func(phase string, err error) KeysSide {
		out.Error = phase + ": " + err.Error()
		return out
	}
	rss := func(into, bus *int64) error {
		pause(ctx, cfg.Settle)
		var err error
		if *into, err = procRSS(s.proc.pid()); err != nil {
			return err
		}
		if s.bus != nil {
			*bus, _ = procRSS(s.bus.pid())
		}
		return nil
	}

	// load
	lctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	out.LoadSeconds, out.Loaded, out.LoadErrors, out.LoadError = loadKeys(lctx, cfg, s)
	timedOut := lctx.Err() != nil && ctx.Err() == nil
	cancel()
	if timedOut {
		out.TimedOut = true
		return fail("load", fmt.Errorf("%d of %d keys after %s", out.Loaded, cfg.Keys, cfg.Timeout))
	}
	if out.Loaded != cfg.Keys {
		return fail("load", fmt.Errorf("%d of %d keys acknowledged; first error: %s", out.Loaded, cfg.Keys, out.LoadError))
	}
	if err := rss(&out.RSSLoaded, &out.BusRSSLoaded); err != nil {
		return fail("rss", err)
	}

	// restart
	stopped, started, err := restartProc(&s.proc, s.server)
	out.StopSeconds = stopped.Seconds()
	if err != nil {
		return fail("restart", err)
	}
	first, ok, err := firstKeyGet(ctx, cfg, s, started)
	if err != nil {
		return fail("restart", err)
	}
	if !ok {
		out.TimedOut = true
		return fail("restart", fmt.Errorf("no get answered in %s", cfg.Timeout))
	}
	out.FirstGet = first.Seconds()
	if err := rss(&out.RSSIdle, &out.BusRSSIdle); err != nil {
		return fail("rss", err)
	}

	// gets of random keys
	lat, secs := randomGets(ctx, cfg, s, &out)
	out.Gets = len(lat)
	if len(lat) == 0 {
		return fail("gets", fmt.Errorf("every get failed: %s", out.GetError))
	}
	out.GetsPerSecond = float64(len(lat)) / secs
	out.GetP99 = percentile(lat, 0.99).Seconds()
	out.GetP50 = percentile(lat, 0.50).Seconds()
	if err := rss(&out.RSSGets, &out.BusRSSGets); err != nil {
		return fail("rss", err)
	}
	return out
}

// restartProc stops *proc with SIGTERM and starts it again with server,
// returning how long the stop took and when the new process started.
func restartProc(proc **child, server func() (*child, error)) (time.Duration, time.Time, error) {
	stopped, err := (*proc).stop(5 * time.Minute)
	if err != nil {
		return stopped, time.Time{}, err
	}
	started := time.Now()
	p, err := server()
	if err != nil {
		return stopped, started, err
	}
	*proc = p
	return stopped, started, nil
}

// loadKeys writes all keys, cfg.Loaders batches in flight, and returns the
// seconds it took, the keys acknowledged and the failures.
func loadKeys(ctx context.Context, cfg KeysConfig, s *keysSide) (float64, int, int64, string) {
	m := cfg.Progress.start(s.name+": load", int64(cfg.Keys), "keys")
	defer m.Done()
	var next, nerr atomic.Int64
	var loaded atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.Loaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				from := int(next.Add(int64(cfg.Batch)) - int64(cfg.Batch))
				if from >= cfg.Keys {
					return
				}
				to := min(from+cfg.Batch, cfg.Keys)
				n, err := s.load(ctx, w, from, to)
				loaded.Add(int64(n))
				if err != nil {
					nerr.Add(int64(to - from - n))
					firstErr.CompareAndSwap(nil, err.Error())
				}
				m.Add(int64(to - from))
			}
		}()
	}
	wg.Wait()
	first, _ := firstErr.Load().(string)
	return time.Since(start).Seconds(), int(loaded.Load()), nerr.Load(), first
}

// firstKeyGet polls gets of random keys until one answers, and returns the
// time since started; false when cfg.Timeout passed first, an error when
// the server exited.
func firstKeyGet(ctx context.Context, cfg KeysConfig, s *keysSide, started time.Time) (time.Duration, bool, error) {
	m := cfg.Progress.start(s.name+": restart, waiting for a get", 0, "tries")
	defer m.Done()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		gctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		_, err := s.get(gctx, 0, rand.IntN(cfg.Keys))
		cancel()
		if err == nil {
			return time.Since(started), true, nil
		}
		m.Add(1)
		if e := s.proc.exited(); e != nil {
			return 0, false, e
		}
		if time.Since(started) > cfg.Timeout || ctx.Err() != nil {
			return 0, false, nil
		}
		<-tick.C
	}
}

// randomGets runs cfg.Gets gets of random keys over cfg.GetClients
// clients, each one get after another, and returns the latencies of those
// answered with the key's value and the seconds they took. A get that
// fails or returns a value of the wrong length counts as an error.
func randomGets(ctx context.Context, cfg KeysConfig, s *keysSide, out *KeysSide) ([]time.Duration, float64) {
	m := cfg.Progress.start(s.name+": gets of random keys", int64(cfg.Gets), "gets")
	defer m.Done()
	lats := make([][]time.Duration, cfg.GetClients)
	var next, nerr atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for c := range cfg.GetClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil && next.Add(1) <= int64(cfg.Gets) {
				i := r.IntN(cfg.Keys)
				gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t := time.Now()
				n, err := s.get(gctx, c, i)
				d := time.Since(t)
				cancel()
				if err == nil && n != keyValueSize(i) {
					err = fmt.Errorf("get %s: %d bytes, want %d", keyName(i), n, keyValueSize(i))
				}
				m.Add(1)
				if err != nil {
					nerr.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lats[c] = append(lats[c], d)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	out.GetErrors += nerr.Load()
	if e, _ := firstErr.Load().(string); e != "" && out.GetError == "" {
		out.GetError = e
	}
	return slices.Concat(lats...), secs
}

// keyValues is one buffer whose prefixes are the values of the benchmark.
var keyValues = testValue(keyValueMax)

// startPersistKeys starts persist's nats-server, a balancer and persist
// serve as three processes (as the many-streams benchmark does), and the
// clients: one per loader and one per get client.
func startPersistKeys(ctx context.Context, cfg KeysConfig, dir string) (*keysSide, error) {
	conns := max(cfg.Loaders, cfg.GetClients)
	ps, err := startPersistSide(ctx, StreamsConfig{
		Streams: 1, Keys: 1, Clients: conns, NATSServer: cfg.NATSServer,
		Switchyard: cfg.Switchyard, SwitchyardEnv: cfg.SwitchyardEnv,
	}.withDefaults(), dir, nil)
	if err != nil {
		return nil, err
	}
	s := &keysSide{name: ps.name, server: ps.server, proc: ps.proc, bus: ps.bus, dirs: ps.dirs, close: ps.close}
	// The clients startPersistSide made are behind its closures; these are
	// ours, on the same bus, closed with the rest.
	if err := persistKeysOps(ctx, s, ps.url, conns); err != nil {
		s.close()
		_, _ = s.proc.stop(time.Minute)
		_, _ = s.bus.stop(time.Minute)
		return nil, err
	}
	return s, nil
}

// keysScope and keysStream are the persist stream of the many-keys
// benchmark; keysBucket is its JetStream KV bucket.
const (
	keysScope  = "keys"
	keysStream = "kv"
	keysBucket = "keys"
)

// persistKeysOps makes s's load and get: conns persist clients, each on a
// connection of its own to url (closed by s.close). Each client knows the
// stream's owner before it returns (Client.Owner: the balancer's answer,
// which is what a persist client asks first, as a JetStream client first
// asks for its bucket's handle), so no timed load or get pays that
// round trip. The balancer is not restarted, so the owner holds across
// persist serve's restart.
func persistKeysOps(ctx context.Context, s *keysSide, url string, conns int) error {
	clients := make([]*persist.Client, conns)
	var ncs []*nats.Conn
	closeAll := s.close
	s.close = func() {
		for _, nc := range ncs {
			nc.Close()
		}
		closeAll()
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := range clients {
		nc, err := nats.Connect(url, clientOptions("bench-keys-"+strconv.Itoa(i))...)
		if err != nil {
			return fmt.Errorf("connect to persist's nats-server: %w", err)
		}
		ncs = append(ncs, nc)
		cc := persist.ClientConfig{Conn: nc}
		if i == 0 { // the one firstKeyGet asks through
			cc.Retry = probeRetry
		}
		if clients[i], err = persist.NewClient(cc); err != nil {
			return err
		}
		if _, err := clients[i].Owner(octx, keysScope); err != nil {
			return fmt.Errorf("owner of scope %s: %w", keysScope, err)
		}
	}
	kv := func(c int) *persist.KV { return clients[c].KV(keysScope, keysStream) }
	s.load = func(ctx context.Context, w, from, to int) (int, error) {
		msgs := make([]persist.Entry, 0, to-from)
		for i := from; i < to; i++ {
			msgs = append(msgs, persist.Entry{Key: keyName(i), Value: keyValues[:keyValueSize(i)]})
		}
		res, err := kv(w).Stream().SetMany(ctx, msgs)
		if err != nil {
			return 0, err
		}
		n := 0
		var first error
		for _, r := range res {
			if r.Err != nil {
				if first == nil {
					first = r.Err
				}
				continue
			}
			n++
		}
		return n, first
	}
	s.get = func(ctx context.Context, c, i int) (int, error) {
		m, err := kv(c).Get(ctx, keyName(i))
		if err != nil {
			return 0, err
		}
		return len(m.Value), nil
	}
	return nil
}

// startJetStreamKeys starts nats-server -js as a process, creates the KV
// bucket (file storage, history 1) and the clients.
func startJetStreamKeys(ctx context.Context, cfg KeysConfig, dir string) (*keysSide, error) {
	n := max(cfg.Loaders, cfg.GetClients)
	j, err := startJetStreamProc(cfg.NATSServer, dir, "bench-keys", n, jetstream.WithPublishAsyncMaxPending(cfg.Batch))
	if err != nil {
		return nil, err
	}
	s := &keysSide{name: "JetStream", dirs: []string{j.store}, server: j.server, proc: j.proc, close: j.closeConns}
	if err := jetStreamKeysOps(ctx, s, j.jss); err != nil {
		s.close()
		_, _ = s.proc.stop(time.Minute)
		return nil, err
	}
	return s, nil
}

// jetStreamKeysOps creates the bucket (file storage, history 1) and makes
// s's load and get on jss, one client each. Each client's KV handle is
// made here: it asks the server for the bucket's info, a round trip that
// a timed get must not pay (persist's clients learn their stream's owner
// here too). A handle is the bucket's name and its connection, so it
// holds across the server's restart.
func jetStreamKeysOps(ctx context.Context, s *keysSide, jss []jetstream.JetStream) error {
	kvCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := jss[0].CreateKeyValue(kvCtx, jetstream.KeyValueConfig{Bucket: keysBucket, History: 1, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	handles := make([]jetstream.KeyValue, len(jss))
	for c, js := range jss {
		kv, err := js.KeyValue(kvCtx, keysBucket)
		if err != nil {
			return fmt.Errorf("bucket %s: %w", keysBucket, err)
		}
		handles[c] = kv
	}
	// A KV put is a JetStream publish to $KV.<bucket>.<key>: async, so a
	// batch is in flight at once, as setMany's is.
	s.load = func(ctx context.Context, w, from, to int) (int, error) {
		futs := make([]jetstream.PubAckFuture, 0, to-from)
		var first error
		for i := from; i < to; i++ {
			f, err := jss[w].PublishAsync("$KV."+keysBucket+"."+keyName(i), keyValues[:keyValueSize(i)])
			if err != nil {
				first = err
				break
			}
			futs = append(futs, f)
		}
		n := 0
		for _, f := range futs {
			select {
			case <-f.Ok():
				n++
			case err := <-f.Err():
				if first == nil {
					first = err
				}
			case <-ctx.Done():
				return n, ctx.Err()
			}
		}
		return n, first
	}
	s.get = func(ctx context.Context, c, i int) (int, error) {
		e, err := handles[c].Get(ctx, keyName(i))
		if err != nil {
			return 0, err
		}
		return len(e.Value()), nil
	}
	return nil
}

// PrintKeys writes res as a table: each figure for both sides and the
// ratio persist / JetStream, with the target.
func PrintKeys(w io.Writer, res *KeysResult) {
	fmt.Fprintf(w, "persist vs JetStream, %d keys in one stream / one KV bucket (values %d-%d bytes, %.1f MiB in all), servers in processes of their own\n",
		res.Keys, res.ValueMin, res.ValueMax, float64(res.ValueBytes)/(1<<20))
	p, j := res.Persist, res.JetStream
	if j == nil {
		j = &KeysSide{Name: "JetStream"}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tpersist\tJetStream\tpersist/JetStream\ttarget")
	secs := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmtSeconds(v)
	}
	over := func(ours, anchor float64) string {
		if ours == 0 || anchor == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", ours/anchor)
	}
	fmt.Fprintf(tw, "load, %d loaders of %d-key batches\t%s\t%s\t%s\t\n", res.Loaders, res.Batch, secs(p.LoadSeconds), secs(j.LoadSeconds), over(p.LoadSeconds, j.LoadSeconds))
	fmt.Fprintf(tw, "RSS after the load (MiB)\t%s\t%s\t%s\t\n", mib(p.RSSLoaded), mib(j.RSSLoaded), over(float64(p.RSSLoaded), float64(j.RSSLoaded)))
	fmt.Fprintf(tw, "stop (SIGTERM to exit)\t%s\t%s\t%s\t\n", secs(p.StopSeconds), secs(j.StopSeconds), over(p.StopSeconds, j.StopSeconds))
	fmt.Fprintf(tw, "restart -> first get\t%s\t%s\t%s\t\n", secs(p.FirstGet), secs(j.FirstGet), over(p.FirstGet, j.FirstGet))
	fmt.Fprintf(tw, "RSS after the restart, idle (MiB)\t%s\t%s\t%s\t<= 0.2x\n", mib(p.RSSIdle), mib(j.RSSIdle), over(float64(p.RSSIdle), float64(j.RSSIdle)))
	fmt.Fprintf(tw, "RSS after %d gets of random keys (MiB)\t%s\t%s\t%s\t<= 0.2x\n", p.Gets, mib(p.RSSGets), mib(j.RSSGets), over(float64(p.RSSGets), float64(j.RSSGets)))
	fmt.Fprintf(tw, "gets of random keys, %d clients (gets/s)\t%.0f\t%.0f\t%s\t\n", res.GetClients, p.GetsPerSecond, j.GetsPerSecond, over(p.GetsPerSecond, j.GetsPerSecond))
	fmt.Fprintf(tw, "get p50\t%s\t%s\t%s\t\n", secs(p.GetP50), secs(j.GetP50), over(p.GetP50, j.GetP50))
	fmt.Fprintf(tw, "get p99\t%s\t%s\t%s\t\n", secs(p.GetP99), secs(j.GetP99), over(p.GetP99, j.GetP99))
	fmt.Fprintf(tw, "disk (MiB)\t%s\t%s\t%s\t\n", mib(p.DiskBytes), mib(j.DiskBytes), over(float64(p.DiskBytes), float64(j.DiskBytes)))
	fmt.Fprintf(tw, "disk per key (bytes)\t%.0f\t%.0f\t%s\t\n", p.DiskPerKey, j.DiskPerKey, over(p.DiskPerKey, j.DiskPerKey))
	tw.Flush()
	fmt.Fprintf(w, "persist's RSS is the persist serve process; its own nats-server held %s / %s / %s MiB at the three readings (not counted). JetStream is one process.\n",
		mib(p.BusRSSLoaded), mib(p.BusRSSIdle), mib(p.BusRSSGets))
	for _, s := range []*KeysSide{&p, res.JetStream} {
		if s == nil {
			continue
		}
		if s.LoadErrors+s.GetErrors > 0 {
			fmt.Fprintf(w, "%s errors: load %d (first: %s), gets %d (first: %s)\n", s.Name, s.LoadErrors, s.LoadError, s.GetErrors, s.GetError)
		}
		if s.Error != "" {
			fmt.Fprintf(w, "%s stopped early: %s\n", s.Name, s.Error)
		}
	}
}
