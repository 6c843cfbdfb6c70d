package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed" // the Node script of the slow-peer anchor
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/forward"
)

// ForwardParts are the parts of the forward benchmark, in the order they
// run: the three queue workloads, the slow peer, loopback HTTP sends.
var ForwardParts = []string{"queue", "slow-peer", "loopback"}

// Defaults of ForwardConfig.
const (
	ForwardLoopItemsDefault = 200_000
	ForwardRunsDefault      = 3
	ForwardSlowRTTDefault   = 50 * time.Millisecond
	ForwardSlowForDefault   = 3 * time.Second
)

// ForwardSlowRatesDefault are the push rates (items/s) of the slow-peer
// runs when ForwardConfig.SlowRates is nil.
var ForwardSlowRatesDefault = []int{40_000, 100_000}

// ForwardConfig shapes the forward benchmark: forward.PeerQueue against
// the reference Node queue (the anchor), and signed against unsigned
// loopback sends.
type ForwardConfig struct {
	// Anchor is the folder holding the reference queue's bench.mjs and
	// forwardQueue.mjs. Empty or missing, or without node installed, the
	// anchor is skipped (and the output says why).
	Anchor string
	// LoopItems is the items per loopback send run. Zero means
	// ForwardLoopItemsDefault; at least 1000.
	LoopItems int
	// Runs is the runs of each queue workload per side, taking turns; the
	// best of each side is reported. Zero means ForwardRunsDefault.
	Runs int
	// SlowRTT is the slow peer's round trip. Zero means
	// ForwardSlowRTTDefault.
	SlowRTT time.Duration
	// SlowRates are the push rates (items/s) of the slow-peer runs. Nil
	// means ForwardSlowRatesDefault.
	SlowRates []int
	// SlowFor is how long each slow-peer run pushes. Zero means
	// ForwardSlowForDefault.
	SlowFor time.Duration
	// Parts are the parts to run, of ForwardParts. Nil means all.
	Parts []string
	// Progress shows each part's runs. Nil means none.
	Progress Progress
}

func (c *ForwardConfig) withDefaults() {
	if c.LoopItems == 0 {
		c.LoopItems = ForwardLoopItemsDefault
	}
	if c.Runs == 0 {
		c.Runs = ForwardRunsDefault
	}
	if c.SlowRTT == 0 {
		c.SlowRTT = ForwardSlowRTTDefault
	}
	if c.SlowRates == nil {
		c.SlowRates = ForwardSlowRatesDefault
	}
	if c.SlowFor == 0 {
		c.SlowFor = ForwardSlowForDefault
	}
}

func (c *ForwardConfig) validate() error {
	switch {
	case c.LoopItems < 1000:
		return errors.New("bench forward: loop items must be at least 1000")
	case c.Runs < 1:
		return errors.New("bench forward: runs must be at least 1")
	case c.SlowRTT < 0 || c.SlowFor < 0:
		return errors.New("bench forward: slow-peer round trip and push time must be positive")
	case slices.ContainsFunc(c.SlowRates, func(r int) bool { return r < 1 }):
		return errors.New("bench forward: slow-peer rates must be positive")
	}
	for _, p := range c.Parts {
		if !slices.Contains(ForwardParts, p) {
			return fmt.Errorf("bench forward: part %q: want one of %s", p, strings.Join(ForwardParts, ", "))
		}
	}
	return nil
}

// forwardResult is one workload's figures, ours or the anchor's (the anchor
// prints the same field names as JSON).
type forwardResult struct {
	Workload string  `json:"workload"`
	Items    int     `json:"items"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"items_per_s"`
	Dropped  uint64  `json:"dropped"`
	Markers  uint64  `json:"markers"`
	// Delivered counts the pushed items a send carried (markers not
	// counted), in the slow-peer workload.
	Delivered uint64 `json:"delivered"`
	// Prebuilt says the events were encoded before the clock started, so
	// the figure is the queue's own cost.
	Prebuilt bool `json:"-"`
}

// RunForward runs the parts of cfg and writes their results on w.
func RunForward(ctx context.Context, cfg ForwardConfig, w io.Writer) error {
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	slow := slowPeerConfig{rtt: cfg.SlowRTT, rates: cfg.SlowRates, dur: cfg.SlowFor}
	parts := map[string]bool{}
	for _, part := range cfg.Parts {
		parts[part] = true
	}
	if len(parts) == 0 {
		for _, part := range ForwardParts {
			parts[part] = true
		}
	}
	why := anchorMissing(cfg.Anchor)
	if why != "" {
		fmt.Fprintf(w, "forward: anchor skipped: %s\n", why)
	}
	if parts["queue"] {
		if err := benchForwardQueue(ctx, w, cfg.Progress, cfg.Anchor, why, cfg.Runs); err != nil {
			return err
		}
	}
	if parts["slow-peer"] {
		if err := benchForwardSlowPeer(ctx, w, cfg.Progress, cfg.Anchor, why, slow); err != nil {
			return err
		}
	}
	if parts["loopback"] {
		return benchForwardLoopback(ctx, w, cfg.Progress, cfg.LoopItems)
	}
	return nil
}

// benchForwardQueue runs the anchor's three workloads on both sides.
func benchForwardQueue(ctx context.Context, out io.Writer, p Progress, anchorDir, why string, runs int) error {
	fmt.Fprintf(out, "forward: queue workloads (GOMAXPROCS=%d), best of %d runs each side, the two sides taking turns\n", runtime.GOMAXPROCS(0), runs)
	type workload struct {
		name  string
		which string // the anchor's name for it (bench.mjs argument)
		run   func() (forwardResult, error)
	}
	for _, w := range []workload{
		{"steady-8-peers", "steady", func() (forwardResult, error) { return benchSteady(ctx, 1_000_000, 8) }},
		{"dead-peer-count-bound", "count", func() (forwardResult, error) { return benchDeadPeer(ctx, "dead-peer-count-bound", 100_000, 128, false) }},
		{"dead-peer-byte-bound", "bytes", func() (forwardResult, error) { return benchDeadPeer(ctx, "dead-peer-byte-bound", 4_000, 64<<10, false) }},
		{"dead-peer-count-bound", "count", func() (forwardResult, error) { return benchDeadPeer(ctx, "dead-peer-count-bound", 100_000, 128, true) }},
		{"dead-peer-byte-bound", "bytes", func() (forwardResult, error) { return benchDeadPeer(ctx, "dead-peer-byte-bound", 4_000, 64<<10, true) }},
	} {
		// The machine's load drifts over a run. Alternating the sides and
		// keeping each one's best makes the ratio compare the two at
		// similar moments, not one early and one late.
		var ours, theirs forwardResult
		sides := int64(1)
		if why == "" {
			sides = 2
		}
		m := p.start(w.name, int64(runs)*sides, "runs")
		for range runs {
			if err := ctx.Err(); err != nil {
				m.Done()
				return err
			}
			if why == "" {
				a, err := runForwardAnchor(ctx, anchorDir, w.which)
				if err != nil {
					m.Done()
					return fmt.Errorf("bench forward %s anchor: %w", w.name, err)
				}
				m.Add(1)
				if a.PerSec > theirs.PerSec {
					theirs = a
				}
			}
			o, err := w.run()
			if err != nil {
				m.Done()
				return fmt.Errorf("bench forward %s: %w", w.name, err)
			}
			m.Add(1)
			if o.PerSec > ours.PerSec {
				ours = o
			}
		}
		m.Done()
		label := w.name
		if ours.Prebuilt {
			label += " (queue only)"
		}
		line := fmt.Sprintf("  %-35s ours %10.0f items/s  (dropped %d, markers %d)", label, ours.PerSec, ours.Dropped, ours.Markers)
		if theirs.PerSec > 0 {
			line += fmt.Sprintf("  anchor %9.0f items/s  (dropped %d, markers %d)  ratio %.1fx",
				theirs.PerSec, theirs.Dropped, theirs.Markers, ours.PerSec/theirs.PerSec)
		}
		fmt.Fprintln(out, line)
	}

	return nil
}

// benchForwardSlowPeer runs the slow-peer workload at each rate, ours then
// the anchor's.
func benchForwardSlowPeer(ctx context.Context, out io.Writer, p Progress, anchorDir, why string, slow slowPeerConfig) error {
	fmt.Fprintf(out, "forward: slow peer, %s round trip, pushing for %s (ours: MaxInFlight %d)\n", slow.rtt, slow.dur, forward.MaxInFlightDefault)
	sides := int64(1)
	if why == "" {
		sides = 2
	}
	m := p.start("slow peer", int64(len(slow.rates))*sides, "runs")
	defer m.Done()
	for _, rate := range slow.rates {
		if err := ctx.Err(); err != nil {
			return err
		}
		ours, err := benchSlowPeer(ctx, rate, slow.rtt, slow.dur)
		m.Add(1)
		if err != nil {
			return fmt.Errorf("bench forward slow-peer: %w", err)
		}
		line := fmt.Sprintf("  %-35s ours   %8.0f delivered/s  shed %7d (pushed %d)",
			fmt.Sprintf("slow-peer %d/s", rate), ours.PerSec, ours.Dropped, ours.Items)
		if why == "" {
			a, err := runSlowPeerAnchor(ctx, anchorDir, rate, slow.rtt, slow.dur)
			if err != nil {
				return fmt.Errorf("bench forward slow-peer anchor: %w", err)
			}
			m.Add(1)
			line += fmt.Sprintf("\n  %-35s anchor %8.0f delivered/s  shed %7d (pushed %d)  delivered %.2fx  shed %s",
				"", a.PerSec, a.Dropped, a.Items, ours.PerSec/a.PerSec, shedRatio(ours.Dropped, a.Dropped))
		}
		fmt.Fprintln(out, line)
	}

	return nil
}

// benchForwardLoopback measures signed vs unsigned sends on loopback.
func benchForwardLoopback(ctx context.Context, out io.Writer, p Progress, loopItems int) error {
	fmt.Fprintf(out, "forward: loopback HTTP sends, %d items per run\n", loopItems)
	m := p.start("loopback", 4*int64(loopItems), "items")
	defer m.Done()
	for _, peers := range []int{1, 8} {
		var rates [2]float64
		for i, signed := range []bool{false, true} {
			rate, err := benchLoopback(ctx, loopItems, peers, signed)
			if err != nil {
				return fmt.Errorf("bench forward loopback: %w", err)
			}
			rates[i] = rate
			m.Add(int64(loopItems))
		}
		fmt.Fprintf(out, "  %d peer(s): unsigned %9.0f items/s  signed %9.0f items/s  signed/unsigned %.2fx\n",
			peers, rates[0], rates[1], rates[1]/rates[0])
	}
	return nil
}

// anchorMissing says why the Node anchor cannot run from dir, or "".
func anchorMissing(dir string) string {
	script := filepath.Join(dir, "bench.mjs")
	if _, err := os.Stat(script); err != nil {
		return fmt.Sprintf("no %s (point --anchor at the anchor folder)", script)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	return ""
}

// runForwardAnchor runs one workload of the Node anchor (which is its
// bench.mjs argument: steady, count or bytes).
func runForwardAnchor(ctx context.Context, dir, which string) (forwardResult, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return forwardResult{}, fmt.Errorf("find node: %w", err)
	}
	c := exec.CommandContext(ctx, node, "bench.mjs", which)
	c.Dir = dir
	var stderr bytes.Buffer
	c.Stderr = &stderr
	raw, err := c.Output()
	if err != nil {
		return forwardResult{}, fmt.Errorf("node: %w %s", err, strings.TrimSpace(stderr.String()))
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r forwardResult
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Workload != "" {
			return r, nil
		}
	}
	return forwardResult{}, fmt.Errorf("node printed no result: %q", raw)
}

// benchEvent encodes the anchor's fs-style event for item i.
func benchEvent(buf []byte, i int, payload string) []byte {
	b := append(buf[:0], `{"id":"ev-`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","subject":"fs:uid-`...)
	b = strconv.AppendInt(b, int64(i%5000), 10)
	b = append(b, `:write","op":"write","uid":"uid-`...)
	b = strconv.AppendInt(b, int64(i%5000), 10)
	b = append(b, `","path":"/user`...)
	b = strconv.AppendInt(b, int64(i%1000), 10)
	b = append(b, `/docs/file-`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `.txt","self":false,"ts":`...)
	b = strconv.AppendInt(b, 1764000000000+int64(i), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"data":"`...)
	b = append(b, payload...)
	return append(b, `"}`...)
}

// benchDelivery builds the anchor's item i, encoding its event as the
// events layer would: once, into its own bytes.
func benchDelivery(i int, payload string) *forward.Delivery {
	ev := benchEvent(make([]byte, 0, 160+len(payload)), i, payload)
	return &forward.Delivery{UserID: int64(i % 1000), SubID: "sub-" + strconv.Itoa(i%64), Event: ev}
}

var benchSubIDs = func() (s [64]string) {
	for i := range s {
		s[i] = "sub-" + strconv.Itoa(i)
	}
	return s
}()

// quietLogger drops the queue's and receiver's lines: a benchmark's
// losses are counted, not logged.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func benchSteady(ctx context.Context, n, peers int) (forwardResult, error) {
	var sent atomic.Int64
	gap := forward.NewGapPolicy(forward.GapConfig{Logger: quietLogger()})
	q, err := forward.NewPeerQueue(forward.QueueConfig{
		From: "bench",
		Send: func(_ context.Context, b *forward.Outbound) error {
			sent.Add(int64(len(b.Items)))
			return nil
		},
		OnOverflow: gap.Overflow, OnTaken: gap.Taken, OnLost: gap.Lost, Logger: quietLogger(),
	})
	if err != nil {
		return forwardResult{}, err
	}
	if err := q.Start(ctx); err != nil {
		return forwardResult{}, err
	}
	names := make([]string, peers)
	for i := range names {
		names[i] = "peer-" + strconv.Itoa(i)
	}
	payload := strings.Repeat("x", 64)
	start := time.Now()
	for i := range n {
		d := &forward.Delivery{UserID: int64(i % 1000), SubID: benchSubIDs[i%64],
			Event: benchEvent(make([]byte, 0, 256), i, payload)}
		q.Push(names[i%peers], d)
		if i%100 == 99 {
			runtime.Gosched() // the anchor's producer yields every 100 pushes
		}
	}
	if err := q.FlushAll(ctx); err != nil {
		return forwardResult{}, err
	}
	secs := time.Since(start).Seconds()
	st := q.Stats()
	_ = q.Stop(ctx)
	if got := st.SentItems + st.Shed - st.Replacements; got != uint64(n) {
		return forwardResult{}, fmt.Errorf("steady: %d sent and shed of %d", got, n)
	}
	gs := gap.Stats()
	return forwardResult{Workload: "steady-8-peers", Items: n, Seconds: secs, PerSec: float64(n) / secs, Dropped: gs.Dropped, Markers: gs.Markers}, nil
}

// benchDeadPeer pushes n deliveries to a peer that never answers. By
// default each event is encoded inside the timed loop, as the anchor builds
// its items there; with prebuilt, a pool of encoded events is built first
// and reused, which leaves the queue's own cost.
func benchDeadPeer(ctx context.Context, name string, n, payloadBytes int, prebuilt bool) (forwardResult, error) {
	gap := forward.NewGapPolicy(forward.GapConfig{Logger: quietLogger()})
	q, err := forward.NewPeerQueue(forward.QueueConfig{
		From: "bench",
		Send: func(ctx context.Context, _ *forward.Outbound) error {
			<-ctx.Done() // a peer that never answers
			return ctx.Err()
		},
		OnOverflow: gap.Overflow, OnTaken: gap.Taken, OnLost: gap.Lost, Logger: quietLogger(),
	})
	if err != nil {
		return forwardResult{}, err
	}
	if err := q.Start(ctx); err != nil {
		return forwardResult{}, err
	}
	payload := strings.Repeat("y", payloadBytes)
	var pool []*forward.Delivery
	if prebuilt {
		// More than the bounds hold, so the shed items are distinct.
		pool = make([]*forward.Delivery, min(n, max(forward.MaxQueuedDefault+1000, forward.MaxQueuedBytesDefault/payloadBytes+100)))
		for i := range pool {
			pool[i] = benchDelivery(i, payload)
		}
	}
	start := time.Now()
	for i := range n {
		if prebuilt {
			q.Push("peer-dead", pool[i%len(pool)])
		} else {
			q.Push("peer-dead", benchDelivery(i, payload))
		}
	}
	secs := time.Since(start).Seconds()
	stopped, cancel := context.WithCancel(context.Background())
	cancel() // the dead send is cancelled at once
	_ = q.Stop(stopped)
	gs := gap.Stats()
	return forwardResult{Workload: name, Items: n, Seconds: secs, PerSec: float64(n) / secs, Dropped: gs.Dropped, Markers: gs.Markers, Prebuilt: prebuilt}, nil
}

// benchLoopback sends items to peers receivers on 127.0.0.1 through a
// queue and a Sender, and returns delivered items per second.
func benchLoopback(ctx context.Context, n, peers int, signed bool) (float64, error) {
	// A secret of this run only: nothing signed here is good anywhere
	// else. crypto/rand.Read never fails (it crashes the program instead).
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	var delivered atomic.Int64
	urls := map[string]string{}
	var servers []*http.Server
	var recvs []*forward.Receiver
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	for i := range peers {
		recv, err := forward.NewReceiver(forward.ReceiverConfig{
			Self:  "region-" + strconv.Itoa(i),
			Peers: map[string][]byte{"bench": secret},
			Sink: forward.SinkFuncs{DeliverFunc: func(context.Context, string, *forward.Delivery) bool {
				delivered.Add(1)
				return false
			}},
			Logger:                quietLogger(),
			InsecureSkipSignature: !signed,
		})
		if err != nil {
			return 0, err
		}
		recvs = append(recvs, recv)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
		urls["region-"+strconv.Itoa(i)] = "http://" + ln.Addr().String() + "/"
	}
	sender, err := forward.NewSender(forward.SenderConfig{Self: "bench", Secret: secret, Peers: urls, InsecureSkipSignature: !signed})
	if err != nil {
		return 0, err
	}
	if err := sender.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = sender.Stop(context.WithoutCancel(ctx)) }()
	q, err := forward.NewPeerQueue(forward.QueueConfig{From: "bench", Send: sender.Send, Logger: quietLogger()})
	if err != nil {
		return 0, err
	}
	if err := q.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = q.Stop(context.WithoutCancel(ctx)) }()
	names := make([]string, peers)
	for i := range names {
		names[i] = "region-" + strconv.Itoa(i)
	}
	payload := strings.Repeat("x", 64)
	items := make([]*forward.Delivery, 4096)
	for i := range items {
		items[i] = benchDelivery(i, payload)
	}
	start := time.Now()
	for i := range n {
		q.Push(names[i%peers], items[i%len(items)])
		// Keep the producer behind the senders: this measures sending,
		// not shedding.
		if i%500 == 499 {
			for _, name := range names {
				for q.PeerStats(name).HeldItems > 2000 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}
	}
	if err := q.FlushAll(ctx); err != nil {
		return 0, err
	}
	secs := time.Since(start).Seconds()
	st := q.Stats()
	if st.Shed != 0 || st.LostBatches != 0 || delivered.Load() != int64(n) {
		var rs forward.ReceiverStats
		for _, r := range recvs {
			s := r.Stats()
			rs.Stale += s.Stale
			rs.Skipped += s.Skipped
			rs.Abandoned += s.Abandoned
			rs.BadRequest += s.BadRequest
			rs.Forbidden += s.Forbidden
			rs.Replayed += s.Replayed
		}
		return 0, fmt.Errorf("loopback: delivered %d of %d (shed %d, lost batches %d; receivers: %+v)",
			delivered.Load(), n, st.Shed, st.LostBatches, rs)
	}
	return float64(n) / secs, nil
}

// slowPeerConfig shapes the slow-peer workload.
type slowPeerConfig struct {
	rtt   time.Duration
	rates []int
	dur   time.Duration
}

func shedRatio(ours, theirs uint64) string {
	if theirs == 0 {
		if ours == 0 {
			return "0 = 0"
		}
		return fmt.Sprintf("%d vs 0", ours)
	}
	return fmt.Sprintf("%.2fx", float64(ours)/float64(theirs))
}

// benchSlowPeer pushes rate deliveries per second for dur to one peer
// whose send returns after rtt, then ships what is left, and reports the
// pushed items delivered per second (the whole run, tail included) and
// the items shed.
func benchSlowPeer(ctx context.Context, rate int, rtt, dur time.Duration) (forwardResult, error) {
	var delivered atomic.Uint64
	gap := forward.NewGapPolicy(forward.GapConfig{Logger: quietLogger()})
	q, err := forward.NewPeerQueue(forward.QueueConfig{
		From: "bench",
		Send: func(ctx context.Context, b *forward.Outbound) error {
			t := time.NewTimer(rtt) // the round trip
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
			n := 0
			for _, it := range b.Items {
				if !forward.IsGapMarker(it) {
					n++
				}
			}
			delivered.Add(uint64(n))
			return nil
		},
		OnOverflow: gap.Overflow, OnTaken: gap.Taken, OnLost: gap.Lost, Logger: quietLogger(),
	})
	if err != nil {
		return forwardResult{}, err
	}
	if err := q.Start(ctx); err != nil {
		return forwardResult{}, err
	}
	defer func() { _ = q.Stop(context.WithoutCancel(ctx)) }()
	payload := strings.Repeat("x", 64)
	pushed := 0
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	for {
		now := <-tick.C
		elapsed := now.Sub(start)
		if elapsed > dur {
			elapsed = dur
		}
		for want := int(elapsed.Seconds() * float64(rate)); pushed < want; pushed++ {
			q.Push("peer-slow", benchDelivery(pushed, payload))
		}
		if elapsed == dur {
			break
		}
	}
	tick.Stop()
	if err := q.FlushAll(ctx); err != nil {
		return forwardResult{}, err
	}
	secs := time.Since(start).Seconds()
	gs := gap.Stats()
	if got := delivered.Load() + gs.Covered + gs.AckRequired; got != uint64(pushed) {
		return forwardResult{}, fmt.Errorf("slow peer: %d delivered or shed of %d pushed", got, pushed)
	}
	return forwardResult{Workload: "slow-peer", Items: pushed, Seconds: secs, PerSec: float64(delivered.Load()) / secs,
		Dropped: gs.Dropped, Markers: gs.Markers, Delivered: delivered.Load()}, nil
}

// slowPeerScript is forward_slowpeer.mjs: the slow-peer workload on the
// reference queue, run under Node on the anchor folder's forwardQueue.mjs.
//
//go:embed forward_slowpeer.mjs
var slowPeerScript string

// runSlowPeerAnchor runs slowPeerScript under Node on the anchor folder's
// forwardQueue.mjs.
func runSlowPeerAnchor(ctx context.Context, dir string, rate int, rtt, dur time.Duration) (forwardResult, error) {
	mod, err := filepath.Abs(filepath.Join(dir, "forwardQueue.mjs"))
	if err != nil {
		return forwardResult{}, err
	}
	if _, err := os.Stat(mod); err != nil {
		return forwardResult{}, fmt.Errorf("reference queue module: %w", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return forwardResult{}, fmt.Errorf("find node: %w", err)
	}
	url := (&neturl.URL{Scheme: "file", Path: filepath.ToSlash(mod)}).String()
	c := exec.CommandContext(ctx, node, "--input-type=module", "-e", slowPeerScript, url,
		strconv.Itoa(rate), strconv.FormatInt(rtt.Milliseconds(), 10), strconv.FormatInt(dur.Milliseconds(), 10))
	var stderr bytes.Buffer
	c.Stderr = &stderr
	raw, err := c.Output()
	if err != nil {
		return forwardResult{}, fmt.Errorf("node: %w %s", err, strings.TrimSpace(stderr.String()))
	}
	var r forwardResult
	if err := json.Unmarshal(bytes.TrimSpace(raw), &r); err != nil {
		return forwardResult{}, fmt.Errorf("node output %q: %w", raw, err)
	}
	return r, nil
}
