package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Errors callers branch on.
var (
	// ErrNotFound is an operation on a user name that is not stored.
	ErrNotFound = errors.New("no such user")
	// ErrExists is Add or Register of a name already taken.
	ErrExists = errors.New("user already exists")
	// ErrUnknownKey is a key no user has.
	ErrUnknownKey = errors.New("unknown key")
)

// MaxNameBytes is the longest user name: room for an e-mail address, which
// is what t=register names an account by.
const MaxNameBytes = 100

// Limits are an account's daily allowances. Zero means unlimited.
type Limits struct {
	RequestsPerDay int // API calls but t=get (searches, details)
	GrabsPerDay    int // t=get, NZB downloads
}

func (l Limits) validate() error {
	if l.RequestsPerDay < 0 || l.GrabsPerDay < 0 {
		return errors.New("a limit must be >= 0 (0 is unlimited)")
	}
	return nil
}

// User is an account as List shows it: never its key.
type User struct {
	Name string
	Limits
	// RequestsToday and GrabsToday are what the account used since
	// midnight UTC.
	RequestsToday, GrabsToday int
	Created                   time.Time
	// Registered says the account was made by t=register, not an operator.
	Registered bool
}

// ValidName reports why name cannot name a user, or nil: 1 to
// MaxNameBytes bytes of letters, digits and . _ - + @, not starting with
// '-' (which would read as a flag on the command line).
func ValidName(name string) error {
	if name == "" || len(name) > MaxNameBytes {
		return fmt.Errorf("user name %q: want 1 to %d characters", name, MaxNameBytes)
	}
	if name[0] == '-' {
		return fmt.Errorf("user name %q: must not start with '-'", name)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '+' || c == '@'
		if !ok {
			return fmt.Errorf("user name %q: only letters, digits and . _ - + @", name)
		}
	}
	return nil
}

// newKey is a random key and its hash: 128 bits in hex, as the admin key.
func newKey() (string, []byte, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("new key: %w", err)
	}
	key := hex.EncodeToString(raw[:])
	return key, hashKey(key), nil
}

func hashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Add creates user name with limits l and returns its key, which is not
// stored and cannot be shown again.
func (s *Store) Add(ctx context.Context, name string, l Limits) (string, error) {
	return s.add(ctx, name, l, false)
}

func (s *Store) add(ctx context.Context, name string, l Limits, registered bool) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	if err := l.validate(); err != nil {
		return "", err
	}
	key, hash, err := newKey()
	if err != nil {
		return "", err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", name, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.insert(ctx, tx, name, hash, l, registered); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("add user %s: %w", name, err)
	}
	return key, nil
}

// insert adds the row of a new user in tx, ErrExists if name is taken (the
// transaction holds the write lock, so nobody takes it between).
func (s *Store) insert(ctx context.Context, tx *sql.Tx, name string, hash []byte, l Limits, registered bool) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE name = ?`, name).Scan(&one)
	switch {
	case err == nil:
		return fmt.Errorf("add user %s: %w", name, ErrExists)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("add user %s: %w", name, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO users(name, key_hash, requests_per_day, grabs_per_day, created, registered) VALUES(?, ?, ?, ?, ?, ?)`,
		name, hash, l.RequestsPerDay, l.GrabsPerDay, s.cfg.Now().Unix(), registered)
	if err != nil {
		return fmt.Errorf("add user %s: %w", name, err)
	}
	return nil
}

// List is every user by name, with today's counts.
func (s *Store) List(ctx context.Context) ([]User, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, requests_per_day, grabs_per_day, day, requests, grabs, created, registered FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	today := day(s.cfg.Now())
	var out []User
	for rows.Next() {
		var u User
		var d, created int64
		if err := rows.Scan(&u.Name, &u.RequestsPerDay, &u.GrabsPerDay, &d, &u.RequestsToday, &u.GrabsToday, &created, &u.Registered); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		if d != today {
			u.RequestsToday, u.GrabsToday = 0, 0
		}
		u.Created = time.Unix(created, 0).UTC()
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// User is the account name, ErrNotFound if there is none.
func (s *Store) User(ctx context.Context, name string) (User, error) {
	all, err := s.List(ctx)
	if err != nil {
		return User{}, err
	}
	for _, u := range all {
		if u.Name == name {
			return u, nil
		}
	}
	return User{}, fmt.Errorf("user %s: %w", name, ErrNotFound)
}

// SetLimits changes name's limits; a nil one is kept.
func (s *Store) SetLimits(ctx context.Context, name string, requestsPerDay, grabsPerDay *int) error {
	if (requestsPerDay != nil && *requestsPerDay < 0) || (grabsPerDay != nil && *grabsPerDay < 0) {
		return errors.New("a limit must be >= 0 (0 is unlimited)")
	}
	res, err := s.db.ExecContext(ctx, `UPDATE users SET requests_per_day = coalesce(?, requests_per_day), grabs_per_day = coalesce(?, grabs_per_day) WHERE name = ?`,
		requestsPerDay, grabsPerDay, name)
	return s.changedOne(res, err, "set limits of", name)
}

// Reset gives name a new key, returned once; the old key stops working at
// once. Today's counts are kept (a new key is no new allowance).
func (s *Store) Reset(ctx context.Context, name string) (string, error) {
	key, hash, err := newKey()
	if err != nil {
		return "", err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE users SET key_hash = ? WHERE name = ?`, hash, name)
	if err := s.changedOne(res, err, "reset key of", name); err != nil {
		return "", err
	}
	return key, nil
}

// Remove deletes name; its key stops working at once.
func (s *Store) Remove(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM users WHERE name = ?`, name)
	return s.changedOne(res, err, "remove", name)
}

// changedOne is the error of a statement that must change name's row.
func (s *Store) changedOne(res sql.Result, err error, op, name string) error {
	if err != nil {
		return fmt.Errorf("%s user %s: %w", op, name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s user %s: %w", op, name, err)
	}
	if n == 0 {
		return fmt.Errorf("%s user %s: %w", op, name, ErrNotFound)
	}
	return nil
}
