// Package bench holds switchyard's side-by-side benchmarks: each measures our
// component and its anchor on the same load, in the same run, on the same
// machine, and reports both figures and the ratio.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/bus/embedded"
	"github.com/switchyard-dev/switchyard/fleet"
	"github.com/switchyard-dev/switchyard/internal/devcert"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// PersistConfig configures the persist benchmark.
type PersistConfig struct {
	// Duration is how long each workload runs on each side. Zero means 3s.
	Duration time.Duration
	// ValueSize is the size of each value. Zero means 128 bytes.
	ValueSize int
	// Clients lists the concurrency levels for set vs put. Nil means {1, 16}.
	Clients []int
	// Batch is the setMany / async-publish batch size. Zero means 1000.
	Batch int
	// Dir holds the SQLite files and JetStream store. Empty means a temp dir,
	// removed afterwards.
	Dir string
	// Progress shows each workload on each side as it runs. Nil means none.
	Progress Progress
	// Durable runs both sides in their durable tier: every persist stream
	// synchronous=FULL (persist serve --sync) against JetStream with
	// sync_interval: always, so every acknowledged write is on the disk.
	Durable bool
	// ExclusiveFiles runs the persist server with each stream file locked
	// while open (persist serve --exclusive-files), as a server alone on
	// its data directory may.
	ExclusiveFiles bool
}

func (c PersistConfig) withDefaults() PersistConfig {
	if c.Duration == 0 {
		c.Duration = 3 * time.Second
	}
	if c.ValueSize == 0 {
		c.ValueSize = 128
	}
	if c.Clients == nil {
		c.Clients = []int{1, 16}
	}
	if c.Batch == 0 {
		c.Batch = 1000
	}
	return c
}

// Result is one workload measured on both sides.
type Result struct {
	Workload     string
	Ours, Anchor float64 // operations per second
	OursName     string
	AnchorName   string
	Target       float64 // the ratio we aim for (not a test)
}

// Ratio is ours over the anchor.
func (r Result) Ratio() float64 {
	if r.Anchor == 0 {
		return 0
	}
	return r.Ours / r.Anchor
}

// PersistEnv is one embedded NATS server with JetStream on, one persist
// server and a balancer, started as `switchyard up` starts them (a
// fleet): both sides of the comparison on one bus.
type PersistEnv struct {
	NATS       *embedded.Server
	dir        string
	clientOpts []nats.Option   // credentials and CA of TCP clients (secure env)
	parts      lifecycle.Group // what Close stops, newest first: the fleet, then clients
	clock      setClock        // what the persist server says of its sets' time
}

// own makes close a part of env, run by Close (newest first).
func (env *PersistEnv) own(name string, close func()) {
	_ = env.parts.Start(context.Background(), name, lifecycle.OnStop(name, func(context.Context) error {
		close()
		return nil
	}))
}

// StartPersistEnv starts the shared environment under dir ("" = temp dir).
func StartPersistEnv(dir string) (*PersistEnv, error) { return startPersistEnv(dir, envOptions{}) }

// StartDurablePersistEnv is StartPersistEnv with both sides in their
// durable tier (PersistConfig.Durable).
func StartDurablePersistEnv(dir string) (*PersistEnv, error) {
	return startPersistEnv(dir, envOptions{durable: true})
}

// envOptions are how startPersistEnv sets both sides up.
type envOptions struct {
	secure    bool // see StartSecurePersistEnv
	durable   bool // see PersistConfig.Durable
	exclusive bool // see PersistConfig.ExclusiveFiles
}

// StartSecurePersistEnv starts the persist side of the environment with the
// bus secured as `switchyard up --auth` secures it: the NATS users and
// permissions of `switchyard auth init` (the server and balancer connect in
// process with their own users) and TLS for every TCP client, which connects
// as the client user. JetStream is off: only persist runs on it.
func StartSecurePersistEnv(dir string) (*PersistEnv, error) {
	return startPersistEnv(dir, envOptions{secure: true})
}

func startPersistEnv(dir string, o envOptions) (env *PersistEnv, err error) {
	env = &PersistEnv{}
	defer func() {
		if err != nil {
			env.Close()
			env = nil
		}
	}()
	if dir == "" {
		d, err := os.MkdirTemp("", "switchyard-bench-")
		if err != nil {
			return nil, err
		}
		dir = d
		env.own("temp dir", func() { os.RemoveAll(d) })
	}
	env.dir = dir
	ids := []string{"0"}
	cfg := fleet.Config{
		NATS:     fleet.NATSConfig{Embedded: &embedded.Config{Port: embedded.RandomPort, JetStream: !o.secure, StoreDir: dir + "/jetstream", JetStreamSyncAlways: o.durable}},
		Persist:  fleet.PersistConfig{IDs: ids, Serve: ids, DataDir: dir + "/persist", Sync: o.durable, ExclusiveFiles: o.exclusive},
		Balancer: true,
	}
	// No HTTP side here, so no metrics observer to keep: the server reports
	// its sets' time to the environment's clock (loneSet).
	cfg.Persist.Tune = func(c *server.Config) { c.Observer = &env.clock }
	if o.secure {
		authDir := filepath.Join(dir, "auth")
		if _, err := auth.Init(authDir, auth.Plan{IDs: ids}, false); err != nil {
			return nil, err
		}
		certDir := filepath.Join(dir, "tls")
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, err
		}
		certs, err := devcert.Write(certDir)
		if err != nil {
			return nil, err
		}
		if cfg.NATS.Embedded.TLS, err = certs.ServerConfig(); err != nil {
			return nil, err
		}
		// The server and the balancer log in with their own users.
		cfg.NATS.AuthDir = authDir
		if env.clientOpts, err = auth.ClientOptions(auth.CredsFile(authDir, auth.RoleClient), certs.CA); err != nil {
			return nil, err
		}
	}
	// The persist server and balancer run inside the NATS server's process,
	// as in `switchyard up`, so they connect in-process like JetStream does.
	f, err := fleet.Start(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	env.NATS = f.NATS()
	if err := env.parts.Start(context.Background(), "fleet", lifecycle.OnStop("fleet", f.Stop)); err != nil {
		return nil, err
	}
	return env, nil
}

// Client opens a new connection (closed with the environment) and returns a
// persist client on it.
func (env *PersistEnv) Client() (*persist.Client, error) {
	nc, err := env.Conn()
	if err != nil {
		return nil, err
	}
	return persist.NewClient(persist.ClientConfig{Conn: nc})
}

// Conn opens a new client connection, closed with the environment.
func (env *PersistEnv) Conn() (*nats.Conn, error) {
	nc, err := nats.Connect(env.NATS.ClientURL(), env.clientOpts...)
	if err != nil {
		return nil, err
	}
	env.own("client conn", nc.Close)
	return nc, nil
}

// Close stops everything, newest first. A stop error of the server or the
// balancer is logged, not returned: the benchmark's figures are out by then.
func (env *PersistEnv) Close() {
	if err := env.parts.Stop(context.Background()); err != nil {
		slog.Warn("bench: close environment", "err", err)
	}
}

// RunPersist runs every persist workload and writes a table to w.
func RunPersist(ctx context.Context, cfg PersistConfig, w io.Writer) ([]Result, error) {
	cfg = cfg.withDefaults()
	tier := ""
	if cfg.Durable {
		tier = ", durable tier (persist --sync: synchronous=FULL; JetStream sync_interval: always)"
	}
	if cfg.ExclusiveFiles {
		tier += ", persist --exclusive-files"
	}
	env, err := startPersistEnv(cfg.Dir, envOptions{durable: cfg.Durable, exclusive: cfg.ExclusiveFiles})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	value := testValue(cfg.ValueSize)
	fmt.Fprintf(w, "persist vs JetStream, one embedded NATS server, %d-byte values, %s per side%s\n", cfg.ValueSize, cfg.Duration, tier)

	var (
		results []Result
		lone    loneSet
		hasLone bool
	)
	for _, n := range cfg.Clients {
		before := env.clock.snapshot()
		ours, err := rate(ctx, cfg.Progress, fmt.Sprintf("set x%d: persist", n), cfg.Duration, n, setOp(env, n, value))
		if err != nil {
			return results, fmt.Errorf("persist set x%d: %w", n, err)
		}
		if n == 1 {
			lone, hasLone = loneSetBetween(before, env.clock.snapshot(), ours)
		}
		anchor, err := rate(ctx, cfg.Progress, fmt.Sprintf("set x%d: JetStream KV put", n), cfg.Duration, n, func(i int) (func(ctx context.Context, k int) error, error) {
			nc, err := env.Conn()
			if err != nil {
				return nil, err
			}
			kv, err := jsKV(ctx, nc, "bench-put-"+strconv.Itoa(n))
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, k int) error {
				_, err := kv.Put(ctx, "k"+strconv.Itoa(i)+"-"+strconv.Itoa(k%1000), value)
				return err
			}, nil
		})
		if err != nil {
			return results, fmt.Errorf("jetstream kv put x%d: %w", n, err)
		}
		// At 1 client a set is a request/reply round trip (the floor line
		// below) plus a commit of its own, while JetStream answers a KV put
		// inside the server: issue 23 put the aim at 0.5x (the measured
		// bound of bus and commit in sequence is 0.51-0.61x), and at 0.7x
		// for 16 clients (the store alone's ceiling measured 0.70-0.98x).
		target := 0.5
		if n > 1 {
			target = 0.7
		}
		if cfg.Durable {
			// Both sides fsync before answering; a group commit covers
			// every set waiting, where JetStream syncs each message.
			target = 1.0
			if n > 1 {
				target = 5.0
			}
		}
		results = append(results, Result{Workload: fmt.Sprintf("set, %d client(s)", n), OursName: "persist set", AnchorName: "JetStream KV put", Ours: ours, Anchor: anchor, Target: target})
	}

	// setMany of Batch vs async publish of Batch, one client, counted in messages.
	ours, err := rate(ctx, cfg.Progress, "setMany: persist", cfg.Duration, 1, setManyOp(env, cfg.Batch, value))
	if err != nil {
		return results, fmt.Errorf("persist setMany: %w", err)
	}
	anchor, err := rate(ctx, cfg.Progress, "async publish: JetStream", cfg.Duration, 1, func(int) (func(ctx context.Context, k int) error, error) {
		nc, err := env.Conn()
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "BENCH_ASYNC", Subjects: []string{"bench.async"}, Storage: jetstream.FileStorage}); err != nil {
			return nil, err
		}
		futures := make([]jetstream.PubAckFuture, cfg.Batch)
		return func(ctx context.Context, k int) error {
			for i := range futures {
				f, err := js.PublishAsync("bench.async", value)
				if err != nil {
					return err
				}
				futures[i] = f
			}
			// Each publish's own answer, as our side checks each set's:
			// PublishAsyncComplete also completes on failed acks, which
			// would count as published.
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}, nil
	})
	if err != nil {
		return results, fmt.Errorf("jetstream async publish: %w", err)
	}
	results = append(results, Result{Workload: fmt.Sprintf("batch of %d (msgs/s)", cfg.Batch), OursName: "persist setMany", AnchorName: "JetStream async publish", Ours: ours * float64(cfg.Batch), Anchor: anchor * float64(cfg.Batch), Target: 1.0})

	// Pipelined single sets vs the same async publish: one client keeping
	// many sets in flight, each with its own result.
	piped, err := rate(ctx, cfg.Progress, "pipelined sets: persist", cfg.Duration, 1, pipelineOp(env, cfg.Batch, value))
	if err != nil {
		return results, fmt.Errorf("persist pipelined sets: %w", err)
	}
	results = append(results, Result{Workload: fmt.Sprintf("pipelined, %d per flush (msgs/s)", cfg.Batch), OursName: "persist Pipeline.Set", AnchorName: "JetStream async publish", Ours: piped * float64(cfg.Batch), Anchor: anchor * float64(cfg.Batch), Target: 1.0})

	PrintResults(w, results)

	// The floor: a bare request/reply to an in-process responder that does
	// nothing. JetStream answers from inside the server's read loop, so at
	// one client its put can beat any service behind request/reply.
	floor, err := rate(ctx, cfg.Progress, "floor: request/reply", cfg.Duration, 1, func(int) (func(ctx context.Context, k int) error, error) {
		srvConn, err := env.NATS.ConnectInProcess(bus.ConnectConfig{Name: "bench-echo"})
		if err != nil {
			return nil, err
		}
		env.own("echo conn", srvConn.Close)
		// It answers only inboxes, as every responder of switchyard does.
		if _, err := srvConn.Subscribe("bench.echo", func(m *nats.Msg) {
			if bus.IsInbox(m.Reply) {
				_ = m.Respond(nil)
			}
		}); err != nil {
			return nil, err
		}
		if err := srvConn.Flush(); err != nil {
			return nil, err
		}
		nc, err := env.Conn()
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, k int) error {
			_, err := nc.RequestWithContext(ctx, "bench.echo", value)
			return err
		}, nil
	})
	if err != nil {
		return results, fmt.Errorf("request/reply floor: %w", err)
	}
	// Against KV put at 1 client, whatever --clients listed first.
	kv1 := "-"
	for i, n := range cfg.Clients {
		if n == 1 && i < len(results) {
			kv1 = fmt.Sprintf("%.2fx", floor/results[i].Anchor)
		}
	}
	fmt.Fprintf(w, "floor: core NATS request/reply to an in-process responder that stores nothing, 1 client: %.0f ops/s (%s JetStream KV put at 1 client)\n", floor, kv1)
	if hasLone {
		lone.print(w, floor)
	}

	// The storage ceiling: the SQLite store alone, no bus, no server, doing
	// the commits a keyed set needs (one per set at 1 client; at n clients,
	// n keyed sets per group commit, the best the group commit can do). No
	// persist set can beat it; its ratio to KV put bounds the set ratios.
	for i, n := range cfg.Clients {
		per := n
		store, err := storeRate(ctx, cfg.Progress, fmt.Sprintf("ceiling: SQLite store, %d per commit", per), env.dir+"/store-floor", cfg.Duration, per, value, store.SQLiteConfig{Sync: cfg.Durable, Exclusive: cfg.ExclusiveFiles})
		if err != nil {
			return results, fmt.Errorf("storage ceiling: %w", err)
		}
		fmt.Fprintf(w, "ceiling: the SQLite store alone, %d keyed set(s) per commit: %.0f sets/s (%.2fx JetStream KV put at %d client(s))\n", per, store, store/results[i].Anchor, n)
	}
	if cfg.Durable {
		if err := durableBound(ctx, cfg, env.dir+"/bound", value, results, w); err != nil {
			return results, fmt.Errorf("durable bound: %w", err)
		}
	}
	return results, nil
}

// durableBound prints the bound of the durable set ratios: persist's set in
// its default tier (no fsync at all), on an environment of its own under
// dir, against JetStream's durable KV put of results. A durable set does
// all that work and an fsync more, so no way of scheduling the fsyncs
// (group commit, or a sync overlapping the next commit) can beat it: where
// it reads under a target, the target is out of reach on that machine.
func durableBound(ctx context.Context, cfg PersistConfig, dir string, value []byte, results []Result, w io.Writer) error {
	env, err := startPersistEnv(dir, envOptions{exclusive: cfg.ExclusiveFiles})
	if err != nil {
		return err
	}
	defer env.Close()
	for i, n := range cfg.Clients {
		ours, err := rate(ctx, cfg.Progress, fmt.Sprintf("bound: set x%d without fsync", n), cfg.Duration, n, setOp(env, n, value))
		if err != nil {
			return fmt.Errorf("persist set x%d: %w", n, err)
		}
		fmt.Fprintf(w, "bound: persist set without any fsync (the default tier), %d client(s): %.0f sets/s (%.2fx JetStream's durable KV put; target %.1fx)\n", n, ours, ours/results[i].Anchor, results[i].Target)
	}
	return nil
}

// storeRate is the keyed sets per second the store alone commits for d,
// per sets in each transaction, on a fresh stream under dir.
func storeRate(ctx context.Context, p Progress, label string, dir string, d time.Duration, per int, value []byte, how store.SQLiteConfig) (float64, error) {
	how.Dir = dir
	st, err := store.NewSQLite(how).Open("bench", "ceiling-"+strconv.Itoa(per), time.Now())
	if err != nil {
		return 0, err
	}
	defer st.Close()
	ops := make([]store.WriteOp, per)
	n := 0
	commit := func() error {
		for j := range ops {
			ops[j] = store.WriteOp{Key: "k" + strconv.Itoa(j) + "-" + strconv.Itoa(n%1000), Value: value}
		}
		n++
		res, _, err := st.Write(ops, time.Now())
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	if err := commit(); err != nil { // warm-up: the file exists before timing
		return 0, err
	}
	m := p.start(label, 0, "commits")
	defer m.Done()
	start, commits := time.Now(), 0
	for time.Since(start) < d && ctx.Err() == nil {
		if err := commit(); err != nil {
			return 0, err
		}
		commits++
		m.Add(1)
	}
	return float64(commits*per) / time.Since(start).Seconds(), ctx.Err()
}

// setOp is the persist side of the set workload at n clients: keyed sets of
// value, each client on its own connection.
func setOp(env *PersistEnv, n int, value []byte) func(i int) (func(ctx context.Context, k int) error, error) {
	return func(i int) (func(ctx context.Context, k int) error, error) {
		c, err := env.Client()
		if err != nil {
			return nil, err
		}
		kv := c.KV("bench", "set-"+strconv.Itoa(n))
		return func(ctx context.Context, k int) error {
			_, err := kv.Set(ctx, "k"+strconv.Itoa(i)+"-"+strconv.Itoa(k%1000), value, persist.SetOptions{})
			return err
		}, nil
	}
}

// setManyOp is the persist side of the setMany workload: batches of batch
// messages of value, one client.
func setManyOp(env *PersistEnv, batch int, value []byte) func(i int) (func(ctx context.Context, k int) error, error) {
	return func(int) (func(ctx context.Context, k int) error, error) {
		c, err := env.Client()
		if err != nil {
			return nil, err
		}
		s := c.Stream("bench", "setmany")
		msgs := make([]persist.Entry, batch)
		for i := range msgs {
			msgs[i].Value = value
		}
		return func(ctx context.Context, k int) error {
			res, err := s.SetMany(ctx, msgs)
			if err != nil {
				return err
			}
			for _, r := range res {
				if r.Err != nil {
					return r.Err
				}
			}
			return nil
		}, nil
	}
}

// pipelineOp is the persist side of the pipelined workload: batch sets of
// value through one Pipeline, then a wait for all of them, one client.
func pipelineOp(env *PersistEnv, batch int, value []byte) func(i int) (func(ctx context.Context, k int) error, error) {
	return func(int) (func(ctx context.Context, k int) error, error) {
		c, err := env.Client()
		if err != nil {
			return nil, err
		}
		p, err := c.Stream("bench", "pipelined").Pipeline(persist.PipelineConfig{})
		if err != nil {
			return nil, err
		}
		env.own("pipeline", func() { _ = p.Close() })
		fs := make([]*persist.SetFuture, batch)
		return func(ctx context.Context, k int) error {
			for i := range fs {
				fs[i] = p.Set(ctx, value, persist.SetOptions{})
			}
			for _, f := range fs {
				if _, err := f.Result(); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}
}

// RunPersistAuth measures what a secured bus costs: each persist workload on
// a plain environment and on a secure one (StartSecurePersistEnv: per-role
// users, TLS for clients), back to back in one run, and writes the table.
// The target is a cost of at most 10 %.
func RunPersistAuth(ctx context.Context, cfg PersistConfig, w io.Writer) ([]Result, error) {
	cfg = cfg.withDefaults()
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "switchyard-bench-auth-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	plain, err := StartPersistEnv(filepath.Join(dir, "plain"))
	if err != nil {
		return nil, fmt.Errorf("plain environment: %w", err)
	}
	defer plain.Close()
	secure, err := StartSecurePersistEnv(filepath.Join(dir, "secure"))
	if err != nil {
		return nil, fmt.Errorf("secure environment: %w", err)
	}
	defer secure.Close()
	value := testValue(cfg.ValueSize)
	fmt.Fprintf(w, "persist on a secured bus (per-role users, TLS) vs an open one, %d-byte values, %s per side\n", cfg.ValueSize, cfg.Duration)
	type workload struct {
		name  string
		n     int
		scale float64
		op    func(env *PersistEnv) func(int) (func(context.Context, int) error, error)
	}
	var loads []workload
	for _, n := range cfg.Clients {
		loads = append(loads, workload{fmt.Sprintf("set, %d client(s)", n), n, 1, func(env *PersistEnv) func(int) (func(context.Context, int) error, error) {
			return setOp(env, n, value)
		}})
	}
	loads = append(loads, workload{fmt.Sprintf("setMany of %d (msgs/s)", cfg.Batch), 1, float64(cfg.Batch), func(env *PersistEnv) func(int) (func(context.Context, int) error, error) {
		return setManyOp(env, cfg.Batch, value)
	}})
	var results []Result
	for _, l := range loads {
		sec, err := rate(ctx, cfg.Progress, l.name+": auth + TLS", cfg.Duration, l.n, l.op(secure))
		if err != nil {
			return results, fmt.Errorf("%s, secure: %w", l.name, err)
		}
		open, err := rate(ctx, cfg.Progress, l.name+": open bus", cfg.Duration, l.n, l.op(plain))
		if err != nil {
			return results, fmt.Errorf("%s, open: %w", l.name, err)
		}
		results = append(results, Result{Workload: l.name, OursName: "auth + TLS", AnchorName: "open bus", Ours: sec * l.scale, Anchor: open * l.scale, Target: 0.9})
	}
	PrintResults(w, results)
	return results, nil
}

// testValue is a value of n printable bytes, the same on both sides.
func testValue(n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	return v
}

// PrintResults writes results as an aligned table.
func PrintResults(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tours\tops/s\tanchor\tops/s\tratio\ttarget")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%.0f\t%.2fx\t>= %.1fx\n", r.Workload, r.OursName, r.Ours, r.AnchorName, r.Anchor, r.Ratio(), r.Target)
	}
	tw.Flush()
}

func jsKV(ctx context.Context, nc *nats.Conn, bucket string) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("create kv bucket: %w", err)
	}
	return kv, nil
}

// rate runs n workers, each built by mk (which may connect), calling its op
// in a loop for d, and returns completed ops per second across all workers.
// Setup happens before the clock starts.
func rate(ctx context.Context, p Progress, label string, d time.Duration, n int, mk func(i int) (func(ctx context.Context, k int) error, error)) (float64, error) {
	ops := make([]func(context.Context, int) error, n)
	for i := range ops {
		op, err := mk(i)
		if err != nil {
			return 0, err
		}
		ops[i] = op
	}
	// Warm up: one op each, so connection setup and stream creation are not timed.
	for i, op := range ops {
		if err := op(ctx, i); err != nil {
			return 0, fmt.Errorf("warm-up: %w", err)
		}
	}
	m := p.start(label, 0, "ops")
	defer m.Done()
	var (
		done     atomic.Int64
		stop     atomic.Bool
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stop.Load(); k++ {
				if err := op(ctx, k); err != nil {
					errOnce.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
				done.Add(1)
				m.Add(1)
			}
		}()
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return 0, err
	}
	return float64(done.Load()) / elapsed.Seconds(), nil
}
