package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A new stream file is a copy of one template, made once per process: an
// empty stream database with the page size, auto_vacuum mode, WAL mode,
// coreSchema and schema version every new file gets. Letting SQLite make
// each file instead costs eight fsyncs per stream: setting auto_vacuum and
// switching to WAL are two transactions in rollback-journal mode (the
// journal, its directory and the database synced in each), before the WAL's
// own header and directory syncs. A copy costs three: the copy itself,
// then the WAL's header and its directory at the first commit, which the
// open of a new stream makes (init stores its name). It is also atomic: the
// copy is written under a temporary name, synced and then linked to the
// stream's name, so a crash or a full disk leaves either no stream file or
// a whole one, never a file half set up.

// createTempInfix is in the name of a copy being written (the stream
// file's name, the infix, a random suffix), of the template or of an
// archive copy being restored (restoreFile): never a stream file, a WAL or
// anything else the storage reads, and removed by the walk of a later
// start (ScanScope) when a crash left it behind.
const createTempInfix = ".new-"

// createTempStale is how old a copy left behind must be before ScanScope
// removes it: older than any create still writing one (a server sharing
// the directory may be).
const createTempStale = time.Minute

// templates holds the template, built on first use.
var templates struct {
	once sync.Once
	b    []byte
	err  error
}

// streamTemplate returns the bytes of a new stream file.
func streamTemplate() ([]byte, error) {
	templates.once.Do(func() { templates.b, templates.err = buildTemplate() })
	return templates.b, templates.err
}

// serializer is the driver connection's sqlite3_serialize.
type serializer interface{ Serialize() ([]byte, error) }

// newFilePageSize is the page size of new stream files. A small stream
// (a few keys) holds one page per table and index (three b-trees, more
// once it uses lazyTables), and its header and pointer-map pages: 2 KiB
// pages halve its file against SQLite's 4 KiB, and a keyed set writes
// 2 KiB frames to the WAL instead of 4 KiB (measured in
// docs/benchmarks.md). Files made before keep theirs.
const newFilePageSize = 2048

// templatePragmas make the template's database what a new stream file is
// before its first table: they only take before the first page is
// written. With auto_vacuum a delete on a full disk can hand freed pages
// back to the filesystem (see reserve.go); it can only be chosen while the
// file is empty, so older files keep NONE.
var templatePragmas = []string{
	`PRAGMA page_size = ` + strconv.Itoa(newFilePageSize),
	`PRAGMA auto_vacuum = INCREMENTAL`,
}

// buildTemplate makes the template in memory: templatePragmas, coreSchema
// and the schema version, serialized as SQLite would write the file. The header then says
// WAL: bytes 18 and 19 (the file format's read and write versions) are 2
// in a database in WAL mode and 1 in a rollback-journal one, which is all
// PRAGMA journal_mode=WAL changes in the file (SQLite's file format,
// section 1.3.3). A file whose header says WAL is opened in WAL mode.
func buildTemplate() ([]byte, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("stream template: %w", err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream template: %w", err)
	}
	defer conn.Close()
	for _, q := range append(templatePragmas[:len(templatePragmas):len(templatePragmas)], coreSchema, `PRAGMA user_version = `+strconv.Itoa(lazySchemaVersion)) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("stream template: %s: %w", q, err)
		}
	}
	var b []byte
	err = conn.Raw(func(dc any) error {
		s, ok := dc.(serializer)
		if !ok {
			return errors.New("the driver cannot serialize a database")
		}
		b, err = s.Serialize()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream template: %w", err)
	}
	if len(b) < newFilePageSize || string(b[:16]) != "SQLite format 3\x00" || b[18] != 1 || b[19] != 1 {
		return nil, fmt.Errorf("stream template: not a rollback-journal database of %d bytes", len(b))
	}
	b[18], b[19] = 2, 2
	return b, nil
}

// createStreamFile makes the stream file p, which does not exist, a copy of
// the template: written beside it under a temporary name, synced, and
// linked to p. It returns an error matching fs.ErrExist when p appeared
// meanwhile (another server sharing the data directory made the stream),
// which is then that server's file, whole. Nothing is left behind on
// failure.
func createStreamFile(p string, template []byte) error {
	f, tmp, err := createTemp(p)
	if err != nil {
		return fmt.Errorf("create stream file: %w", err)
	}
	defer os.Remove(tmp) // the link is the stream's name now, or failed
	_, err = f.Write(template)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create stream file: %w", err)
	}
	if err := linkFile(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		// A filesystem without hard links: a rename, which would replace a
		// file made since the caller looked, so only when there is none.
		if _, serr := os.Lstat(p); serr == nil {
			return fs.ErrExist
		}
		if rerr := os.Rename(tmp, p); rerr != nil {
			return fmt.Errorf("create stream file: %w", rerr)
		}
	}
	return nil
}

// createTemp creates a new file beside p, named p, createTempInfix and a
// random suffix, with the permissions SQLite gives the files it creates
// (0644 less the umask; os.CreateTemp's 0600 would lock out the tools an
// operator reads them with).
func createTemp(p string) (*os.File, string, error) {
	for range 10 {
		var r [8]byte
		_, _ = rand.Read(r[:]) // crypto/rand.Read never fails on supported platforms
		name := p + createTempInfix + hex.EncodeToString(r[:])
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("no free temporary name beside %s", filepath.Base(p))
}

// linkFile is os.Link; tests stand in a filesystem without hard links.
var linkFile = os.Link

// isCreateTemp reports whether a directory entry's name is a copy being
// written by createStreamFile or restoreFile.
func isCreateTemp(n string) bool {
	i := strings.LastIndex(n, createTempInfix)
	return i >= 0 && isStreamFile(n[:i])
}

// removeStaleCreateTemp removes the copy e of directory dir if it is older
// than createTempStale: a create that crashed before its link, or a restore
// before its rename.
func removeStaleCreateTemp(dir string, e fs.DirEntry, now time.Time) {
	info, err := e.Info()
	if err != nil || !info.Mode().IsRegular() || now.Sub(info.ModTime()) < createTempStale {
		return
	}
	_ = os.Remove(filepath.Join(dir, e.Name())) // gone meanwhile is fine
}
