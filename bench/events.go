package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/switchyard-dev/switchyard/events"
	"github.com/switchyard-dev/switchyard/web/eventsws"
)

// EventsConfig configures bench events.
type EventsConfig struct {
	// Subscribers is the number of WebSocket subscribers on each server.
	// Zero means 1000.
	Subscribers int
	// Rate is publishes per second, across all channels. Zero means 100.
	Rate int
	// Duration is how long the publisher publishes. Zero means 5s.
	Duration time.Duration
	// Payload is the size of each published value. Zero means 128 bytes.
	Payload int
	// Shared puts every subscriber on one channel (anchor), so each
	// publish is delivered to all of them; otherwise each subscriber has a
	// channel of its own and the publishes go round the channels.
	Shared bool
	// Publishers is how many publishes may be in flight. Zero means 16.
	Publishers int
	// Users is how many bus users our subscribers log in as, round robin
	// (tenants of the bench scope, under `up --auth`). Zero means one per
	// subscriber when Shared puts more than events.MaxMatchedPerOwner of
	// them on one anchor (one event reaches at most that many
	// subscriptions of one owner, the rest get gap markers), else none: up
	// runs without --auth and every socket is the user anonymous.
	// Centrifugo's clients are anonymous either way.
	Users int
	// UpCmd is the argv that runs the switchyard binary (`up` and its
	// flags are appended). Empty: our side is not run.
	UpCmd []string
	// UpProfile, when set, is where our up writes a CPU profile of its
	// whole life (start, subscribers, fan-out).
	UpProfile string
	// Centrifugo is the Centrifugo binary. Empty: Centrifugo is not run.
	Centrifugo string
	// Dir holds the servers' data, configs and logs. Empty means a temp
	// dir.
	Dir string
	// CrossRegion also runs ours across two regions on loopback (two `up
	// --region` joined by the forward queue): subscribers on one,
	// publishes through the other. Needs UpCmd.
	CrossRegion bool
	// PublishCost also measures, on each server after its fan-out, the
	// same publishes with every subscriber gone (CPUPerPublish), so that
	// the CPU per delivery splits into what publishing costs and what
	// delivering adds (FanoutCPUPerDelivery).
	PublishCost bool
	// Window is our up's coalescing window (its --events-window). Zero
	// means up's default, events.CoalesceWindowDefault; events.NoCoalescing
	// none, so that the latency is the machinery's alone.
	Window time.Duration
	// Rounds is how many times each server is measured, the servers
	// taking turns (the first of each round the next one along, so no
	// server is always first after the machine's quiet moment); the
	// result is each server's median over its rounds (medianRun). On a
	// shared 2-core machine one run's CPU and p99 spread by a quarter
	// and more. Zero means 1.
	Rounds int
	// Packs runs our up with --packs N: its streams (each channel's, the
	// presence rows') in N shared files. Zero: a file each.
	Packs int
}

// upFlags are the flags of our up that the config sets.
func (c EventsConfig) upFlags() []string {
	var f []string
	if c.Packs > 0 {
		f = append(f, "--packs", strconv.Itoa(c.Packs))
	}
	switch c.Window {
	case 0:
		return f
	case events.NoCoalescing:
		return append(f, "--events-window", "0")
	}
	return append(f, "--events-window", c.Window.String())
}

// window is our up's coalescing window; 0 for none.
func (c EventsConfig) window() time.Duration {
	switch c.Window {
	case 0:
		return events.CoalesceWindowDefault
	case events.NoCoalescing:
		return 0
	}
	return c.Window
}

func (c EventsConfig) withDefaults() EventsConfig {
	if c.Subscribers == 0 {
		c.Subscribers = 1000
	}
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Payload == 0 {
		c.Payload = 128
	}
	if c.Publishers == 0 {
		c.Publishers = 16
	}
	if c.Rounds == 0 {
		c.Rounds = 1
	}
	if c.Users == 0 && c.Shared && c.Subscribers > events.MaxMatchedPerOwner {
		c.Users = c.Subscribers
	}
	return c
}

// EventsRateLimit is the events layer's limit of deliveries per
// subscription per sliding minute; bench events keeps below it so that it
// measures deliveries, not gap markers.
const EventsRateLimit = 600

// PerSubscription is how many deliveries one subscription gets in a run.
func (c EventsConfig) PerSubscription() int {
	c = c.withDefaults()
	total := int(float64(c.Rate) * c.Duration.Seconds())
	if c.Shared {
		return total
	}
	return (total + c.Subscribers - 1) / c.Subscribers
}

// Check refuses a configuration whose subscriptions would pass the
// events layer's rate limit within the run (which lasts under a minute).
func (c EventsConfig) Check() error {
	c = c.withDefaults()
	if c.Rounds < 0 {
		return errors.New("--rounds must not be negative")
	}
	if c.Users < 0 {
		return errors.New("--users must not be negative")
	}
	if c.Window < 0 && c.Window != events.NoCoalescing {
		return errors.New("--window must not be negative (0: none)")
	}
	if c.Subscribers < 1 || c.Rate < 1 || c.Duration <= 0 || c.Publishers < 1 || c.Payload < len(eventsMarker)+20 {
		return fmt.Errorf("--subscribers, --rate, --duration and --publishers must be positive and --payload at least %d", len(eventsMarker)+20)
	}
	if c.Duration > time.Minute {
		return errors.New("--duration is at most 1m (the rate limit's window; see --help)")
	}
	if c.Shared && c.Users > 0 && (c.Subscribers+c.Users-1)/c.Users > events.MaxMatchedPerOwner {
		return fmt.Errorf("%d subscribers of one anchor as %d users: one event reaches at most %d subscriptions of one user (the rest get gap markers); give more --users", c.Subscribers, c.Users, events.MaxMatchedPerOwner)
	}
	if c.Users > 0 && (c.Subscribers+c.Users-1)/c.Users > eventsws.TenantConnectionsDefault {
		return fmt.Errorf("%d subscribers as %d users: the events gateway takes at most %d sockets of one user (the rest are refused 429); give more --users", c.Subscribers, c.Users, eventsws.TenantConnectionsDefault)
	}
	if n := c.PerSubscription(); n > EventsRateLimit-10 {
		return fmt.Errorf("%d deliveries per subscription in %s: the events layer delivers at most %d per subscription a minute and turns the rest into gap markers; lower --rate or --duration", n, c.Duration, EventsRateLimit)
	}
	return nil
}

// EventsRun is what one server measured.
type EventsRun struct {
	Server      string  `json:"server"`
	Subscribers int     `json:"subscribers"`
	Channels    int     `json:"channels"`
	Published   int64   `json:"published"`
	PublishRate float64 `json:"publish_rate"` // publishes/s reached
	Expected    int64   `json:"expected"`     // deliveries the publishes call for
	Delivered   int64   `json:"delivered"`
	// DeliveredRate is deliveries per second, from the first publish to
	// the last delivery.
	DeliveredRate float64       `json:"delivered_per_sec"`
	P50           time.Duration `json:"p50_ns"`
	P99           time.Duration `json:"p99_ns"`
	// PublishP50 and PublishP99 are of the time a publish takes to be
	// acknowledged (ours: the set committed and answered; Centrifugo: its
	// HTTP API's answer), from the same clock as P50 and P99: how much of
	// those the publish alone accounts for.
	PublishP50 time.Duration `json:"publish_p50_ns"`
	PublishP99 time.Duration `json:"publish_p99_ns"`
	// CPUPerDelivery is the server process's CPU time (user and system)
	// from the first publish to the last delivery, over the deliveries.
	CPUPerDelivery time.Duration `json:"cpu_per_delivery_ns"`
	// PeakRSS is the most resident memory of the server process sampled
	// during the fan-out.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// IdleRSSPerSub is the server's RSS growth per subscriber, connected
	// and subscribed but idle, before the fan-out.
	IdleRSSPerSub float64 `json:"idle_rss_per_subscriber_bytes"`
	Gaps          int64   `json:"gaps"` // gap messages (ours: gap, resync, skipped)
	// GapEvents is how many events the gap messages stand for: the sum of
	// their counts (1 for a message without one; 0 for the watch
	// gateway's resync, after which its watcher gets nothing more).
	GapEvents int64 `json:"gap_events"`
	// CPUPerPublish (with EventsConfig.PublishCost) is the server's CPU
	// time per publish of the same load published again with no
	// subscriber: on ours the durable write and its change feed, on
	// Centrifugo its HTTP API call (and history).
	CPUPerPublish time.Duration `json:"cpu_per_publish_ns,omitempty"`
}

// Missing is how many of the deliveries r's publishes called for neither
// arrived nor were named by a gap marker: lost without a word.
func (r EventsRun) Missing() int64 {
	return max(r.Expected-r.Delivered-r.GapEvents, 0)
}

// FanoutCPUPerDelivery is what delivering adds to publishing, per
// delivery: the CPU of the fan-out run less CPUPerPublish for each of its
// publishes, over the deliveries. Zero without CPUPerPublish.
func (r EventsRun) FanoutCPUPerDelivery() time.Duration {
	if r.CPUPerPublish == 0 || r.Delivered == 0 {
		return 0
	}
	total := r.CPUPerDelivery*time.Duration(r.Delivered) - r.CPUPerPublish*time.Duration(r.Published)
	return max(total, 0) / time.Duration(r.Delivered)
}

// EventsResult is what RunEvents measured.
type EventsResult struct {
	Subscribers int           `json:"subscribers"`
	Shared      bool          `json:"shared"`
	Rate        int           `json:"rate"`
	Duration    time.Duration `json:"duration_ns"`
	Payload     int           `json:"payload"`
	Users       int           `json:"users"` // our subscribers' bus users (0: anonymous, no --auth)
	// Window is our up's coalescing window (0: none).
	Window time.Duration `json:"window_ns"`
	// Layout, when set, describes the load in the printed table's first
	// line in place of bench events' own words (bench ws sets it).
	Layout string `json:"layout,omitempty"`
	// Runs is each server's figures: with Rounds above 1, the median of
	// its rounds (medianRun), whose every run is in Each.
	Runs   []EventsRun `json:"runs"`
	Rounds int         `json:"rounds"`
	// Each is every round of every server, Each[i] the rounds of Runs[i]
	// in order; nil with one round.
	Each [][]EventsRun `json:"each_round,omitempty"`
}

// Lost is nil when every server delivered, in every round, each delivery
// its publishes called for or a gap marker for it; else an error naming
// each server (and round, with more than one) and how many it lost. Every
// server is expected to deliver every publish at the loads Check allows,
// so a loss is a broken server, not a slow one: the figures are printed
// either way, and a script that reads the exit code must not take such a
// run for a good one.
func (r EventsResult) Lost() error {
	return r.lost("events", func(rr EventsRun) string {
		return fmt.Sprintf("%d delivered, %d named by gap markers", rr.Delivered, rr.GapEvents)
	})
}

// lost is Lost's and WSLost's error, prefixed by bench, each server's (and
// round's) loss followed by detail in parentheses; nil when none lost any.
func (r EventsResult) lost(bench string, detail func(EventsRun) string) error {
	var parts []string
	for i, run := range r.Runs {
		rounds := []EventsRun{run}
		if i < len(r.Each) {
			rounds = r.Each[i]
		}
		for k, rr := range rounds {
			n := rr.Missing()
			if n == 0 {
				continue
			}
			name := run.Server
			if len(rounds) > 1 {
				name += fmt.Sprintf(" round %d", k+1)
			}
			parts = append(parts, fmt.Sprintf("%s lost %d of %d deliveries (%s)", name, n, rr.Expected, detail(rr)))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%s: deliveries lost (the figures printed are what was measured): %s", bench, strings.Join(parts, "; "))
}

// Server names in EventsRun.
const (
	ServerOurs              = "switchyard"
	ServerOursCross         = "switchyard-cross-region"
	ServerCentrifugo        = "centrifugo"
	ServerCentrifugoHistory = "centrifugo+history"
)

// RunEvents runs the same load on our events WebSocket API (a separate
// `switchyard up` process) and on Centrifugo without and with history (a
// separate process each), one after the other, each with a fresh server.
func RunEvents(ctx context.Context, cfg EventsConfig, p Progress, w io.Writer) (EventsResult, error) {
	cfg = cfg.withDefaults()
	res := EventsResult{Subscribers: cfg.Subscribers, Shared: cfg.Shared, Rate: cfg.Rate, Duration: cfg.Duration, Payload: cfg.Payload, Users: cfg.Users, Window: cfg.window(), Rounds: cfg.Rounds}
	if err := cfg.Check(); err != nil {
		return res, err
	}
	var sides []fanoutSide
	// The bus users, made once in the run's directory by the first side
	// of ours that starts (runFanout gives every side the same dir).
	var users *eventsUsers
	usersIn := func(dir string) (*eventsUsers, error) {
		if cfg.Users == 0 || users != nil {
			return users, nil
		}
		u, err := makeEventsUsers(dir, cfg.Users)
		users = u
		return u, err
	}
	stream := "own"
	if cfg.Shared {
		stream = "shared"
	}
	if len(cfg.UpCmd) > 0 {
		sides = append(sides, fanoutSide{ServerOurs, func(dir string, round int) (eventsServer, error) {
			users, err := usersIn(dir)
			if err != nil {
				return nil, err
			}
			return startOurs(ctx, cfg.UpCmd, dir, "switchyard-up", stream, roundProfile(cfg.UpProfile, round), users, cfg.upFlags()...)
		}})
		if cfg.CrossRegion {
			sides = append(sides, fanoutSide{ServerOursCross, func(dir string, round int) (eventsServer, error) {
				profile := ""
				if cfg.UpProfile != "" {
					profile = roundProfile(cfg.UpProfile+".cross", round)
				}
				users, err := usersIn(dir)
				if err != nil {
					return nil, err
				}
				return startCross(ctx, cfg.UpCmd, dir, stream, profile, users, cfg.upFlags()...)
			}})
		}
	}
	sides = append(sides, centrifugoSides(ctx, cfg.Centrifugo, cfg.Publishers)...)
	var err error
	res.Runs, res.Each, err = runFanout(ctx, cfg, sides, false, "switchyard-bench-events-", p)
	return res, err
}

// fanoutSide is one server a fan-out run (bench events, bench ws)
// measures: its name in the results and how to start a fresh one whose
// data, configs and logs go in dir.
type fanoutSide struct {
	name string
	// start starts the server on dir for round (1 for the first).
	start func(dir string, round int) (eventsServer, error)
}

// roundProfile is where our up writes its CPU profile in round (1 for
// the first): path itself in the first round, path.roundN in round N, so
// that no round's profile overwrites another's. Empty stays empty.
func roundProfile(path string, round int) string {
	if path == "" || round <= 1 {
		return path
	}
	return path + ".round" + strconv.Itoa(round)
}

// centrifugoSides are Centrifugo without and with history, or none when
// bin is empty.
func centrifugoSides(ctx context.Context, bin string, publishers int) []fanoutSide {
	if bin == "" {
		return nil
	}
	var sides []fanoutSide
	for _, h := range []bool{false, true} {
		name := ServerCentrifugo
		if h {
			name = ServerCentrifugoHistory
		}
		sides = append(sides, fanoutSide{name, func(dir string, _ int) (eventsServer, error) {
			return startCentrifugo(ctx, bin, dir, h, publishers)
		}})
	}
	return sides
}

// runFanout runs cfg's load on each side in turn, each a fresh server
// stopped before the next starts, in cfg.Dir or a temp dir named after
// tmpPrefix, cfg.Rounds times (see EventsConfig.Rounds). It returns each
// side's figures (with more than one round, their medians) and, with more
// than one round, every round of each. warm: see measureEvents.
func runFanout(ctx context.Context, cfg EventsConfig, sides []fanoutSide, warm bool, tmpPrefix string, p Progress) ([]EventsRun, [][]EventsRun, error) {
	if len(sides) == 0 {
		return nil, nil, errors.New("no server to measure")
	}
	rounds := max(cfg.Rounds, 1)
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", tmpPrefix)
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	each := make([][]EventsRun, len(sides))
	var rm Meter = nopMeter{}
	if rounds > 1 {
		rm = p.start("rounds", int64(rounds*len(sides)), "runs")
	}
	defer rm.Done()
	for r := range rounds {
		// Each round's servers start on data of their own, as the first's.
		roundDir := dir
		if r > 0 {
			roundDir = filepath.Join(dir, "round"+strconv.Itoa(r+1))
			if err := os.MkdirAll(roundDir, 0o755); err != nil {
				return nil, nil, err
			}
		}
		for k := range sides {
			i := (r + k) % len(sides)
			sd := sides[i]
			srv, err := sd.start(roundDir, r+1)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", sd.name, err)
			}
			run, err := measureEvents(ctx, cfg, srv, warm, p)
			run.Server = sd.name
			if cerr := srv.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", sd.name, err)
			}
			each[i] = append(each[i], run)
			rm.Add(1)
		}
	}
	runs := make([]EventsRun, len(sides))
	for i := range sides {
		runs[i] = medianRun(each[i])
	}
	if rounds == 1 {
		each = nil
	}
	return runs, each, nil
}

// medianRun is one server's rounds as one run: each figure the median of
// its rounds (the mean of the middle two for an even number), the counts
// (published, expected, delivered, gaps) their sums, so that the
// deliveries a CPU figure is over stay consistent with it.
func medianRun(rounds []EventsRun) EventsRun {
	if len(rounds) == 1 {
		return rounds[0]
	}
	out := rounds[0]
	out.Published, out.Expected, out.Delivered, out.Gaps, out.GapEvents = 0, 0, 0, 0, 0
	for _, r := range rounds {
		out.Published += r.Published
		out.Expected += r.Expected
		out.Delivered += r.Delivered
		out.Gaps += r.Gaps
		out.GapEvents += r.GapEvents
	}
	mf := func(get func(EventsRun) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = get(r)
		}
		slices.Sort(v)
		n := len(v)
		if n%2 == 1 {
			return v[n/2]
		}
		return (v[n/2-1] + v[n/2]) / 2
	}
	md := func(get func(EventsRun) time.Duration) time.Duration {
		return time.Duration(mf(func(r EventsRun) float64 { return float64(get(r)) }))
	}
	out.PublishRate = mf(func(r EventsRun) float64 { return r.PublishRate })
	out.DeliveredRate = mf(func(r EventsRun) float64 { return r.DeliveredRate })
	out.P50 = md(func(r EventsRun) time.Duration { return r.P50 })
	out.P99 = md(func(r EventsRun) time.Duration { return r.P99 })
	out.PublishP50 = md(func(r EventsRun) time.Duration { return r.PublishP50 })
	out.PublishP99 = md(func(r EventsRun) time.Duration { return r.PublishP99 })
	out.CPUPerDelivery = md(func(r EventsRun) time.Duration { return r.CPUPerDelivery })
	out.CPUPerPublish = md(func(r EventsRun) time.Duration { return r.CPUPerPublish })
	out.PeakRSS = int64(mf(func(r EventsRun) float64 { return float64(r.PeakRSS) }))
	out.IdleRSSPerSub = mf(func(r EventsRun) float64 { return r.IdleRSSPerSub })
	return out
}

// settle is how long a server is left alone before a memory reading, so
// the work of the step before it (connecting, a GC) is done.
const settle = time.Second

// measureEvents connects the subscribers (reading the idle memory), then
// publishes for cfg.Duration and waits for the deliveries. With warm, one
// publish on every channel that every subscriber must have received goes
// after the idle memory is read and before the CPU is: our watch
// gateway's watchers confirm their first change with a read of the
// stream (see persist's Watcher.apply), a start-up cost of N reads for N
// watchers that is not the fan-out measured. The peak RSS includes it.
func measureEvents(ctx context.Context, cfg EventsConfig, srv eventsServer, warm bool, p Progress) (EventsRun, error) {
	run := EventsRun{Subscribers: cfg.Subscribers, Channels: cfg.Subscribers}
	if cfg.Shared {
		run.Channels = 1
	}
	channel := func(i int) string {
		if cfg.Shared {
			return "shared"
		}
		return "c" + strconv.Itoa(i)
	}
	pid := srv.pid()
	time.Sleep(settle)
	rss0, err := procRSS(pid)
	if err != nil {
		return run, err
	}

	subs := make([]*subscriber, cfg.Subscribers)
	var delivered atomic.Int64
	var readers sync.WaitGroup
	defer func() {
		for _, s := range subs {
			if s != nil {
				_ = s.c.CloseNow()
			}
		}
		readers.Wait()
	}()
	m := p.start("subscribe", int64(cfg.Subscribers), "subscribers")
	if err := forEach(ctx, cfg.Subscribers, 16, func(ctx context.Context, i int) error {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := srv.subscribe(dctx, channel(i))
		if err != nil {
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
		subs[i] = &subscriber{c: c}
		m.Add(1)
		return nil
	}); err != nil {
		m.Done()
		return run, err
	}
	m.Done()
	if r, ok := srv.(interface {
		ready(ctx context.Context, channels int) error
	}); ok {
		if err := r.ready(ctx, run.Channels); err != nil {
			return run, err
		}
	}
	startReaders := func() {
		for _, s := range subs {
			readers.Add(1)
			go func() {
				defer readers.Done()
				s.read(&delivered)
			}()
		}
	}
	if !warm {
		startReaders()
	}
	time.Sleep(settle)
	rss1, err := procRSS(pid)
	if err != nil {
		return run, err
	}
	run.IdleRSSPerSub = float64(rss1-rss0) / float64(cfg.Subscribers)

	// Peak RSS: sampled from here (with warm, the warm-up's first change
	// is in it) until the deliveries are in.
	stopSampling := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() {
		peak := rss1
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				sampled <- peak
				return
			case <-t.C:
				if r, err := procRSS(pid); err == nil && r > peak {
					peak = r
				}
			}
		}
	}()
	if warm {
		err := warmUp(ctx, cfg, srv, subs, channel)
		if err != nil {
			close(stopSampling)
			<-sampled
			return run, err
		}
		startReaders()
		// The server's start-up work (and its garbage) out of the CPU
		// figure.
		time.Sleep(settle)
	}
	pids := []int{pid}
	if more, ok := srv.(interface{ morePIDs() []int }); ok {
		pids = append(pids, more.morePIDs()...)
	}
	cpu0, err := procsCPU(pids)
	if err != nil {
		close(stopSampling)
		<-sampled
		return run, err
	}
	start := time.Now()
	var rtt []time.Duration
	published, err := publishPaced(ctx, cfg, srv, channel, 0, "publish", p, &rtt)
	pubEnd := time.Now()
	run.Published = published
	run.PublishRate = float64(published) / pubEnd.Sub(start).Seconds()
	run.Expected = published
	if cfg.Shared {
		run.Expected = published * int64(cfg.Subscribers)
	}
	last := drain(ctx, &delivered, run.Expected, cfg.drainWait())
	cpu1, cerr := procsCPU(pids)
	close(stopSampling)
	run.PeakRSS = <-sampled
	if err == nil {
		err = cerr
	}
	if err != nil {
		return run, err
	}
	var lat []time.Duration
	for _, s := range subs {
		l, g, ge := s.take()
		lat = append(lat, l...)
		run.Gaps += g
		run.GapEvents += ge
	}
	run.Delivered = int64(len(lat))
	if run.Delivered > 0 {
		slices.Sort(lat)
		run.P50, run.P99 = pct(lat, 0.50), pct(lat, 0.99)
	}
	if len(rtt) > 0 {
		slices.Sort(rtt)
		run.PublishP50, run.PublishP99 = pct(rtt, 0.50), pct(rtt, 0.99)
	}
	if run.Delivered > 0 {
		run.DeliveredRate = float64(run.Delivered) / last.Sub(start).Seconds()
		run.CPUPerDelivery = (cpu1 - cpu0) / time.Duration(run.Delivered)
	}
	if cfg.PublishCost {
		// The subscribers leave first (and the server forgets them): the
		// same publishes then cost what publishing alone costs. The keys
		// go on from the fan-out's, so nothing is replaced.
		for i, s := range subs {
			_ = s.c.CloseNow()
			subs[i] = nil
		}
		readers.Wait()
		time.Sleep(settle)
		cpuA, err := procsCPU(pids)
		if err != nil {
			return run, err
		}
		n, err := publishPaced(ctx, cfg, srv, channel, published, "publish alone", p, nil)
		cpuB, cerr := procsCPU(pids)
		if err == nil {
			err = cerr
		}
		if err != nil {
			return run, err
		}
		if n > 0 {
			run.CPUPerPublish = (cpuB - cpuA) / time.Duration(n)
		}
	}
	return run, nil
}

// procsCPU is the CPU time of the processes, summed.
func procsCPU(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, p := range pids {
		d, err := procCPU(p)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// publishPaced publishes cfg.Rate a second for cfg.Duration, with up to
// cfg.Publishers in flight, each payload carrying its publish time, and
// returns how many it published. Publish i has the sequence number
// first+i (on ours, its key).
// rtt, if not nil, gets the time each publish took to be acknowledged
// (ours: the set committed; Centrifugo: its API's answer).
func publishPaced(ctx context.Context, cfg EventsConfig, srv eventsServer, channel func(int) string, first int64, what string, p Progress, rtt *[]time.Duration) (int64, error) {
	total := int(float64(cfg.Rate) * cfg.Duration.Seconds())
	m := p.start(what, int64(total), "publishes")
	defer m.Done()
	period := time.Second / time.Duration(cfg.Rate)
	start := time.Now()
	took := make([]time.Duration, total) // each index written by its own publish
	defer func() {
		if rtt != nil {
			*rtt = slices.DeleteFunc(took, func(d time.Duration) bool { return d == 0 })
		}
	}()
	var published atomic.Int64
	err := forEach(ctx, total, cfg.Publishers, func(ctx context.Context, i int) error {
		// Publish i is due at start + i × period; a publisher that is
		// behind publishes at once.
		if d := time.Until(start.Add(time.Duration(i) * period)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		ch := i
		if !cfg.Shared {
			ch = i % cfg.Subscribers
		}
		at := time.Now()
		if err := srv.publish(ctx, channel(ch), first+int64(i), eventsPayload(cfg.Payload, at)); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
		took[i] = max(time.Since(at), 1)
		published.Add(1)
		m.Add(1)
		return nil
	})
	return published.Load(), err
}

// drainIdle is how long drain waits past a coalescing window with no new
// delivery before it gives up on the rest: the path's own time after the
// window closes, with room for a loaded machine.
const drainIdle = 3 * time.Second

// drainWait is how long drain waits with no new delivery: a coalescing
// window that opened with the last publish holds its delivery for the
// whole window, so the wait is the window and drainIdle past it. The
// window is our up's; a server without one (Centrifugo, the watch
// gateway) delivers sooner, and waits that much longer only when a
// delivery is missing.
func (c EventsConfig) drainWait() time.Duration { return c.window() + drainIdle }

// drain waits until delivered reaches want or stops growing for idle, and
// returns when the last delivery was seen.
func drain(ctx context.Context, delivered *atomic.Int64, want int64, idle time.Duration) time.Time {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last, lastAt := delivered.Load(), time.Now()
	for last < want && time.Since(lastAt) < idle {
		select {
		case <-ctx.Done():
			return lastAt
		case <-t.C:
		}
		if n := delivered.Load(); n != last {
			last, lastAt = n, time.Now()
		}
	}
	return lastAt
}

// forEach runs fn for 0..n-1 on up to par goroutines, in order of i, and
// returns the first error (the rest are skipped).
func forEach(ctx context.Context, n, par int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(par, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// PrintEventsResult writes res as a table and the ratios of ours to each
// Centrifugo run, or as JSON.
func PrintEventsResult(w io.Writer, res EventsResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if res.Layout != "" {
		fmt.Fprintln(w, res.Layout)
	} else {
		layout := "each subscriber on its own channel"
		if res.Shared {
			layout = "all subscribers on one channel"
		}
		if res.Users > 0 {
			layout += fmt.Sprintf(", ours logged in as %d bus users (up --auth)", res.Users)
		}
		if res.Window > 0 {
			layout += fmt.Sprintf(", ours coalescing in %s windows", res.Window)
		} else {
			layout += ", ours with no coalescing window"
		}
		fmt.Fprintf(w, "%d subscribers, %s, %d publishes/s of %d bytes for %s\n", res.Subscribers, layout, res.Rate, res.Payload, res.Duration)
	}
	if res.Rounds > 1 {
		fmt.Fprintf(w, "each figure is the server's median over %d rounds, the servers taking turns (counts are sums)\n", res.Rounds)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "server\tpublished/s\tdelivered\tdelivered/s\tp50\tp99\tpublish p50/p99\tserver CPU/delivery\tpeak RSS\tRSS/idle subscriber\tgaps")
	for _, r := range res.Runs {
		fmt.Fprintf(tw, "%s\t%.0f\t%d/%d\t%.0f\t%s\t%s\t%s/%s\t%.1fµs\t%.1f MiB\t%.1f KiB\t%d\n", r.Server, r.PublishRate, r.Delivered, r.Expected, r.DeliveredRate,
			fmtMs(r.P50), fmtMs(r.P99), fmtMs(r.PublishP50), fmtMs(r.PublishP99), float64(r.CPUPerDelivery)/float64(time.Microsecond), float64(r.PeakRSS)/(1<<20), r.IdleRSSPerSub/1024, r.Gaps)
	}
	tw.Flush()
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	ours := slices.IndexFunc(res.Runs, func(r EventsRun) bool { return r.Server == ServerOurs })
	if slices.ContainsFunc(res.Runs, func(r EventsRun) bool { return r.CPUPerPublish > 0 }) {
		us := func(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond)) }
		fmt.Fprintln(tw, "server\tCPU/publish, no subscriber\tCPU/delivery less the publishes")
		for _, r := range res.Runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Server, us(r.CPUPerPublish), us(r.FanoutCPUPerDelivery()))
		}
		for _, r := range res.Runs {
			if ours < 0 || r.Server == ServerOurs || r.Server == ServerOursCross {
				continue
			}
			o := res.Runs[ours]
			fmt.Fprintf(tw, "ours / %s\t%s\t%s\n", r.Server, ratio(float64(o.CPUPerPublish), float64(r.CPUPerPublish)),
				ratio(float64(o.FanoutCPUPerDelivery()), float64(r.FanoutCPUPerDelivery())))
		}
		tw.Flush()
	}
	if ours < 0 {
		return nil
	}
	o := res.Runs[ours]
	if cross := slices.IndexFunc(res.Runs, func(r EventsRun) bool { return r.Server == ServerOursCross }); cross >= 0 {
		c := res.Runs[cross]
		fmt.Fprintln(tw, "cross / same region\tdelivered/s\tp50\tp99\tserver CPU/delivery (both regions)\t\t\t")
		fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t\t\t\n", ratio(c.DeliveredRate, o.DeliveredRate), ratio(float64(c.P50), float64(o.P50)), ratio(float64(c.P99), float64(o.P99)),
			ratio(float64(c.CPUPerDelivery), float64(o.CPUPerDelivery)))
	}
	header := false
	for _, r := range res.Runs {
		if r.Server == ServerOurs || r.Server == ServerOursCross {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "ours / theirs\tdelivered/s\tp50\tp99\tserver CPU/delivery\tpeak RSS\tRSS/idle subscriber\ttargets: CPU, p99, idle RSS <= 1.0x (vs +history)")
			header = true
		}
		fmt.Fprintf(tw, "vs %s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Server, ratio(o.DeliveredRate, r.DeliveredRate), ratio(float64(o.P50), float64(r.P50)), ratio(float64(o.P99), float64(r.P99)),
			ratio(float64(o.CPUPerDelivery), float64(r.CPUPerDelivery)), ratio(float64(o.PeakRSS), float64(r.PeakRSS)), ratio(o.IdleRSSPerSub, r.IdleRSSPerSub))
	}
	if err := tw.Flush(); err != nil || len(res.Each) != len(res.Runs) {
		return err
	}
	// Round by round, how far the ratios of the medians are from each
	// round's own.
	for i, r := range res.Runs {
		if r.Server == ServerOurs || r.Server == ServerOursCross {
			continue
		}
		var cpu, p99 []string
		for k, t := range res.Each[i] {
			if k < len(res.Each[ours]) {
				u := res.Each[ours][k]
				cpu = append(cpu, ratio(float64(u.CPUPerDelivery), float64(t.CPUPerDelivery)))
				p99 = append(p99, ratio(float64(u.P99), float64(t.P99)))
			}
		}
		fmt.Fprintf(w, "round by round, ours / %s: CPU/delivery %s; p99 %s\n", r.Server, strings.Join(cpu, " "), strings.Join(p99, " "))
	}
	return nil
}

// fmtMs prints a latency in milliseconds.
func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
