package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/persist"
)

// WatchStatser is what a watcher offers: *persist.Watcher.
type WatchStatser interface{ Stats() persist.WatchStats }

// WatchSet is a part whose watchers come and go, such as the WebSocket
// gateway's (one per connection): it reports how many run now and their
// stats summed, the counters of the ended ones included so that they never
// go down. *watch.Gateway is one.
type WatchSet interface {
	WatchStats() (n int, sum persist.WatchStats)
}

// watchCollector exports watchers summed by role (the part that runs
// them, such as "search-index"), never by the stream they watch.
type watchCollector struct {
	watchers sources[roleWatcher]
}

// roleWatcher is one watcher (w) or one set of them (set) under role.
type roleWatcher struct {
	role string
	w    WatchStatser
	set  WatchSet
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
	r.watch.watchers.add(roleWatcher{role: role, w: w})
}

// AddWatchSet exports the watchers of s under role, as AddWatcher does
// for one: their number now and their stats summed.
func (r *Registry) AddWatchSet(role string, s WatchSet) {
	r.watch.watchers.add(roleWatcher{role: role, set: s})
}

// WatchSum is the watchers of one role, summed: Stats' counters added up,
// its Lag the largest.
type WatchSum struct {
	Role     string
	Watchers int
	Stats    persist.WatchStats
}

// Watchers reads the watchers added, summed by role in the order the roles
// were first added: what /metrics exports, for the dashboard.
func (r *Registry) Watchers() []WatchSum { return r.watch.sums() }

func (c *watchCollector) sums() []WatchSum {
	var out []WatchSum
	at := map[string]int{}
	for _, rw := range c.watchers.snapshot() {
		i, ok := at[rw.role]
		if !ok {
			i = len(out)
			at[rw.role] = i
			out = append(out, WatchSum{Role: rw.role})
		}
		s := &out[i]
		var n int
		var st persist.WatchStats
		if rw.set != nil {
			n, st = rw.set.WatchStats()
		} else {
			n, st = 1, rw.w.Stats()
		}
		s.Watchers += n
		s.Stats.Resyncs += st.Resyncs
		s.Stats.Gaps += st.Gaps
		s.Stats.Retries += st.Retries
		s.Stats.Read += st.Read
		s.Stats.Skipped += st.Skipped
		s.Stats.Forged += st.Forged
		s.Stats.IdleChecks += st.IdleChecks
		s.Stats.Lag = max(s.Stats.Lag, st.Lag)
	}
	return out
}

func (c *watchCollector) Describe(ch chan<- *prometheus.Desc) { describe(ch, watchDescs...) }

func (c *watchCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sums() {
		role, st := s.Role, s.Stats
		gauge(ch, watchCount, float64(s.Watchers), role)
		counter(ch, watchResyncs, float64(st.Resyncs), role)
		counter(ch, watchGaps, float64(st.Gaps), role)
		counter(ch, watchRetries, float64(st.Retries), role)
		counter(ch, watchSkipped, float64(st.Skipped), role)
		counter(ch, watchForged, float64(st.Forged), role)
		gauge(ch, watchLag, float64(st.Lag), role)
	}
}
