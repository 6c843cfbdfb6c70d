package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/persist"
)

// FeedConfig configures the change feed benchmark.
type FeedConfig struct {
	// Duration is how long the writer writes in each workload on each side.
	// Zero means 2s.
	Duration time.Duration
	// Watchers lists the watcher counts. Nil means {1, 100}.
	Watchers []int
	// Rate is the paced writer's sets per second. Zero means 1000.
	Rate int
	// ValueSize is the size of each value. Zero means 128 bytes.
	ValueSize int
	// Conns is how many NATS connections the watchers of a side are spread
	// over, round robin, with the same layout on both sides: on ours one
	// persist.Client per connection (a client shares one feed subscription
	// among its watchers of a stream), on JetStream's one KV handle per
	// connection (each WatchAll is its own consumer). Zero means 1.
	Conns int
	// Dir holds the SQLite files and JetStream store. Empty means a temp dir.
	Dir string
	// Progress shows each workload on each side as it runs. Nil means none.
	Progress Progress
}

func (c FeedConfig) withDefaults() FeedConfig {
	if c.Duration == 0 {
		c.Duration = 2 * time.Second
	}
	if c.Watchers == nil {
		c.Watchers = []int{1, 100}
	}
	if c.Rate == 0 {
		c.Rate = 1000
	}
	if c.ValueSize == 0 {
		c.ValueSize = 128
	}
	if c.Conns == 0 {
		c.Conns = 1
	}
	return c
}

// FeedResult is one workload measured on both sides: latency from a write
// returning to a watcher receiving it.
type FeedResult struct {
	Workload             string
	Watchers             int
	OursRate, AnchorRate float64 // writes per second the writer reached
	OursP50, OursP99     time.Duration
	AnchorP50, AnchorP99 time.Duration
}

// P99Ratio is our p99 over the anchor's; the target is <= 1.
func (r FeedResult) P99Ratio() float64 {
	if r.AnchorP99 == 0 {
		return 0
	}
	return float64(r.OursP99) / float64(r.AnchorP99)
}

// feedSide runs one side of a workload: start watchers, then write.
type feedSide interface {
	// watch starts n watchers; each calls got(watcher, id, time) per change,
	// where id is the write's seq or revision.
	watch(ctx context.Context, n int, got func(w int, id uint64, at time.Time)) (stop func(), err error)
	// write writes one value and returns its id.
	write(ctx context.Context, value []byte) (uint64, error)
}

// RunFeed measures persist Watch against JetStream KV watch on one embedded
// NATS server and writes a table to w.
func RunFeed(ctx context.Context, cfg FeedConfig, w io.Writer) ([]FeedResult, error) {
	cfg = cfg.withDefaults()
	env, err := StartPersistEnv(cfg.Dir)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	value := testValue(cfg.ValueSize)
	fmt.Fprintf(w, "change feed latency, set returned -> watcher received: persist Watch vs JetStream KV watch, one embedded NATS server, %d-byte values, %s per workload, each side's watchers on %d connection(s)\n", cfg.ValueSize, cfg.Duration, cfg.Conns)
	var results []FeedResult
	run := 0
	for _, n := range cfg.Watchers {
		for _, rate := range []int{cfg.Rate, 0} {
			run++
			name := fmt.Sprintf("%d sets/s", rate)
			if rate == 0 {
				name = "max rate"
			}
			res := FeedResult{Workload: name, Watchers: n}
			ours, err := newOursSide(ctx, env, "feed-"+strconv.Itoa(run), cfg.Conns)
			if err != nil {
				return results, err
			}
			if res.OursRate, res.OursP50, res.OursP99, err = measureFeed(ctx, cfg.Progress.start(fmt.Sprintf("%d watchers, %s: persist Watch", n, name), 0, "sets"), ours, n, rate, cfg.Duration, value); err != nil {
				return results, fmt.Errorf("persist watch, %d watchers, %s: %w", n, name, err)
			}
			anchor, err := newJSSide(ctx, env, "feed-"+strconv.Itoa(run), cfg.Conns)
			if err != nil {
				return results, err
			}
			if res.AnchorRate, res.AnchorP50, res.AnchorP99, err = measureFeed(ctx, cfg.Progress.start(fmt.Sprintf("%d watchers, %s: JetStream KV watch", n, name), 0, "sets"), anchor, n, rate, cfg.Duration, value); err != nil {
				return results, fmt.Errorf("jetstream kv watch, %d watchers, %s: %w", n, name, err)
			}
			results = append(results, res)
		}
	}
	PrintFeedResults(w, results)
	return results, nil
}

// PrintFeedResults writes results as an aligned table.
func PrintFeedResults(w io.Writer, results []FeedResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "watchers\twriter\tours sets/s\tours p50\tours p99\tJetStream puts/s\tJetStream p50\tJetStream p99\tp99 ours/JetStream\ttarget")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%.0f\t%s\t%s\t%.2fx\t<= 1.0x\n", r.Watchers, r.Workload, r.OursRate, fmtDur(r.OursP50), fmtDur(r.OursP99), r.AnchorRate, fmtDur(r.AnchorP50), fmtDur(r.AnchorP99), r.P99Ratio())
	}
	tw.Flush()
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

// measureFeed starts n watchers, has each get one warm-up write before the
// clock starts, writes for d (paced at rate per second, or as fast as one
// writer goes when rate is 0), waits until every watcher has every write,
// and returns the write rate and the p50 and p99 latency over
// all (watcher, write) pairs. m counts the writes and is done at return.
func measureFeed(ctx context.Context, m Meter, side feedSide, n, rate int, d time.Duration, value []byte) (float64, time.Duration, time.Duration, error) {
	r, err := measureFeedRun(ctx, m, side, n, rate, d, value)
	return r.rate, r.p50, r.p99, err
}

// feedRun is what measureFeedRun measured.
type feedRun struct {
	rate float64
	// writes is how many writes were timed: the last ones the side was
	// given (a warm-up write goes before them).
	writes   int
	p50, p99 time.Duration
	// cpuPerDelivery is this process's CPU time from the first write to
	// the last delivery over the deliveries: a figure that holds steadier
	// than latency on cores shared with other work.
	cpuPerDelivery time.Duration
}

// measureFeedRun is measureFeed with the CPU time per delivery.
func measureFeedRun(ctx context.Context, m Meter, side feedSide, n, rate int, d time.Duration, value []byte) (feedRun, error) {
	defer m.Done()
	var run feedRun
	// One lock per watcher, not one for all: a lock every watcher takes
	// on every delivery would make the watchers queue behind each other
	// in the measurement itself.
	type watcherLog struct {
		mu sync.Mutex
		m  map[uint64]time.Time
	}
	var (
		received  = make([]watcherLog, n)
		delivered atomic.Int64 // distinct (watcher, id) pairs
	)
	for i := range received {
		received[i].m = map[uint64]time.Time{}
	}
	stop, err := side.watch(ctx, n, func(w int, id uint64, at time.Time) {
		r := &received[w]
		r.mu.Lock()
		if _, dup := r.m[id]; !dup {
			r.m[id] = at
			delivered.Add(1)
		}
		r.mu.Unlock()
	})
	if err != nil {
		return run, err
	}
	defer stop()

	// One warm-up write that every watcher must have before the clock
	// starts: a persist watcher takes nothing on the feed's word after its
	// start until it has confirmed the first change with a read of the
	// stream (Watcher.apply), so n watchers' first change costs n reads, a
	// start-up cost that is not the feed's latency (bench ws warms up for
	// the same reason). JetStream's watchers get the same write, so both
	// sides are timed from the same state. The watchers start after the
	// write that made the stream, so the warm-up is the first change each
	// gets; it is none of the timed writes.
	if _, err := side.write(ctx, value); err != nil {
		return run, fmt.Errorf("warm-up write: %w", err)
	}
	if err := awaitDeliveries(ctx, &delivered, int64(n)); err != nil {
		return run, fmt.Errorf("warm-up: %w", err)
	}

	returned := map[uint64]time.Time{}
	var ids []uint64
	start, cpu0 := time.Now(), processCPU()
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
	}
	for time.Since(start) < d {
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return run, ctx.Err()
			}
		}
		id, err := side.write(ctx, value)
		if err != nil {
			return run, err
		}
		returned[id] = time.Now()
		ids = append(ids, id)
		m.Add(1)
	}
	writeRate := float64(len(ids)) / time.Since(start).Seconds()

	// Every watcher has every write, the warm-up's included.
	want := n * (len(ids) + 1)
	if err := awaitDeliveries(ctx, &delivered, int64(want)); err != nil {
		return run, err
	}
	cpu := processCPU() - cpu0
	lat := make([]time.Duration, 0, n*len(ids))
	for i := range received {
		r := &received[i]
		r.mu.Lock()
		for _, id := range ids {
			at, ok := r.m[id]
			if !ok {
				// The wait above ended on a count that took in a
				// delivery of no timed write: its figures would be wrong.
				r.mu.Unlock()
				return run, fmt.Errorf("watcher %d never got write %d, but %d of %d deliveries were counted", i, id, delivered.Load(), want)
			}
			// A watcher can hear of a write before the writer hears it
			// returned: that counts as zero.
			lat = append(lat, max(0, at.Sub(returned[id])))
		}
		r.mu.Unlock()
	}
	slices.Sort(lat)
	run = feedRun{rate: writeRate, writes: len(ids), p50: pct(lat, 0.50), p99: pct(lat, 0.99)}
	if len(lat) > 0 {
		run.cpuPerDelivery = cpu / time.Duration(len(lat))
	}
	return run, nil
}

// awaitDeliveries waits (for 30 s at most) until delivered reaches want.
func awaitDeliveries(ctx context.Context, delivered *atomic.Int64, want int64) error {
	for waited := time.Duration(0); ; waited += 10 * time.Millisecond {
		got := delivered.Load()
		if got >= want {
			return nil
		}
		if waited > 30*time.Second {
			return fmt.Errorf("%d of %d deliveries after 30s", got, want)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pct is the nearest-rank p-quantile of sorted: the smallest sample with
// at least p of the samples at or below it (p99 of 100 samples is the
// 99th, not the largest); 0 for none.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// oursSide is persist: Stream.Set and Stream.Watch.
type oursSide struct {
	writer  *persist.Stream
	readers []*persist.Client // watcher i uses readers[i%len(readers)]
	scope   string
	name    string
	from    uint64 // the watchers' WatchOptions.From: after the set that made the stream
	k       int
	// watchers are the last watch's, kept for their Stats (reads).
	watchers []*persist.Watcher
}

// reads is how many messages the last watch's watchers read from the
// server rather than took from the feed.
func (o *oursSide) reads() uint64 {
	var n uint64
	for _, w := range o.watchers {
		n += w.Stats().Read
	}
	return n
}

// newOursSide makes the stream before anything is timed, as newJSSide
// makes its bucket: a persist stream's file is made by its first write,
// which would otherwise be the first timed set, on this side alone.
func newOursSide(ctx context.Context, env *PersistEnv, name string, conns int) (*oursSide, error) {
	wnc, err := env.Conn()
	if err != nil {
		return nil, err
	}
	wc, err := persist.NewClient(persist.ClientConfig{Conn: wnc})
	if err != nil {
		return nil, err
	}
	o := &oursSide{writer: wc.Stream("bench", name), scope: "bench", name: name}
	// Key k0 is one of the keys the writes cycle over, so the stream keeps
	// the same bounded set as the bucket. The watchers start after it: it
	// is none of the writes they are timed on.
	made, err := o.writer.Set(ctx, []byte("made before the clock starts"), persist.SetOptions{Key: "k0"})
	if err != nil {
		return nil, fmt.Errorf("make stream bench/%s: %w", name, err)
	}
	o.from = made.Seq + 1
	for range conns {
		rnc, err := env.Conn()
		if err != nil {
			return nil, err
		}
		rc, err := persist.NewClient(persist.ClientConfig{Conn: rnc})
		if err != nil {
			return nil, err
		}
		o.readers = append(o.readers, rc)
	}
	return o, nil
}

func (o *oursSide) watch(ctx context.Context, n int, got func(int, uint64, time.Time)) (func(), error) {
	var ws []*persist.Watcher
	caught := make(chan struct{}, n)
	stop := func() {
		for _, w := range ws {
			_ = w.Stop(context.Background())
		}
	}
	for i := 0; i < n; i++ {
		w, err := o.readers[i%len(o.readers)].Stream(o.scope, o.name).Watch(ctx, persist.WatchOptions{From: o.from}, func(ev persist.Event) {
			switch ev.Kind {
			case persist.EventSet:
				got(i, ev.Msg.Seq, time.Now())
			case persist.EventCaughtUp:
				select {
				case caught <- struct{}{}:
				default:
				}
			}
		})
		if err != nil {
			stop()
			return nil, err
		}
		ws = append(ws, w)
	}
	for range n {
		select {
		case <-caught:
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
	}
	o.watchers = ws
	return stop, nil
}

func (o *oursSide) write(ctx context.Context, value []byte) (uint64, error) {
	// Keys cycle as on the JetStream side: each set also replaces (deletes)
	// the key's older row, which the feed carries too.
	o.k++
	res, err := o.writer.Set(ctx, value, persist.SetOptions{Key: "k" + strconv.Itoa(o.k%1000)})
	return res.Seq, err
}

// jsSide is JetStream KV: Put and WatchAll.
type jsSide struct {
	writer  jetstream.KeyValue
	readers []jetstream.KeyValue // watcher i uses readers[i%len(readers)]
	k       int
}

func newJSSide(ctx context.Context, env *PersistEnv, bucket string, conns int) (*jsSide, error) {
	wnc, err := env.Conn()
	if err != nil {
		return nil, err
	}
	w, err := jsKV(ctx, wnc, bucket)
	if err != nil {
		return nil, err
	}
	j := &jsSide{writer: w}
	for range conns {
		rnc, err := env.Conn()
		if err != nil {
			return nil, err
		}
		r, err := jsKV(ctx, rnc, bucket)
		if err != nil {
			return nil, err
		}
		j.readers = append(j.readers, r)
	}
	return j, nil
}

func (j *jsSide) watch(ctx context.Context, n int, got func(int, uint64, time.Time)) (func(), error) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	for i := 0; i < n; i++ {
		kw, err := j.readers[i%len(j.readers)].WatchAll(wctx, jetstream.UpdatesOnly())
		if err != nil {
			stop()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = kw.Stop() }()
			for {
				select {
				case <-wctx.Done():
					return
				case e, ok := <-kw.Updates():
					if !ok {
						return
					}
					if e != nil {
						got(i, e.Revision(), time.Now())
					}
				}
			}
		}()
	}
	// WatchAll returns once its consumer exists, so later puts reach it.
	return stop, nil
}

func (j *jsSide) write(ctx context.Context, value []byte) (uint64, error) {
	j.k++
	// Keys cycle like the persist bench's, so both sides keep a bounded set.
	return j.writer.Put(ctx, "k"+strconv.Itoa(j.k%1000), value)
}
