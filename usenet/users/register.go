package users

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors of Register.
var (
	// ErrRegistrationClosed is Register while registration is closed (the
	// default; an operator opens it with SetRegistration).
	ErrRegistrationClosed = errors.New("registrations are closed")
	// ErrBadEmail is Register with what is not an e-mail address usable
	// as a user name.
	ErrBadEmail = errors.New("not an e-mail address")
)

// RegistrationLimitError is Register refused because
// Config.RegistrationsPerDay accounts were registered today.
type RegistrationLimitError struct {
	Limit int
	Reset time.Time // the next midnight UTC, when registering works again
}

func (e *RegistrationLimitError) Error() string {
	return fmt.Sprintf("%d registrations today; registering opens again at %s", e.Limit, e.Reset.Format(time.RFC3339))
}

// Registration is whether t=register creates accounts, and the limits it
// gives them.
type Registration struct {
	Open bool
	Limits
}

// SetRegistration opens or closes registration; the limits apply to
// accounts registered from now on.
func (s *Store) SetRegistration(ctx context.Context, r Registration) error {
	if err := r.Limits.validate(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("set registration: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	open := int64(0)
	if r.Open {
		open = 1
	}
	for k, v := range map[string]int64{metaRegOpen: open, metaRegRequests: int64(r.RequestsPerDay), metaRegGrabs: int64(r.GrabsPerDay)} {
		if err := setMeta(ctx, tx, k, v); err != nil {
			return fmt.Errorf("set registration: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("set registration: %w", err)
	}
	return nil
}

// Registration is the current setting (closed, unlimited, when never set).
func (s *Store) Registration(ctx context.Context) (Registration, error) {
	return s.registration(ctx, s.db)
}

func (s *Store) registration(ctx context.Context, q querier) (Registration, error) {
	var r Registration
	for k, p := range map[string]*int{metaRegRequests: &r.RequestsPerDay, metaRegGrabs: &r.GrabsPerDay} {
		v, _, err := getMeta(ctx, q, k)
		if err != nil {
			return Registration{}, fmt.Errorf("registration: %w", err)
		}
		*p = int(v)
	}
	open, _, err := getMeta(ctx, q, metaRegOpen)
	if err != nil {
		return Registration{}, fmt.Errorf("registration: %w", err)
	}
	r.Open = open == 1
	return r, nil
}

// AccountName is the name Register gives the account of address email.
// The domain of an address is case-insensitive (RFC 5321): the account is
// named with it in lower case, so one address is one account whatever
// case it is written in. The local part is the mail server's to
// interpret, and kept as given.
func AccountName(email string) string {
	if at := strings.LastIndexByte(email, '@'); at >= 0 {
		return email[:at+1] + strings.ToLower(email[at+1:])
	}
	return email
}

// Register creates an account named by e-mail address email (AccountName) with the
// registration's limits, and returns its key: ErrRegistrationClosed,
// ErrBadEmail, ErrExists for an address registered before, or a
// *RegistrationLimitError past Config.RegistrationsPerDay today.
func (s *Store) Register(ctx context.Context, email string) (string, error) {
	email = AccountName(email)
	if !looksLikeEmail(email) || ValidName(email) != nil {
		return "", ErrBadEmail
	}
	key, hash, err := newKey()
	if err != nil {
		return "", err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	reg, err := s.registration(ctx, tx)
	if err != nil {
		return "", err
	}
	if !reg.Open {
		return "", ErrRegistrationClosed
	}
	today := day(s.cfg.Now())
	regDay, _, err := getMeta(ctx, tx, metaRegDay)
	if err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	n, _, err := getMeta(ctx, tx, metaRegCount)
	if err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	if regDay != today {
		n = 0
	}
	if n >= int64(s.cfg.RegistrationsPerDay) {
		return "", &RegistrationLimitError{Limit: s.cfg.RegistrationsPerDay, Reset: midnight(today)}
	}
	if err := s.insert(ctx, tx, email, hash, reg.Limits, true); err != nil {
		return "", err
	}
	if err := setMeta(ctx, tx, metaRegDay, today); err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	if err := setMeta(ctx, tx, metaRegCount, n+1); err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("register: %w", err)
	}
	return key, nil
}

// looksLikeEmail is the spec's "email address bad format" check, no more:
// one @ with something before it and a dotted domain after it. The address
// is not mailed (the key is the answer), only used as the account's name.
func looksLikeEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && !strings.Contains(domain, "@") &&
		strings.Contains(domain, ".") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}
