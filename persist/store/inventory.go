package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/bus"
)

// Lister is a Storage that can count the streams it holds on disk without
// opening them, for the server's Stats.Streams, and find the ones a quick
// close left with a write-ahead log (QuickCloser), for compaction after a
// restart. SQLite implements it.
type Lister interface {
	// Scopes calls fn with each scope directory under the storage's
	// directory, in no particular order, reading the directory a batch at a
	// time (memory bounded by the batch, not by the scopes); it stops at
	// fn's first error, or when ctx ends, and returns that error.
	Scopes(ctx context.Context, fn func(scope string) error) error
	// ScanScope counts the stream files of scope, reading its directory a
	// batch at a time without a stat per file, and calls wal with the file
	// name (StreamFileName) of each that has a -wal beside it. A scope with
	// no directory holds none. It also removes what a create that crashed
	// left (a copy of the template never linked: template.go), and what a
	// backup that crashed left in the scope's archive directory (a copy
	// never renamed: archive.go), once old enough not to be a create or
	// a backup still running.
	ScanScope(scope string, wal func(file string)) (int, error)
	// HasStream reports whether the stream has its file on the local disk
	// (an archive copy does not count): the server stats it around opens
	// and drops to keep its count up to date.
	HasStream(scope, name string) (bool, error)
	// StreamName reads the stream name stored inside file (a name
	// ScanScope reported) of scope, without writing it or checkpointing
	// its WAL. A file removed meanwhile is an error matching ErrNoStream.
	StreamName(scope, file string) (string, error)
}

var _ Lister = (*SQLite)(nil)

// scanBatch is how many directory entries one read of Scopes and ScanScope
// holds: a data directory may have a million scopes, one scope as many
// streams.
const scanBatch = 512

// walSuffix ends the write-ahead log beside a stream file.
const walSuffix = "-wal"

// StreamFileName is the name (no directory) of stream name's file in its
// scope directory: {readable}~{hash}.db (see the top of paths.go).
func StreamFileName(name string) string { return streamFileName(name) }

// isStreamFile reports whether a directory entry's name is a stream file
// (…~{32 hex}.db), not its -wal, -shm, -journal or anything else.
func isStreamFile(n string) bool {
	base, ok := strings.CutSuffix(n, fileSuffix)
	if !ok {
		return false
	}
	i := strings.LastIndexByte(base, '~')
	return i >= 0 && len(base)-i-1 == hashHexLen
}

// Scopes implements Lister. Entries that are not directories or not valid
// scopes (the disk reserve, anything an operator put there) are skipped.
func (st *SQLite) Scopes(ctx context.Context, fn func(scope string) error) error {
	if st.dir == "" {
		return nil
	}
	err := readDirBatches(st.dir, func(e fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.IsDir() || !bus.ValidScope(e.Name()) {
			return nil
		}
		return fn(e.Name())
	})
	if errors.Is(err, fs.ErrNotExist) {
		// A data directory not made yet (no disk reserve, no stream
		// written) holds no scope; the first create makes it.
		return nil
	}
	if err != nil || st.archive != "" {
		return err
	}
	// Scopes whose streams are all in packs have no directory.
	return st.packScopes(ctx, fn)
}

// ScanScope implements Lister.
func (st *SQLite) ScanScope(scope string, wal func(file string)) (int, error) {
	if st.dir == "" || !bus.ValidScope(scope) {
		return 0, nil
	}
	n := 0
	dir, now := filepath.Join(st.dir, scope), time.Now()
	err := readDirBatches(dir, func(e fs.DirEntry) error {
		name := e.Name()
		switch db, isWAL := strings.CutSuffix(name, walSuffix); {
		case isStreamFile(name):
			n++
		case isWAL && isStreamFile(db):
			if wal != nil {
				wal(db)
			}
		case isCreateTemp(name):
			removeStaleCreateTemp(dir, e, now)
		}
		return nil
	})
	st.removeStaleArchiveTemps(scope, now)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err == nil && st.archive == "" {
		var packed int
		packed, err = st.packScopeCount(scope)
		n += packed
	}
	return n, err
}

// readDirBatches calls fn for each entry of dir, scanBatch at a time.
// DirEntry's type comes with the directory read (no stat) on the
// filesystems Go knows.
func readDirBatches(dir string, fn func(fs.DirEntry) error) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	defer f.Close()
	for {
		es, err := f.ReadDir(scanBatch)
		for _, e := range es {
			if ferr := fn(e); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
	}
}

// HasStream implements Lister.
func (st *SQLite) HasStream(scope, name string) (bool, error) {
	if st.dir == "" {
		return false, nil
	}
	p, err := StreamPath(st.dir, scope, name)
	if err != nil {
		return false, err
	}
	if _, err := os.Lstat(p); err == nil {
		return true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("stream file: %w", err)
	}
	if st.archive != "" {
		return false, nil
	}
	return st.hasPacked(scope, name)
}

// StreamName implements Lister: a connection of its own (mode=rw, so a
// missing file is not created) reads meta's name and closes with
// SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, so the WAL stays for Compact (or the
// stream's next open) and nothing is unlinked, even were the stream
// dropped meanwhile; without that option it reads nothing.
func (st *SQLite) StreamName(scope, file string) (string, error) {
	if st.dir == "" || !bus.ValidScope(scope) || !isStreamFile(file) || strings.ContainsAny(file, `/\`) {
		return "", ErrNoStream
	}
	p := filepath.Join(st.dir, scope, file)
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return "", ErrNoStream
	}
	// A short busy timeout: a file held by an exclusive connection (an
	// open stream, SQLiteConfig.Exclusive) is in service, and the closer
	// that asks must not wait for it. An exclusive storage reads it in
	// its own locking mode, so that no -shm is made (nothing would remove
	// it).
	db, err := sql.Open("sqlite", st.streamDSN(p, nameBusyTimeoutMs))
	if err != nil {
		return "", fmt.Errorf("stream name: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", st.nameErr(p, err)
	}
	defer conn.Close()
	// Without the option (a driver this cannot reach) the close would
	// checkpoint and unlink the WAL by name, which must not happen to a
	// stream that is not known (it may be dropped and made again meanwhile).
	if err := noCheckpointOnClose(conn); err != nil {
		return "", fmt.Errorf("stream name: %w", err)
	}
	var name string
	if err := conn.QueryRowContext(ctx, `SELECT v FROM meta WHERE k='name'`).Scan(&name); err != nil {
		return "", st.nameErr(p, err)
	}
	if streamFileName(name) != file {
		return "", fmt.Errorf("stream name: %s holds stream %q, whose file is %s", p, name, streamFileName(name))
	}
	return name, nil
}

// nameBusyTimeoutMs is how long StreamName waits for a locked file.
const nameBusyTimeoutMs = 50

// nameErr is StreamName's error: ErrNoStream when the file went away,
// ErrInUse when another connection holds it locked.
func (st *SQLite) nameErr(p string, err error) error {
	if _, serr := os.Lstat(p); errors.Is(serr, fs.ErrNotExist) {
		return ErrNoStream
	}
	if isBusy(err) {
		return fmt.Errorf("stream name: %w: %w", ErrInUse, err)
	}
	return fmt.Errorf("stream name: %w", err)
}
