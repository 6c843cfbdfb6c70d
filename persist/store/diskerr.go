package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Disk failure reasons: the first words of a DiskError's message, which the
// server sends to the caller.
const (
	ReasonFull     = "disk full"
	ReasonReadOnly = "data directory read-only"
	ReasonCantOpen = "cannot open stream file"
	ReasonIO       = "disk I/O error"
)

// DiskError is a failure of the disk under the data directory rather than
// of the request or of the stream's data: the disk is full, the directory
// is read-only or not writable, or an I/O call failed. It goes away when
// the operator frees space or makes the directory writable again, so the
// server answers it unavailable (retry).
type DiskError struct {
	Reason string // one of the Reason constants
	// Reopen says the stream's connection may be stuck in the state that
	// failed (SQLite opened the file read-only, or an I/O error left the
	// connection unusable): its owner must close the stream so the next
	// request opens it afresh. A refusal by the disk-full guard, which
	// never reached SQLite, does not need it.
	Reopen bool
	Err    error
}

func (e *DiskError) Error() string { return e.Reason + ": " + e.Err.Error() }

// Unwrap returns the underlying SQLite or OS error.
func (e *DiskError) Unwrap() error { return e.Err }

// IsDiskError reports whether err is or wraps a *DiskError, and returns it.
func IsDiskError(err error) (*DiskError, bool) {
	var d *DiskError
	ok := errors.As(err, &d)
	return d, ok
}

// classifyDisk returns err as a *DiskError when it is a disk failure (a
// SQLite FULL, READONLY, CANTOPEN or IOERR result, or an OS error such as
// ENOSPC, EROFS or EACCES from the directory or file calls around SQLite),
// and err unchanged otherwise. SQLite's extended codes keep the primary
// code in their low byte: SQLITE_IOERR_WRITE is SQLITE_IOERR | 3<<8.
func classifyDisk(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := IsDiskError(err); ok {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		if se.Code() == sqlite3.SQLITE_IOERR_SHMSIZE {
			// SQLite could not extend the -shm: ENOSPC in an I/O error's
			// clothes (a new stream's first open on a nearly full disk).
			return &DiskError{Reason: ReasonFull, Err: err}
		}
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL:
			// The connection is fine: SQLite rolled the statement back.
			return &DiskError{Reason: ReasonFull, Err: err}
		case sqlite3.SQLITE_READONLY:
			return &DiskError{Reason: ReasonReadOnly, Reopen: true, Err: err}
		case sqlite3.SQLITE_CANTOPEN:
			return &DiskError{Reason: ReasonCantOpen, Reopen: true, Err: err}
		case sqlite3.SQLITE_IOERR:
			return &DiskError{Reason: ReasonIO, Reopen: true, Err: err}
		}
		return err
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
			return &DiskError{Reason: ReasonFull, Err: err}
		case syscall.EROFS, syscall.EACCES, syscall.EPERM:
			return &DiskError{Reason: ReasonReadOnly, Reopen: true, Err: err}
		case syscall.EIO:
			return &DiskError{Reason: ReasonIO, Reopen: true, Err: err}
		}
	}
	return err
}

// isFull reports whether err is a disk-full DiskError.
func isFull(err error) bool {
	d, ok := IsDiskError(err)
	return ok && d.Reason == ReasonFull
}

// removeCreated removes the stream file p that a failed open created from
// template, with its -shm and -journal files, while it is still byte for
// byte the template with no -wal beside it: a stream nobody could open is
// not left behind to be found by the next walk. A file anyone wrote to is
// never removed (another server sharing the directory may have opened
// the stream since the link): a commit leaves a -wal or, checkpointed,
// other bytes.
func removeCreated(p string, template []byte) {
	// A -wal shorter than its 32-byte header holds no commit: SQLite made
	// it empty before the open failed (a -shm it could not extend).
	if wal, err := os.Lstat(p + walSuffix); err == nil && wal.Size() >= walHeaderBytes || err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, template) {
		return
	}
	if os.Remove(p) != nil {
		return
	}
	for _, suffix := range []string{walSuffix, "-shm", "-journal"} {
		_ = os.Remove(p + suffix) // absent is fine
	}
}

// walHeaderBytes is the size of a WAL file's header, which its first
// commit writes.
const walHeaderBytes = 32

// isBusy reports whether err is SQLite's SQLITE_BUSY: another connection
// held the file's lock past the busy timeout.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}
