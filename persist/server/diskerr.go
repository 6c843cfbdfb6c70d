package server

import (
	"errors"

	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/persist/store"
)

// storageError is what a caller hears of a failed storage call: a failure of
// the disk (full, read-only, I/O; a *store.DiskError) is unavailable with
// its reason, since it goes away once space is freed or the directory is
// writable again; an *persist.Error keeps its code; anything else is
// internal.
func storageError(err error) error {
	if d, ok := store.IsDiskError(err); ok {
		// d's own text starts with the reason, whatever wrapped it.
		return persist.Errorf(persist.CodeUnavailable, "%v", d)
	}
	var e *persist.Error
	if errors.As(err, &e) {
		return err
	}
	return persist.Errorf(persist.CodeInternal, "%v", err)
}

// dropIfStuck closes h's stream after a disk error whose connection may be
// stuck in the failed state (SQLite falls back to opening a file it cannot
// write read-only and stays so): the next request on h opens it afresh,
// which is how a stream recovers without a restart once the directory is
// writable again.
func (s *Server) dropIfStuck(h *handle, err error) {
	d, ok := store.IsDiskError(err)
	if !ok || !d.Reopen || h.st == nil {
		return
	}
	if cerr := s.closeHandle(h); cerr != nil {
		s.log.Warn("persist: close stream after disk error", "scope", h.key.scope, "stream", h.key.name, "err", cerr)
	}
}
