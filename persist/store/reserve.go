package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// The disk reserve: a file of ReserveBytes in the data directory, written
// while there is space, that makes deleting on a full disk possible.
//
// In WAL mode a delete appends pages to the stream's -wal file, and a
// checkpoint copies the WAL into the database file before the WAL can be
// truncated, so freeing space first needs space; on a disk filled to the
// last byte every delete fails with "database or disk is full" and the data
// stays stuck. So when a write fails for space, the storage removes the
// reserve and enters the full state: writes, config changes and opens of
// streams that have no file yet are refused (DiskError, disk full) before
// they reach SQLite, so they cannot eat the space the reserve gave back,
// while deletes and expiry run and are followed by WAL checkpoints
// (TRUNCATE) and an incremental vacuum that hand the freed pages back to the
// filesystem (giveBack). Every refused write first tries to write the
// reserve again with as much again beside it; once that fits (space was
// freed, by deletes or by the operator), the full state ends and writes go
// through: no restart is needed.

// ReserveBytesDefault is SQLiteConfig.ReserveBytes when zero: twice what a
// stream's WAL holds before SQLite's automatic checkpoint (1,000 pages of
// 4 KiB in files made before newFilePageSize, of 2 KiB since), so that the
// checkpoint a delete on a full disk needs, which can grow the database
// file by what the WAL holds, can finish. A single
// transaction larger than that leaves a larger WAL, and the operator may
// have to free space by hand.
const ReserveBytesDefault = 8 << 20

// reserveName is the reserve's file name in the data directory. It cannot
// collide with a scope directory: scopes never start with '.'.
const reserveName = ".reserve"

// space is the full state and the reserve of one data directory. It is
// shared by the streams of one SQLite storage and safe for concurrent use.
type space struct {
	path string // the reserve file; "" = no reserve (ReserveBytes < 0)
	size int64

	mu   sync.Mutex // protects full and serializes reserve file changes
	full bool
}

func newSpace(dir string, size int64) *space {
	sp := &space{size: size}
	if dir != "" && size > 0 {
		sp.path = filepath.Join(dir, reserveName)
	}
	return sp
}

// admit is called before anything that adds data. Outside the full state
// it lets the caller go on at once. In the full state it tries to write the
// reserve again, with headroom, and refuses with a disk-full DiskError while
// that does not fit.
func (sp *space) admit() error {
	if sp == nil || sp.path == "" {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.full {
		return nil
	}
	// The reserve's own space came back when it was released: leaving the
	// full state needs as much again free beside it, or the first write
	// would fill the disk once more and take the reserve with it.
	if err := sp.fillLocked(sp.size); err != nil {
		return &DiskError{Reason: ReasonFull, Err: fmt.Errorf("writes wait until the data directory has room for its %d-byte reserve and as much again (deletes still run): %w", sp.size, err)}
	}
	sp.full = false
	return nil
}

// ensure writes the reserve when it is missing (at first use, or after a
// restart on a full disk). It enters the full state when there is no room.
func (sp *space) ensure() {
	if sp == nil || sp.path == "" {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.full {
		return
	}
	if fi, err := os.Stat(sp.path); err == nil && fi.Size() >= sp.size {
		return
	}
	// Only a full disk: a read-only directory is answered by the opens and
	// writes that fail on it, and must not look like a full one.
	if err := sp.fillLocked(0); err != nil && isFull(classifyDisk(err)) {
		sp.full = true
	}
}

// release removes the reserve and enters the full state, after err (a
// storage error) said the disk is full.
func (sp *space) release(err error) {
	if sp == nil || sp.path == "" || !isFull(err) {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.full = true
	_ = os.Remove(sp.path) // a missing reserve is what we want
}

// isFull reports whether the storage is in the full state.
func (sp *space) isFull() bool {
	if sp == nil {
		return false
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.full
}

// fillLocked writes the reserve in full, with zeros (blocks a sparse file
// would not hold), to a temporary name renamed into place, so a reserve
// file is never shorter than size; on failure nothing is left behind. It
// does not fsync: the filesystem allocates (or refuses with ENOSPC) at
// write time, which is all the reserve is for, and an fsync of megabytes on
// a stream's first open would hold that open up. With
// headroom > 0 it first proves that much more is free by writing it too,
// then cuts the file back to size.
func (sp *space) fillLocked(headroom int64) error {
	if fi, err := os.Stat(sp.path); err == nil && fi.Size() >= sp.size && headroom == 0 {
		return nil
	}
	_ = os.Remove(sp.path) // a short one from a crash; rewritten below
	tmp := sp.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	buf := make([]byte, 64<<10)
	var werr error
	total := sp.size + headroom
	for n := int64(0); n < total && werr == nil; n += int64(len(buf)) {
		_, werr = f.Write(buf[:min(int64(len(buf)), total-n)])
	}
	if werr == nil && headroom > 0 {
		werr = f.Truncate(sp.size)
	}
	if err := f.Close(); err != nil && werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp, sp.path)
	}
	if werr != nil {
		_ = os.Remove(tmp) // give the space back
		return fmt.Errorf("reserve: %w", werr)
	}
	return nil
}

// fail classifies a stream operation's error and, when the disk is full,
// releases the reserve so that deletes can run.
func (s *sqliteStream) fail(err error) error {
	err = classifyDisk(err)
	s.space.release(err)
	return err
}

// giveBack runs after a delete or expiry committed while the disk is full
// and hands the freed space back to the filesystem. First a
// checkpoint(TRUNCATE) copies the WAL into the database file and cuts the
// -wal file to zero bytes; the copy can grow the file by what the WAL held,
// which the released reserve has room for (see ReserveBytesDefault). Then,
// giveBackPages at a time so that the WAL each step writes stays small, an
// incremental vacuum moves pages from the end of the file into freed ones
// and truncates it, and another checkpoint cuts the WAL again. A file
// created before auto_vacuum=INCREMENTAL was set gives back nothing this
// way (its free pages serve its own later writes). It is best effort: the
// delete is committed whatever happens here, and the next delete retries.
func (s *sqliteStream) giveBack() {
	if !s.space.isFull() {
		return
	}
	ctx := context.Background()
	checkpoint := func() error {
		_, err := s.execSQL(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		return err
	}
	if checkpoint() != nil {
		return
	}
	prev := int64(-1)
	for {
		var free int64
		if err := s.queryRowSQL(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return
		}
		// Stop when nothing is free, or when a step freed nothing (an
		// auto_vacuum=NONE file, or no room even for a small step).
		if free == 0 || (prev >= 0 && free >= prev) {
			return
		}
		prev = free
		if _, err := s.execSQL(ctx, `PRAGMA incremental_vacuum(`+strconv.Itoa(giveBackPages)+`)`); err != nil {
			return
		}
		if checkpoint() != nil {
			return
		}
	}
}

// giveBackPages is how many pages one incremental vacuum step of giveBack
// frees: 1 MiB of 4 KiB pages, well inside the reserve.
const giveBackPages = 256
