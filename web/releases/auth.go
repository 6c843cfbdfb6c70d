package releases

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/web"
)

// CookieName is the cookie the page keeps its API key in: HttpOnly (no
// script reads it), SameSite=Strict (no other site's page sends it), Path
// / (the watch gateway's WebSocket carries it too), Secure on HTTPS.
const CookieName = "switchyard_key"

// CookieMaxAge is how long a browser keeps the key.
const CookieMaxAge = 30 * 24 * time.Hour

// maxKeyForm bounds the body of a sign-in: a key and its field name.
const maxKeyForm = 4 << 10

// keyOf is the key a request carries: the page's cookie, else an
// X-Api-Key header (a script or a test). Never a URL parameter.
func keyOf(r *http.Request) string {
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return cookieKey(c.Value)
	}
	return r.Header.Get(web.APIKeyHeader)
}

// cookieEncoded marks a cookie value holding its key in base64url: a
// cookie cannot hold every byte a key may have (net/http drops non-ASCII,
// '"', ';' and '\\' from a value), and a key changed so never signed in.
const cookieEncoded = "b64."

// cookieValue is key as the cookie holds it.
func cookieValue(key string) string {
	if key == "" {
		return ""
	}
	return cookieEncoded + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// cookieKey is the key a cookie value holds; a value set before keys were
// encoded is the key itself.
func cookieKey(v string) string {
	if enc, ok := strings.CutPrefix(v, cookieEncoded); ok {
		if b, err := base64.RawURLEncoding.DecodeString(enc); err == nil {
			return string(b)
		}
	}
	return v
}

// keyPrincipal is who an API key of the indexer is: a reader of its scope.
func keyPrincipal(scope string) web.Principal {
	return web.Principal{Name: "api key", Scopes: []string{scope}}
}

// checkKey says who key is: an indexer API key (keys), else a bus user's
// key (authz, asked with the key as an X-Api-Key header and no other
// credentials). Either may be nil.
func checkKey(r *http.Request, key, scope string, keys func(string) bool, authz web.Authorizer) (web.Principal, error) {
	if keys != nil && keys(key) {
		return keyPrincipal(scope), nil
	}
	if authz != nil {
		r2 := r.Clone(r.Context())
		r2.Header.Del("Authorization")
		r2.Header.Set(web.APIKeyHeader, key)
		r2.URL.RawQuery = ""
		if p, err := authz(r2); err == nil {
			return p, nil
		}
	}
	return web.Principal{}, fmt.Errorf("%w: unknown API key", web.ErrUnauthorized)
}

// who says who r comes from: its key (cookie or header), else its Basic
// credentials (with an Authorizer), else anonymous on an open page.
func (p *Page) who(r *http.Request) (web.Principal, error) {
	if key := keyOf(r); key != "" {
		return checkKey(r, key, p.cfg.Scope, p.cfg.APIKeys, p.cfg.Authorizer)
	}
	if _, _, ok := r.BasicAuth(); ok && p.cfg.Authorizer != nil {
		return p.cfg.Authorizer(r)
	}
	if p.cfg.APIKeys == nil && p.cfg.Authorizer == nil {
		return web.Principal{Name: "anonymous", AllScopes: true, Anonymous: true}, nil
	}
	return web.Principal{}, fmt.Errorf("%w: sign in with the indexer's API key", web.ErrUnauthorized)
}

// guard serves h to the requests whose principal may read the scope. A
// refusal is JSON, and a 401 has no Basic challenge: a script's request
// must not make the browser prompt (the page shows its key form).
func (p *Page) guard(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := p.who(r)
		switch {
		case errors.Is(err, web.ErrUnauthorized):
			writeError(w, http.StatusUnauthorized, "unauthorized", err.Error())
		case err != nil:
			writeError(w, http.StatusForbidden, "forbidden", err.Error())
		case !who.CanRead(p.cfg.Scope):
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not read scope %s", who.Name, p.cfg.Scope))
		default:
			h(w, r)
		}
	})
}

// serveSignIn checks the POSTed form's key and, if it is good, keeps it in
// the page's cookie.
func (p *Page) serveSignIn(w http.ResponseWriter, r *http.Request) {
	if err := p.cfg.Hosts.CheckOrigin(r, nil); err != nil {
		writeError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxKeyForm)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "bad-request", fmt.Sprintf("want a form (application/x-www-form-urlencoded) of at most %d bytes with a key field", maxKeyForm))
		return
	}
	if r.URL.Query().Has("key") {
		writeError(w, http.StatusBadRequest, "bad-request", "key: send it in the body, never in the URL")
		return
	}
	key := r.PostForm.Get("key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "bad-request", "key: missing")
		return
	}
	who, err := checkKey(r, key, p.cfg.Scope, p.cfg.APIKeys, p.cfg.Authorizer)
	if err != nil {
		writeError(w, http.StatusUnauthorized, "unauthorized", err.Error())
		return
	}
	if !who.CanRead(p.cfg.Scope) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not read scope %s", who.Name, p.cfg.Scope))
		return
	}
	http.SetCookie(w, keyCookie(r, key, CookieMaxAge))
	writeJSON(w, http.StatusOK, map[string]string{"who": who.Name})
}

// serveSignOut forgets the key.
func (p *Page) serveSignOut(w http.ResponseWriter, r *http.Request) {
	if err := p.cfg.Hosts.CheckOrigin(r, nil); err != nil {
		writeError(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	http.SetCookie(w, keyCookie(r, "", -1))
	w.WriteHeader(http.StatusNoContent)
}

// keyCookie is the page's cookie holding key for maxAge (negative: delete
// it).
func keyCookie(r *http.Request, key string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{
		Name: CookieName, Value: cookieValue(key), Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
	if maxAge < 0 {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(maxAge / time.Second)
	}
	return c
}

// WatchAuthorizer is the watch gateway's Authorizer with the page's key
// added: a request that carries a key (the page's cookie or an X-Api-Key
// header) that keys accepts reads scope, and only scope; one that next
// accepts as a key (a bus user's) is that user; every other request is
// next's to judge (nil next refuses it). This is how the page's
// WebSocket is admitted without its key in the URL. keys is the same
// checker as Config.APIKeys.
func WatchAuthorizer(keys func(string) bool, scope string, next web.Authorizer) web.Authorizer {
	return func(r *http.Request) (web.Principal, error) {
		if key := keyOf(r); key != "" {
			if p, err := checkKey(r, key, scope, keys, next); err == nil {
				return p, nil
			}
		}
		if next == nil {
			return web.Principal{}, fmt.Errorf("%w: sign in on /releases with the indexer's API key", web.ErrUnauthorized)
		}
		return next(r)
	}
}
