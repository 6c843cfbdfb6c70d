package users

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is what a limit counts.
type Kind int

// The kinds of use.
const (
	Requests Kind = iota // RequestsPerDay
	Grabs                // GrabsPerDay
)

func (k Kind) String() string {
	if k == Grabs {
		return "grabs"
	}
	return "requests"
}

// LimitError is a use refused because the account used its daily limit.
type LimitError struct {
	Kind  Kind
	Limit int
	// Reset is when the counters start again: the next midnight UTC.
	Reset time.Time
	// Wait is how long that is from now, by the Store's clock.
	Wait time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%d %s per day used; the count resets at %s", e.Limit, e.Kind, e.Reset.Format(time.RFC3339))
}

// Valid reports whether key is a user's.
func (s *Store) Valid(ctx context.Context, key string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM users WHERE key_hash = ?`, hashKey(key)).Scan(&one)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	}
	return false, fmt.Errorf("check key: %w", err)
}

// Request counts one request of key's user: ErrUnknownKey for a key no
// user has, a *LimitError once it made RequestsPerDay today (the refused
// request is not counted).
func (s *Store) Request(ctx context.Context, key string) error {
	return s.count(ctx, s.db, key, Requests)
}

// RefundRequest takes back one request that Request counted today for
// key's user. The API counts a request before it reads its parameters, so
// that the limit holds for requests made at once, and refunds one it then
// refuses for them (which did none of the work asked). A request counted
// before midnight UTC is not refunded after it: the day it counted in is
// over. A key no user has refunds nothing.
func (s *Store) RefundRequest(ctx context.Context, key string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE users SET requests = requests - 1 WHERE key_hash = ? AND day = ? AND requests > 0`,
		hashKey(key), day(s.cfg.Now())); err != nil {
		return fmt.Errorf("refund request: %w", err)
	}
	return nil
}

// Grab counts a grab of release by key's user, and one of release (see
// Grabs), in one transaction: ErrUnknownKey, or a *LimitError once the user
// made GrabsPerDay today, and then neither is counted.
func (s *Store) Grab(ctx context.Context, key, release string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("count grab: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.count(ctx, tx, key, Grabs); err != nil {
		return err
	}
	if err := countRelease(ctx, tx, release); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("count grab: %w", err)
	}
	return nil
}

// CheckGrab answers as Grab would for key's user, counting nothing: nil
// while a grab is left today, else ErrUnknownKey or a *LimitError. It is
// for a HEAD of an NZB, which must answer what its GET would.
func (s *Store) CheckGrab(ctx context.Context, key string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("check grab: %w", err)
	}
	// The count is made and rolled back: the same question Grab asks,
	// with the same answer, and nothing kept.
	defer func() { _ = tx.Rollback() }()
	return s.count(ctx, tx, key, Grabs)
}

// CountGrab counts a grab of release by a caller without an account (the
// admin key, an open API), which no limit applies to.
func (s *Store) CountGrab(ctx context.Context, release string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("count grab: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := countRelease(ctx, tx, release); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("count grab: %w", err)
	}
	return nil
}

func countRelease(ctx context.Context, tx *sql.Tx, release string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO grabs(release, n) VALUES(?, 1) ON CONFLICT(release) DO UPDATE SET n = n + 1`, release); err != nil {
		return fmt.Errorf("count grab of %s: %w", release, err)
	}
	return nil
}

type execQuerier interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// countSQL counts one use of a kind in one statement, so that two
// requests at once cannot both take the last one: the row is updated only
// while under its limit (or on a new day, when the counters start from
// zero), and RETURNING says whether it was. SQLite evaluates every SET
// expression against the row as it was, so the CASEs read the old day.
var countSQL = map[Kind]string{
	Requests: `UPDATE users SET
		requests = CASE WHEN day = ?1 THEN requests ELSE 0 END + 1,
		grabs    = CASE WHEN day = ?1 THEN grabs ELSE 0 END,
		day      = ?1
	WHERE key_hash = ?2 AND (requests_per_day = 0 OR day <> ?1 OR requests < requests_per_day)
	RETURNING 1`,
	Grabs: `UPDATE users SET
		grabs    = CASE WHEN day = ?1 THEN grabs ELSE 0 END + 1,
		requests = CASE WHEN day = ?1 THEN requests ELSE 0 END,
		day      = ?1
	WHERE key_hash = ?2 AND (grabs_per_day = 0 OR day <> ?1 OR grabs < grabs_per_day)
	RETURNING 1`,
}

func (s *Store) count(ctx context.Context, q execQuerier, key string, kind Kind) error {
	now := s.cfg.Now()
	today := day(now)
	hash := hashKey(key)
	var one int
	err := q.QueryRowContext(ctx, countSQL[kind], today, hash).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("count %s: %w", kind, err)
	}
	// Nothing updated: no such key, or at the limit. Which is read after
	// the fact; a key removed in between reads as unknown, as it now is.
	var limit int
	col := "requests_per_day"
	if kind == Grabs {
		col = "grabs_per_day"
	}
	err = q.QueryRowContext(ctx, `SELECT `+col+` FROM users WHERE key_hash = ?`, hash).Scan(&limit)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrUnknownKey
	case err != nil:
		return fmt.Errorf("count %s: %w", kind, err)
	}
	reset := midnight(today)
	return &LimitError{Kind: kind, Limit: limit, Reset: reset, Wait: reset.Sub(now)}
}

// Grabs is how many times each of ids was grabbed (t=get), by anyone; an
// id never grabbed is absent.
func (s *Store) Grabs(ctx context.Context, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	// A page of a search is at most a few hundred ids, well under
	// SQLite's limit of bound parameters.
	q := `SELECT release, n FROM grabs WHERE release IN (?` + strings.Repeat(",?", len(ids)-1) + `)`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read grabs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("read grabs: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read grabs: %w", err)
	}
	return out, nil
}
