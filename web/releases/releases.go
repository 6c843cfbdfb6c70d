// Package releases is the page people search the usenet indexer on and
// download NZBs from (GET /releases): a search box over the same search
// index as the Newznab API's t=search, category and group filters, the
// newest releases first, paging, a page per release (its files, their
// sizes and completion) and an NZB download. New releases appear without a
// reload: the page follows the releases stream over the watch gateway's
// WebSocket (web/watch) and searches again when it changes.
//
// The page asks for an API key once and keeps it in an HttpOnly,
// SameSite=Strict cookie (CookieName), which its own requests and the
// watch gateway's WebSocket carry: the key never travels in a URL. Under
// `up --auth` a bus user's Basic credentials, or its password given as the
// key, serve as well (web.AuthDirAccounts).
package releases

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/web"
)

// Defaults of Config.
const (
	PageSizeDefault     = 50
	SearchBudgetDefault = newznab.SearchBudgetDefault
	CatchUpWaitDefault  = 2 * time.Second
)

// MaxPageSize is the most releases one search answers (its limit).
const MaxPageSize = 100

// Patterns are the routes Mount registers (everything under /releases). A
// server that listens before the page is mounted can hold them, answering
// 503 until then.
var Patterns = []string{"/releases", "/releases/"}

// Config configures a Page.
type Config struct {
	// Index answers the searches: the Newznab API's index. Required.
	Index *search.Index
	// Store gives a release's files and its NZB, as t=details and t=get
	// read them. Required.
	Store newznab.Store
	// Scope is the usenet scope whose releases stream (usenet.
	// ReleasesStream) the page watches. "" means usenet.DefaultScope.
	Scope string
	// APIKeys reports whether key may use the page: the Newznab API's
	// checker, so that one key serves both. Nil with a nil Authorizer
	// means open (no key asked).
	APIKeys func(key string) bool
	// Authorizer, when set, also admits the bus's users: HTTP Basic auth,
	// or a user's API key (its bus password, web.AuthDirAccounts) given
	// as the page's key. A principal must be able to read Scope.
	Authorizer web.Authorizer
	// Hosts are the server's names: a POST or DELETE of the key from a
	// page of another origin is refused (403). Nil means the loopback
	// names only.
	Hosts *web.Hosts
	// PageSize is the releases of one page when a search names no limit.
	// Zero means PageSizeDefault; at most MaxPageSize.
	PageSize int
	// SearchBudget bounds one search, as newznab.Config.SearchBudget.
	// Zero means SearchBudgetDefault.
	SearchBudget time.Duration
	// HidePassworded leaves releases post-processing found passworded out
	// of the searches, as newznab.Config.HidePassworded; a release's own
	// page still shows.
	HidePassworded bool
	// CatchUpWait is how long a search that names a stream seq it has
	// seen (seen=N, sent after a live change) waits for the index to
	// apply it before it searches anyway. Zero means CatchUpWaitDefault.
	CatchUpWait time.Duration
	// Grab counts an NZB download of release made with key (the page's
	// cookie or X-Api-Key; "" for Basic auth), before the NZB is sent:
	// newznab.Config.Grab, so that a user's daily grab limit holds on the
	// page as on t=get. A *users.LimitError refuses the download (429 with
	// Retry-After); another error, 503. A HEAD counts nothing. Nil counts
	// nothing.
	Grab func(ctx context.Context, key, release string) error
	// Logger gets the failures a page is answered 500 for. Nil means
	// slog.Default() (through lifecycle.Logger, as role releases).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Scope == "" {
		c.Scope = usenet.DefaultScope
	}
	if c.PageSize == 0 {
		c.PageSize = PageSizeDefault
	}
	c.PageSize = min(c.PageSize, MaxPageSize)
	if c.SearchBudget == 0 {
		c.SearchBudget = SearchBudgetDefault
	}
	if c.CatchUpWait == 0 {
		c.CatchUpWait = CatchUpWaitDefault
	}
	c.Logger = lifecycle.Logger(c.Logger, "releases")
	return c
}

func (c Config) validate() error {
	switch {
	case c.Index == nil:
		return errors.New("releases: Config.Index is nil")
	case c.Store == nil:
		return errors.New("releases: Config.Store is nil")
	case c.PageSize < 0 || c.SearchBudget < 0 || c.CatchUpWait < 0:
		return errors.New("releases: negative PageSize, SearchBudget or CatchUpWait")
	}
	return usenet.ValidScope(c.Scope)
}

// Page serves the releases page and its JSON endpoints. It holds no
// goroutines: every request is served in its own.
type Page struct {
	cfg Config
	mux *http.ServeMux
}

// New checks cfg and returns the page.
func New(cfg Config) (*Page, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Page{cfg: cfg, mux: http.NewServeMux()}
	p.mux.Handle("GET /releases", web.StaticPage(page))
	p.mux.Handle("GET /releases/assets/", http.StripPrefix("/releases/assets/", web.StaticAssets(assetFS)))
	p.mux.HandleFunc("GET /releases/api/info", p.serveInfo)
	p.mux.HandleFunc("POST /releases/api/key", p.serveSignIn)
	p.mux.HandleFunc("DELETE /releases/api/key", p.serveSignOut)
	p.mux.Handle("GET /releases/api/search", p.guard(p.serveSearch))
	p.mux.Handle("GET /releases/api/release", p.guard(p.serveRelease))
	p.mux.Handle("GET /releases/nzb/{id}", p.guard(p.serveNZB))
	p.mux.HandleFunc("/releases/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not-found", "no such page: "+r.URL.Path)
	})
	return p, nil
}

// ServeHTTP serves the routes under Patterns.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// Mount registers the page on mux (a *web.Server or *http.ServeMux) at
// Patterns.
func (p *Page) Mount(mux interface{ Handle(string, http.Handler) }) {
	for _, pat := range Patterns {
		mux.Handle(pat, p)
	}
}
