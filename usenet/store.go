package usenet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/switchyard-dev/switchyard/persist"
)

// ErrNotFound is returned for a release or binary that is not stored.
var ErrNotFound = errors.New("usenet: not found")

// DefaultScope is the persist scope of the usenet records. Articles keep
// their message-ids across providers, so one scope serves every source.
const DefaultScope = "usenet"

// The streams of the scope.
const (
	// BinariesKV holds one Binary per key (its ID).
	BinariesKV = "binaries"
	// CollectionsKV holds every Release being assembled, visible or not.
	CollectionsKV = "collections"
	// ReleasesStream holds the visible releases, keyed by ID: the record
	// the search index follows and `switchyard watch` can show.
	ReleasesStream = "releases"
)

// scopeRe is what a scope may be: one NATS subject token.
var scopeRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,100}$`)

// ValidScope reports whether scope can hold the usenet records.
func ValidScope(scope string) error {
	if !scopeRe.MatchString(scope) {
		return fmt.Errorf("usenet: invalid scope %q: want [a-z0-9][a-z0-9_-]{0,100}", scope)
	}
	return nil
}

// Store keeps binaries and releases in persist.
type Store struct {
	c           *persist.Client
	scope       string
	binaries    *persist.KV
	collections *persist.KV
	releases    *persist.Stream
	// policy says which posts are published and which articles make one;
	// set by SetPolicy before use.
	policy SettleConfig
}

// SetPolicy sets when Apply publishes a post (complete and past the
// minimums of cfg) and how it cuts copies into posts (cfg.PostGap). Every
// writer of a scope must use the same PostGap. Not safe to call while the
// store is in use.
func (s *Store) SetPolicy(cfg SettleConfig) { s.policy = cfg.withDefaults() }

// NewStore returns the store of scope (DefaultScope when "").
func NewStore(c *persist.Client, scope string) (*Store, error) {
	if scope == "" {
		scope = DefaultScope
	}
	if err := ValidScope(scope); err != nil {
		return nil, err
	}
	return &Store{
		c:           c,
		scope:       scope,
		binaries:    c.KV(scope, BinariesKV),
		collections: c.KV(scope, CollectionsKV),
		releases:    c.Stream(scope, ReleasesStream),
		policy:      SettleConfig{}.withDefaults(),
	}, nil
}

// Scope is the store's persist scope.
func (s *Store) Scope() string { return s.scope }

// Releases is the stream of visible releases, keyed by release ID; each
// change of a visible release appends its whole record again.
func (s *Store) Releases() *persist.Stream { return s.releases }

// Release returns the visible release id, or ErrNotFound.
func (s *Store) Release(ctx context.Context, id string) (Release, error) {
	if persist.ValidKey(id) != nil || id == "" {
		return Release{}, fmt.Errorf("%w: release %q", ErrNotFound, id)
	}
	m, err := s.releases.GetKey(ctx, id)
	if errors.Is(err, persist.ErrNotFound) {
		return Release{}, fmt.Errorf("%w: release %q", ErrNotFound, id)
	}
	if err != nil {
		return Release{}, fmt.Errorf("usenet: release %s: %w", id, err)
	}
	var r Release
	if err := json.Unmarshal(m.Value, &r); err != nil {
		return Release{}, fmt.Errorf("usenet: decode release %s: %w", id, err)
	}
	return r, nil
}

// Binaries returns the binaries of ids, in the order of ids.
func (s *Store) Binaries(ctx context.Context, ids []string) ([]Binary, error) {
	out := make([]Binary, 0, len(ids))
	for _, id := range ids {
		m, err := s.binaries.Get(ctx, id)
		if errors.Is(err, persist.ErrNotFound) {
			return nil, fmt.Errorf("%w: binary %q", ErrNotFound, id)
		}
		if err != nil {
			return nil, fmt.Errorf("usenet: binary %s: %w", id, err)
		}
		var b Binary
		if err := decodeRecord(m, &b); err != nil {
			return nil, fmt.Errorf("usenet: decode binary %s: %w", id, err)
		}
		out = append(out, b)
	}
	return out, nil
}
