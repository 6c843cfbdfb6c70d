package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/persist"
)

// WatchStatser is what a watcher offers: *persist.Watcher.
type WatchStatser interface{ Stats() persist.WatchStats }

// watchCollector exports watchers summed by role (the part that runs
// them, such as "search-index"), never by the stream they watch.
type watchCollector struct {
	watchers sources[roleWatcher]
}

type roleWatcher struct {
	role string
	w    WatchStatser
}

var (
	watchCount   = desc("watch_watchers", "Watchers added under the role.", "role")
	watchResyncs = desc("watch_resyncs_total", "Times the watchers re-read their stream (a buffer overflow, a reconnect, a forged or conflicting feed message).", "role")
	watchGaps    = desc("watch_gaps_filled_total", "Feed messages that jumped past the next seq, the gap filled by reading the server.", "role")
	watchRetries = desc("watch_retries_total", "Reads that failed with a transient error and were retried.", "role")
	watchSkipped = desc("watch_skipped_seqs_total", "Seqs removed before a watcher could read them, reported as skipped.", "role")
	watchForged  = desc("watch_forged_total", "Feed claims the server contradicted (never caused by servers; see the trust model).", "role")
	watchLag     = desc("watch_lag_seqs", "The largest lag of the role's watchers: seqs the feed announced that the watcher has not yet accounted for.", "role")
	watchDescs   = []*prometheus.Desc{watchCount, watchResyncs, watchGaps, watchRetries, watchSkipped, watchForged, watchLag}
)

// AddWatcher exports w's WatchStats under role (a fixed name of the part
// that runs it; never a scope or stream name).
func (r *Registry) AddWatcher(role string, w WatchStatser) {
	r.watch.watchers.add(roleWatcher{role, w})
}

func (c *watchCollector) Describe(ch chan<- *prometheus.Desc) { describe(ch, watchDescs...) }

func (c *watchCollector) Collect(ch chan<- prometheus.Metric) {
	type sum struct {
		n                                       int
		resyncs, gaps, retries, skipped, forged uint64
		lag                                     uint64
	}
	byRole := map[string]*sum{}
	var order []string
	for _, rw := range c.watchers.snapshot() {
		s := byRole[rw.role]
		if s == nil {
			s = &sum{}
			byRole[rw.role] = s
			order = append(order, rw.role)
		}
		st := rw.w.Stats()
		s.n++
		s.resyncs += st.Resyncs
		s.gaps += st.Gaps
		s.retries += st.Retries
		s.skipped += st.Skipped
		s.forged += st.Forged
		s.lag = max(s.lag, st.Lag)
	}
	for _, role := range order {
		s := byRole[role]
		gauge(ch, watchCount, float64(s.n), role)
		counter(ch, watchResyncs, float64(s.resyncs), role)
		counter(ch, watchGaps, float64(s.gaps), role)
		counter(ch, watchRetries, float64(s.retries), role)
		counter(ch, watchSkipped, float64(s.skipped), role)
		counter(ch, watchForged, float64(s.forged), role)
		gauge(ch, watchLag, float64(s.lag), role)
	}
}
