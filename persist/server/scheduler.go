package server

import (
	"time"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// failQueuedLocked answers every queued request unavailable and returns how
// many it answered. It looks at every handle, not only the ready ones: a
// stream a worker is serving keeps collecting requests in its queue while it
// is off the ready list. The worker serving such a stream finds its queue
// empty when it is done and unschedules it.
func (s *Server) failQueuedLocked() int {
	n := 0
	for _, h := range s.handles {
		for _, j := range h.queue {
			if j.msg != nil {
				s.replyError(j.msg, persist.Errorf(persist.CodeUnavailable, "server stopping"))
				n++
			}
		}
		s.queuedBytes.Add(-jobsBytes(h.queue))
		h.queue = nil
	}
	for _, h := range s.ready {
		h.scheduled = false
	}
	s.ready = nil
	return n
}

// closeHandle closes h's stream, if open, and takes its bytes out of
// OpenBytes.
func (s *Server) closeHandle(h *handle) error { return s.closeHandleHow(h, false) }

// closeHandleHow is closeHandle, with quick: with the stream's CloseQuick
// when its storage has one (store.QuickCloser).
func (s *Server) closeHandleHow(h *handle, quick bool) error {
	if h.st == nil {
		return nil
	}
	var err error
	kept := false
	if store.InPack(h.st) {
		s.openPacked.Add(-1)
	}
	if qc, ok := h.st.(store.QuickCloser); ok && quick {
		kept, err = qc.CloseQuick()
	} else {
		err = h.st.Close()
	}
	h.walKept = kept
	h.st = nil
	s.feed.closed(h.key)
	if h.key.ephemeral {
		s.openEphemeral.Add(-1)
	}
	s.giveSlot()
	s.noteBytes(h)
	return err
}

// enqueue queues j on the stream of k and makes sure a worker will serve it.
func (s *Server) enqueue(k handleKey, j *job) {
	s.mu.Lock()
	if s.quit {
		s.mu.Unlock()
		s.replyError(j.msg, persist.Errorf(persist.CodeUnavailable, "server stopping"))
		return
	}
	// Checked before the stream's handle is made, which a refused request
	// would leave behind. Additions are made under mu, so the bound holds;
	// one request is taken when none is held, however large.
	size := int64(j.msg.Size()) + jobOverhead + int64(len(j.req.ops))*opOverhead
	if held := s.queuedBytes.Load(); held > 0 && held+size > s.cfg.MaxQueueBytes {
		s.mu.Unlock()
		s.queueRefused.Add(1)
		s.replyError(j.msg, persist.Errorf(persist.CodeUnavailable, "requests waiting on this server hold %d bytes, and this one's %d would pass the bound of %d (MaxQueueBytes); retry later", held, size, s.cfg.MaxQueueBytes))
		return
	}
	h := s.handles[k]
	if h == nil {
		if h = s.rescueLocked(k); h == nil {
			h = &handle{key: k}
			s.handles[k] = h
		}
	}
	if len(h.queue) >= s.cfg.MaxQueue {
		s.mu.Unlock()
		s.queueRefused.Add(1)
		s.replyError(j.msg, persist.Errorf(persist.CodeUnavailable, "stream has %d requests waiting; retry later", s.cfg.MaxQueue))
		return
	}
	if !h.sized && j.createsStream() {
		// It will open the stream: eviction makes room for it ahead of
		// the open.
		s.sizeLocked(h)
	}
	if !h.scheduled && h.st != nil && inlineable(j) && !s.syncs(h) && s.subIdle() {
		// Nothing waits on this stream or behind this message: serve it
		// here, on the subscription's goroutine, instead of handing it to
		// a worker (a wake-up and a switch on every lone request). Marking
		// the stream scheduled keeps workers off it, so its order holds;
		// under load messages wait in the subscription, so they take the
		// queue and its group commit.
		h.scheduled = true
		h.lastUsed = time.Now()
		s.idle.remove(h)
		s.inService++
		s.inlined.Add(1)
		s.wg.Add(1) // before quit is set (checked above), so before Stop waits
		s.mu.Unlock()
		s.serveInline(h, j)
		return
	}
	j.bytes = size
	s.queuedBytes.Add(size)
	h.queue = append(h.queue, j)
	h.lastUsed = time.Now()
	s.scheduleLocked(h)
	if h.waiting {
		select {
		case h.more <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// jobsBytes is what jobs count in Server.queuedBytes.
func jobsBytes(jobs []*job) int64 {
	var n int64
	for _, j := range jobs {
		n += j.bytes
	}
	return n
}

// syncs reports whether h's commits wait for the disk: the server's Sync,
// or the stream's own sync config. The caller owns h (it is being served,
// or holds s.mu while h is not).
func (s *Server) syncs(h *handle) bool {
	return s.cfg.Sync || h.st != nil && h.st.Config().Sync
}

// commitGatherMax bounds how long a sync stream's group commit waits for
// more writes (gather).
const commitGatherMax = 2 * time.Millisecond

// gathers reports whether the worker about to commit jobs on h should wait
// for more writes first: the stream's commits wait for an fsync, every job
// is a write, and fewer writes are queued than its recent commits held.
// Without the wait, writers settle into alternating halves: those answered
// by one commit write again while the next one, holding the others, runs,
// so each commit holds half of them (PostgreSQL's commit_delay answers the
// same). Called with s.mu held.
func (s *Server) gathers(h *handle, jobs []*job) bool {
	if h.commitTook <= 0 || !s.syncs(h) {
		return false
	}
	n := 0
	for _, j := range jobs {
		if j.req == nil || !j.req.isWrite() {
			return false
		}
		n += len(j.req.ops)
	}
	return n < h.peakOps
}

// decayPeak is a stream's recent peak of writes per commit after a commit of
// ops writes: the larger of ops and the old peak less an eighth of it,
// rounded up, so that it falls back to a lone writer's 1 in a dozen commits
// after a burst of 16. (Rounded down, an eighth of a peak under 8 is 0:
// the peak never fell below 7 again, and every later lone write of a sync
// stream waited its gather out.)
func decayPeak(peak, ops int) int {
	return max(ops, peak-(peak+7)/8)
}

// gather waits, for at most half of h's last commit (and
// commitGatherMax), for writes that bring jobs up to the writes of h's
// recent commits, and returns jobs with what came. s.mu is not held; h is
// the caller's (being served).
func (s *Server) gather(h *handle, jobs []*job) []*job {
	s.gathered.Add(1)
	wait := min(h.commitTook/2, commitGatherMax)
	if s.gatherWait > 0 {
		wait = s.gatherWait
	}
	deadline := time.Now().Add(wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-h.more:
		case <-t.C:
		}
		s.mu.Lock()
		jobs = append(jobs, h.queue...)
		clear(h.queue)
		h.queue = h.queue[:0]
		done := s.quit || !time.Now().Before(deadline) || !s.gathers(h, jobs)
		if done {
			h.waiting = false
		}
		s.mu.Unlock()
		if done {
			return jobs
		}
	}
}

// subIdle reports whether no message waits in the subscription behind the
// one being handled (called from the subscription's handler).
func (s *Server) subIdle() bool {
	if s.sub == nil {
		return false
	}
	// nats.go counts the message being handled as pending until its
	// handler returns.
	n, _, err := s.sub.Pending()
	return err == nil && n <= 1
}

// inlineMaxOps and inlineMaxBytes bound a write served on the
// subscription's goroutine: while it runs, requests for every other stream
// wait, so only requests about as cheap as a keyed set are served there
// (values over 1 KiB are compressed on the way in).
const (
	inlineMaxOps   = 16
	inlineMaxBytes = 64 << 10
)

// inlineable reports whether j is cheap enough to serve on the
// subscription's goroutine: a small write or a get. (Streams with sync on
// are never served there: their commits wait for the disk.)
func inlineable(j *job) bool {
	r := j.req
	if r == nil {
		return false
	}
	if r.isWrite() {
		return len(r.ops) <= inlineMaxOps && len(j.msg.Data) <= inlineMaxBytes
	}
	return r.cmd == persist.CmdGet
}

// serveInline serves j on the caller's goroutine; h is marked scheduled.
func (s *Server) serveInline(h *handle, j *job) {
	defer s.wg.Done()
	jobs := [1]*job{j}
	later := s.apply(h, jobs[:])
	s.doneServing(h)
	s.answerWrites(later)
}

func (s *Server) scheduleLocked(h *handle) {
	if !h.scheduled {
		h.scheduled = true
		s.idle.remove(h)
		s.ready = append(s.ready, h)
		s.cond.Signal()
	}
}

// worker serves ready streams until Stop.
func (s *Server) worker() {
	defer s.wg.Done()
	var spare []*job
	for {
		s.mu.Lock()
		for len(s.ready) == 0 && !s.quit {
			s.cond.Wait()
		}
		if len(s.ready) == 0 {
			s.mu.Unlock()
			return
		}
		h := s.ready[0]
		s.ready[0] = nil
		s.ready = s.ready[1:]
		s.inService++
		jobs := h.queue
		h.queue = spare[:0]
		gather := s.gathers(h, jobs)
		if gather {
			h.waiting = true
			if h.more == nil {
				h.more = make(chan struct{}, 1)
			}
		}
		s.mu.Unlock()
		if gather {
			jobs = s.gather(h, jobs)
		}

		held := jobsBytes(jobs) // before apply, which reuses jobs' array
		later := s.apply(h, jobs)
		s.doneServing(h)
		s.answerWrites(later)
		// Every job is answered (or dropped past its deadline) by now.
		s.queuedBytes.Add(-held)
		clear(jobs)
		spare = jobs
	}
}

// apply serves jobs on h as serve does, in runs, checking each request just
// before its run is applied (admit): a run is one group commit's writes,
// consecutive reads, or one delete or config change. The check then sees
// the clock and the placement of the moment the request takes effect, not
// of its arrival: a stream's queue can hold a request for long (a slow
// commit ahead of it, a paused process). Reads in one run are checked
// together, which only lets a read answer a caller who has just left.
// Like serve, it returns the last run's write answers unsent.
func (s *Server) apply(h *handle, jobs []*job) (later writeAnswers) {
	for i := len(jobs) - 1; i >= 0; i-- {
		if r := jobs[i].req; r != nil {
			h.cold = r.cold && !h.key.ephemeral // the last request's word
			break
		}
	}
	for len(jobs) > 0 {
		n := s.runLen(jobs)
		run := s.admit(h, jobs[:n])
		jobs = jobs[n:]
		if len(run) == 0 {
			continue
		}
		// The previous run is committed: its callers hear of it before
		// the next run is applied, as within serve.
		s.answerWrites(later)
		later = s.serve(h, run)
	}
	return later
}

// Kinds of job, for runLen.
const (
	runRead   = iota // a read, or the server's own expiry or backup
	runWrite         // set or setMany: shares a group commit
	runChange        // delete or a config change: a run of its own
)

// jobRun is the kind of run j belongs to.
func jobRun(j *job) int {
	switch {
	case j.req == nil:
		return runRead
	case j.req.isWrite():
		return runWrite
	case j.req.cmd == persist.CmdDelete, j.req.cmd == persist.CmdConfig && j.req.configPatch != nil:
		return runChange
	}
	return runRead
}

// runLen is how many jobs from the first form one run: consecutive writes
// up to one group commit (serve's MaxCommitOps rule), consecutive reads, or
// a single change.
func (s *Server) runLen(jobs []*job) int {
	kind := jobRun(jobs[0])
	switch kind {
	case runChange:
		return 1
	case runWrite:
		n, ops := 1, len(jobs[0].req.ops)
		for n < len(jobs) && jobRun(jobs[n]) == runWrite && ops+len(jobs[n].req.ops) <= s.cfg.MaxCommitOps {
			ops += len(jobs[n].req.ops)
			n++
		}
		return n
	}
	n := 1
	for n < len(jobs) && jobRun(jobs[n]) == runRead {
		n++
	}
	return n
}

// admit returns the jobs of run that may be applied now, reusing run's
// array, and disposes of the others:
//   - A request whose Sy-Deadline has passed is dropped unanswered and
//     counted (DeadlineDropped): its caller gave up and may have retried at
//     another server, so applying it could overwrite a newer write made
//     since. The deadline is the caller's clock and the check is this
//     server's, with no margin: where the server's clock is ahead, a
//     request is dropped while its caller still waits for it, which costs
//     the caller a timeout and a retry; where it is behind, a request may
//     be applied up to the skew after its caller gave up. Clocks kept by
//     NTP differ by milliseconds, and a margin would only trade one for
//     the other.
//   - A request for a scope placement no longer gives this server is
//     answered wrong-owner, so the caller asks the balancer again.
//
// The server's own jobs (expiry, backup) always pass.
func (s *Server) admit(h *handle, run []*job) []*job {
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	t := now()
	owner := "" // asked once per run, for its first request
	kept := run[:0]
	for _, j := range run {
		if j.req == nil {
			kept = append(kept, j)
			continue
		}
		if j.req.gaveUp(t) {
			s.deadlineDropped.Add(1)
			s.log.Debug("persist: request past its deadline dropped", "scope", h.key.scope, "stream", h.key.name, "cmd", j.req.cmd, "late", t.Sub(j.req.deadline))
			continue
		}
		if owner == "" {
			owner = s.cfg.Placement(s.cfg.IDs, h.key.scope)
		}
		if owner != s.cfg.ID {
			s.replyError(j.msg, persist.Errorf(persist.CodeWrongOwner, "scope %q belongs to server %s, not %s", h.key.scope, owner, s.cfg.ID))
			s.served(j)
			continue
		}
		kept = append(kept, j)
	}
	return kept
}

// doneServing hands h back after a worker or serveInline served it: to the
// ready list if work arrived meanwhile, else idle; and closes what is over
// the open-stream limit.
func (s *Server) doneServing(h *handle) {
	s.noteBytes(h)
	needs := h.st != nil && h.st.NeedsExpiry()
	ck, _ := h.st.(store.Checkpointer)
	due := ck != nil && ck.CheckpointDue()
	s.mu.Lock()
	s.inService--
	// lastUsed is the last request's (enqueue): the server's own jobs,
	// the timer's expiry and the archive's backup, are no use, else a
	// stream with max_age, or any with an archive, never idled out.
	h.needsExpiry = needs
	if !h.sized && h.st != nil && s.handles[h.key] == h {
		// Opened by a read (a write counted at enqueue): the stream
		// exists, and counts toward the cache's size from now on.
		s.sizeLocked(h)
	}
	if len(h.queue) == 0 && due && !h.cold && !s.quit && s.handles[h.key] == h {
		// Nothing waits for the stream: its WAL's checkpoint runs now, on
		// a worker, rather than inside a later commit whose writers would
		// wait for it. (A cold stream closes instead, as every stream does
		// at Stop: the close checkpoints, or leaves the WAL for the
		// closer.)
		h.queue = append(h.queue, &job{checkpoint: true})
	}
	if len(h.queue) > 0 {
		s.ready = append(s.ready, h)
		s.cond.Signal()
	} else {
		h.scheduled = false
		// A stream that is still not open was only read while missing
		// (or failed to open): keeping its handle would let reads of
		// made-up names push open streams out of the cache.
		switch {
		case s.handles[h.key] != h:
			// No longer the cache's handle of its stream (only idle
			// handles leave the cache, so not expected): not idle.
		case h.st == nil:
			s.dropLocked(h)
		case h.cold:
			// Its last request said none would follow soon: an open
			// stream holds its file and ~200 KiB until IdleClose, which
			// a stream written once a session (a presence row) never
			// uses again.
			s.retireLocked(h, false)
			s.coldCloses.Add(1)
		default:
			s.idleLocked(h)
		}
	}
	s.evictLocked(time.Now(), false)
	if !s.busyLocked() && (len(s.toCompact) > 0 || len(s.foundWAL) > 0) {
		s.closeWork.Signal() // the closer's upkeep waits for this (upkeepLocked)
	}
	s.mu.Unlock()
}

// busyLocked reports whether requests are being served or wait for a
// worker.
func (s *Server) busyLocked() bool { return s.inService > 0 || len(s.ready) > 0 }

// evictLocked retires idle streams to the closer (retireLocked): beyond
// the cache's size (MaxOpenStreams less cacheReserve, of the handles that
// count toward it: handle.sized) the least recently used first, to be
// closed quickly, and (when idle is set) those unused for
// IdleClose, to be closed fully. Streams
// with queued or running work stay. Both walk the idle list from its least
// recently used end and stop at the first stream that stays.
func (s *Server) evictLocked(now time.Time, idle bool) {
	if idle {
		for h := s.idle.head; h != nil && now.Sub(h.lastUsed) >= s.cfg.IdleClose; h = s.idle.head {
			s.retireLocked(h, false)
		}
	}
	size := s.cfg.MaxOpenStreams - cacheReserve(s.cfg.MaxOpenStreams)
	for s.sized > size && s.idle.head != nil {
		s.retireLocked(s.idle.head, true)
	}
}

// waitClosedLocked waits until no evicted handle of stream k is still
// being closed.
func (s *Server) waitClosedLocked(k handleKey) {
	if h := s.retired[k]; h != nil {
		// Still waiting for the closer: close it here rather than wait
		// behind the streams evicted before it.
		s.toClose.remove(h)
		delete(s.retired, k)
		s.mu.Unlock()
		s.finishClose(h)
		s.mu.Lock()
	}
	for s.closing[k] > 0 {
		s.closed.Wait()
	}
}

// timer runs expiry on open streams and closes idle ones.
func (s *Server) timer() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ExpireEvery)
	defer t.Stop()
	var archiveC <-chan time.Time // nil (never ready) without an archive
	if s.cfg.Archive != "" {
		at := time.NewTicker(s.cfg.ArchiveEvery)
		defer at.Stop()
		archiveC = at.C
	}
	for {
		select {
		case <-s.stopTim:
			return
		case <-archiveC:
			s.mu.Lock()
			s.queueArchivesLocked()
			s.mu.Unlock()
		case now := <-t.C:
			s.mu.Lock()
			// Idle ones first: a stream that needs expiry would be
			// scheduled for it, off the idle list, and never idle out.
			// One closed now expires at its next open.
			s.evictLocked(now, true)
			for _, h := range s.handles {
				if h.needsExpiry && !h.expirePending {
					h.expirePending = true
					h.queue = append(h.queue, &job{expire: true})
					s.scheduleLocked(h)
				}
			}
			s.mu.Unlock()
		}
	}
}
