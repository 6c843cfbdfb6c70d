package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/switchyard-dev/switchyard/bus/auth"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/persist"
	"github.com/switchyard-dev/switchyard/usenet"
	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/usenet/search"
	"github.com/switchyard-dev/switchyard/usenet/users"
	"github.com/switchyard-dev/switchyard/web"
	"github.com/switchyard-dev/switchyard/web/metrics"
	"github.com/switchyard-dev/switchyard/web/releases"
	"github.com/switchyard-dev/switchyard/web/watch"
)

// APIConfig is the usenet indexer's Newznab API (/api on the HTTP side)
// and the releases page people search it on (/releases, web/releases).
type APIConfig struct {
	// Dir holds the search index (search.db), the API key file (the
	// admin's key) and the users store (users.db, see usenet users). ""
	// means no API.
	Dir string

	// BaseURL is what the links in feeds start with. "" means the
	// request's own host.
	BaseURL string

	// HidePassworded leaves releases post-processing found passworded out
	// of the searches and feeds (newznab.Config.HidePassworded).
	HidePassworded bool
}

// The roles the watchers are exported under (switchyard_watch_*{role}).
const (
	watchRoleSearch  = "search-index"
	watchRoleGateway = "watch-gateway"
)

// apiPattern is the route of the Newznab API.
const apiPattern = "/api"

// apiInfo is what the API tells the caller once started.
type apiInfo struct {
	key     string
	created bool
	role    *apiRole
	keys    func(string) bool // the one key check of the releases page and its WebSocket: the admin's key or a user's
	scope   string            // the usenet scope the API serves
}

// apiKeyChecker is the check of the admin's key (newznab.Config.APIKeys);
// users' keys are checked by the users store beside it (apiRole.validKey).
func apiKeyChecker(key string) func(string) bool { return newznab.KeyChecker(key) }

// validKey is the one check of the releases page and its WebSocket: the
// admin's key or a user's, as /api accepts them, counting nothing.
func (a *apiRole) validKey(key string) bool { return a.cfg.ValidKey(context.Background(), key) }

// APIKey is the Newznab API key and whether this start created it ("" with
// no API).
func (f *Fleet) APIKey() (key string, created bool) { return f.api.key, f.api.created }

// ValidAPIKey reports whether key may use the Newznab API: the admin's
// key or a user's (newznab.Config.ValidKey); false with no API. For pages
// beside the API that take the same keys.
func (f *Fleet) ValidAPIKey(ctx context.Context, key string) bool {
	if f.api.role == nil {
		return false
	}
	return f.api.role.cfg.ValidKey(ctx, key)
}

// APIKeyFile is where the API key is kept ("" with no API).
func (f *Fleet) APIKeyFile() string {
	if f.cfg.API.Dir == "" {
		return ""
	}
	return filepath.Join(f.cfg.API.Dir, newznab.KeyFile)
}

// startAPI opens (or creates) the search index in API.Dir, follows the
// releases stream into it from where it left off, and mounts /api, with
// its requests counted in the metrics and its follower in readiness.
func (f *Fleet) startAPI(ctx context.Context) error {
	dir := f.cfg.API.Dir
	if dir == "" {
		return nil
	}
	key, created, err := newznab.LoadKey(dir)
	if err != nil {
		return err
	}
	c, err := f.apiClient(ctx)
	if err != nil {
		return err
	}
	st, err := usenet.NewStore(c, f.cfg.Work.UsenetScope)
	if err != nil {
		return err
	}
	f.api = apiInfo{key: key, created: created, scope: st.Scope()}
	a := &apiRole{dir: dir, store: st, http: f.http, baseURL: f.cfg.API.BaseURL, hide: f.cfg.API.HidePassworded, keys: apiKeyChecker(key), log: lifecycle.Logger(f.log, "newznab"), ended: f.roleEnded}
	if err := f.start(ctx, "newznab", a); err != nil {
		return err
	}
	f.api.role, f.api.keys = a, a.validKey
	return nil
}

// apiClient is the persist client of the API and the watch gateway, on a
// connection of its own (made once).
func (f *Fleet) apiClient(ctx context.Context) (*persist.Client, error) {
	if f.apiPersist != nil {
		return f.apiPersist, nil
	}
	nc, err := f.connect(ctx, "switchyard-usenet-api", auth.RoleClient)
	if err != nil {
		return nil, err
	}
	c, err := f.persistClient(ctx, nc)
	if err != nil {
		return nil, err
	}
	f.apiPersist = c
	return c, nil
}

// apiRole is the Newznab API: the index, its follower and the handler.
type apiRole struct {
	base    lifecycle.Base
	dir     string
	store   *usenet.Store
	http    *httpSide
	baseURL string
	hide    bool // HidePassworded
	keys    func(string) bool
	log     *slog.Logger
	ended   func(role string, err error) // Fleet.roleEnded

	ix    *search.Index
	f     *search.Follower
	users *users.Store
	cfg   newznab.Config // the handler's, for ValidKey
}

func (a *apiRole) Start(ctx context.Context) error {
	return a.base.Start(ctx, "newznab", func(ctx context.Context) error {
		if err := os.MkdirAll(a.dir, 0o755); err != nil {
			return fmt.Errorf("usenet api: %w", err)
		}
		ix, err := search.Open(filepath.Join(a.dir, "search.db"))
		if err != nil {
			return fmt.Errorf("usenet api: %w", err)
		}
		fl, err := ix.Follow(ctx, a.store.Releases())
		if err != nil {
			ix.Close()
			return fmt.Errorf("usenet api: follow releases: %w", err)
		}
		us, err := users.Open(filepath.Join(a.dir, users.File), users.Config{})
		if err != nil {
			_ = fl.Stop(ctx)
			ix.Close()
			return fmt.Errorf("usenet api: %w", err)
		}
		a.ix, a.f, a.users = ix, fl, us
		// A follower that failed leaves the index behind the releases
		// for good (the API and the page serve it stale): the role is
		// gone. It ends, with no error, when Stop stops it.
		go func() {
			<-fl.Done()
			if err := fl.Err(); err != nil {
				a.ended("newznab", fmt.Errorf("search index: %w", err))
			}
		}()
		var observe func(string, int)
		if a.http != nil {
			requests, err := metrics.NewznabRequests(a.http.metrics.Registerer())
			if err != nil {
				_ = a.stop(ctx)
				return err
			}
			observe = func(fn string, code int) { requests.WithLabelValues(fn, metrics.NewznabCode(code)).Inc() }
		}
		a.http.check("usenet search index", followCheck(fl))
		a.http.addMetrics(func(r *metrics.Registry) { r.AddWatcher(watchRoleSearch, fl) })
		if a.http != nil {
			a.http.parts.setIndex(ix)
		}
		a.cfg = newznab.Config{Index: ix, Store: a.store, APIKeys: a.keys, Users: us, BaseURL: a.baseURL, Observe: observe, HidePassworded: a.hide}
		a.http.Handle(apiPattern, newznab.Handler(a.cfg))
		if err := a.mountPage(ix); err != nil {
			_ = a.stop(ctx)
			return err
		}
		a.log.Info("search index following releases", "index", filepath.Join(a.dir, "search.db"), "from_seq", ix.LastSeq()+1)
		return nil
	})
}

// mountPage serves the releases page (/releases) over the API's index and
// store, with the API's key check and, under NATS.AuthDir, the bus's users.
func (a *apiRole) mountPage(ix *search.Index) error {
	if a.http == nil {
		return nil
	}
	p, err := releases.New(releases.Config{Index: ix, Store: a.store, Scope: a.store.Scope(), APIKeys: a.validKey, Grab: a.cfg.Grab, HidePassworded: a.hide,
		Authorizer: a.http.authz, Hosts: a.http.hosts, Logger: a.log})
	if err != nil {
		return fmt.Errorf("usenet api: %w", err)
	}
	for _, pat := range releases.Patterns {
		a.http.Handle(pat, p)
	}
	return nil
}

func (a *apiRole) Stop(ctx context.Context) error { return a.base.Stop(ctx, a.stop) }

// stop stops following and closes the index.
func (a *apiRole) stop(ctx context.Context) error {
	err := a.f.Stop(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, a.ix.Close(), a.users.Close())
}

// followCheck is the readiness check of the search index's follower: ready
// while it follows; once it ended, why (a follower stopped on purpose, as
// in a shutdown, has no error of its own and says so).
func followCheck(fl *search.Follower) func() error {
	return func() error {
		select {
		case <-fl.Done():
		default:
			return nil
		}
		if err := fl.Err(); err != nil {
			return fmt.Errorf("stopped following releases: %w", err)
		}
		return errors.New("stopped following releases: the follower was stopped")
	}
}

// startWatch mounts the WebSocket watch gateway (/ws/watch, /watch). With
// HTTP.Watch and NATS.AuthDir, browsers log in as the bus's users and see
// what the bus lets them read (a tenant its own scopes); with HTTP.Watch
// and no AuthDir the bus is open, and so is the gateway. With the API, the
// releases page's key (its cookie) reads the usenet scope: the page follows
// the releases stream here. A process with the API and without HTTP.Watch
// (usenet serve) runs the gateway for that key alone.
func (f *Fleet) startWatch(ctx context.Context) error {
	if f.http == nil || (!f.cfg.HTTP.Watch && f.api.keys == nil) {
		return nil
	}
	var authz web.Authorizer
	if f.cfg.HTTP.Watch {
		authz = f.http.authz
		if authz == nil {
			authz = web.Open()
		}
	}
	if f.api.keys != nil {
		authz = releases.WatchAuthorizer(f.api.keys, f.api.scope, authz)
	}
	c, err := f.apiClient(ctx)
	if err != nil {
		return err
	}
	gw, err := watch.New(watch.Config{Client: c, Authorizer: authz, Hosts: f.http.hosts, Logger: f.log})
	if err != nil {
		return err
	}
	// The server's shutdown does not wait for WebSocket connections (they
	// were taken over from it): the gateway closes its own, before it.
	if err := f.start(ctx, "watch", gw); err != nil {
		return err
	}
	f.http.addMetrics(func(r *metrics.Registry) { r.AddWatchSet(watchRoleGateway, gw) })
	gw.Mount(f.http)
	return nil
}

// gatewayParts are what a browser gateway needs: the HTTP side's
// authorizer (the bus's users under NATS.AuthDir; open, as the bus,
// without) and the API's persist client.
func (f *Fleet) gatewayParts(ctx context.Context) (web.Authorizer, *persist.Client, error) {
	authz := f.http.authz
	if authz == nil {
		authz = web.Open()
	}
	c, err := f.apiClient(ctx)
	return authz, c, err
}
