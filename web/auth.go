package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	natsconf "github.com/nats-io/nats-server/v2/conf"

	"github.com/switchyard-dev/switchyard/bus"
	"github.com/switchyard-dev/switchyard/bus/auth"
)

// Principal is who an HTTP request proved to be and what it may read.
// The watch gateway (web/watch) lets it read the scopes it names; the
// dashboard and /metrics (RequireAuth) admit only one that reads them all.
type Principal struct {
	// Name is the user's name, for logs.
	Name string
	// AllScopes lets the principal read every scope (the bus's client user).
	AllScopes bool
	// Scopes are the scopes a tenant may read; ignored with AllScopes.
	Scopes []string
	// Anonymous: no credentials were asked (Open). Every request is then
	// this one principal, so it is no one's in particular: per-user bounds
	// (the watch and events gateways' TenantConnections) do not apply to
	// it.
	Anonymous bool
}

// CanRead reports whether p may watch streams of scope.
func (p Principal) CanRead(scope string) bool {
	return p.AllScopes || slices.Contains(p.Scopes, scope)
}

// An Authorizer says who a request comes from. An error wrapping
// ErrUnauthorized answers 401 (no or wrong credentials), one wrapping
// ErrForbidden 403; any other error is a 500. It is called once per
// request, before the WebSocket upgrade, and may be called concurrently.
type Authorizer func(r *http.Request) (Principal, error)

// Errors an Authorizer returns.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
)

// APIKeyHeader and APIKeyParam carry an API key. Browsers cannot set headers
// on a WebSocket, so the query parameter is the way in for them.
const (
	APIKeyHeader = "X-Api-Key"
	APIKeyParam  = "apikey"
)

// Authorize runs authz on r and, when it refuses, answers r itself: 401
// with WWW-Authenticate: Basic (so a browser prompts for a bus user and
// password), 403, or 500. ok is false when it has answered.
func Authorize(w http.ResponseWriter, r *http.Request, authz Authorizer) (p Principal, ok bool) {
	p, err := authz(r)
	switch {
	case err == nil:
		return p, true
	case errors.Is(err, ErrUnauthorized):
		w.Header().Set("WWW-Authenticate", `Basic realm="switchyard", charset="UTF-8"`)
		http.Error(w, err.Error(), http.StatusUnauthorized)
	case errors.Is(err, ErrForbidden):
		http.Error(w, err.Error(), http.StatusForbidden)
	default:
		http.Error(w, "internal: "+err.Error(), http.StatusInternalServerError)
	}
	return Principal{}, false
}

// RequireAuth serves h only to the requests of a principal authz admits
// that reads every scope (an operator: the bus's client user); the others
// are answered as Authorize does, and a principal confined to some scopes
// (a tenant) or to none (a server's user) 403. The dashboard and /metrics
// show the whole process — releases, work, every stream's figures — so
// they are not a tenant's. A nil authz is h itself.
func RequireAuth(authz Authorizer, h http.Handler) http.Handler {
	if authz == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := Authorize(w, r, authz)
		if !ok {
			return
		}
		if !p.AllScopes {
			http.Error(w, fmt.Sprintf("%v: %s may not read every scope", ErrForbidden, p.Name), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Open is the Authorizer of an open bus on loopback: everyone reads every
// scope. Use it only where the bus itself runs without auth.
func Open() Authorizer {
	return func(*http.Request) (Principal, error) {
		return Principal{Name: "anonymous", AllScopes: true, Anonymous: true}, nil
	}
}

// Account is one identity Accounts knows.
type Account struct {
	Principal
	// Password is checked against HTTP Basic auth with Principal.Name as
	// the user. Empty: no Basic login.
	Password string
	// APIKeys are keys that log in as this account (X-Api-Key or ?apikey=).
	APIKeys []string
}

// NoLoginsMessage is why Accounts refuses every request when none of its
// accounts has a password or an API key.
const NoLoginsMessage = "no user can log in over HTTP here: no account has a password or API key (an auth directory of NKey users has none: switchyard auth init without --nkey makes password users; up --metrics-open serves /metrics without one)"

// Accounts is an Authorizer over a fixed set of accounts: HTTP Basic auth
// (name and password) or an API key. Secrets are compared as SHA-256
// digests in constant time. With no password and no key among accts it
// refuses every request with NoLoginsMessage.
func Accounts(accts []Account) Authorizer {
	type entry struct {
		p   Principal
		sum [32]byte
	}
	byName := map[string]entry{}
	byKey := map[[32]byte]Principal{}
	for _, a := range accts {
		if a.Password != "" {
			byName[a.Name] = entry{a.Principal, sha256.Sum256([]byte(a.Password))}
		}
		for _, k := range a.APIKeys {
			if k != "" {
				byKey[sha256.Sum256([]byte(k))] = a.Principal
			}
		}
	}
	if len(byName) == 0 && len(byKey) == 0 {
		// Nothing can pass: say so, rather than ask for credentials no
		// one holds (an auth directory of NKey users gives no accounts).
		return func(*http.Request) (Principal, error) {
			return Principal{}, fmt.Errorf("%w: %s", ErrUnauthorized, NoLoginsMessage)
		}
	}
	return func(r *http.Request) (Principal, error) {
		if user, pass, ok := r.BasicAuth(); ok {
			e, known := byName[user]
			sum := sha256.Sum256([]byte(pass))
			// Compare even for an unknown user, so timing does not tell
			// which names exist.
			if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 && known {
				return e.p, nil
			}
			return Principal{}, fmt.Errorf("%w: wrong user or password", ErrUnauthorized)
		}
		key := r.Header.Get(APIKeyHeader)
		if key == "" {
			key = r.URL.Query().Get(APIKeyParam)
		}
		if key == "" {
			return Principal{}, fmt.Errorf("%w: give HTTP Basic auth (a bus user), an %s header or an %s parameter", ErrUnauthorized, APIKeyHeader, APIKeyParam)
		}
		// The map is keyed by digest: a lookup's timing says nothing
		// about the key itself.
		if p, ok := byKey[sha256.Sum256([]byte(key))]; ok {
			return p, nil
		}
		return Principal{}, fmt.Errorf("%w: unknown API key", ErrUnauthorized)
	}
}

// AuthDirAccounts reads the users of an auth directory (written by
// `switchyard auth init`) from its nats-server configuration and grants
// each what the bus grants it: a user that may subscribe to every feed of
// service (the client user) reads every scope, a tenant reads the scopes
// whose feeds it may subscribe to, the other roles read nothing. A user's
// bus password is both its Basic auth password and its API key (256
// random bits identify it alone). NKey users have no password and cannot
// log in over HTTP: a directory of NKey users only gives no accounts. service "" means bus.DefaultService.
func AuthDirAccounts(dir, service string) ([]Account, error) {
	if service == "" {
		service = bus.DefaultService
	}
	path := filepath.Join(dir, auth.ConfFile)
	m, err := natsconf.ParseFile(path)
	if err != nil {
		return nil, fmt.Errorf("read auth dir: %w", err)
	}
	// The users are in an account block (auth.Account); files written
	// before accounts had them in the authorization block.
	az, _ := m["authorization"].(map[string]any)
	users, _ := az["users"].([]any)
	accounts, _ := m["accounts"].(map[string]any)
	for _, acc := range accounts {
		am, _ := acc.(map[string]any)
		more, _ := am["users"].([]any)
		users = append(users, more...)
	}
	var out []Account
	for _, u := range users {
		um, _ := u.(map[string]any)
		name, _ := um["user"].(string)
		pass, _ := um["password"].(string)
		if name == "" || pass == "" {
			continue
		}
		a := Account{Principal: Principal{Name: name}, Password: pass, APIKeys: []string{pass}}
		for _, subj := range allowedSubscribe(um) {
			scope, ok := feedScope(service, subj)
			switch {
			case !ok:
			case scope == "*":
				a.AllScopes = true
			case bus.ValidScope(scope):
				a.Scopes = append(a.Scopes, scope)
			}
		}
		out = append(out, a)
	}
	// A directory of NKey users (auth init --nkey) has no password to
	// check: it yields no accounts, so the guarded pages admit nobody
	// rather than the roles failing to start.
	return out, nil
}

// allowedSubscribe lists permissions.subscribe.allow of one user entry
// (nats-server also accepts a bare list for subscribe).
func allowedSubscribe(user map[string]any) []string {
	perms, _ := user["permissions"].(map[string]any)
	var list []any
	switch s := perms["subscribe"].(type) {
	case map[string]any:
		list, _ = s["allow"].([]any)
	case []any:
		list = s
	case string:
		list = []any{s}
	}
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// feedScope returns S for a subject "service.S.feed.>".
func feedScope(service, subj string) (string, bool) {
	rest, ok := strings.CutPrefix(subj, service+".")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, ".feed.>")
}
