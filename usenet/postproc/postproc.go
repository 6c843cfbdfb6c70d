// Package postproc is the usenet indexer's post-processing: for each
// visible release it reads a few bodies (the par2 index, the NFO, the
// first RAR volume's first segment, a yEnc header) within a small budget,
// and keeps what they say with the release: the real names of an
// obfuscated post (and from them its name and category), the par2 file
// list, the NFO text, the password flag and the names inside the archive
// (see Read and usenet.Processed).
//
// The Processor follows the releases stream, never the ingest path: its
// queue is bounded and a release it could not queue (overflow, a restart,
// a connection that failed) is found again by a scan of the visible
// releases without a post-processing record. It fetches through a pool of
// its own, sized by a work.Share participant whose priority is below the
// coordinator's (work.PriorityPostProcess), so the provider's connection
// limit holds across every process of the source.
package postproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/nntp"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/work"
)

// Defaults of Config.
const (
	// QueueDefault bounds the releases waiting: past it they are left to
	// the next scan.
	QueueDefault = 1024
	// WorkersDefault is how many releases are read at once, and the most
	// connections the share asks for.
	WorkersDefault = 2
	// RescanEveryDefault is how often a scan looks for releases left
	// unprocessed, when some were (overflow, failed connections).
	RescanEveryDefault = time.Minute
	// ShareName names the post-processor in the share table.
	ShareName = "postprocess"
	// DutyDefault is the part of its time a worker spends on releases:
	// after a release that took d it waits d·(1-Duty)/Duty before the
	// next, so that post-processing, which is never urgent, leaves the
	// cores to ingest (one release of 700 KiB costs milliseconds; a group
	// gains a release every few seconds).
	DutyDefault = 0.5
)

// Config configures a Processor.
type Config struct {
	// Store holds the releases processed and what is found. Required.
	Store *usenet.Store
	// Pool fetches the bodies. Required. The Processor owns it: Start
	// starts it, Stop closes it.
	Pool *nntp.Pool
	// Share, when set, sizes Pool (see work.NewShare with Pool): the
	// Processor runs its rounds every ShareEvery and leaves it at Stop.
	// Nil means the caller sizes Pool.
	Share *work.Share
	// ShareEvery is the share's round. Zero means work.ShareEveryDefault.
	ShareEvery time.Duration
	// Budget bounds what is fetched per release; zero fields mean its
	// defaults (3 articles, 2 MiB).
	Budget Budget
	// Queue bounds the releases waiting. Zero means QueueDefault.
	Queue int
	// Workers is how many releases are read at once. Zero means
	// WorkersDefault.
	Workers int
	// Duty is the part of its time each worker may spend reading
	// releases, in (0, 1]: it waits in between (see DutyDefault). Zero
	// means DutyDefault; 1 means no wait.
	Duty float64
	// RescanEvery is how often releases left unprocessed are looked for.
	// Zero means RescanEveryDefault.
	RescanEvery time.Duration
	// Counters, when set, receive the totals (web/metrics exports them).
	Counters *Counters
	// Logger receives failures. Nil means slog.Default(); either way its
	// lines carry role=postprocess.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Queue <= 0 {
		c.Queue = QueueDefault
	}
	if c.Workers <= 0 {
		c.Workers = WorkersDefault
	}
	if c.Duty <= 0 || c.Duty > 1 {
		c.Duty = DutyDefault
	}
	if c.RescanEvery <= 0 {
		c.RescanEvery = RescanEveryDefault
	}
	if c.ShareEvery <= 0 {
		c.ShareEvery = work.ShareEveryDefault
	}
	if c.Counters == nil {
		c.Counters = &Counters{}
	}
	c.Budget = c.Budget.withDefaults()
	return c
}

// Counters are the post-processor's running totals. The zero value is
// ready; methods are safe for concurrent use.
type Counters struct {
	articles, bytes, releases, renamed, passworded, nfos, dropped atomic.Int64
	nanos                                                         atomic.Int64

	mu       sync.Mutex
	failures map[string]int64
}

// Stats is a snapshot of Counters.
type Stats struct {
	Articles   int64 // articles fetched
	Bytes      int64 // their bytes, as the overview announced them
	Releases   int64 // releases processed (a record written)
	Renamed    int64 // releases or files that got their real names
	Passworded int64 // releases found passworded (password=1)
	NFOs       int64 // NFOs stored
	// Dropped counts releases the queue had no room for (found again by
	// the next scan).
	Dropped int64
	// Time is the time spent reading releases, summed over the workers.
	Time time.Duration
	// Failures counts failed bodies by kind (usenet.FailFetch, ...).
	Failures map[string]int64
}

// Stats returns the totals.
func (c *Counters) Stats() Stats {
	c.mu.Lock()
	f := make(map[string]int64, len(c.failures))
	for k, v := range c.failures {
		f[k] = v
	}
	c.mu.Unlock()
	return Stats{
		Articles: c.articles.Load(), Bytes: c.bytes.Load(), Releases: c.releases.Load(), Renamed: c.renamed.Load(),
		Passworded: c.passworded.Load(), NFOs: c.nfos.Load(), Dropped: c.dropped.Load(), Time: time.Duration(c.nanos.Load()),
		Failures: f,
	}
}

func (c *Counters) add(res Result, took time.Duration) {
	c.articles.Add(int64(res.Articles))
	c.bytes.Add(res.Bytes)
	c.releases.Add(1)
	c.nanos.Add(int64(took))
	if res.Renamed {
		c.renamed.Add(1)
	}
	if res.Password == 1 {
		c.passworded.Add(1)
	}
	if res.NFO {
		c.nfos.Add(1)
	}
	if len(res.Failures) > 0 {
		c.mu.Lock()
		if c.failures == nil {
			c.failures = map[string]int64{}
		}
		for _, k := range res.Failures {
			c.failures[k]++
		}
		c.mu.Unlock()
	}
}

// Processor post-processes the visible releases of a store; see the
// package doc. It follows the lifecycle package's rules.
type Processor struct {
	cfg  Config
	log  *slog.Logger
	base lifecycle.Base
	wg   sync.WaitGroup

	queue chan usenet.Release
	// missed is set when a release could not be queued or processed: the
	// next rescan looks for it.
	missed   atomic.Bool
	scanning atomic.Int32  // a scan runs
	polling  atomic.Bool   // the watch ended: every round scans
	kick     chan struct{} // capacity 1: rescan now

	mu      sync.Mutex
	pending map[string]struct{} // queued or in hand, by release id
	watcher *persist.Watcher
	// idle is closed and replaced when the queue empties with nothing in
	// hand, for WaitIdle.
	idle chan struct{}
}

// New returns a Processor, not yet started.
func New(cfg Config) (*Processor, error) {
	if cfg.Store == nil || cfg.Pool == nil {
		return nil, errors.New("postproc: Config.Store and Config.Pool are required")
	}
	cfg = cfg.withDefaults()
	return &Processor{
		cfg: cfg, log: lifecycle.Logger(cfg.Logger, "postprocess"),
		queue: make(chan usenet.Release, cfg.Queue), kick: make(chan struct{}, 1),
		pending: map[string]struct{}{}, idle: make(chan struct{}),
	}, nil
}

// Counters are the processor's totals.
func (p *Processor) Counters() *Counters { return p.cfg.Counters }

// Pool is the processor's pool, for the metrics.
func (p *Processor) Pool() *nntp.Pool { return p.cfg.Pool }

// Share is the processor's share (nil when the caller sizes the pool).
func (p *Processor) Share() *work.Share { return p.cfg.Share }

// Start takes the first share, watches the releases stream from its end,
// scans it for releases not yet processed and starts the workers.
func (p *Processor) Start(ctx context.Context) error {
	return p.base.Start(ctx, "postproc: processor", func(ctx context.Context) error {
		run := p.base.Run()
		if err := p.cfg.Pool.Start(ctx); err != nil {
			return fmt.Errorf("postproc: start pool: %w", err)
		}
		if p.cfg.Share != nil {
			if _, err := p.cfg.Share.Round(ctx); err != nil {
				// Not fatal: the share loop tries again; until then the
				// pool opens nothing.
				p.log.Warn("nntp share failed", "err", err)
			}
		}
		rel := p.cfg.Store.Releases()
		inv, err := rel.Inventory(ctx)
		if err != nil {
			p.stopPool(ctx)
			return fmt.Errorf("postproc: releases: %w", err)
		}
		w, err := rel.Watch(run, persist.WatchOptions{From: inv.Seq + 1}, p.offer)
		if err != nil {
			p.stopPool(ctx)
			return fmt.Errorf("postproc: watch releases: %w", err)
		}
		p.watcher = w
		p.missed.Store(true) // the history: the first scan reads it
		p.kick <- struct{}{}
		p.wg.Add(1 + p.cfg.Workers)
		go p.scanLoop(run)
		for range p.cfg.Workers {
			go p.worker(run)
		}
		if p.cfg.Share != nil {
			p.wg.Add(1)
			go p.shareLoop(run)
		}
		return nil
	})
}

// Stop stops watching and reading (a release in hand is left to the next
// start: no record was written for it), closes the pool and leaves the
// share.
func (p *Processor) Stop(ctx context.Context) error {
	return p.base.Stop(ctx, func(ctx context.Context) error {
		var first error
		if p.watcher != nil {
			if err := p.watcher.Stop(ctx); err != nil {
				first = err
			}
		}
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("postproc: stop: %w", ctx.Err())
		}
		if err := p.stopPool(ctx); err != nil && first == nil {
			first = err
		}
		return first
	})
}

// closeWait bounds closing the pool and leaving the share at Stop.
const closeWait = 5 * time.Second

func (p *Processor) stopPool(ctx context.Context) error {
	var first error
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait)
	if err := p.cfg.Pool.Stop(pctx); err != nil {
		first = fmt.Errorf("postproc: close pool: %w", err)
	}
	cancel()
	if p.cfg.Share != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeWait)
		if err := p.cfg.Share.Leave(sctx); err != nil && first == nil {
			first = fmt.Errorf("postproc: leave share: %w", err)
		}
		cancel()
	}
	return first
}

// offer runs on the watcher's goroutine and never blocks: a release the
// queue has no room for is left to the next scan.
func (p *Processor) offer(ev persist.Event) {
	switch ev.Kind {
	case persist.EventSet:
		var r usenet.Release
		if err := json.Unmarshal(ev.Msg.Value, &r); err != nil {
			return
		}
		p.enqueue(r, false)
	case persist.EventResynced, persist.EventSkipped:
		// Changes may have been passed over: the scan finds them.
		p.missed.Store(true)
		p.rescan()
	case persist.EventEnded:
		// No more changes come: from now on every round scans.
		if p.base.Run().Err() == nil {
			p.log.Warn("releases watch ended; scanning every round instead", "err", ev.Err)
		}
		p.polling.Store(true)
		p.missed.Store(true)
		p.rescan()
	}
}

// enqueue queues r unless it needs no processing or is queued already;
// with wait it waits for room (the scan), else it drops r and marks a
// rescan.
func (p *Processor) enqueue(r usenet.Release, wait bool) bool {
	if !r.Visible || r.Processed || r.ID == "" {
		return true
	}
	p.mu.Lock()
	if _, ok := p.pending[r.ID]; ok {
		p.mu.Unlock()
		return true
	}
	p.pending[r.ID] = struct{}{}
	p.mu.Unlock()
	if wait {
		select {
		case p.queue <- r:
			return true
		case <-p.base.Run().Done():
		}
	} else {
		select {
		case p.queue <- r:
			return true
		default:
			p.cfg.Counters.dropped.Add(1)
			p.missed.Store(true)
		}
	}
	p.done(r.ID)
	return false
}

// done forgets id as pending.
func (p *Processor) done(id string) {
	p.mu.Lock()
	delete(p.pending, id)
	if len(p.pending) == 0 {
		close(p.idle)
		p.idle = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *Processor) rescan() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Processor) scanLoop(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.RescanEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		p.scanning.Add(1)
		if !p.missed.Swap(false) && !p.polling.Load() {
			p.scanning.Add(-1)
			continue
		}
		err := p.scan(ctx)
		p.scanning.Add(-1)
		if err != nil && ctx.Err() == nil {
			p.missed.Store(true)
			p.log.Warn("scan for unprocessed releases failed", "err", err)
		}
	}
}

// scan queues every visible release that has no post-processing record,
// a page of the releases stream at a time (a page is at most the queue's
// size), so that it holds one page in memory, not the stream.
func (p *Processor) scan(ctx context.Context) error {
	done, err := p.cfg.Store.PostRecordIDs(ctx)
	if err != nil {
		return err
	}
	for from := uint64(1); from != 0; {
		var todo []usenet.Release
		next, err := p.cfg.Store.Releases().Scan(ctx, persist.Range{Start: from, Limit: p.cfg.Queue}, func(m *persist.Message) error {
			if m.Key == "" {
				return nil
			}
			if _, ok := done[m.Key]; ok {
				return nil
			}
			var r usenet.Release
			if json.Unmarshal(m.Value, &r) == nil {
				todo = append(todo, r)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("postproc: scan releases: %w", err)
		}
		for _, r := range todo {
			if !p.enqueue(r, true) {
				return ctx.Err()
			}
		}
		from = next
	}
	return nil
}

func (p *Processor) shareLoop(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.ShareEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, err := p.cfg.Share.Round(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("nntp share failed", "err", err)
		case err == nil && r.Granted != r.Was:
			p.log.Info("nntp share", "granted", r.Granted, "was", r.Was)
		}
	}
}

func (p *Processor) worker(ctx context.Context) {
	defer p.wg.Done()
	pause := time.NewTimer(0) // the wait between releases (Duty)
	defer pause.Stop()
	<-pause.C
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-p.queue:
			start := time.Now()
			if err := p.Process(ctx, r); err != nil && ctx.Err() == nil {
				p.missed.Store(true)
				p.log.Warn("post-processing failed; tried again at the next scan", "release", r.ID, "err", err)
			}
			p.done(r.ID)
			if p.cfg.Duty < 1 {
				pause.Reset(time.Duration(float64(time.Since(start)) * (1 - p.cfg.Duty) / p.cfg.Duty))
				select {
				case <-ctx.Done():
					return
				case <-pause.C:
				}
			}
		}
	}
}

// WaitIdle waits until nothing is queued or in hand, or ctx ends. For
// tests and benchmarks: a release published meanwhile is queued later.
func (p *Processor) WaitIdle(ctx context.Context) error {
	// Polled as well: a scan that finds nothing closes no channel.
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		p.mu.Lock()
		n, ch := len(p.pending), p.idle
		p.mu.Unlock()
		if n == 0 && !p.missed.Load() && p.scanning.Load() == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Process reads release r's bodies and stores what they say: the NFO
// text, the findings in r's post state (republishing r with them) and
// the post-processing record. A release with a record is skipped. The
// error is one of the store or the connection: nothing is recorded then,
// so a later scan tries again.
func (p *Processor) Process(ctx context.Context, r usenet.Release) error {
	st := p.cfg.Store
	if _, err := st.PostRecord(ctx, r.ID); err == nil {
		return nil
	} else if !errors.Is(err, usenet.ErrNotFound) {
		return err
	}
	start := time.Now()
	ids := make([]string, len(r.Binaries))
	for i, f := range r.Binaries {
		ids[i] = f.ID
	}
	bins, err := st.Binaries(ctx, ids)
	if errors.Is(err, usenet.ErrNotFound) {
		// A binary of the release is not stored (cannot be, but for a
		// record written by hand): nothing to read, and no retry.
		return st.PutPostRecord(ctx, usenet.PostRecord{Release: r.ID, Status: usenet.PostFailed, At: time.Now().UnixMilli()})
	}
	if err != nil {
		return err
	}
	bins = usenet.PostBinaries(r, bins)
	res, err := Read(ctx, r, bins, p.fetch, isGone, p.cfg.Budget)
	if err != nil {
		return err
	}
	if res.NFO {
		if err := st.PutNFO(ctx, r.ID, res.NFOText); err != nil {
			return err
		}
	}
	if !res.Empty() && len(bins) > 0 {
		if _, found, err := st.SetProcessed(ctx, bins[0].Release, r.ID, res.Processed); err != nil {
			return err
		} else if !found {
			p.log.Debug("release no longer in its collection", "release", r.ID)
		}
	}
	rec := usenet.PostRecord{
		Release: r.ID, Status: res.Status, At: time.Now().UnixMilli(), Articles: res.Articles, Bytes: res.Bytes,
		Failures: res.Failures, Renamed: res.Renamed, Processed: res.Processed,
	}
	if err := st.PutPostRecord(ctx, rec); err != nil {
		return err
	}
	p.cfg.Counters.add(res, time.Since(start))
	p.log.Debug("release post-processed", "release", r.ID, "status", res.Status, "articles", res.Articles, "bytes", res.Bytes,
		"renamed", res.Renamed, "password", res.Password, "nfo", res.NFO, "failures", res.Failures)
	return nil
}

// fetch reads one body through the pool.
func (p *Processor) fetch(ctx context.Context, id string, size int) ([]byte, error) {
	var buf bytes.Buffer
	err := p.cfg.Pool.Do(ctx, func(c *nntp.Conn) error {
		buf.Reset()
		buf.Grow(size)
		_, err := c.Body(ctx, "<"+strings.Trim(id, "<>")+">", &limited{w: &buf, n: maxArticle})
		return err
	})
	return buf.Bytes(), err
}

// maxArticle bounds the bytes of one body kept: the budget's, with room.
const maxArticle = 4 << 20

// limited keeps the first n bytes written and discards the rest, so the
// connection still reads the whole body.
type limited struct {
	w interface{ Write([]byte) (int, error) }
	n int
}

func (l *limited) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		if _, err := l.w.Write(b[:k]); err != nil {
			return 0, err
		}
		l.n -= k
	}
	return len(b), nil
}

// isGone says the server answered about the article (no such article,
// or another 4xx refusal of it, such as a provider's 451 for a removed
// one): that article's failure, counted, not the connection's. A status
// that speaks of the server, the connection or the account (400 service
// unavailable, 480/481 authentication, too many connections, a command not
// supported) is not: every article would get it, so it is returned and the
// release is read again by a later scan instead of being recorded failed.
func isGone(err error) bool {
	if errors.Is(err, nntp.ErrNoSuchArticle) {
		return true
	}
	var se *nntp.StatusError
	if !errors.As(err, &se) || se.Code < 400 || se.Code >= 500 {
		return false
	}
	for _, notArticle := range []error{nntp.ErrUnavailable, nntp.ErrAuth, nntp.ErrTooManyConnections,
		nntp.ErrNotSupported, nntp.ErrNoSuchGroup, nntp.ErrPostingNotAllowed} {
		if errors.Is(se, notArticle) {
			return false
		}
	}
	return true
}
