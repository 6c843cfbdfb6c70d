package newznab

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/usenet/users"
)

// Defaults of Config.
const (
	MaxLimitDefault     = 100
	DefaultLimitDefault = 100
	TitleDefault        = "switchyard"
	VersionDefault      = "1.0"
	// SearchBudgetDefault is the time one search may take
	// (Config.SearchBudget): about ten times what the costliest query the
	// index accepts took on a million releases (BenchmarkSearchWorstQuery,
	// 180 ms on 2 cores), and short enough that a client whose search is
	// refused is not left waiting.
	SearchBudgetDefault = 2 * time.Second
)

// MaxFormBytes is the most bytes of a POSTed form the API reads; a larger
// one is refused with error 201. The parameters of any function fit in a
// fraction of it (q has at most search.MaxWordsBytes).
const MaxFormBytes = 64 << 10

// Store is what the API reads releases and binaries from for t=get and
// t=details; *usenet.Store satisfies it. A release or binary that is not
// stored is an error wrapping usenet.ErrNotFound.
type Store interface {
	Release(ctx context.Context, id string) (usenet.Release, error)
	Binaries(ctx context.Context, ids []string) ([]usenet.Binary, error)
	// NFO is the release's NFO text (t=getnfo), an error wrapping
	// usenet.ErrNotFound when it has none.
	NFO(ctx context.Context, id string) (string, error)
}

var _ Store = (*usenet.Store)(nil)

// Config configures Handler.
type Config struct {
	// Index answers t=search, tvsearch and movie. Required.
	Index *search.Index
	// Store answers t=get and t=details. Required.
	Store Store
	// APIKeys reports whether key is the admin's: a key that may use the
	// API without limits. Every function but t=caps and t=register needs
	// a key that APIKeys or Users accepts. With both nil no key is
	// checked (an open indexer).
	APIKeys func(key string) bool
	// Users, when set, are the accounts whose keys the API accepts beside
	// APIKeys's, each with its daily limits of requests and grabs (error
	// 500 or 501 past them); it also counts every grab per release (the
	// grabs attr) and answers t=register. Nil means no accounts, grabs
	// shown as 0 and t=register answered 104.
	Users *users.Store
	// BaseURL is the scheme, host and path prefix the links of a feed
	// start with ("https://indexer.example/nz"). Empty means the request's
	// own scheme and Host.
	BaseURL string
	// Title and Version are the server's, as t=caps and feeds show them.
	// Empty means TitleDefault and VersionDefault.
	Title, Version string
	// MaxLimit is the largest page a search returns; a larger limit is
	// clamped to it. Zero means MaxLimitDefault.
	MaxLimit int
	// Observe, when set, is told of every answered request: its function
	// (t, or "other" for one the API does not have) and its error code (0
	// for success). Metrics hang here. A request whose client went away
	// before its answer was ready is not answered, nor observed.
	Observe func(function string, code int)
	// DefaultLimit is the page size of a search without limit. Zero means
	// DefaultLimitDefault (at most MaxLimit).
	DefaultLimit int
	// HidePassworded leaves the releases post-processing found passworded
	// (password attr 1) out of every search and feed; t=details, t=get
	// and t=getnfo still answer for them.
	HidePassworded bool
	// SearchBudget is the most time the index may spend on one search
	// (t=search, tvsearch, movie); a search that takes longer is ended and
	// answered with error 900. A search also ends when its client goes
	// away, and is then not answered. Zero means SearchBudgetDefault.
	SearchBudget time.Duration
}

func (c Config) withDefaults() Config {
	if c.Title == "" {
		c.Title = TitleDefault
	}
	if c.Version == "" {
		c.Version = VersionDefault
	}
	if c.MaxLimit == 0 {
		c.MaxLimit = MaxLimitDefault
	}
	if c.DefaultLimit == 0 {
		c.DefaultLimit = DefaultLimitDefault
	}
	c.DefaultLimit = min(c.DefaultLimit, c.MaxLimit)
	if c.SearchBudget == 0 {
		c.SearchBudget = SearchBudgetDefault
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return c
}

func (c Config) validate() error {
	switch {
	case c.Index == nil:
		return errors.New("newznab: Config.Index is nil")
	case c.Store == nil:
		return errors.New("newznab: Config.Store is nil")
	case c.MaxLimit < 0 || c.DefaultLimit < 0:
		return errors.New("newznab: negative MaxLimit or DefaultLimit")
	case c.SearchBudget < 0:
		return errors.New("newznab: negative SearchBudget")
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || u.Scheme == "" || u.Host == "" {
			return errors.New("newznab: Config.BaseURL must be an absolute URL")
		}
	}
	return nil
}

// ValidKey reports whether key may use the API: the admin's (APIKeys) or a
// user's (Users), any key for an open API. It counts nothing; a page that
// asks for a key checks it here.
func (c Config) ValidKey(ctx context.Context, key string) bool {
	if c.APIKeys == nil && c.Users == nil {
		return true
	}
	if key == "" {
		return false
	}
	if c.APIKeys != nil && c.APIKeys(key) {
		return true
	}
	if c.Users == nil {
		return false
	}
	ok, err := c.Users.Valid(ctx, key)
	return err == nil && ok
}

// Grab counts a grab of release made with key, by t=get or the releases
// page's NZB download alike: a user's key against its daily
// grab limit (a *users.LimitError past it, counting nothing), and the
// release's grab count (its grabs attribute) for every key. A key that is
// neither the admin's nor a user's (a bus user's, which the page also
// admits) counts the release's only. Without Users there is nothing to
// count.
func (c Config) Grab(ctx context.Context, key, release string) error {
	if c.Users == nil {
		return nil
	}
	if key != "" && (c.APIKeys == nil || !c.APIKeys(key)) {
		err := c.Users.Grab(ctx, key, release)
		if !errors.Is(err, users.ErrUnknownKey) {
			return err
		}
	}
	return c.Users.CountGrab(ctx, release)
}
