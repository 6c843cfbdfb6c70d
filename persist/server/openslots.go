package server

import (
	"errors"
	"io/fs"
	"os"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// The open-stream cache is bounded in file descriptors: each open
// persistent stream holds store.FilesPerOpenStream of them, and a process
// that runs out fails every open, accept and dial it makes, not only the
// stream's. Eviction (evictLocked) keeps the cache a little below
// MaxOpenStreams after each request (cache.go); the slots here make the
// bound exact. A stream takes a slot before its storage opens and gives it
// back when its storage has closed, so streams being opened, served,
// waiting for the closer, closing or compacted all count, and the number of
// open streams never exceeds MaxOpenStreams.

// takeSlot reserves an open-stream slot for a stream about to open. With
// none free it closes, itself and quickly (store.QuickCloser), a stream
// waiting for the closer or else the least recently used idle one: cheaper
// than waiting behind the closer's queue. When every open stream is busy (queued or being served) and none
// is closing it refuses with unavailable, which the client retries, rather
// than open one more file.
func (s *Server) takeSlot() error {
	for {
		if s.tryTakeSlot() {
			return nil
		}
		s.mu.Lock()
		victim := s.takeRetiredLocked()
		if victim == nil && s.idle.head != nil {
			victim = s.idle.head
			s.retireLocked(victim, true)
			s.takeRetiredLocked() // victim: the queue was empty
		}
		if victim != nil {
			victim.quickClose = true // on the request path
			s.mu.Unlock()
			s.slotCloses.Add(1)
			s.finishClose(victim)
			continue
		}
		if len(s.closing) == 0 && s.resolving == 0 {
			s.mu.Unlock()
			return persist.Errorf(persist.CodeUnavailable, "all %d open streams are busy (the open-stream limit, --max-open-streams); retry later", s.cfg.MaxOpenStreams)
		}
		for (len(s.closing) > 0 || s.resolving > 0) && s.openStreams.Load() >= int64(s.cfg.MaxOpenStreams) {
			s.closed.Wait() // the closer, or another worker, is closing one or reading a found one's name
		}
		s.mu.Unlock()
	}
}

// tryTakeSlot takes a slot if one is free, without closing anything.
func (s *Server) tryTakeSlot() bool {
	for {
		n := s.openStreams.Load()
		if n >= int64(s.cfg.MaxOpenStreams) {
			return false
		}
		if s.openStreams.CompareAndSwap(n, n+1) {
			for p := s.openPeak.Load(); n+1 > p && !s.openPeak.CompareAndSwap(p, n+1); p = s.openPeak.Load() {
			}
			return true
		}
	}
}

// surelyMissing reports whether the stream of k is known not to exist, so
// that a read of it needs no slot: a persistent stream whose file is not
// there, nor its archive copy when there is an archive (the open would
// restore it from that). Anything else (an ephemeral stream, a storage
// that cannot tell, an error) is not sure.
func (s *Server) surelyMissing(k handleKey) bool {
	if k.ephemeral {
		return false
	}
	l, ok := s.storage(k).(store.Lister)
	if !ok {
		return false
	}
	if exists, err := l.HasStream(k.scope, k.name); err != nil || exists {
		return false
	}
	if s.cfg.Archive == "" {
		return true
	}
	// Not sure without a look at the archive: a read with no slot free
	// would close an idle stream (an ephemeral one loses its messages)
	// for every made-up name. An archive needs the default storage
	// (validateArchive), which keeps the copy where StreamPath says and
	// restores from it on open.
	p, err := store.StreamPath(s.cfg.Archive, k.scope, k.name)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return errors.Is(err, fs.ErrNotExist)
}

// giveSlot returns a slot taken by takeSlot whose stream did not open (it
// was missing, or failed) or has closed.
func (s *Server) giveSlot() { s.openStreams.Add(-1) }
