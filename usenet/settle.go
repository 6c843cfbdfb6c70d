package usenet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
)

// Defaults of SettleConfig.
const (
	// PostGapDefault: posters upload a post's articles seconds apart and
	// repost a taken-down one hours or days later.
	PostGapDefault = time.Hour
	// MinFilesDefault: a release needs a file.
	MinFilesDefault = 1
	// MinBytesDefault keeps out lone .nfo, .sfv and .par2 posts (a few
	// hundred KiB at most) and lets in any real release (a 4 GiB .mkv).
	MinBytesDefault = 1 << 20
)

// SettleConfig says when a release becomes visible: at once when it is
// complete, or once it has not changed for Window and at least
// MinCompletion of it is present (par2 recovery files can repair the
// rest); either way only with at least MinFiles files and MinBytes bytes.
// PostGap says which articles make one post.
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
	// PostGap is the longest gap between the posting dates of two
	// consecutive articles of one post: a copy posted after a longer pause
	// is a repost, a release of its own (see Collection.Posts). Zero means
	// PostGapDefault.
	PostGap time.Duration
	// MinFiles is the least number of files present a release needs. Zero
	// means MinFilesDefault; negative means no minimum.
	MinFiles int
	// MinBytes is the least size present a release needs. Zero means
	// MinBytesDefault; negative means no minimum.
	MinBytes int64
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
	if c.PostGap <= 0 {
		c.PostGap = PostGapDefault
	}
	if c.MinFiles == 0 {
		c.MinFiles = MinFilesDefault
	}
	if c.MinBytes == 0 {
		c.MinBytes = MinBytesDefault
	}
	if c.Every <= 0 {
		c.Every = max(c.Window/8, time.Second)
	}
	return c
}

// Validate reports a config no sweep can use.
func (c SettleConfig) Validate() error {
	if c.PostGap < 0 {
		return fmt.Errorf("usenet: post gap %v: want a positive duration", c.PostGap)
	}
	if c.MinCompletion > 1 || c.MinCompletion < 0 {
		return fmt.Errorf("usenet: settle completion %v: want a fraction in (0, 1]", c.MinCompletion)
	}
	return nil
}

// gap is PostGap in seconds, the unit of posting dates.
func (c SettleConfig) gap() int64 { return int64(c.PostGap / time.Second) }

// passes reports whether r is past the minimums of files and bytes.
func (c SettleConfig) passes(r *Release) bool {
	return (c.MinFiles < 0 || len(r.Binaries) >= c.MinFiles) && (c.MinBytes < 0 || r.Size >= c.MinBytes)
}

// settle makes visible the posts of c that settled by now, and returns
// them to publish.
func (c *Collection) settle(cfg SettleConfig, now time.Time) []Release {
	posts, idx, _ := c.resolve(cfg.gap())
	var pub []Release
	for i := range posts {
		if idx[i] < 0 {
			continue // not seen by update: the record changed under another gap
		}
		st := &c.States[idx[i]]
		r := &posts[i]
		if st.Visible || now.UnixMilli()-st.Updated < cfg.Window.Milliseconds() || r.Completion() < cfg.MinCompletion || !cfg.passes(r) {
			continue
		}
		st.Visible = true
		st.Version++
		st.overlay(r)
		pub = append(pub, *r)
	}
	return pub
}

// Settle makes visible (and publishes) every release that settled by now;
// it returns how many. Sweeps may run in several processes at once: each
// collection is changed under compare-and-set.
func (s *Store) Settle(ctx context.Context, now time.Time, cfg SettleConfig) (int, error) {
	cfg = cfg.withDefaults()
	var due []string
	_, err := s.collections.Stream().Scan(ctx, persist.Range{}, func(m *persist.Message) error {
		if m.Key == "" {
			return nil
		}
		var c Collection
		if err := decodeRecord(m, &c); err != nil {
			return fmt.Errorf("usenet: decode collection %s: %w", m.Key, err)
		}
		if len(c.settle(cfg, now)) > 0 {
			due = append(due, m.Key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("usenet: settle: %w", err)
	}
	n := 0
	for _, id := range due {
		var pub []Release
		_, _, err := s.publishingMerge(ctx, id, func(cur *Collection) (bool, []Release, error) {
			pub = cur.settle(cfg, now)
			return len(pub) > 0, pub, nil
		})
		if errors.Is(err, persist.ErrTooLarge) {
			// A release too large to publish (or its record to write):
			// it stays as it was, and the sweep goes on to the others,
			// which it would otherwise never reach again.
			lifecycle.Logger(cfg.Logger, "settler").Warn("usenet: record too large for the bus, left as it was",
				"scope", s.scope, "record", "collection", "key", id, "err", err)
			continue
		}
		if err != nil {
			return n, fmt.Errorf("usenet: settle %s: %w", id, err)
		}
		n += len(pub)
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
