// Package sqlitefile opens the SQLite files of the usenet indexer's parts
// (the search index, the users store) one way, and keeps the small
// key-value meta table each of them has (its schema version and counters).
package sqlitefile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// MetaTable is the statement that creates the meta table; a schema passed
// to Init lists it first.
const MetaTable = `CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID`

// metaSchema is the meta key of the schema version.
const metaSchema = "schema"

// ErrVersion is a file whose schema version is not the one asked for.
var ErrVersion = errors.New("schema version")

// Open opens (creating it if needed) the SQLite file at path with up to
// conns connections. WAL lets readers read while one writer writes (and
// another process, such as a command beside the server, use the file);
// NORMAL is safe in WAL (a crash loses at most the last commits, not the
// file); a busy writer is waited for up to 10 s; every transaction is
// IMMEDIATE, taking the write lock at BEGIN, so a read-then-write in one
// cannot be overtaken between its read and its write.
func Open(path string, conns int) (*sql.DB, error) {
	dsn := "file:" + uriPath(path) + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	return db, nil
}

// uriPath escapes what a file: URI would read as its query or fragment.
func uriPath(p string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return r.Replace(filepath.ToSlash(p))
}

// Init runs the schema's statements in tx and checks the file's schema
// version: a new file gets version, one of another version is an error
// wrapping ErrVersion (a file is refused rather than misread).
func Init(ctx context.Context, tx *sql.Tx, schema []string, version int64) error {
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: %w", err)
		}
	}
	v, ok, err := GetMeta(ctx, tx, metaSchema)
	switch {
	case err != nil:
		return err
	case !ok:
		return SetMeta(ctx, tx, metaSchema, version)
	case v != version:
		return fmt.Errorf("%w %d, want %d", ErrVersion, v, version)
	}
	return nil
}

// Querier is a *sql.DB or *sql.Tx, as GetMeta reads.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// GetMeta reads meta key k; ok says it is set.
func GetMeta(ctx context.Context, q Querier, k string) (v int64, ok bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = ?`, k).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read meta %s: %w", k, err)
	}
	return v, true, nil
}

// SetMeta writes meta key k in tx.
func SetMeta(ctx context.Context, tx *sql.Tx, k string, v int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES(?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`, k, v); err != nil {
		return fmt.Errorf("write meta %s: %w", k, err)
	}
	return nil
}
