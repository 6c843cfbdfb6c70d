package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/events"
)

// TestEventsConfigUsers: a shared anchor past the events layer's fan-out
// per user gets a bus user per subscriber unless told otherwise, and too
// few users for the subscribers is refused rather than measured as gaps.
func TestEventsConfigUsers(t *testing.T) {
	base := EventsConfig{Rate: 10, Duration: time.Second}
	for _, tc := range []struct {
		name      string
		cfg       func(EventsConfig) EventsConfig
		wantUsers int
		wantErr   string
	}{
		{"own channels stay anonymous", func(c EventsConfig) EventsConfig { c.Subscribers = 1000; return c }, 0, ""},
		{"shared within the cap", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared = events.MaxMatchedPerOwner, true
			return c
		}, 0, ""},
		{"shared past the cap", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared = 1000, true
			return c
		}, 1000, ""},
		{"shared, enough users", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared, c.Users = 1000, true, 20
			return c
		}, 20, ""},
		{"shared, too few users", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Shared, c.Users = 1000, true, 19
			return c
		}, 19, "give more --users"},
		// (Was: measured, with the sockets past the gateway's bound per
		// user refused.)
		{"own channels, too many sockets per user", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Users = 1000, 9
			return c
		}, 9, "sockets of one user"},
		{"own channels, users enough for the sockets", func(c EventsConfig) EventsConfig {
			c.Subscribers, c.Users = 1000, 10
			return c
		}, 10, ""},
		{"negative", func(c EventsConfig) EventsConfig { c.Users = -1; return c }, -1, "must not be negative"},
		{"negative rounds", func(c EventsConfig) EventsConfig { c.Rounds = -1; return c }, 0, "--rounds must not be negative"},
	} {
		cfg := tc.cfg(base)
		err := cfg.Check()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: Check() = %v, want %q", tc.name, err, tc.wantErr)
		}
		if got := cfg.withDefaults().Users; got != tc.wantUsers {
			t.Errorf("%s: users %d, want %d", tc.name, got, tc.wantUsers)
		}
	}
}

// TestMedianRun: a server's rounds become one run whose figures are the
// medians (the middle two's mean for an even count) and whose counts are
// sums; one round is itself.
func TestMedianRun(t *testing.T) {
	r := func(cpu, p99 time.Duration, rss int64, delivered int64) EventsRun {
		return EventsRun{Server: "s", CPUPerDelivery: cpu, P99: p99, PeakRSS: rss, Delivered: delivered, Expected: delivered, Published: delivered}
	}
	odd := medianRun([]EventsRun{r(300, 9, 30, 10), r(100, 1, 10, 20), r(200, 5, 20, 30)})
	if odd.CPUPerDelivery != 200 || odd.P99 != 5 || odd.PeakRSS != 20 || odd.Delivered != 60 || odd.Expected != 60 || odd.Published != 60 || odd.Server != "s" {
		t.Fatalf("three rounds: %+v", odd)
	}
	even := medianRun([]EventsRun{r(400, 8, 40, 1), r(100, 2, 10, 1), r(300, 4, 30, 1), r(200, 6, 20, 1)})
	if even.CPUPerDelivery != 250 || even.P99 != 5 || even.PeakRSS != 25 || even.Delivered != 4 {
		t.Fatalf("four rounds: %+v", even)
	}
	one := r(7, 7, 7, 7)
	if got := medianRun([]EventsRun{one}); got != one {
		t.Fatalf("one round: %+v", got)
	}
}

// TestEventsCheckRefusesNegativePublishers: Check refuses Publishers below
// zero, as WSConfig.Check does. (Was: accepted, and publishPaced's forEach
// started no goroutine, so nothing was published and the run reported
// zeros as a success.)
func TestEventsCheckRefusesNegativePublishers(t *testing.T) {
	t.Parallel()
	cfg := EventsConfig{Subscribers: 10, Rate: 10, Duration: time.Second, Publishers: -1}
	if err := cfg.Check(); err == nil {
		t.Fatal("Check accepted Publishers -1: the run would publish nothing and report success")
	}
}

// TestEventsLost: a run in which a server (any of ours, cross-region or
// Centrifugo, in any round) delivered fewer than its publishes called
// for, beyond what its gap markers name, is an error naming the server,
// the round and how many; a full run, or one whose shortfall gap markers
// account for, is not. (Was: such a run printed its figures and bench
// events exited 0, so a script could not tell a broken server from a slow
// one.)
func TestEventsLost(t *testing.T) {
	t.Parallel()
	full := func(server string) EventsRun {
		return EventsRun{Server: server, Published: 10, Expected: 30, Delivered: 30}
	}
	short := func(server string, delivered, gapEvents int64) EventsRun {
		r := full(server)
		r.Delivered, r.GapEvents, r.Gaps = delivered, gapEvents, min(gapEvents, 1)
		return r
	}
	for _, tc := range []struct {
		name string
		res  EventsResult
		want []string // in the error; none: no error
	}{
		{"every server full", EventsResult{Runs: []EventsRun{full(ServerOurs), full(ServerOursCross), full(ServerCentrifugo), full(ServerCentrifugoHistory)}}, nil},
		{"shortfall named by gap markers", EventsResult{Runs: []EventsRun{short(ServerOurs, 13, 17)}}, nil},
		{"ours short", EventsResult{Runs: []EventsRun{short(ServerOurs, 27, 0), full(ServerCentrifugo)}},
			[]string{"switchyard lost 3 of 30 deliveries"}},
		{"beyond its gap markers", EventsResult{Runs: []EventsRun{short(ServerOurs, 20, 4)}},
			[]string{"switchyard lost 6 of 30 deliveries (20 delivered, 4 named by gap markers)"}},
		{"cross-region short", EventsResult{Runs: []EventsRun{full(ServerOurs), short(ServerOursCross, 29, 0)}},
			[]string{"switchyard-cross-region lost 1 of 30"}},
		{"centrifugo short", EventsResult{Runs: []EventsRun{full(ServerOurs), full(ServerCentrifugo), short(ServerCentrifugoHistory, 0, 0)}},
			[]string{"centrifugo+history lost 30 of 30"}},
		{"one round of two short", EventsResult{Rounds: 2,
			Runs: []EventsRun{medianRun([]EventsRun{full(ServerOurs), short(ServerOurs, 25, 0)}), medianRun([]EventsRun{full(ServerCentrifugo), full(ServerCentrifugo)})},
			Each: [][]EventsRun{{full(ServerOurs), short(ServerOurs, 25, 0)}, {full(ServerCentrifugo), full(ServerCentrifugo)}}},
			[]string{"switchyard round 2 lost 5 of 30"}},
	} {
		err := tc.res.Lost()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want no error", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error, want one saying %q", tc.name, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
}

// TestGapEvents: a gap message stands for the events its count names (a
// marker merges what it covers; skipped counts the seqs it passes over),
// or one without a count; the watch gateway's resync, which ends the
// watch, for none.
func TestGapEvents(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]int64{
		`{"type":"gap","sub":"files","reason":"delivery_rate_limit","subject":"a/c.txt","count":17,"from":1,"to":2}`: 17,
		`{"type":"gap","sub":"s","reason":"matched_subscription_limit","count":1}`:                                   1,
		`{"type":"resync","from":3,"reason":"slow consumer"}`:                                                        0,
		`{"type":"skipped","count":4,"first":5,"last":8}`:                                                            4,
		`{"type":"gap","count":0}`: 1,
	} {
		if got := gapEvents([]byte(msg)); got != want {
			t.Errorf("gapEvents(%s) = %d, want %d", msg, got, want)
		}
	}
}
