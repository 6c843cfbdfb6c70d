package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The archive holds one SQLite file per persistent stream, at the same
// relative path as in the data directory (see StreamPath): a consistent
// copy taken with VACUUM INTO on the stream's own connection, written to a
// temporary name next to its final one, fsynced and renamed into place, so
// an archive file is always a complete database, never a half-written one.
//
// Which copy is newer is decided by modification time: a backup stamps the
// archive file with the modification time the stream's files had when the
// copy was taken. On open, a stream restores from the archive when its local
// file is missing or strictly older than the archive copy, and otherwise
// keeps the local file (and backs it up again when it is the newer one).
// Servers sharing one archive directory therefore need clocks that agree.

// streamArchive is the archive side of one open persistent stream. It is
// used only by the goroutine that owns the stream.
type streamArchive struct {
	path  string // the archive copy
	local string // the stream's file in the data directory
	// saved is the connection's total_changes() when the archive last matched
	// the stream; -1 means the archive is behind and the next backup must run
	// whatever the counter says.
	saved int64
}

// archiveStream prepares the archive of the stream whose local file is
// local: it restores local from the archive copy when that copy is newer (or
// local is missing) and returns the handle the stream backs itself up with.
// It runs before the stream's database is opened.
func archiveStream(archiveDir, scope, name, local string) (*streamArchive, error) {
	path, err := StreamPath(archiveDir, scope, name)
	if err != nil {
		return nil, err
	}
	a := &streamArchive{path: path, local: local, saved: -1}
	at, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil // nothing archived yet: the first backup writes it
	}
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	lt, ok, err := localModTime(local)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	switch {
	case !ok || at.ModTime().After(lt):
		if err := restoreFile(path, local, at.ModTime()); err != nil {
			return nil, fmt.Errorf("archive: restore %q: %w", filepath.Base(local), err)
		}
		a.saved = 0 // in step; baseline takes the real counter after open
	}
	// Equal times prove nothing: file times move in steps of several ms,
	// so a write just after a backup can leave the local file with the
	// archive's time. saved stays unknown and the next close backs up.
	return a, nil
}

// baseline records the connection's change counter once the stream is open,
// when the archive was found in step with the local file.
func (a *streamArchive) baseline(ctx context.Context, s *sqliteStream) error {
	if a.saved < 0 {
		return nil
	}
	n, err := totalChanges(ctx, s)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	a.saved = n
	return nil
}

func totalChanges(ctx context.Context, s *sqliteStream) (int64, error) {
	var n int64
	err := s.queryRowSQL(ctx, `SELECT total_changes()`).Scan(&n)
	return n, err
}

// backup copies the stream to the archive if anything changed since the
// last copy. It must run between transactions, on the stream's goroutine.
func (a *streamArchive) backup(s *sqliteStream) error {
	ctx := context.Background()
	n, err := totalChanges(ctx, s)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if a.saved >= 0 && n == a.saved {
		return nil
	}
	// Fold the WAL into the main file first, so that the modification time
	// stamped on the copy is the one the local files keep once closed.
	if _, err := s.execSQL(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("archive: checkpoint: %w", err)
	}
	mt, _, err := localModTime(a.local)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	dir := filepath.Dir(a.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	// VACUUM INTO accepts an existing empty file, so CreateTemp's unique
	// name keeps two writers (say a misrouted second server) apart.
	tmp, err := os.CreateTemp(dir, filepath.Base(a.path)+archiveTempInfix+"*")
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmpName)
		}
	}()
	if _, err := s.execSQL(ctx, `VACUUM INTO ?`, tmpName); err != nil {
		return fmt.Errorf("archive: copy: %w", err)
	}
	if err := syncFile(tmpName); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if err := os.Chtimes(tmpName, mt, mt); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if err := os.Rename(tmpName, a.path); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	ok = true
	syncDir(dir)
	a.saved = n
	return nil
}

// archiveTempInfix is in the name of an archive copy being written (the
// stream file's name, the infix, CreateTemp's random digits): never a
// stream file, and removed by the walk of a later start (ScanScope) when a
// crash left it behind.
const archiveTempInfix = ".tmp-"

// archiveTempStale is how old an archive copy left behind must be before
// ScanScope removes it: older than any backup still writing one, of this
// server or of another sharing the archive directory. Until its rename a
// copy's time is no older than its backup's start: VACUUM INTO writes it,
// and the stamp just before the rename is the stream's time right after
// the checkpoint that starts the backup, which touches the WAL (even an
// empty one, truncating it). Copying a whole stream to an archive disk
// that may be slower than the data directory (a network mount), then
// syncing it, takes longer than a create's template copy
// (createTempStale); a leftover kept longer costs only its space until a
// later start.
const archiveTempStale = 10 * time.Minute

// isArchiveTemp reports whether a directory entry's name is an archive copy
// being written by backup.
func isArchiveTemp(n string) bool {
	i := strings.LastIndex(n, archiveTempInfix)
	return i >= 0 && isStreamFile(n[:i])
}

// removeStaleArchiveTemps removes from the archive's directory of scope the
// copies a backup that crashed before its rename left, once older than
// archiveTempStale. It is best effort, as the removal of a create's
// leftovers is: an archive that cannot be read now (a mount away) fails
// the backups that need it, not the walk counting the local streams.
func (st *SQLite) removeStaleArchiveTemps(scope string, now time.Time) {
	if st.archive == "" {
		return
	}
	dir := filepath.Join(st.archive, scope)
	_ = readDirBatches(dir, func(e fs.DirEntry) error {
		if !isArchiveTemp(e.Name()) {
			return nil
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || now.Sub(info.ModTime()) < archiveTempStale {
			return nil
		}
		_ = os.Remove(filepath.Join(dir, e.Name())) // gone meanwhile is fine
		return nil
	})
}

// localModTime is the newest modification time of a stream's database and
// WAL files; ok is false when the database file does not exist.
func localModTime(db string) (t time.Time, ok bool, err error) {
	st, err := os.Stat(db)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	t = st.ModTime()
	if w, err := os.Stat(db + "-wal"); err == nil && w.ModTime().After(t) {
		t = w.ModTime()
	}
	return t, true, nil
}

// restoreFile replaces the database local with a copy of src, stamped with
// mt. A WAL or shared-memory file left by the replaced database would be
// applied to the copy, so they go first. The copy is written under the
// temporary name a new stream file is (createTemp), which no walk of the
// directory counts as a stream, and which ScanScope removes once stale when
// a crash left it behind; a failure removes it at once. It is stamped once
// renamed: stamped before, with mt (older than createTempStale), a walk
// meanwhile would take it for a crash's leftover and remove it.
func restoreFile(src, local string, mt time.Time) error {
	dir := filepath.Dir(local)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, tmpName, err := createTemp(local)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err == nil {
			if rerr := os.Remove(local + suffix); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = rerr
			}
		}
	}
	if err == nil {
		err = renameFile(tmpName, local)
	}
	if err != nil {
		os.Remove(tmpName)
		return err
	}
	// The copy is whole under its name now: a crash before the stamp
	// leaves it newer than the archive's, which only costs a backup.
	if err := os.Chtimes(local, mt, mt); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// renameFile is os.Rename; a test stands in a crash during a restore.
var renameFile = os.Rename

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a rename in dir durable where the platform allows it; some
// do not support syncing a directory, which is not worth failing over.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// Archiver is a Stream that keeps an archive copy.
type Archiver interface {
	// ArchiveNow backs the stream up if it changed since its last backup.
	ArchiveNow() error
}

var _ Archiver = (*sqliteStream)(nil)

// ArchiveNow implements Archiver.
func (s *sqliteStream) ArchiveNow() error {
	if s.arch == nil {
		return nil
	}
	return s.arch.backup(s)
}
