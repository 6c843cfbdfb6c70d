// Package search is the full-text index of the visible releases: a SQLite
// database derived from the persist releases stream, which it follows
// (Follow) and resumes after a restart from the last seq it applied.
//
// The index can always be rebuilt from the stream: delete its file and
// follow again.
package search

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-dev/switchyard/internal/sqlitefile"
)

// schemaVersion changes when the tables change or what they hold does (the
// row keys, the tags); Open empties an index of another version, which
// following then rebuilds from the stream, rather than misread it.
//
//	1  row keys ordered by 22 bits of the ID's first 3 bytes; episode tags
//	   missed a marker right after another (S01.S02)
//	2  row keys ordered by the ID's first 5 hex digits, then ID order
//	   within a second (see groupKey); every marker tagged
//	3  every episode of a multi-episode marker tagged (S01E01E02,
//	   S01E04-E05), not only its first; names indexed with their accents
//	   removed in every script (see fold), not only Latin letters
//	4  every episode of a multi-episode NxMM marker tagged too (1x01-02,
//	   1x01-1x03, 2x04x05), not only its first
//	5  every episode of a range written with the whole marker again
//	   tagged (S01E01-S01E03 is 1, 2 and 3, not 1 and 3); rel holds each
//	   release's size, which a search by size compares
const schemaVersion = 5

// The schema. rel holds one row per visible release, keyed by rk, a key
// ordered by date (see groupKey), so "newest first" is a walk down the
// primary key. fts is a contentless FTS5 table with the same rowids: name
// holds the release name, tags the filter tokens (category, group, season
// and episode, see tags), so that every search is one FTS query answered
// in rowid order, and LIMIT stops it early instead of sorting all matches.
var schema = []string{
	sqlitefile.MetaTable,
	`CREATE TABLE IF NOT EXISTS rel (
		rk      INTEGER PRIMARY KEY,
		id      TEXT    NOT NULL UNIQUE,
		seq     INTEGER NOT NULL,
		version INTEGER NOT NULL,
		size    INTEGER NOT NULL,
		data    BLOB    NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS rel_seq ON rel(seq)`,
	// The separators are unicode61's already (it splits on everything but
	// letters and digits); naming them says what release names need.
	// remove_diacritics folds Latin letters only; the name and the words
	// searched for are folded before (see fold), so that accents of other
	// scripts are ignored too.
	`CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
		name, tags,
		content='', contentless_delete=1,
		tokenize="unicode61 remove_diacritics 2 separators '._-'"
	)`,
}

// Keys of the meta table.
const (
	metaLastSeq = "last_seq" // highest stream seq applied, stored with the rows it applied
	metaCount   = "count"    // rows of rel, so that an unfiltered search need not count them
)

// Index is a search index in one SQLite file. Its methods are safe for
// concurrent use; writes (Apply) are serialised.
type Index struct {
	db   *sql.DB
	path string
	now  func() time.Time // the clock of MaxAge; a variable for tests

	onRow func() // called for each row Search reads; nil but in tests

	writeMu sync.Mutex    // serialises Apply, so rk probing sees its own writes
	lastSeq atomic.Uint64 // mirror of meta last_seq after each commit
	changed chan struct{} // closed and replaced on each commit; see Changed

	changedMu sync.Mutex // protects changed
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating it if needed) the index at path. An index of
// another schema version (written by another release of switchyard) is
// emptied: following rebuilds it from the stream.
func Open(path string) (*Index, error) {
	// WAL lets searches read while a batch is applied; a crash loses at
	// most the last commits, which the stream replays since last_seq goes
	// with them.
	db, err := sqlitefile.Open(path, 4)
	if err != nil {
		return nil, fmt.Errorf("search: open %s: %w", path, err)
	}
	ix := &Index{db: db, path: path, now: time.Now, changed: make(chan struct{})}
	if err := ix.init(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("search: open %s: %w", path, err)
	}
	return ix, nil
}

func (ix *Index) init(ctx context.Context) error {
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	err = sqlitefile.Init(ctx, tx, schema, schemaVersion)
	if errors.Is(err, sqlitefile.ErrVersion) {
		// The index is derived from the stream: start it again, empty
		// and at last seq 0, rather than refuse to start.
		err = reset(ctx, tx)
	}
	if err != nil {
		return err
	}
	last, _, err := getMeta(ctx, tx, metaLastSeq)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	ix.lastSeq.Store(uint64(last))
	return nil
}

// reset empties an index of another schema version in tx and creates it
// again at this one.
func reset(ctx context.Context, tx *sql.Tx) error {
	for _, stmt := range []string{`DROP TABLE IF EXISTS fts`, `DROP TABLE IF EXISTS rel`, `DELETE FROM meta`} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("reset %q: %w", stmt, err)
		}
	}
	return sqlitefile.Init(ctx, tx, schema, schemaVersion)
}

// Close closes the database. Stop followers first.
func (ix *Index) Close() error {
	ix.closeOnce.Do(func() { ix.closeErr = ix.db.Close() })
	return ix.closeErr
}

// LastSeq is the highest seq of the releases stream the index has applied
// (0 for none). Following resumes after it.
func (ix *Index) LastSeq() uint64 { return ix.lastSeq.Load() }

// Changed returns a channel closed at the next commit of Apply: a waiter
// reads LastSeq or searches again when it closes.
func (ix *Index) Changed() <-chan struct{} {
	ix.changedMu.Lock()
	defer ix.changedMu.Unlock()
	return ix.changed
}

func (ix *Index) notify() {
	ix.changedMu.Lock()
	close(ix.changed)
	ix.changed = make(chan struct{})
	ix.changedMu.Unlock()
}

// Count is the number of releases in the index.
func (ix *Index) Count(ctx context.Context) (int, error) {
	n, _, err := getMeta(ctx, ix.db, metaCount)
	if err != nil {
		return 0, fmt.Errorf("search: count: %w", err)
	}
	return int(n), nil
}

// getMeta and setMeta are the meta table's, by their short names.
var (
	getMeta = sqlitefile.GetMeta
	setMeta = sqlitefile.SetMeta
)
