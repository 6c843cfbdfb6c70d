package work

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testwait"
	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

func listed(tbl []ShareEntry, name string) bool {
	for _, e := range tbl {
		if e.Name == name {
			return true
		}
	}
	return false
}

// TestCoordinatorStopKeepsShareWhileDraining: a stopping coordinator
// keeps its share entry renewed while its pool holds connections: while
// the chunks in flight finish, then while the connections close. Its
// share loop ended first, and the entry was renewed again only after the
// pool was closed (up to StopWait and closeWait, 27 s by default, against
// a TTL of 15 s): another process dropped it as stale and grew into
// connections still open, past the provider's limit.
func TestCoordinatorStopKeepsShareWhileDraining(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPFEnv(t, 2_000, 2)
	const limit = 2
	const ttl = time.Second
	// Another process sharing the provider, at a lower priority: it gets
	// nothing while the coordinator is registered.
	other, err := NewShare(e.st, nil, ShareConfig{Name: "other", Priority: PriorityWorker, Limit: limit, Every: 50 * time.Millisecond, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Round(ctx); err != nil {
		t.Fatal(err)
	}
	groups, _ := ParseGroups(pfGroup)
	co, err := NewCoordinator(e.st, e.pool, CoordinatorConfig{
		Planner:   PlannerConfig{Groups: groups, RangeSize: 1_000, HistoryDepth: 2_000},
		Prefetch:  PrefetchConfig{Chunk: 100},
		Share:     ShareConfig{Limit: limit, Every: 50 * time.Millisecond, TTL: ttl},
		Tick:      20 * time.Millisecond,
		TailEvery: time.Hour,
		PlanEvery: time.Hour,
		// The drain may take longer than the share's TTL (a slow server).
		StopWait: 30 * time.Second,
		Logger:   quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The server answers GROUP but holds every OVER: the chunks stay in
	// flight on both connections until the test lets them go.
	e.srv.SetFaults(nntptest.Faults{HoldOver: true})
	if err := co.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "chunks in flight on both connections", func() bool {
		return co.Prefetcher().Active() == limit && e.pool.Stats().InUse == limit
	})
	if _, err := other.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if g := other.Using(); g != 0 {
		t.Fatalf("other uses %d while the coordinator holds the limit", g)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- co.Stop(ctx) }()

	// Watch three TTLs of the drain: the coordinator's connections are
	// open all along, so its entry must stay.
	var violation string
	deadline := time.Now().Add(3 * ttl)
	tick := time.NewTicker(20 * time.Millisecond)
	for violation == "" && time.Now().Before(deadline) {
		<-tick.C
		if _, err := other.Round(ctx); err != nil {
			continue
		}
		tbl, err := e.st.ShareTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open := e.pool.Stats().Open()
		if !listed(tbl.Val, "coordinator") && open > 0 {
			violation = fmt.Sprintf("the coordinator's share entry was dropped as stale while its pool still held %d connections; the other process now uses %d of the limit %d",
				open, other.Using(), limit)
		}
	}
	tick.Stop()
	e.srv.SetFaults(nntptest.Faults{})
	if err := <-stopped; err != nil {
		t.Logf("coordinator stop: %v", err)
	}
	if err := other.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if violation != "" {
		t.Fatal(violation)
	}
}

// TestNewCoordinatorRefusesNegativeIntervals: a negative interval would
// run its loop with no pause at all (the tail planner sending GROUP back
// to back); only zero means the default.
func TestNewCoordinatorRefusesNegativeIntervals(t *testing.T) {
	t.Parallel()
	e := newPFEnv(t, 10, 2)
	for name, set := range map[string]func(*CoordinatorConfig){
		"Tick":                 func(c *CoordinatorConfig) { c.Tick = -time.Second },
		"TailEvery":            func(c *CoordinatorConfig) { c.TailEvery = -time.Second },
		"PlanEvery":            func(c *CoordinatorConfig) { c.PlanEvery = -time.Second },
		"ProgressEvery":        func(c *CoordinatorConfig) { c.ProgressEvery = -time.Second },
		"StopWait":             func(c *CoordinatorConfig) { c.StopWait = -time.Second },
		"Share.Every":          func(c *CoordinatorConfig) { c.Share.Every = -time.Second },
		"Lease.AbandonedEvery": func(c *CoordinatorConfig) { c.Lease.AbandonedEvery = -time.Second },
	} {
		cfg := CoordinatorConfig{Logger: quietLogger()}
		set(&cfg)
		if _, err := NewCoordinator(e.st, e.pool, cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("NewCoordinator with a negative %s: %v, want an error naming it", name, err)
		}
	}
}
