// Package users is the usenet indexer's accounts: who may call the Newznab
// API with which key, how many requests and grabs a day each may make, and
// how often each release was grabbed. It is one SQLite file (File) in the
// API's data directory, which the API server and the `usenet users`
// commands open side by side.
//
// Keys are stored as their SHA-256 only: a key is shown once, when it is
// made (Add, Reset, Register), and can then only be checked, never read
// back. Keys are 128 random bits, so a plain hash is enough: there is
// nothing to guess that a slow hash would protect.
package users

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard-dev/switchyard/internal/sqlitefile"
)

// File is the store's file name in a data directory.
const File = "users.db"

// RegistrationsPerDayDefault is Config.RegistrationsPerDay's default: enough
// for a small community's sign-ups, few enough that a script cannot fill
// the table with accounts.
const RegistrationsPerDayDefault = 20

// schemaVersion changes when the tables change; a file of another version
// is refused rather than misread.
const schemaVersion = 1

// The schema. users.day is the UTC day (days since 1970-01-01) that
// requests and grabs count; a row whose day is not today has counted
// nothing today, so the counters reset at midnight UTC without a job:
// the first use of a new day starts them from zero (see count).
var schema = []string{
	sqlitefile.MetaTable,
	`CREATE TABLE IF NOT EXISTS users (
		name             TEXT    PRIMARY KEY,
		key_hash         BLOB    NOT NULL UNIQUE,
		requests_per_day INTEGER NOT NULL,
		grabs_per_day    INTEGER NOT NULL,
		day              INTEGER NOT NULL DEFAULT 0,
		requests         INTEGER NOT NULL DEFAULT 0,
		grabs            INTEGER NOT NULL DEFAULT 0,
		created          INTEGER NOT NULL,
		registered       INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE TABLE IF NOT EXISTS grabs (release TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID`,
}

// Keys of the meta table.
const (
	metaRegOpen     = "registration_open"     // 1 when t=register creates accounts
	metaRegRequests = "registration_requests" // requests per day of a registered account
	metaRegGrabs    = "registration_grabs"    // grabs per day of a registered account
	metaRegDay      = "registration_day"      // the UTC day metaRegCount counts
	metaRegCount    = "registration_count"    // accounts registered on metaRegDay
)

// Config configures Open.
type Config struct {
	// Now is the clock the daily counters go by (their day is its UTC
	// date). Nil means time.Now.
	Now func() time.Time
	// RegistrationsPerDay is the most accounts t=register creates in one
	// UTC day; past it registering is denied until midnight. Zero means
	// RegistrationsPerDayDefault.
	RegistrationsPerDay int
}

// Store is the accounts in one SQLite file. Its methods are safe for
// concurrent use, and for use beside another process's Store on the same
// file (writes take SQLite's write lock in turn).
type Store struct {
	db  *sql.DB
	cfg Config
}

// Open opens (creating it if needed) the store at path.
func Open(path string, cfg Config) (*Store, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RegistrationsPerDay == 0 {
		cfg.RegistrationsPerDay = RegistrationsPerDayDefault
	}
	if cfg.RegistrationsPerDay < 0 {
		return nil, errors.New("users: negative RegistrationsPerDay")
	}
	// The API reads while a command beside it writes; transactions are
	// immediate, so a read-then-write (Register, Add) holds the write
	// lock throughout (see sqlitefile.Open).
	db, err := sqlitefile.Open(path, 4)
	if err != nil {
		return nil, fmt.Errorf("users: open %s: %w", path, err)
	}
	s := &Store{db: db, cfg: cfg}
	if err := s.init(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("users: open %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := sqlitefile.Init(ctx, tx, schema, schemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// getMeta and setMeta are the meta table's, by their short names.
var (
	getMeta = sqlitefile.GetMeta
	setMeta = sqlitefile.SetMeta
)

type querier = sqlitefile.Querier

// day is t's UTC day, in days since 1970-01-01.
func day(t time.Time) int64 {
	u := t.Unix()
	d := u / 86400
	if u < 0 && u%86400 != 0 {
		d-- // floor, for clocks before 1970
	}
	return d
}

// midnight is the start of the UTC day after d: when its counters reset.
func midnight(d int64) time.Time { return time.Unix((d+1)*86400, 0).UTC() }
