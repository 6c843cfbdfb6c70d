package store

import (
	"errors"
	"os"
	"syscall"

	"github.com/switchyard-dev/switchyard/persist"
)

// FilesPerOpenStream is the file descriptors an open persistent stream
// holds: its database, its -wal and its -shm (SQLite in WAL mode). A closed
// stream holds none. With SQLiteConfig.Exclusive there is no -shm, and a
// stream holds 2; the open-stream cap still counts 3, which leaves the
// difference to the rest of the process.
const FilesPerOpenStream = 3

// FilesPerExclusiveStream is the file descriptors an open stream of a
// storage with SQLiteConfig.Exclusive holds: its database and its -wal.
const FilesPerExclusiveStream = 2

// FilesPerStream is the file descriptors an open stream holds in a storage
// with SQLiteConfig.Exclusive set to exclusive.
func FilesPerStream(exclusive bool) int {
	if exclusive {
		return FilesPerExclusiveStream
	}
	return FilesPerOpenStream
}

// outOfDescriptors reports whether err, the failure of an open of a
// stream that holds per descriptors, came from the process being out of
// file descriptors. SQLite reports that as "unable to open database file"
// (SQLITE_CANTOPEN) without the errno, so when the error itself does not
// say, more opens tell. One is not enough: SQLite closes what the failed
// open had already opened (the database, when its -wal was the one
// refused), and any other goroutine may close a file meanwhile, so a
// process at its limit a moment ago may have a descriptor or two free
// again. A process that cannot open per+2 files more was out of them.
func outOfDescriptors(err error, per int) bool {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return true
	}
	var probes []*os.File
	defer func() {
		for _, f := range probes {
			f.Close()
		}
	}()
	for range per + 2 {
		f, ferr := os.Open(os.DevNull)
		if ferr != nil {
			return errors.Is(ferr, syscall.EMFILE) || errors.Is(ferr, syscall.ENFILE)
		}
		probes = append(probes, f)
	}
	return false
}

// descriptorError is the answer to an open that failed for want of file
// descriptors: unavailable (the caller retries, and a later open succeeds
// once streams close), saying why and what to change; per is what an open
// stream of the storage holds.
func descriptorError(err error, per int) error {
	return persist.Errorf(persist.CodeUnavailable, "too many open files: the process is at its file descriptor limit (each open stream holds %d; lower --max-open-streams or raise the limit): %v", per, err)
}
