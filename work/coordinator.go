package work

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/nntp"
)

// CoordinatorConfig configures a Coordinator. Zero fields take the
// defaults of config.go and of the parts' own configs.
type CoordinatorConfig struct {
	// Shard is this process's part of the prefetching. Zero means 1/1.
	Shard Shard
	// Planner, Prefetch, Lease and Share configure the parts; their Shard,
	// Name and Priority fields are set from Shard when zero.
	// Lease.AbandonedEvery is also the main shard's FinishAbandoned round,
	// which retires the done ranges older than Lease.RetainDone.
	Planner  PlannerConfig
	Prefetch PrefetchConfig
	Lease    LeaseConfig
	Share    ShareConfig
	// Tick is the prefetch round (Prefetch.Tick when that is zero). Zero
	// means TickDefault.
	Tick time.Duration
	// TailEvery: zero means TailEveryDefault.
	TailEvery time.Duration
	// PlanEvery: zero means PlanEveryDefault.
	PlanEvery time.Duration
	// StopWait bounds Stop's wait for chunks in flight. Zero means
	// StopWaitDefault.
	StopWait time.Duration
	// ProgressEvery is how often the main shard logs how far the source is
	// (only while ranges are outstanding). Zero means ProgressEveryDefault.
	ProgressEvery time.Duration
	// Logger: nil means slog.Default(). The coordinator's lines carry
	// role=coordinator; it is also the parts' Logger when theirs is nil.
	Logger *slog.Logger
}

func (c CoordinatorConfig) withDefaults() CoordinatorConfig {
	if c.Shard == (Shard{}) {
		c.Shard = Shard{Index: 1, Count: 1}
	}
	if c.Tick == 0 {
		c.Tick = TickDefault
	}
	if c.TailEvery == 0 {
		c.TailEvery = TailEveryDefault
	}
	if c.PlanEvery == 0 {
		c.PlanEvery = PlanEveryDefault
	}
	if c.Lease.AbandonedEvery == 0 {
		c.Lease.AbandonedEvery = AbandonedEveryDefault
	}
	if c.StopWait == 0 {
		c.StopWait = StopWaitDefault
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = ProgressEveryDefault
	}
	c.Prefetch.Shard = c.Shard
	if c.Prefetch.Tick == 0 {
		c.Prefetch.Tick = c.Tick
	}
	if c.Prefetch.Logger == nil {
		c.Prefetch.Logger = c.Logger
	}
	if c.Share.Name == "" {
		c.Share.Name = "coordinator"
		if c.Shard.Count > 1 {
			c.Share.Name = "coordinator " + c.Shard.String()
		}
	}
	if c.Share.Priority == 0 {
		c.Share.Priority = PriorityCoordinator
	}
	return c
}

// closeWait bounds closing the pool and leaving the share at Stop, each: a
// provider that does not answer QUIT holds a connection for its QUIT
// timeout and grace (10 s) before the pool lets it go.
const closeWait = 12 * time.Second

// Coordinator runs a coordinator shard: its share of the provider's
// connections, the prefetcher, and on the main shard the planner and the
// finishing of abandoned leases, each in a loop of its own that logs a
// failing round and goes on.
type Coordinator struct {
	cfg      CoordinatorConfig
	st       *Store
	pool     *nntp.Pool
	share    *Share
	prefetch *Prefetcher
	planner  *Planner
	leases   *Leases
	log      *slog.Logger

	base lifecycle.Base // the loops run in its run context
	// wg counts the loops. The prefetcher runs its own, with an end of its
	// own: Stop lets its last round finish (chunks in flight written, their
	// range marked spooled) before it cancels anything.
	wg sync.WaitGroup
	// The share loop ends last, apart from the others: it renews the
	// entry that counts the connections the prefetcher's last round still
	// holds, which the other processes would take over once it is stale.
	shareWG     sync.WaitGroup
	shareCancel context.CancelFunc
}

// NewCoordinator builds a coordinator on st that fetches through pool. The
// coordinator owns pool from Start on: Stop closes it.
func NewCoordinator(st *Store, pool *nntp.Pool, cfg CoordinatorConfig) (*Coordinator, error) {
	cfg = cfg.withDefaults()
	if cfg.Shard.Count < 1 || cfg.Shard.Index < 1 || cfg.Shard.Index > cfg.Shard.Count {
		return nil, fmt.Errorf("coordinator: shard %s: want 1 <= i <= n", cfg.Shard)
	}
	for name, d := range map[string]time.Duration{
		"Tick": cfg.Tick, "TailEvery": cfg.TailEvery, "PlanEvery": cfg.PlanEvery, "ProgressEvery": cfg.ProgressEvery,
		"StopWait": cfg.StopWait, "Share.Every": cfg.Share.Every, "Lease.AbandonedEvery": cfg.Lease.AbandonedEvery,
		"Lease.RetainDone": cfg.Lease.RetainDone,
	} {
		// A negative interval would run its loop with no pause at all.
		if d < 0 {
			return nil, fmt.Errorf("coordinator: %s %v must not be negative", name, d)
		}
	}
	share, err := NewShare(st, pool, cfg.Share)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	pf, err := NewPrefetcher(st, pool, cfg.Prefetch)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	c := &Coordinator{cfg: cfg, st: st, pool: pool, share: share, prefetch: pf, log: lifecycle.Logger(cfg.Logger, "coordinator")}
	if cfg.Shard.Main() {
		if c.planner, err = NewPlanner(st, pool, cfg.Planner); err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
		if c.leases, err = NewLeases(st, cfg.Lease); err != nil {
			return nil, fmt.Errorf("coordinator: %w", err)
		}
	}
	return c, nil
}

// Prefetcher is the coordinator's prefetcher (for its stats).
func (c *Coordinator) Prefetcher() *Prefetcher { return c.prefetch }

// Share is the coordinator's share of the connections.
func (c *Coordinator) Share() *Share { return c.share }

// Start logs the start, takes the first share (so the pool has its size
// before the first connection) and starts the loops and the prefetcher.
// ctx is used only to start (the lifecycle package's rules: a second Start
// fails, a stopped coordinator does not start again).
func (c *Coordinator) Start(ctx context.Context) error {
	return c.base.Start(ctx, "coordinator", c.start)
}

func (c *Coordinator) start(ctx context.Context) error {
	if err := c.st.Init(ctx); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	if c.cfg.Shard.Count > 1 {
		if c.cfg.Shard.Main() {
			c.log.Info("coordinator started", "source", c.st.Source(), "shard", c.cfg.Shard.String())
		} else {
			c.log.Info("coordinator started, prefetching only", "source", c.st.Source(), "shard", c.cfg.Shard.String())
		}
	} else {
		c.log.Info("coordinator started", "source", c.st.Source())
	}
	if err := c.pool.Start(ctx); err != nil {
		return fmt.Errorf("coordinator: start pool: %w", err)
	}
	first, err := c.share.Round(ctx)
	if err != nil {
		// Not fatal: the share loop tries again; until then the pool keeps
		// the size it was made with.
		c.log.Error("nntp share failed", "err", err)
	} else {
		c.log.Info("nntp share", "granted", first.Granted)
	}
	if err := c.prefetch.Start(ctx); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	run := c.base.Run()
	shareEvery := c.cfg.Share.Every
	if shareEvery == 0 {
		shareEvery = ShareEveryDefault
	}
	shareCtx, shareCancel := context.WithCancel(context.WithoutCancel(run))
	c.shareCancel = shareCancel
	c.shareWG.Add(1)
	go func() {
		defer c.shareWG.Done()
		runLoop(shareCtx, c.log, "nntp share", shareEvery, func(ctx context.Context) error {
			r, err := c.share.Round(ctx)
			if err == nil && r.Granted != r.Was {
				c.log.Info("nntp share", "granted", r.Granted, "was", r.Was)
			}
			return err
		})
	}()
	if c.cfg.Shard.Main() {
		c.loop(run, "finishing abandoned leases", c.cfg.Lease.AbandonedEvery, func(ctx context.Context) error {
			n, err := c.leases.FinishAbandoned(ctx)
			if n > 0 {
				c.log.Info("finished ranges read to their end whose worker went quiet", "ranges", n)
			}
			if ctx.Err() != nil {
				return err
			}
			// The same round retires the done ranges past their retention,
			// so that reading the ranges costs the live work only.
			r, rerr := c.leases.Retire(ctx)
			if r > 0 {
				c.log.Debug("retired done ranges", "ranges", r)
			}
			return errors.Join(err, rerr)
		})
		// A failed history round is tried again at the tail's pace, not an
		// hour later: PlanTail plans only groups with a record, so a
		// provider unreachable at start (or a pooled connection it closed
		// while idle) would otherwise leave new groups unplanned for the
		// whole PlanEvery.
		c.loopRetry(run, "planning history", c.cfg.PlanEvery, min(c.cfg.TailEvery, c.cfg.PlanEvery), func(ctx context.Context) error {
			st, err := c.planner.PlanAll(ctx)
			if st.Ranges > 0 {
				c.log.Info("planned history", "ranges", st.Ranges, "groups", st.Groups)
			}
			return err
		})
		var lastDone int64
		c.loop(run, "progress", c.cfg.ProgressEvery, func(ctx context.Context) error {
			s, err := c.st.Status(ctx)
			if err != nil {
				return err
			}
			done := s.Articles[StateDone]
			total := done
			for _, state := range []RangeState{StatePlanned, StateSpooled, StateLeased} {
				total += s.Articles[state]
			}
			if total == done && done == lastDone {
				return nil // nothing outstanding, nothing new: stay quiet
			}
			lastDone = done
			c.log.Info("progress", "done", done, "planned", total, "percent", fmt.Sprintf("%.1f", 100*float64(done)/float64(max(total, 1))),
				"articles_per_second", int64(s.Throughput), "spooled", s.Ranges[StateSpooled], "leased", s.Ranges[StateLeased], "failed", s.Ranges[StateFailed])
			return nil
		})
		c.loop(run, "planning the tail", c.cfg.TailEvery, func(ctx context.Context) error {
			st, err := c.planner.PlanTail(ctx)
			if st.Ranges > 0 {
				c.log.Debug("planned the tail", "ranges", st.Ranges, "groups", st.Groups)
			}
			return err
		})
	}
	return nil
}

// loop runs runLoop in a goroutine that Stop waits for.
func (c *Coordinator) loop(ctx context.Context, what string, every time.Duration, round func(context.Context) error) {
	c.loopRetry(ctx, what, every, every, round)
}

// loopRetry is loop with the round after a failed one due in retry.
func (c *Coordinator) loopRetry(ctx context.Context, what string, every, retry time.Duration, round func(context.Context) error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		runLoopRetry(ctx, c.log, what, every, retry, round)
	}()
}

// runLoop runs round at once and then every interval until ctx ends; a
// failed round is logged and the loop goes on.
func runLoop(ctx context.Context, log *slog.Logger, what string, every time.Duration, round func(context.Context) error) {
	runLoopRetry(ctx, log, what, every, every, round)
}

// runLoopRetry is runLoop with the round after a failed one due in retry.
func runLoopRetry(ctx context.Context, log *slog.Logger, what string, every, retry time.Duration, round func(context.Context) error) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := every
		if err := round(ctx); err != nil && ctx.Err() == nil {
			log.Error(what+" failed", "err", err)
			next = retry
		}
		t.Reset(next)
	}
}

// Stop stops taking work, waits up to StopWait (or ctx) for the chunks in
// flight, leaves the share (waiting, its entry renewed, until the pool's
// connections are closed) and closes the pool. Safe without Start and
// twice.
func (c *Coordinator) Stop(ctx context.Context) error {
	return c.base.Stop(ctx, c.stop)
}

func (c *Coordinator) stop(ctx context.Context) error {
	c.log.Info("stopping: waiting for the chunks in flight", "chunks", c.prefetch.Active())
	// The other loops end with the run context, which is cancelled now; the
	// prefetcher's round may finish its chunks in flight within StopWait.
	c.wg.Wait()
	wctx, wcancel := context.WithTimeout(ctx, c.cfg.StopWait)
	if err := c.prefetch.Stop(wctx); err != nil {
		// Expected past StopWait: the chunks cut off are fetched again.
		c.log.Info("closed connections still fetching", "err", err)
	}
	wcancel()
	// The share loop renewed the entry while the chunks were fetched; Leave
	// renews it while the connections close.
	if c.shareCancel != nil {
		c.shareCancel()
	}
	c.shareWG.Wait()
	// Cleanup runs even when ctx is done, each step with its own time: a
	// slow pool close must not leave the share entry behind.
	var firstErr error
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait)
	if err := c.share.Leave(sctx); err != nil {
		firstErr = fmt.Errorf("coordinator: leave share: %w", err)
	}
	scancel()
	pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait)
	if err := c.pool.Stop(pctx); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("coordinator: close pool: %w", err)
	}
	pcancel()
	c.log.Info("coordinator stopped")
	return firstErr
}
