package server

import "github.com/switchyard-dev/switchyard/persist/store"

// The open-stream cache keeps its idle streams (open, nothing queued or
// being served) in an intrusive list in the order they became idle, so that
// finding the least recently used one, and closing those unused for
// IdleClose, costs O(1) per stream instead of a scan of every handle.
//
// Closing a stream costs about as much as opening it (SQLite checkpoints its
// WAL and fsyncs), so it is kept off the request path: eviction hands the
// stream to the closer goroutine, and keeps the cache a little below the
// cap (cacheReserve) so that the slots freed by the closer are there when a
// stream has to open. An open that still finds no free slot closes a
// waiting stream itself, quickly, rather than wait (takeSlot). A request for a stream
// waiting for the closer takes it back, open, at no cost (rescueLocked).

// handleList is an intrusive doubly linked list of handles (handle.prev,
// handle.next, handle.list): the idle streams, least recently used at the
// head, or the evicted streams waiting for the closer, first evicted at the
// head. A handle is on at most one list. Guarded by Server.mu.
type handleList struct {
	head, tail *handle
	n          int
}

// pushBack appends h, which is on no list.
func (l *handleList) pushBack(h *handle) {
	h.list, h.prev, h.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = h
	} else {
		l.head = h
	}
	l.tail = h
	l.n++
}

// pushFront puts h, which is on no list, at the head.
func (l *handleList) pushFront(h *handle) {
	h.list, h.prev, h.next = l, nil, l.head
	if l.head != nil {
		l.head.prev = h
	} else {
		l.tail = h
	}
	l.head = h
	l.n++
}

// remove takes h off l; a handle not on l is left alone.
func (l *handleList) remove(h *handle) {
	if h.list != l {
		return
	}
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		l.tail = h.prev
	}
	h.list, h.prev, h.next = nil, nil, nil
	l.n--
}

// cacheReserve is how far below MaxOpenStreams eviction keeps the cache: a
// 32nd of the cap (none below 32), so that while the closer keeps up an open
// finds a free slot without closing anything itself, and the closer finds
// one to compact with.
func cacheReserve(maxOpen int) int { return maxOpen / 32 }

// idleLocked puts h, just served and left open with nothing queued, on
// the idle list by its last use: at the most recently used end, or at
// the least recently used one when it was used before the head was (it
// served only the server's own jobs, expiry or a backup, which are no
// use: the stream idles toward IdleClose and eviction as if they had not
// run).
func (s *Server) idleLocked(h *handle) {
	s.idle.remove(h)
	if head := s.idle.head; head != nil && h.lastUsed.Before(head.lastUsed) {
		s.idle.pushFront(h)
		return
	}
	s.idle.pushBack(h)
}

// sizeLocked counts h, which is in the cache, toward the cache's size
// (handle.sized).
func (s *Server) sizeLocked(h *handle) {
	if !h.sized {
		h.sized = true
		s.sized++
	}
}

// dropLocked takes h out of the cache, and out of its size.
func (s *Server) dropLocked(h *handle) {
	delete(s.handles, h.key)
	if h.sized {
		h.sized = false
		s.sized--
	}
}

// retireLocked takes the idle handle h out of the cache and queues it for
// the closer, to close quickly or not (see closer). Until it is closed it
// counts in closing (a drop of the stream waits for it) and in the
// open-stream slots.
func (s *Server) retireLocked(h *handle, quick bool) {
	h.quickClose = quick
	s.idle.remove(h)
	s.dropLocked(h)
	s.closing[h.key]++
	s.retired[h.key] = h
	s.toClose.pushBack(h)
	s.closeWork.Signal()
}

// takeRetiredLocked takes the first handle waiting for the closer off its
// queue, for the caller to close with finishClose; nil when none waits.
func (s *Server) takeRetiredLocked() *handle {
	h := s.toClose.head
	if h == nil {
		return nil
	}
	s.toClose.remove(h)
	delete(s.retired, h.key)
	return h
}

// rescueLocked puts back into the cache the handle of k that waits for the
// closer, if there is one, and returns it: its stream is still open, so the
// request that wants it neither opens it again nor races its close.
func (s *Server) rescueLocked(k handleKey) *handle {
	h := s.retired[k]
	if h == nil {
		return nil
	}
	s.toClose.remove(h)
	delete(s.retired, k)
	s.handles[k] = h
	s.sizeLocked(h) // still open
	s.doneClosingLocked(k)
	s.rescued.Add(1)
	return h
}

// doneClosingLocked counts one retired handle of k as no longer closing.
func (s *Server) doneClosingLocked(k handleKey) {
	if s.closing[k]--; s.closing[k] <= 0 {
		delete(s.closing, k)
	}
	s.closed.Broadcast()
}

// finishClose closes a retired handle taken off the closer's queue (or
// evicted by takeSlot) and counts it closed; one to close quickly
// (h.quickClose) is closed with CloseQuick and, when that left its WAL,
// listed for compaction (see closer). A new handle of the same stream
// may be open and served meanwhile: two connections to one file are fine for
// SQLite, but not a drop removing the file under this one, whose close
// still checkpoints, removes "-wal" by name (a new stream's, by then) and
// backs up to the archive. So each close is counted until it is done, and a
// drop waits for it (waitClosedLocked).
func (s *Server) finishClose(h *handle) {
	if err := s.closeHandleHow(h, h.quickClose); err != nil {
		s.log.Warn("persist: close stream", "scope", h.key.scope, "stream", h.key.name, "err", err)
	}
	s.mu.Lock()
	s.doneClosingLocked(h.key)
	if h.walKept {
		if _, listed := s.compacting[h.key]; !listed {
			s.compacting[h.key] = struct{}{}
			s.toCompact = append(s.toCompact, h.key)
		}
	}
	// The close gave a slot back: a closer that found none for a
	// compaction waits for work, and a close done by an open on a worker
	// (takeSlot) would otherwise not wake it.
	s.closeWork.Signal()
	s.mu.Unlock()
}

// closer closes the retired streams, in the order they were evicted, until
// Stop (stopCloser); it closes what is queued before it returns. A stream
// evicted to make room is closed quickly (store.QuickCloser: the WAL stays,
// for the next open to append to without an fsync), about a third of a
// full close, so that the closer keeps pace with the opens of writes spread
// over many more streams than the cache holds; one closed for being idle
// is closed fully (the WAL checkpointed into the database and removed, so a
// closed stream takes the least disk). When nothing waits to be closed,
// the closer compacts the streams closed quickly, one at a time (compact),
// and then those the walk at start found left so by an earlier run
// (streamcount.go).
func (s *Server) closer() {
	defer close(s.closerDone)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if h := s.takeRetiredLocked(); h != nil {
			s.mu.Unlock()
			s.finishClose(h)
			s.mu.Lock()
			continue
		}
		if s.closerQuit {
			return
		}
		if s.upkeepLocked() {
			if k, ok := s.nextCompactLocked(); ok {
				s.mu.Unlock()
				s.compact(k)
				s.mu.Lock()
				continue
			}
			if f, ok := s.nextFoundLocked(); ok {
				s.mu.Unlock()
				s.resolveFound(f)
				s.mu.Lock()
				continue
			}
		} else if s.upkeepWaits != nil {
			s.upkeepWaits()
		}
		s.closeWork.Wait()
	}
}

// upkeepLocked reports whether the closer may compact (and resolve what
// the start's walk found) now. Compacting a stream costs about what opening
// one does, on a core and in the file: while requests are being served it
// waits, so that a burst of writes spread over more streams than the
// cache holds is not slowed by the compactions of its own evictions (up
// to a third more sets a second while the backlog covers the burst,
// docs/benchmarks.md); doneServing wakes it
// when the last request is done. Past compactMax streams waiting it
// compacts under load too, which bounds the disk their WALs hold; the
// streams the start's walk found with a WAL count among them, so that a
// server busy from its start works those down to the same bound.
func (s *Server) upkeepLocked() bool {
	return !s.busyLocked() || len(s.toCompact)+len(s.foundWAL) > s.compactMax
}

// compactBacklog is how many quickly closed streams may wait for
// compaction while the server is busy: the open-stream cap's worth (at
// least 256). Each keeps its WAL meanwhile: the pages its writes touched
// while it was open, at most the quick close's bound (256 KiB). Four caps'
// worth made spread writes faster still, but left more WAL than the idle
// moments after a burst compact (docs/benchmarks.md).
func compactBacklog(maxOpen int) int { return max(maxOpen, 256) }

// nextCompactLocked takes the next stream to compact off toCompact, with a
// slot for it (a compaction opens the stream's files): one not in the
// cache, nor waiting to be closed or closing. A stream in service is
// dropped from the list, its next close decides again. With no slot free
// it takes nothing.
func (s *Server) nextCompactLocked() (handleKey, bool) {
	if s.noCompact {
		return handleKey{}, false
	}
	for len(s.toCompact) > 0 {
		k := s.toCompact[0]
		if _, inUse := s.handles[k]; inUse || s.retired[k] != nil || s.closing[k] > 0 {
			s.toCompact = s.toCompact[1:]
			delete(s.compacting, k)
			continue
		}
		if !s.tryTakeSlot() {
			return handleKey{}, false
		}
		s.toCompact[0] = handleKey{}
		s.toCompact = s.toCompact[1:]
		delete(s.compacting, k)
		// Counted as closing, so that a drop of the stream waits for it
		// before it removes the files.
		s.closing[k]++
		return k, true
	}
	s.toCompact = nil // let the array go
	return handleKey{}, false
}

// compact checkpoints the WAL of the closed stream k into its database
// (store.Compacter), gives back the slot nextCompactLocked took and counts
// the compaction done. A request that opens the stream meanwhile opens a
// second connection to the file, which is fine: the compaction's close is
// then not the last one and leaves the WAL to it.
func (s *Server) compact(k handleKey) {
	if c, ok := s.storage(k).(store.Compacter); ok {
		if err := c.Compact(k.scope, k.name); err != nil {
			s.log.Warn("persist: compact stream", "scope", k.scope, "stream", k.name, "err", err)
		} else {
			s.compacted.Add(1)
		}
	}
	s.giveSlot()
	s.mu.Lock()
	s.doneClosingLocked(k)
	s.mu.Unlock()
}

// stopCloser has the closer close what it holds and return, and waits for
// it; without a closer (a server never started) it closes the queue itself.
func (s *Server) stopCloser() {
	s.mu.Lock()
	s.closerQuit = true
	s.closeWork.Broadcast()
	done := s.closerDone
	s.mu.Unlock()
	if done != nil {
		<-done
		return
	}
	for {
		s.mu.Lock()
		h := s.takeRetiredLocked()
		s.mu.Unlock()
		if h == nil {
			return
		}
		s.finishClose(h)
	}
}
