package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/server"
)

// labelOther stands for a command or code outside the closed sets: a
// client can send any Sy-Cmd, and a label must not take its value.
const labelOther = "other"

// persistCmds and persistCodes are the closed sets of the requests metric's
// labels; codeOK labels a success.
var (
	persistCmds = []string{
		persist.CmdSet, persist.CmdSetMany, persist.CmdGet, persist.CmdGetAll,
		persist.CmdDelete, persist.CmdKeys, persist.CmdInventory, persist.CmdConfig, persist.CmdStats,
	}
	persistCodes = []persist.Code{
		persist.CodeBadRequest, persist.CodeNotFound, persist.CodeWrongOwner,
		persist.CodeWrongLastSequence, persist.CodeReject, persist.CodeTooLarge,
		persist.CodeForbidden, persist.CodeUnavailable, persist.CodeInternal,
	}
)

const codeOK = "ok"

// Buckets: requests and commits take from tens of microseconds (a cached
// get) to seconds (a large synchronous commit); commits hold 1 to
// MaxCommitOpsDefault messages.
var (
	latencyBuckets = prometheus.ExponentialBuckets(50e-6, 4, 10) // 50µs .. ~13s
	batchBuckets   = prometheus.ExponentialBuckets(1, 4, 8)      // 1 .. 16384
)

// persistCollector exports persist servers: the histograms and request
// counters fed by each server's Observer, and its Stats read at scrape time.
type persistCollector struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	commitD  *prometheus.HistogramVec
	commitN  *prometheus.HistogramVec

	servers sources[namedServer]
}

type namedServer struct {
	id  string
	srv *server.Server
}

var (
	persistCommits       = desc("persist_commits_total", "Write transactions (group commits) committed.", "server")
	persistCommitFails   = desc("persist_commit_failures_total", "Write transactions the storage refused (disk full, read-only, I/O).", "server")
	persistFeed          = desc("persist_feed_messages_total", "Change-feed messages published.", "server")
	persistFeedLocal     = desc("persist_feed_local_total", "Change-feed messages handed to watchers in the server's own process without the bus (only they listened).", "server")
	persistFeedUnheard   = desc("persist_feed_unheard_total", "Change-feed messages not published: nothing listened on the bus.", "server")
	persistFeedFails     = desc("persist_feed_publish_failures_total", "Change-feed messages the NATS connection refused (watchers see them as gaps).", "server")
	persistDedup         = desc("persist_dedup_hits_total", "Writes answered from the msgID de-duplication window (nothing written).", "server")
	persistExpired       = desc("persist_expired_messages_total", "Messages removed by the expiry timer (TTL, max_age) and by tightened limits.", "server")
	persistReplyRefused  = desc("persist_reply_refused_total", "Requests dropped unanswered: their reply subject was missing or not an inbox.", "server")
	persistDeadline      = desc("persist_deadline_dropped_total", "Requests dropped unanswered and unapplied: their Sy-Deadline had passed when their turn came.", "server")
	persistQueueRefused  = desc("persist_queue_refused_total", "Requests answered unavailable on arrival: their stream had 10,000 requests waiting (MaxQueue) or the server's queued requests would have passed MaxQueueBytes.", "server")
	persistQueuedBytes   = desc("persist_queued_request_bytes", "Bytes the requests queued or being served hold, as MaxQueueBytes counts them.", "server")
	persistOpenStreams   = desc("persist_open_streams", "Streams in the server's cache of open streams.", "server")
	persistOpenBytes     = desc("persist_open_stream_bytes", "Bytes stored in the open streams.", "server")
	persistOpenStorage   = desc("persist_open_stream_storage", "Streams whose storage is open, opening or closing; a persistent one holds 3 file descriptors (its database, -wal and -shm).", "server")
	persistMaxOpen       = desc("persist_max_open_streams", "The server's open-stream cap (--max-open-streams): open_stream_storage never exceeds it.", "server")
	persistStreams       = desc("persist_streams", "Persistent streams the server holds on disk, open or closed (counted by a walk of the data directory at start, then kept up by creates and drops); absent until counted.", "server")
	persistRescued       = desc("persist_streams_rescued_total", "Evicted streams taken back, still open, by a request that came before the closer closed them.", "server")
	persistWaitCloses    = desc("persist_open_wait_closes_total", "Streams an open closed itself because no open-stream slot was free (the closer behind).", "server")
	persistCompacted     = desc("persist_streams_compacted_total", "Streams closed quickly whose WAL the closer later checkpointed into their database (those an earlier run left included).", "server")
	persistCompactWait   = desc("persist_compaction_backlog", "Streams waiting for the closer to compact their WAL: it waits while requests are being served.", "server")
	persistColdCloses    = desc("persist_streams_cold_closed_total", "Streams closed as soon as they were idle because their last request said Sy-Cold (no more requests soon).", "server")
	persistReady         = desc("persist_ready", "1 while the server serves, its NATS connection is up and its last commit succeeded.", "server")
	persistCheckpoints   = desc("persist_checkpoints_total", "WAL checkpoints run between requests (a stream's WAL grown to 500 pages with nothing queued for it), so that no commit waits for one.", "server")
	persistCkptFails     = desc("persist_checkpoint_failures_total", "Checkpoints between requests that failed (SQLite's own, inside a commit, still bounds the WAL).", "server")
	persistCollectorDesc = []*prometheus.Desc{persistCheckpoints, persistCkptFails, persistCommits, persistCommitFails, persistFeed, persistFeedLocal, persistFeedUnheard, persistFeedFails, persistDedup, persistExpired, persistReplyRefused, persistDeadline, persistQueueRefused, persistQueuedBytes, persistOpenStreams, persistOpenBytes, persistOpenStorage, persistMaxOpen, persistStreams, persistRescued, persistWaitCloses, persistCompacted, persistCompactWait, persistColdCloses, persistReady}
)

func newPersistCollector() *persistCollector {
	return &persistCollector{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "persist_requests_total",
			Help: "Requests answered, by command and code (ok for a success).",
		}, []string{"server", "cmd", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "persist_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer, for requests queued on their stream.",
			Buckets: latencyBuckets,
		}, []string{"server", "cmd"}),
		commitD: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "persist_commit_duration_seconds",
			Help:    "Time the storage took to write one group commit.",
			Buckets: latencyBuckets,
		}, []string{"server"}),
		commitN: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "persist_commit_batch_messages",
			Help:    "Messages in one group commit.",
			Buckets: batchBuckets,
		}, []string{"server"}),
	}
}

// PersistObserver returns the hook to put in server.Config.Observer of the
// server with this id; add the server itself with AddPersistServer.
func (r *Registry) PersistObserver(id string) server.Observer {
	return newPersistObserver(r.persist, id)
}

// AddPersistServer exports srv's Stats and Ready under server=id.
func (r *Registry) AddPersistServer(id string, srv *server.Server) {
	r.persist.servers.add(namedServer{id, srv})
}

func (c *persistCollector) Describe(ch chan<- *prometheus.Desc) {
	c.requests.Describe(ch)
	c.latency.Describe(ch)
	c.commitD.Describe(ch)
	c.commitN.Describe(ch)
	describe(ch, persistCollectorDesc...)
}

func (c *persistCollector) Collect(ch chan<- prometheus.Metric) {
	c.requests.Collect(ch)
	c.latency.Collect(ch)
	c.commitD.Collect(ch)
	c.commitN.Collect(ch)
	for _, s := range c.servers.snapshot() {
		st := s.srv.Stats()
		counter(ch, persistCommits, float64(st.Commits), s.id)
		counter(ch, persistCommitFails, float64(st.CommitFailures), s.id)
		counter(ch, persistFeed, float64(st.FeedPublished), s.id)
		counter(ch, persistFeedLocal, float64(st.FeedLocal), s.id)
		counter(ch, persistFeedUnheard, float64(st.FeedUnheard), s.id)
		counter(ch, persistFeedFails, float64(st.FeedFailed), s.id)
		counter(ch, persistDedup, float64(st.Dedup), s.id)
		counter(ch, persistExpired, float64(st.Expired), s.id)
		counter(ch, persistReplyRefused, float64(st.ReplyRefused), s.id)
		counter(ch, persistDeadline, float64(st.DeadlineDropped), s.id)
		counter(ch, persistQueueRefused, float64(st.QueueRefused), s.id)
		gauge(ch, persistQueuedBytes, float64(st.QueuedBytes), s.id)
		gauge(ch, persistOpenStreams, float64(st.OpenStreams), s.id)
		gauge(ch, persistOpenBytes, float64(st.OpenBytes), s.id)
		gauge(ch, persistOpenStorage, float64(st.OpenStorage), s.id)
		gauge(ch, persistMaxOpen, float64(st.MaxOpenStreams), s.id)
		if st.Streams >= 0 {
			gauge(ch, persistStreams, float64(st.Streams), s.id)
		}
		counter(ch, persistRescued, float64(st.StreamsRescued), s.id)
		counter(ch, persistWaitCloses, float64(st.OpenWaitCloses), s.id)
		counter(ch, persistCompacted, float64(st.StreamsCompacted), s.id)
		gauge(ch, persistCompactWait, float64(st.CompactBacklog), s.id)
		counter(ch, persistColdCloses, float64(st.ColdCloses), s.id)
		counter(ch, persistCheckpoints, float64(st.Checkpoints), s.id)
		counter(ch, persistCkptFails, float64(st.CheckpointFails), s.id)
		ready := 0.0
		if s.srv.Ready() == nil {
			ready = 1
		}
		gauge(ch, persistReady, ready, s.id)
	}
}

// persistObserver is one server's Observer. A label child is made on its
// first use (so only the commands and codes seen are exported) and kept in
// a fixed slot: a request then costs a read-only map lookup, an atomic load
// and an atomic add, no lock and no allocation.
type persistObserver struct {
	c        *persistCollector
	id       string
	cmdIdx   map[string]int                        // command -> slot; labelOther is the last
	codeIdx  map[string]int                        // code -> slot; labelOther is the last
	cmds     []string                              // slot -> command label
	codes    []string                              // slot -> code label
	requests []atomic.Pointer[prometheus.Counter]  // [cmd*len(codes)+code]
	latency  []atomic.Pointer[prometheus.Observer] // [cmd]
	commitD  prometheus.Observer
	commitN  prometheus.Observer
}

var _ server.Observer = (*persistObserver)(nil)

func newPersistObserver(c *persistCollector, id string) *persistObserver {
	o := &persistObserver{
		c: c, id: id,
		cmdIdx: map[string]int{}, codeIdx: map[string]int{},
		commitD: c.commitD.WithLabelValues(id),
		commitN: c.commitN.WithLabelValues(id),
	}
	o.cmds = append(append(o.cmds, persistCmds...), labelOther)
	o.codes = append(o.codes, codeOK)
	for _, code := range persistCodes {
		o.codes = append(o.codes, string(code))
	}
	o.codes = append(o.codes, labelOther)
	for i, cmd := range o.cmds {
		o.cmdIdx[cmd] = i
	}
	for i, code := range o.codes {
		o.codeIdx[code] = i
	}
	o.requests = make([]atomic.Pointer[prometheus.Counter], len(o.cmds)*len(o.codes))
	o.latency = make([]atomic.Pointer[prometheus.Observer], len(o.cmds))
	return o
}

// slot maps a label value to its slot; unknown values go to labelOther.
func slot(idx map[string]int, v string) int {
	if i, ok := idx[v]; ok {
		return i
	}
	return idx[labelOther]
}

func (o *persistObserver) Answered(cmd string, code persist.Code) {
	key := string(code)
	if key == "" {
		key = codeOK
	}
	ci, ki := slot(o.cmdIdx, cmd), slot(o.codeIdx, key)
	p := &o.requests[ci*len(o.codes)+ki]
	ctr := p.Load()
	if ctr == nil {
		// Two first uses may race: WithLabelValues returns the same child.
		c := o.c.requests.WithLabelValues(o.id, o.cmds[ci], o.codes[ki])
		ctr = &c
		p.Store(ctr)
	}
	(*ctr).Inc()
}

func (o *persistObserver) Served(cmd string, d time.Duration) {
	ci := slot(o.cmdIdx, cmd)
	p := &o.latency[ci]
	h := p.Load()
	if h == nil {
		x := o.c.latency.WithLabelValues(o.id, o.cmds[ci])
		h = &x
		p.Store(h)
	}
	(*h).Observe(d.Seconds())
}

func (o *persistObserver) Committed(ops int, d time.Duration) {
	o.commitD.Observe(d.Seconds())
	o.commitN.Observe(float64(ops))
}
