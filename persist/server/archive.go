package server

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/switchyard-dev/switchyard/persist/store"
)

// queueArchivesLocked queues a backup job on every open persistent stream
// that has none pending. The job runs on the stream's worker, between its
// transactions; a stream with nothing new since its last backup skips it
// cheaply.
func (s *Server) queueArchivesLocked() {
	for _, h := range s.handles {
		if h.key.ephemeral || h.archivePending {
			continue
		}
		h.archivePending = true
		h.queue = append(h.queue, &job{archive: true})
		s.scheduleLocked(h)
	}
}

// runArchive is the worker's side of a backup job.
func (s *Server) runArchive(h *handle, st store.Stream) {
	s.mu.Lock()
	h.archivePending = false
	s.mu.Unlock()
	a, ok := st.(store.Archiver)
	if !ok {
		return
	}
	if err := a.ArchiveNow(); err != nil {
		s.log.Error("persist: archive", "scope", h.key.scope, "stream", h.key.name, "err", err)
	}
}

// clearArchivePending forgets a backup job that could not run because the
// stream failed to open.
func (s *Server) clearArchivePending(h *handle, jobs []*job) {
	for _, j := range jobs {
		if j.archive {
			s.mu.Lock()
			h.archivePending = false
			s.mu.Unlock()
			return
		}
	}
}

func (c Config) validateArchive() error {
	if c.Archive == "" {
		return nil
	}
	if _, ok := c.Storage.(*store.SQLite); !ok {
		return errors.New("persist server: Archive needs the default SQLite storage")
	}
	if c.DataDir == "" {
		return errors.New("persist server: Archive needs DataDir")
	}
	a, err1 := filepath.Abs(c.Archive)
	d, err2 := filepath.Abs(c.DataDir)
	if err1 == nil && err2 == nil && a == d {
		return errors.New("persist server: Archive must not be the data directory")
	}
	return nil
}

// ArchiveEveryDefault is how often a server backs up the streams written
// since their last backup, when Config.Archive is set.
const ArchiveEveryDefault = 30 * time.Second
