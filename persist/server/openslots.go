package server

import (
	"github.com/switchyard-dev/switchyard/persist"
)

// The open-stream cache is bounded in file descriptors: each open
// persistent stream holds store.FilesPerOpenStream of them, and a process
// that runs out fails every open, accept and dial it makes, not only the
// stream's. Eviction (evictLocked) keeps the cache near MaxOpenStreams
// after each request; the slots here make the bound exact. A stream takes
// a slot before its storage opens and gives it back when its storage has
// closed, so streams being opened, served or closed all count, and the
// number of open streams never exceeds MaxOpenStreams.

// takeSlot reserves an open-stream slot for a stream about to open. With
// none free it closes the least recently used idle streams first; when
// every open stream is busy (queued or being served) it refuses with
// unavailable, which the client retries, rather than open one more file.
func (s *Server) takeSlot() error {
	for {
		if n := s.openStreams.Load(); n < int64(s.cfg.MaxOpenStreams) {
			if s.openStreams.CompareAndSwap(n, n+1) {
				for p := s.openPeak.Load(); n+1 > p && !s.openPeak.CompareAndSwap(p, n+1); p = s.openPeak.Load() {
				}
				return nil
			}
			continue
		}
		s.mu.Lock()
		victims := s.evictIdleLocked(1)
		s.mu.Unlock()
		if len(victims) == 0 && s.closingCount() == 0 {
			return persist.Errorf(persist.CodeUnavailable, "all %d open streams are busy (the open-stream limit, --max-open-streams); retry later", s.cfg.MaxOpenStreams)
		}
		s.closeAll(victims)
		if len(victims) == 0 {
			s.mu.Lock()
			for len(s.closing) > 0 && s.openStreams.Load() >= int64(s.cfg.MaxOpenStreams) {
				s.closed.Wait() // another worker is closing one
			}
			s.mu.Unlock()
		}
	}
}

// giveSlot returns a slot taken by takeSlot whose stream did not open (it
// was missing, or failed) or has closed.
func (s *Server) giveSlot() { s.openStreams.Add(-1) }

// closingCount is how many evicted streams are still being closed.
func (s *Server) closingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.closing)
}

// evictIdleLocked takes up to n of the least recently used idle streams
// out of the cache, for the caller to close with closeAll. (Idle handles
// are open ones: doneServing drops a handle whose stream did not open. h.st
// itself is the serving worker's to read, not this one's.)
func (s *Server) evictIdleLocked(n int) []*handle {
	var out []*handle
	for range n {
		var lru *handle
		for _, h := range s.handles {
			if !h.scheduled && (lru == nil || h.lastUsed.Before(lru.lastUsed)) {
				lru = h
			}
		}
		if lru == nil {
			break
		}
		delete(s.handles, lru.key)
		s.closing[lru.key]++
		out = append(out, lru)
	}
	return out
}
