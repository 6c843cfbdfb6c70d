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

func closeHandle(h *handle) error {
	if h.st == nil {
		return nil
	}
	err := h.st.Close()
	h.st = nil
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
	h.queue = append(h.queue, j)
	h.lastUsed = time.Now()
	s.scheduleLocked(h)
	s.mu.Unlock()
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

		s.serve(h, jobs)
		needs := h.st != nil && h.st.NeedsExpiry()
		clear(jobs)

		s.mu.Lock()
		spare = jobs
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
}

// evictLocked removes idle streams from the cache: beyond MaxOpenStreams the
// least recently used first, and (when idle is set) those unused for
// IdleClose. Streams with queued or running work stay. The caller closes
// what it returns, outside the lock.
func (s *Server) evictLocked(now time.Time, idle bool) []*handle {
	var out []*handle
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

func (s *Server) closeAll(hs []*handle) {
	for _, h := range hs {
		if err := closeHandle(h); err != nil {
			s.log.Warn("persist: close stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
		}
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
