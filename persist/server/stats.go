package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// Observer receives a server's per-request and per-commit measurements, for
// monitoring (web/metrics adapts it to Prometheus). Its methods are called
// from the subscription's goroutine and the stream workers, concurrently,
// and must be cheap and must not block. A nil Config.Observer costs nothing.
type Observer interface {
	// Answered is called once for every reply to a request: cmd is the
	// request's Sy-Cmd ("" when it had none), code "" for success.
	Answered(cmd string, code persist.Code)
	// Served is called when a request that waited on its stream's queue is
	// answered (every request but those refused on arrival), with the time
	// from its arrival.
	Served(cmd string, d time.Duration)
	// Committed is called after each group commit with its messages and
	// how long the storage write took.
	Committed(ops int, d time.Duration)
}

// Stats is a snapshot of a server's counters and gauges, for monitoring.
type Stats struct {
	Commits        uint64 // write transactions committed
	CommitFailures uint64 // write transactions the storage refused
	FeedPublished  uint64 // feed messages handed to the connection
	FeedFailed     uint64 // feed messages the connection refused
	// FeedLocal counts the feed messages handed to watchers of this
	// process without the bus, FeedUnheard those not published because
	// nothing listened (Config.FeedInterest).
	FeedLocal   uint64
	FeedUnheard uint64
	Dedup       uint64 // writes answered from the msgID window (nothing written)
	// Expired counts the messages the expiry timer (TTL, max_age) and
	// config changes (tighter limits) removed. Removals inside a write (a
	// key's older row, a limit tripped by the write) are not counted: the
	// write's changes do not say which is which.
	Expired uint64
	// ReplyRefused counts the requests dropped unanswered because their
	// reply subject was missing or not an inbox (bus.IsInbox).
	ReplyRefused uint64
	// DeadlineDropped counts the requests dropped unanswered, not applied,
	// because their Sy-Deadline had passed when their turn came: the
	// caller had stopped waiting (and may have retried elsewhere).
	DeadlineDropped uint64
	// QueueRefused counts the requests answered unavailable on arrival
	// because their stream had MaxQueue requests waiting or the server's
	// queued requests would have passed MaxQueueBytes.
	QueueRefused uint64
	// QueuedBytes is what the requests queued or being served hold now,
	// as MaxQueueBytes counts it.
	QueuedBytes int64
	OpenStreams int   // streams in the server's cache (open or being opened)
	OpenBytes   int64 // bytes stored in the open streams (Inventory.Bytes summed)
	// OpenStorage counts the streams whose storage is open, being opened or
	// still closing: at most MaxOpenStreams. A persistent one holds
	// store.FilesPerOpenStream file descriptors.
	OpenStorage int64
	// OpenStoragePeak is the most OpenStorage has been since the server
	// was made.
	OpenStoragePeak int64
	// OpenDescriptors is the file descriptors the open persistent streams
	// hold (those of OpenStorage that are not ephemeral, which hold none):
	// store.FilesPerOpenStream each, store.FilesPerExclusiveStream with
	// Config.ExclusiveFiles.
	OpenDescriptors int64
	// MaxOpenStreams is the server's open-stream cap (Config.MaxOpenStreams
	// after defaults).
	MaxOpenStreams int
	// MaxQueue and MaxQueueBytes are the server's queue bounds
	// (Config.MaxQueue and Config.MaxQueueBytes after defaults).
	MaxQueue      int
	MaxQueueBytes int64
	// StreamsRescued counts evicted streams taken back, still open, by a
	// request that came before the closer reached them (cache.go).
	StreamsRescued uint64
	// OpenWaitCloses counts the streams an open closed itself because no
	// slot was free (the closer behind, or no reserve).
	OpenWaitCloses uint64
	// StreamsCompacted counts the streams closed quickly whose WAL the
	// closer later checkpointed into their database (cache.go), those an
	// earlier run left so included (found by the walk at start).
	StreamsCompacted uint64
	// CompactBacklog is the streams waiting for the closer to compact
	// them now: closed quickly, or found so at start. While requests are
	// being served they wait (up to the cap's worth closed quickly, see
	// upkeepLocked), so a backlog that stays up is a server that is never
	// idle.
	CompactBacklog int
	// ColdCloses counts the streams closed once idle, not kept for
	// IdleClose, because their last request said Sy-Cold.
	ColdCloses uint64
	// Checkpoints counts the WAL checkpoints run between requests, when a
	// stream's WAL had grown to store.IdleCheckpointPages and nothing was
	// queued for it; CheckpointFails those that failed.
	Checkpoints, CheckpointFails uint64
	// Streams is the persistent streams the server holds on disk: the
	// stream files of the scopes it owned at start, counted by a walk of
	// the data directory that runs beside the requests (streamcount.go),
	// plus the streams it created since, less those it dropped. It is -1
	// until the walk has finished, and -2 when there will be no count: the
	// walk failed (it logs why) or the server stopped first, a
	// Config.Storage that cannot list its streams (not a store.Lister), no
	// DataDir.
	// Ephemeral streams are in OpenStreams only: they exist while open.
	Streams int64
}

// Stats returns a snapshot of the counters. It is safe to call at any time.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	open := len(s.handles)
	backlog := len(s.toCompact) + len(s.foundWAL)
	s.mu.Unlock()
	return Stats{
		Commits:          s.commits.Load(),
		CommitFailures:   s.commitFails.Load(),
		FeedPublished:    s.feed.published.Load(),
		FeedFailed:       s.feed.failed.Load(),
		FeedLocal:        s.feed.local.Load(),
		FeedUnheard:      s.feed.unheard.Load(),
		Dedup:            s.dedup.Load(),
		Expired:          s.expired.Load(),
		ReplyRefused:     s.replyRefused.Load(),
		DeadlineDropped:  s.deadlineDropped.Load(),
		QueueRefused:     s.queueRefused.Load(),
		QueuedBytes:      s.queuedBytes.Load(),
		OpenStreams:      open,
		OpenBytes:        s.openBytes.Load(),
		OpenStorage:      s.openStreams.Load(),
		OpenStoragePeak:  s.openPeak.Load(),
		OpenDescriptors:  s.openDescriptors(),
		MaxOpenStreams:   s.cfg.MaxOpenStreams,
		MaxQueue:         s.cfg.MaxQueue,
		MaxQueueBytes:    s.cfg.MaxQueueBytes,
		StreamsRescued:   s.rescued.Load(),
		OpenWaitCloses:   s.slotCloses.Load(),
		StreamsCompacted: s.compacted.Load(),
		CompactBacklog:   backlog,
		ColdCloses:       s.coldCloses.Load(),
		Checkpoints:      s.checkpoints.Load(),
		CheckpointFails:  s.ckptFails.Load(),
		Streams:          s.count.value(),
	}
}

// openDescriptors is Stats.OpenDescriptors.
func (s *Server) openDescriptors() int64 {
	return max(s.openStreams.Load()-s.openEphemeral.Load()-s.openPacked.Load(), 0) * int64(store.FilesPerStream(s.cfg.ExclusiveFiles))
}

// serveServer answers a request to the server itself (persist.ServerScope)
// on the subscription's goroutine: it reads counters only, no I/O.
func (s *Server) serveServer(m *nats.Msg) {
	if cmd := m.Header.Get(persist.HdrCmd); cmd != persist.CmdStats {
		s.replyError(m, persist.Errorf(persist.CodeBadRequest, "command %q is not one a server answers for itself (%s)", cmd, persist.CmdStats))
		return
	}
	st := s.Stats()
	s.replyJSON(m, persist.ServerStats{
		ID: s.cfg.ID, Streams: st.Streams,
		OpenStorage: st.OpenStorage, OpenStoragePeak: st.OpenStoragePeak, MaxOpenStreams: st.MaxOpenStreams,
		Descriptors: st.OpenDescriptors,
		OpenStreams: st.OpenStreams, OpenBytes: st.OpenBytes,
		StreamsRescued: st.StreamsRescued, OpenWaitCloses: st.OpenWaitCloses, StreamsCompacted: st.StreamsCompacted,
		CompactBacklog: st.CompactBacklog,
		MaxQueue:       st.MaxQueue, MaxQueueBytes: st.MaxQueueBytes, QueuedBytes: st.QueuedBytes, QueueRefused: st.QueueRefused,
	})
}

// ErrNotServing is what Ready returns for a server not started, or stopped.
var ErrNotServing = errors.New("persist server: not serving")

// Ready says whether the server can take writes: nil once started, while
// its NATS connection is up and its last commit did not fail; else why not.
// A failed commit (disk full, read-only, I/O error) keeps it unready until
// a later commit succeeds. It is cheap: no I/O.
func (s *Server) Ready() error {
	if !s.base.Running() {
		return ErrNotServing
	}
	if !s.cfg.Conn.IsConnected() {
		return fmt.Errorf("persist server %s: NATS connection %s", s.cfg.ID, s.cfg.Conn.Status())
	}
	if f := s.writeFailure.Load(); f != nil {
		return fmt.Errorf("persist server %s: last commit failed at %s: %w", s.cfg.ID, f.at.Format(time.RFC3339), f.err)
	}
	return nil
}

// writeFailure is the last failed commit, cleared by the next success.
type writeFailure struct {
	at  time.Time
	err error
}

// serverStats are the counters behind Stats, embedded in Server.
type serverStats struct {
	commitFails atomic.Uint64
	dedup       atomic.Uint64
	expired     atomic.Uint64
	openBytes   atomic.Int64
	// replyRefused counts requests dropped for their reply subject (onMsg).
	replyRefused atomic.Uint64
	// deadlineDropped counts requests dropped for their deadline (admit).
	deadlineDropped atomic.Uint64
	// queueRefused counts requests refused for MaxQueue or MaxQueueBytes
	// (enqueue).
	queueRefused atomic.Uint64
	// writeFailure is set by a failed commit and cleared by a good one.
	writeFailure atomic.Pointer[writeFailure]
}

// countExpired adds the seqs of the delete changes of an expiry run or a
// config change to Expired.
func (s *Server) countExpired(changes []store.Change) {
	var n uint64
	for i := range changes {
		if changes[i].Op == store.ChangeDelete {
			n += uint64(len(changes[i].Seqs))
		}
	}
	if n > 0 {
		s.expired.Add(n)
	}
}

// countDedup adds the writes answered from the msgID window to Dedup.
func (s *Server) countDedup(results []store.WriteResult) {
	var n uint64
	for i := range results {
		if results[i].Dup {
			n++
		}
	}
	if n > 0 {
		s.dedup.Add(n)
	}
}

// noteBytes refreshes the stream's share of OpenBytes after a worker served
// it (its Bytes is kept in memory: no I/O).
func (s *Server) noteBytes(h *handle) {
	var b int64
	if h.st != nil {
		b = h.st.Bytes()
	}
	if d := b - h.bytes; d != 0 {
		s.openBytes.Add(d)
		h.bytes = b
	}
}

// answered reports one reply to m to the observer, if any.
func (s *Server) answered(m *nats.Msg, code persist.Code) {
	if o := s.cfg.Observer; o != nil {
		o.Answered(m.Header.Get(persist.HdrCmd), code)
	}
}

// served reports to the observer, if any, that j was answered.
func (s *Server) served(j *job) {
	if o := s.cfg.Observer; o != nil && j.msg != nil && j.req != nil {
		o.Served(j.req.cmd, time.Since(j.start))
	}
}
