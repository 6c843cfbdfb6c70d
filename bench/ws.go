package bench

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard-dev/switchyard/persist"
)

// WSConfig configures bench ws: the watch gateway of a `switchyard up`
// process against Centrifugo, both in processes of their own, driven by
// bench events' reader loop.
type WSConfig struct {
	// Watchers is the number of WebSocket watchers of the one stream (on
	// Centrifugo: subscribers of the one channel). Zero means 1000.
	Watchers int
	// Rate is the writer's sets (publishes) per second. Zero means 100.
	Rate int
	// Duration is how long the writer writes. Zero means 5s.
	Duration time.Duration
	// ValueSize is the size of each value. Zero means 128 bytes.
	ValueSize int
	// Publishers is how many sets may be in flight. Zero means 16.
	Publishers int
	// UpCmd is the argv that runs the switchyard binary (`up` and its
	// flags are appended). Empty: our side is not run.
	UpCmd []string
	// UpProfile, when set, is where our up writes a CPU profile of its
	// whole life.
	UpProfile string
	// Centrifugo is the Centrifugo binary. Empty: Centrifugo is not run.
	Centrifugo string
	// Dir holds the servers' data, configs and logs. Empty means a temp
	// dir.
	Dir string
}

// events is the load as bench events' machinery runs it: every watcher on
// one channel.
func (c WSConfig) events() EventsConfig {
	return EventsConfig{
		Subscribers: c.Watchers, Rate: c.Rate, Duration: c.Duration, Payload: c.ValueSize, Shared: true,
		Publishers: c.Publishers, UpCmd: c.UpCmd, UpProfile: c.UpProfile, Centrifugo: c.Centrifugo, Dir: c.Dir,
	}.withDefaults()
}

// Check refuses a load that cannot run. The watch gateway has no rate
// limit, so unlike bench events' any rate and duration go.
func (c WSConfig) Check() error {
	e := c.events()
	if e.Subscribers < 1 || e.Rate < 1 || e.Duration <= 0 || e.Publishers < 1 || e.Payload < len(eventsMarker)+20 {
		return fmt.Errorf("--watchers, --rate, --duration and --publishers must be positive and --value-size at least %d", len(eventsMarker)+20)
	}
	return nil
}

// RunWS runs the same load on our watch gateway (/ws/watch of a separate
// `switchyard up` process) and on Centrifugo without and with history (a
// separate process each), one after the other, each a fresh server: the
// watchers connect (the idle memory is read), one warm-up write reaches
// all of them, then a writer sets cfg.Rate values a second for
// cfg.Duration. The stream (on Centrifugo the channel) is bench events'
// shared one: bench/shared, and shared.
func RunWS(ctx context.Context, cfg WSConfig, p Progress) (EventsResult, error) {
	e := cfg.events()
	res := EventsResult{Subscribers: e.Subscribers, Shared: true, Rate: e.Rate, Duration: e.Duration, Payload: e.Payload,
		Layout: fmt.Sprintf("%d watchers of one stream (Centrifugo: subscribers of one channel), %d sets/s of %d bytes for %s", e.Subscribers, e.Rate, e.Payload, e.Duration)}
	if err := cfg.Check(); err != nil {
		return res, err
	}
	var sides []fanoutSide
	if len(e.UpCmd) > 0 {
		sides = append(sides, fanoutSide{ServerOurs, func(dir string, round int) (eventsServer, error) {
			s, err := startOurs(ctx, e.UpCmd, dir, "switchyard-up", "", roundProfile(e.UpProfile, round), nil)
			if err != nil {
				return nil, err
			}
			return watchServer{s}, nil
		}})
	}
	sides = append(sides, centrifugoSides(ctx, e.Centrifugo, e.Publishers)...)
	var err error
	res.Runs, res.Each, err = runFanout(ctx, e, sides, true, "switchyard-bench-ws-", p)
	return res, err
}

// WSLost is nil when every server of a bench ws result delivered every
// write to every watcher, or a watch gateway's skipped message named it;
// else an error naming each server (and round, with more than one) and
// how many deliveries it lost. A resync names none (see gapEvents): it
// ends its watcher's watch and bench ws does not reconnect, so what
// follows it is lost to that watcher. The gateway has no rate limit and
// every server is expected to keep up, so a loss is a broken run, not a
// slow one: the figures are printed either way, and a script that reads
// the exit code must not take such a run for a good one.
func WSLost(r EventsResult) error {
	return r.lost("ws", func(rr EventsRun) string {
		return fmt.Sprintf("%d delivered, %d named by skipped messages; resync and skipped messages: %d", rr.Delivered, rr.GapEvents, rr.Gaps)
	})
}

// watchServer is `switchyard up --no-work --servers 1` and its watch
// gateway: a channel is a stream of the scope bench, a watcher is a
// /ws/watch of it from the changes after it connects (no from), and a
// publish is a keyed set of a new key through a persist client on up's
// NATS, committed to SQLite before any watcher sees it.
type watchServer struct{ *oursServer }

// subscribe opens /ws/watch on the stream ch and returns once its ready
// message says the watch is in place.
func (s watchServer) subscribe(ctx context.Context, ch string) (*websocket.Conn, error) {
	q := url.Values{"scope": {eventsScope}, "stream": {ch}}
	c, _, err := websocket.Dial(ctx, "ws://"+s.http+"/ws/watch?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("dial /ws/watch: %w", err)
	}
	c.SetReadLimit(-1)
	if err := expectMsg(ctx, c, `"type":"ready"`); err != nil {
		_ = c.CloseNow()
		return nil, err
	}
	return c, nil
}

// publish sets payload under a key of its own, so no set replaces another
// (which would send the watchers a delete beside it).
func (s watchServer) publish(ctx context.Context, ch string, seq int64, payload []byte) error {
	_, err := s.client.Stream(eventsScope, ch).Set(ctx, payload, persist.SetOptions{Key: "m" + strconv.FormatInt(seq, 10)})
	if err != nil {
		return fmt.Errorf("set %s/%s: %w", eventsScope, ch, err)
	}
	return nil
}
