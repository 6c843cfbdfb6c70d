package server

import (
	"slices"
	"time"

	"github.com/switchyard-dev/switchyard/persist"
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
func (s *Server) closeHandle(h *handle) error {
	if h.st == nil {
		return nil
	}
	err := h.st.Close()
	h.st = nil
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
	h := s.handles[k]
	if h == nil {
		h = &handle{key: k}
		s.handles[k] = h
	}
	if len(h.queue) >= s.cfg.MaxQueue {
		s.mu.Unlock()
		s.replyError(j.msg, persist.Errorf(persist.CodeUnavailable, "stream has %d requests waiting; retry later", s.cfg.MaxQueue))
		return
	}
	if !h.scheduled && h.st != nil && inlineable(j) && !h.st.Config().Sync && s.subIdle() {
		// Nothing waits on this stream or behind this message: serve it
		// here, on the subscription's goroutine, instead of handing it to
		// a worker (a wake-up and a switch on every lone request). Marking
		// the stream scheduled keeps workers off it, so its order holds;
		// under load messages wait in the subscription, so they take the
		// queue and its group commit.
		h.scheduled = true
		s.inlined.Add(1)
		s.wg.Add(1) // before quit is set (checked above), so before Stop waits
		s.mu.Unlock()
		s.serveInline(h, j)
		return
	}
	h.queue = append(h.queue, j)
	h.lastUsed = time.Now()
	s.scheduleLocked(h)
	s.mu.Unlock()
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
	later := s.serve(h, jobs[:])
	s.doneServing(h)
	s.answerWrites(later)
}

func (s *Server) scheduleLocked(h *handle) {
	if !h.scheduled {
		h.scheduled = true
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
		jobs := h.queue
		h.queue = spare[:0]
		s.mu.Unlock()

		later := s.serve(h, jobs)
		s.doneServing(h)
		s.answerWrites(later)
		clear(jobs)
		spare = jobs
	}
}

// doneServing hands h back after a worker or serveInline served it: to the
// ready list if work arrived meanwhile, else idle; and closes what is over
// the open-stream limit.
func (s *Server) doneServing(h *handle) {
	s.noteBytes(h)
	needs := h.st != nil && h.st.NeedsExpiry()
	s.mu.Lock()
	h.lastUsed = time.Now()
	h.needsExpiry = needs
	if len(h.queue) > 0 {
		s.ready = append(s.ready, h)
		s.cond.Signal()
	} else {
		h.scheduled = false
		// A stream that is still not open was only read while missing
		// (or failed to open): keeping its handle would let reads of
		// made-up names push open streams out of the cache.
		if h.st == nil && s.handles[h.key] == h {
			delete(s.handles, h.key)
		}
	}
	evict := s.evictLocked(time.Now(), false)
	s.mu.Unlock()
	s.closeAll(evict)
}

// evictLocked removes idle streams from the cache: beyond MaxOpenStreams the
// least recently used first, and (when idle is set) those unused for
// IdleClose. Streams with queued or running work stay. The caller closes
// what it returns, outside the lock, with closeAll.
func (s *Server) evictLocked(now time.Time, idle bool) []*handle {
	var out []*handle
	defer func() {
		for _, h := range out {
			s.closing[h.key]++
		}
	}()
	if idle {
		for k, h := range s.handles {
			if !h.scheduled && now.Sub(h.lastUsed) >= s.cfg.IdleClose {
				delete(s.handles, k)
				out = append(out, h)
			}
		}
	}
	if excess := len(s.handles) - s.cfg.MaxOpenStreams; excess > 0 {
		var idleHs []*handle
		for _, h := range s.handles {
			if !h.scheduled {
				idleHs = append(idleHs, h)
			}
		}
		slices.SortFunc(idleHs, func(a, b *handle) int { return a.lastUsed.Compare(b.lastUsed) })
		for _, h := range idleHs[:min(excess, len(idleHs))] {
			delete(s.handles, h.key)
			out = append(out, h)
		}
	}
	return out
}

// closeAll closes the handles evictLocked returned. Meanwhile a new handle
// of the same stream may be opened and served: two connections to one file
// are fine for SQLite, but not a drop removing the file under this one,
// whose close still checkpoints, removes "-wal" by name (a new stream's, by
// then) and backs up to the archive. So each close is counted until it is
// done, and a drop waits for it (waitClosedLocked).
func (s *Server) closeAll(hs []*handle) {
	for _, h := range hs {
		if err := s.closeHandle(h); err != nil {
			s.log.Warn("persist: close stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
		}
		s.mu.Lock()
		if s.closing[h.key]--; s.closing[h.key] <= 0 {
			delete(s.closing, h.key)
		}
		s.closed.Broadcast()
		s.mu.Unlock()
	}
}

// waitClosedLocked waits until no evicted handle of stream k is still
// being closed.
func (s *Server) waitClosedLocked(k handleKey) {
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
			for _, h := range s.handles {
				if h.needsExpiry && !h.expirePending {
					h.expirePending = true
					h.queue = append(h.queue, &job{expire: true})
					s.scheduleLocked(h)
				}
			}
			evict := s.evictLocked(now, true)
			s.mu.Unlock()
			s.closeAll(evict)
		}
	}
}
