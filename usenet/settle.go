package usenet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
)

// SettleConfig says when an incomplete release becomes visible: once it
// has not changed for Window and at least MinCompletion of it is present
// (par2 recovery files can repair the rest). A complete release is visible
// at once.
type SettleConfig struct {
	// Window is how long a release must go unchanged. Default 2h: posters
	// upload a release within minutes, and providers take a while to
	// propagate every article.
	Window time.Duration
	// MinCompletion is the least Completion (0..1] a settled release needs.
	// Default 0.95.
	MinCompletion float64
	// Every is how often a Settler sweeps. Default Window/8, at least a
	// second.
	Every time.Duration
	// Logger receives a Settler's sweep results and failures. Nil means
	// slog.Default(); either way its lines carry role=settler.
	Logger *slog.Logger
}

func (c SettleConfig) withDefaults() SettleConfig {
	if c.Window <= 0 {
		c.Window = 2 * time.Hour
	}
	if c.MinCompletion <= 0 {
		c.MinCompletion = 0.95
	}
	if c.Every <= 0 {
		c.Every = max(c.Window/8, time.Second)
	}
	return c
}

// Validate reports a config no sweep can use.
func (c SettleConfig) Validate() error {
	if c.MinCompletion > 1 || c.MinCompletion < 0 {
		return fmt.Errorf("usenet: settle completion %v: want a fraction in (0, 1]", c.MinCompletion)
	}
	return nil
}

// settled reports whether r is due to become visible at now.
func (c SettleConfig) settled(r *Release, now time.Time) bool {
	return !r.Visible && now.UnixMilli()-r.Updated >= c.Window.Milliseconds() && r.Completion() >= c.MinCompletion
}

// Settle makes visible (and publishes) every release that settled by now;
// it returns how many. Sweeps may run in several processes at once: each
// release is changed under compare-and-set.
func (s *Store) Settle(ctx context.Context, now time.Time, cfg SettleConfig) (int, error) {
	cfg = cfg.withDefaults()
	var due []string
	_, err := s.collections.Stream().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key == "" {
			return nil
		}
		var r Release
		if err := decodeRecord(m, &r); err != nil {
			return fmt.Errorf("usenet: decode release %s: %w", m.Key, err)
		}
		if cfg.settled(&r, now) {
			due = append(due, m.Key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("usenet: settle: %w", err)
	}
	n := 0
	for _, id := range due {
		_, ch, err := mergeLoop(ctx, s.collections, id, func(cur *Release) (bool, error) {
			if !cfg.settled(cur, now) {
				return false, nil
			}
			cur.Visible = true
			cur.Version++
			return true, s.publish(ctx, []*Release{cur})
		})
		if err != nil {
			return n, fmt.Errorf("usenet: settle %s: %w", id, err)
		}
		if ch {
			n++
		}
	}
	return n, nil
}

// Settler runs the settle sweep every SettleConfig.Every in its own
// goroutine, logging what each sweep published and any failure (the next
// sweep tries again). It follows the lifecycle package's rules: Start
// twice fails, Stop before Start or twice is a no-op, and a stopped
// Settler does not start again.
type Settler struct {
	store *Store
	cfg   SettleConfig
	now   func() time.Time
	log   *slog.Logger
	base  lifecycle.Base
	done  chan struct{} // closed when the sweep loop has returned
}

// NewSettler returns a Settler over s, not yet started; now is its clock
// (time.Now when nil).
func NewSettler(s *Store, cfg SettleConfig, now func() time.Time) *Settler {
	if now == nil {
		now = time.Now
	}
	return &Settler{store: s, cfg: cfg.withDefaults(), now: now, log: lifecycle.Logger(cfg.Logger, "settler")}
}

// Start starts the sweeps; they run until Stop, with ctx's values but not
// its end.
func (st *Settler) Start(ctx context.Context) error {
	return st.base.Start(ctx, "usenet: settler", func(context.Context) error {
		st.done = make(chan struct{})
		go st.run(st.base.Run())
		return nil
	})
}

// Stop ends the sweeps and waits for the one in flight, or for ctx.
func (st *Settler) Stop(ctx context.Context) error {
	return st.base.Stop(ctx, func(ctx context.Context) error {
		select {
		case <-st.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("usenet: settler stop: %w", ctx.Err())
		}
	})
}

func (st *Settler) run(ctx context.Context) {
	defer close(st.done)
	t := time.NewTicker(st.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := st.store.Settle(ctx, st.now(), st.cfg)
		switch {
		case err != nil && ctx.Err() == nil:
			st.log.Warn("usenet: settle sweep failed", "err", err)
		case n > 0:
			st.log.Debug("usenet: settled releases published", "releases", n)
		}
	}
}
