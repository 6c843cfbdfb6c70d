package work

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// WorkerIdleDefault is how long a worker waits before asking again when no
// range is spooled.
const WorkerIdleDefault = time.Second

// cleanupTimeout bounds the writes that give a range back (or finish it)
// after the caller's context ended.
const cleanupTimeout = 10 * time.Second

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Name is the lease holder; it must be unique among the source's
	// workers. Required.
	Name string
	// Lease configures the worker's leases.
	Lease LeaseConfig
	// Heartbeat is how often the lease of the range in hand is renewed.
	// Zero means HeartbeatDefault, or a third of the lease TTL when that is
	// shorter; it must be shorter than the TTL.
	Heartbeat time.Duration
	// Idle is the wait when no range is spooled. Zero means
	// WorkerIdleDefault.
	Idle time.Duration
	// Logger: nil means slog.Default(). The worker's lines carry
	// role=worker and worker=Name.
	Logger *slog.Logger
}

// WorkerStats is a snapshot of a worker's counters and of the range in
// hand.
type WorkerStats struct {
	Finished int64 // ranges finished
	Articles int64 // lines handed to the indexer in the ranges finished
	Fenced   int64 // ranges lost to another holder mid-way
	Failed   int64 // ranges given back after an indexer or spool error
	Released int64 // ranges given back unfinished because the worker stopped
	// Current is the id of the range in hand, 0 when none; Progress the
	// last article of it handed to the indexer.
	Current  uint64
	Progress int64
}

// Worker leases spooled ranges one at a time and hands their lines to an
// Indexer, renewing the lease while it works and finishing the range under
// the lease's fence.
type Worker struct {
	st     *Store
	ix     Indexer
	leases *Leases
	cfg    WorkerConfig
	log    *slog.Logger

	base     lifecycle.Base
	stopOnce sync.Once
	stop     chan struct{}      // closed by Stop: lease no more
	abort    context.CancelFunc // cancels the loop's context: the range in hand is released
	done     chan struct{}      // closed when the loop has returned

	finished, articles, fenced, failed, released atomic.Int64
	current                                      atomic.Uint64
	progress                                     atomic.Int64

	// Test hooks, set before Start: beforeAcquire runs just before each
	// Acquire; heartbeatCall, when set, renews instead of Leases.Heartbeat.
	beforeAcquire func()
	heartbeatCall func(ctx context.Context, h *Held, progress int64) error
}

// NewWorker returns a worker of st's source that indexes with ix.
func NewWorker(st *Store, ix Indexer, cfg WorkerConfig) (*Worker, error) {
	if st == nil || ix == nil {
		return nil, errors.New("work: worker: nil store or indexer")
	}
	if cfg.Name == "" {
		return nil, errors.New("work: worker: Name is required")
	}
	leases, err := NewLeases(st, cfg.Lease)
	if err != nil {
		return nil, fmt.Errorf("work: worker %s: %w", cfg.Name, err)
	}
	ttl := leases.cfg.TTL
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = min(HeartbeatDefault, ttl/3)
	}
	if cfg.Heartbeat <= 0 || cfg.Heartbeat >= ttl {
		return nil, fmt.Errorf("work: worker %s: heartbeat %v must be positive and shorter than the lease TTL %v", cfg.Name, cfg.Heartbeat, ttl)
	}
	if cfg.Idle == 0 {
		cfg.Idle = WorkerIdleDefault
	}
	if cfg.Idle < 0 {
		return nil, fmt.Errorf("work: worker %s: negative idle %v", cfg.Name, cfg.Idle)
	}
	return &Worker{
		st: st, ix: ix, leases: leases, cfg: cfg, log: lifecycle.Logger(cfg.Logger, "worker").With("worker", cfg.Name),
		stop: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Leases is the worker's lease handle (its counters include the worker's).
func (w *Worker) Leases() *Leases { return w.leases }

// Stats returns a snapshot of the counters.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{
		Finished: w.finished.Load(),
		Articles: w.articles.Load(),
		Fenced:   w.fenced.Load(),
		Failed:   w.failed.Load(),
		Released: w.released.Load(),
		Current:  w.current.Load(),
		Progress: w.progress.Load(),
	}
}

// Start runs the worker's loop until Stop: lease a range, index it, and
// wait Idle when there is none. ctx is used only to start (the lifecycle
// package's rules: a second Start fails, a stopped worker does not start
// again).
func (w *Worker) Start(ctx context.Context) error {
	return w.base.Start(ctx, "work: worker "+w.cfg.Name, func(context.Context) error {
		// Not the run context itself, which ends as soon as Stop begins:
		// the range in hand may still be finished within Stop's deadline,
		// and only then is this context cancelled (the range released).
		runCtx, cancel := context.WithCancel(context.WithoutCancel(w.base.Run()))
		w.abort = cancel
		go w.loop(runCtx)
		return nil
	})
}

func (w *Worker) loop(ctx context.Context) {
	defer close(w.done)
	idle := time.NewTimer(0)
	defer idle.Stop()
	<-idle.C
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		ok, err := w.RunOne(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("work: range", "err", err)
		}
		if ok {
			continue
		}
		idle.Reset(w.cfg.Idle)
		select {
		case <-w.stop:
			return
		case <-idle.C:
		}
	}
}

// Stop stops leasing. The range in hand is finished if that completes
// before ctx ends; otherwise it is released for another worker. Stop
// returns once the loop has returned. Idempotent; safe without Start.
func (w *Worker) Stop(ctx context.Context) error {
	// Closed even without Start: RunOne called directly leases no more.
	w.stopOnce.Do(func() { close(w.stop) })
	return w.base.Stop(ctx, func(ctx context.Context) error {
		select {
		case <-w.done:
		case <-ctx.Done():
			// Too long: give the range back; the loop releases it and returns.
			w.abort()
			<-w.done
		}
		return nil
	})
}

// RunOne leases one range and processes it. It reports false when no range
// was available, and an error when a leased range was not finished
// (ErrFenced when another holder took it over, the indexer's or spool's
// error when it was failed, ctx's when it was released because ctx ended).
func (w *Worker) RunOne(ctx context.Context) (bool, error) {
	if w.beforeAcquire != nil {
		w.beforeAcquire()
	}
	h, err := w.leases.Acquire(ctx, w.cfg.Name)
	if errors.Is(err, ErrNoWork) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("work: worker %s: %w", w.cfg.Name, err)
	}
	select {
	case <-w.stop:
		// Stop landed after the loop's check but before Acquire took the
		// range: a stopping worker takes no new range, so give it back.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if err := w.leases.Release(cctx, h); err != nil {
			return false, w.lost(h.Range.ID, err)
		}
		w.released.Add(1)
		return false, nil
	default:
	}
	return true, w.process(ctx, h)
}

// process indexes h's range while a heartbeat goroutine keeps its lease,
// then finishes, fails or releases it.
func (w *Worker) process(ctx context.Context, h *Held) error {
	id := h.Range.ID
	w.current.Store(id)
	w.progress.Store(0)
	defer w.current.Store(0)

	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopHB := w.heartbeat(pctx, cancel, h)
	defer stopHB()

	var n int64
	var result json.RawMessage
	ri, err := w.ix.Begin(pctx, h.Range)
	if err == nil {
		var chunks int
		prev := h.Range.First - 1
		n, chunks, err = w.st.readSpool(pctx, id, func(a int64, line []byte) error {
			if err := checkArticle(h.Range, prev, a); err != nil {
				return err
			}
			prev = a
			if err := ri.Line(pctx, a, line); err != nil {
				return err
			}
			w.progress.Store(a)
			return nil
		})
		if err == nil {
			err = checkCounts(h.Range, n, chunks)
		}
	}
	if err == nil {
		result, err = ri.End(pctx)
	}
	// No heartbeat may race the writes below on the same token.
	stopHB()

	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer ccancel()
	switch {
	case errors.Is(context.Cause(pctx), ErrFenced):
		w.fenced.Add(1)
		w.log.Info("work: range taken over by another holder", "range", id)
		return fmt.Errorf("work: worker %s: range %d: %w", w.cfg.Name, id, ErrFenced)
	case err != nil && ctx.Err() != nil:
		// Stopping (or the caller gave up) mid-range: give it back whole.
		if rerr := w.leases.Release(cctx, h); rerr != nil {
			return w.lost(id, rerr)
		}
		w.released.Add(1)
		return fmt.Errorf("work: worker %s: range %d released: %w", w.cfg.Name, id, ctx.Err())
	case err != nil:
		if ferr := w.leases.Fail(cctx, h, err.Error(), [][2]int64{{h.Range.First, h.Range.Last}}); ferr != nil {
			return w.lost(id, errors.Join(err, ferr))
		}
		w.failed.Add(1)
		return fmt.Errorf("work: worker %s: range %d: %w", w.cfg.Name, id, err)
	}
	// Indexed to the end: finish it even if ctx ended just now.
	fctx := ctx
	if ctx.Err() != nil {
		fctx = cctx
	}
	if err := w.leases.ReadAll(fctx, h, result); err != nil {
		return w.lost(id, err)
	}
	if err := w.leases.Finish(fctx, h, result); err != nil {
		if h.Range.State != StateDone {
			return w.lost(id, err)
		}
		// Done; only dropping the spool or lease failed, which the next
		// Settle of the range retries.
		w.log.Warn("work: range finished, clean-up failed", "range", id, "err", err)
	}
	w.finished.Add(1)
	w.articles.Add(n)
	return nil
}

// checkArticle checks spool line a, read after article prev, of range r:
// a spool with a chunk twice, chunks that overlap or lines of another
// range would otherwise be indexed, and finished, as if right. Its error
// comes back through readSpool, which names the spool.
func checkArticle(r Range, prev, a int64) error {
	if a < r.First || a > r.Last {
		return fmt.Errorf("article %d outside the range's %d-%d", a, r.First, r.Last)
	}
	if a <= prev {
		return fmt.Errorf("article %d after article %d (duplicate or overlapping chunk)", a, prev)
	}
	return nil
}

// checkCounts compares what was read of r's spool with what the prefetcher
// recorded when it spooled r: a chunk lost (or added) since would
// otherwise finish the range with a wrong result.
func checkCounts(r Range, lines int64, chunks int) error {
	if lines != r.Articles || chunks != r.Chunks {
		return fmt.Errorf("work: spool of range %d holds %d lines in %d chunks, the range record says %d in %d", r.ID, lines, chunks, r.Articles, r.Chunks)
	}
	return nil
}

// lost counts a fenced write and wraps err.
func (w *Worker) lost(id uint64, err error) error {
	if errors.Is(err, ErrFenced) {
		w.fenced.Add(1)
	}
	return fmt.Errorf("work: worker %s: range %d: %w", w.cfg.Name, id, err)
}

// heartbeat renews h's lease every Heartbeat with the progress until the
// returned function is called (which waits for it); a fenced renewal
// cancels ctx with ErrFenced as its cause, so the range is dropped.
func (w *Worker) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, h *Held) func() {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(w.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// Not cut short by ctx: a renewal the server applied but whose
			// answer we stopped waiting for would leave us a stale token.
			// But bounded by the interval, not the TTL: Stop waits for this
			// call, and its deadline must hold. A renewal cut off this way
			// that did land is read back (Leases.renew), so it keeps the
			// range unless persist stays unreachable; it never costs the
			// range's correctness.
			hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Heartbeat)
			renew := w.leases.Heartbeat
			if w.heartbeatCall != nil {
				renew = w.heartbeatCall
			}
			err := renew(hctx, h, w.progress.Load())
			hcancel()
			if errors.Is(err, ErrFenced) {
				cancel(err)
				return
			}
			if err != nil && ctx.Err() == nil {
				// The lease may outlive a failed renewal: try again next tick.
				w.log.Warn("work: heartbeat", "range", h.Range.ID, "err", err)
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(quit)
		<-done
	})
}
