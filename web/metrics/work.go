package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/work"
)

// statusTimeout bounds the read of a source's work status at scrape time.
const statusTimeout = 5 * time.Second

// workCollector exports the work of the process: the status of each source
// it works on (read from persist at scrape time, as `work status` does),
// and the counters of its coordinators and workers, summed.
type workCollector struct {
	stores       sources[*work.Store]
	coordinators sources[*work.Coordinator]
	workers      sources[*work.Worker]
}

var (
	workRanges     = desc("work_ranges", "Ranges of the source by state.", "source", "state")
	workArticles   = desc("work_range_articles", "Article numbers of the source's ranges, by state.", "source", "state")
	workLeasesLive = desc("work_leases", "Live leases of the source.", "source")
	workShares     = desc("work_share_entries", "Live entries of the source's connection share table.", "source")
	workRate       = desc("work_articles_per_second", "Articles of the ranges finished in the last minute, per second.", "source")
	workStatusUp   = desc("work_status_up", "1 when the last scrape read the source's status, 0 when it failed.", "source")
	workRetired    = desc("work_ranges_retired", "Done ranges of the source whose records were retired after their retention (counted in work_ranges' done).", "source")
	workBroken     = desc("work_broken_records", "Records of the source's groups, ranges and leases that do not decode, which every reader skips.", "source")

	workAcquired  = desc("work_leases_acquired_total", "Leases this process took.")
	workExpired   = desc("work_lease_expiries_total", "Leased ranges this process found with their lease gone.")
	workFenced    = desc("work_fence_rejections_total", "Fenced calls rejected because the lease's token was stale.")
	workSettled   = desc("work_ranges_settled_total", "Ranges finished for a holder that read everything and went quiet.")
	workFinished  = desc("work_ranges_finished_total", "Ranges this process's workers finished.")
	workFailed    = desc("work_ranges_failed_total", "Ranges given back after an indexer or spool error.")
	workReleased  = desc("work_ranges_released_total", "Ranges given back unfinished because a worker stopped.")
	workIndexed   = desc("work_worker_articles_total", "Overview lines workers handed to the indexer in finished ranges.")
	pfInFlight    = desc("work_prefetch_in_flight", "Chunks being fetched or written now.")
	pfRanges      = desc("work_prefetch_ranges_total", "Ranges the prefetcher spooled.")
	pfArticles    = desc("work_prefetch_articles_total", "Overview lines the prefetcher wrote to the spool.")
	pfBytes       = desc("work_prefetch_bytes_total", "Bytes of those lines.")
	pfChunkErrors = desc("work_prefetch_chunk_errors_total", "Failed attempts at a chunk (fetch or write).")
	pfDropped     = desc("work_prefetch_dropped_lines_total", "Lines the provider sent that were not an overview line of the chunk.")

	workDescs = []*prometheus.Desc{workRanges, workArticles, workLeasesLive, workShares, workRate, workStatusUp, workRetired, workBroken, workAcquired, workExpired, workFenced, workSettled, workFinished, workFailed, workReleased, workIndexed, pfInFlight, pfRanges, pfArticles, pfBytes, pfChunkErrors, pfDropped}
)

// AddWorkStatus exports st's source status (ranges by state, leases,
// shares, throughput), read at each scrape with a bounded timeout: one
// read of the source's ranges, leases and share table per scrape.
func (r *Registry) AddWorkStatus(st *work.Store) { r.work.stores.add(st) }

// AddCoordinator exports co's prefetcher and (main shard) lease counters.
func (r *Registry) AddCoordinator(co *work.Coordinator) { r.work.coordinators.add(co) }

// AddWorker exports w's counters and its lease counters.
func (r *Registry) AddWorker(w *work.Worker) { r.work.workers.add(w) }

func (c *workCollector) Describe(ch chan<- *prometheus.Desc) { describe(ch, workDescs...) }

func (c *workCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.stores.snapshot() {
		c.collectStatus(ch, st)
	}
	cos, ws := c.coordinators.snapshot(), c.workers.snapshot()
	if len(cos)+len(ws) == 0 {
		return
	}
	var ls work.LeaseStats
	addLeases := func(s work.LeaseStats) {
		ls.Acquired += s.Acquired
		ls.Expired += s.Expired
		ls.Fenced += s.Fenced
		ls.Settled += s.Settled
	}
	var pf work.PrefetchStats
	active := 0
	for _, co := range cos {
		if l := co.Leases(); l != nil {
			addLeases(l.Stats())
		}
		p := co.Prefetcher()
		s := p.Stats()
		active += p.Active()
		pf.Ranges += s.Ranges
		pf.Articles += s.Articles
		pf.Bytes += s.Bytes
		pf.ChunkErrors += s.ChunkErrors
		pf.Dropped += s.Dropped
	}
	var wsum work.WorkerStats
	for _, w := range ws {
		addLeases(w.Leases().Stats())
		s := w.Stats()
		wsum.Finished += s.Finished
		wsum.Failed += s.Failed
		wsum.Released += s.Released
		wsum.Articles += s.Articles
	}
	counter(ch, workAcquired, float64(ls.Acquired))
	counter(ch, workExpired, float64(ls.Expired))
	counter(ch, workFenced, float64(ls.Fenced))
	counter(ch, workSettled, float64(ls.Settled))
	if len(ws) > 0 {
		counter(ch, workFinished, float64(wsum.Finished))
		counter(ch, workFailed, float64(wsum.Failed))
		counter(ch, workReleased, float64(wsum.Released))
		counter(ch, workIndexed, float64(wsum.Articles))
	}
	if len(cos) > 0 {
		gauge(ch, pfInFlight, float64(active))
		counter(ch, pfRanges, float64(pf.Ranges))
		counter(ch, pfArticles, float64(pf.Articles))
		counter(ch, pfBytes, float64(pf.Bytes))
		counter(ch, pfChunkErrors, float64(pf.ChunkErrors))
		counter(ch, pfDropped, float64(pf.Dropped))
	}
}

// collectStatus exports one source's status; a failed read exports only
// work_status_up 0 (and is logged at debug: the scrape goes on).
func (c *workCollector) collectStatus(ch chan<- prometheus.Metric, st *work.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	src := st.Source()
	s, err := st.Status(ctx)
	if err != nil {
		slog.Debug("metrics: work status", "source", src, "err", err)
		gauge(ch, workStatusUp, 0, src)
		return
	}
	gauge(ch, workStatusUp, 1, src)
	for _, state := range work.States {
		gauge(ch, workRanges, float64(s.Ranges[state]), src, string(state))
		gauge(ch, workArticles, float64(s.Articles[state]), src, string(state))
	}
	gauge(ch, workLeasesLive, float64(len(s.Leases)), src)
	gauge(ch, workShares, float64(len(s.Shares)), src)
	gauge(ch, workRate, s.Throughput, src)
	gauge(ch, workRetired, float64(s.Retired), src)
	gauge(ch, workBroken, float64(len(s.Broken)), src)
}
