package fleet

import (
	"net/http"
	"testing"

	"github.com/switchyard-dev/switchyard/web/releases"
)

// pageRow is one request of TestReleasesPage and the status it wants.
type pageRow struct {
	name    string
	path    string
	upgrade bool
	header  http.Header
	want    int
}

// TestReleasesPage: the releases page is served beside /api, its data
// needs the API's key (the cookie or the header, never the URL), and the
// watch gateway admits that key as a reader of the usenet scope alone —
// in up (HTTP.Watch, open bus) and in usenet serve (no HTTP.Watch: the
// gateway runs for the page's key only).
func TestReleasesPage(t *testing.T) {
	t.Parallel()
	up := startWeb(t, webConfig(t))
	serveCfg := webConfig(t)
	serveCfg.HTTP.Dashboard, serveCfg.HTTP.Watch = false, false
	serve := startWeb(t, serveCfg)
	for _, f := range []struct {
		name string
		f    *Fleet
	}{{"up", up}, {"usenet serve", serve}} {
		key, _ := f.f.APIKey()
		cookie := http.Header{"Cookie": {releases.CookieName + "=" + key}}
		header := http.Header{"X-Api-Key": {key}}
		releasesWatch := "/ws/watch?scope=" + f.f.api.scope + "&stream=releases"
		rows := []pageRow{
			{"page", "/releases", false, nil, http.StatusOK},
			{"search, no key", "/releases/api/search", false, nil, http.StatusUnauthorized},
			{"search, key in the URL", "/releases/api/search?apikey=" + key, false, nil, http.StatusUnauthorized},
			{"search, key header", "/releases/api/search", false, header, http.StatusOK},
			{"search, cookie", "/releases/api/search", false, cookie, http.StatusOK},
			{"releases watch, cookie", releasesWatch, true, cookie, http.StatusSwitchingProtocols},
		}
		if f.f == serve {
			rows = append(rows,
				pageRow{"releases watch, no key", releasesWatch, true, nil, http.StatusUnauthorized},
				pageRow{"other scope, cookie", "/ws/watch?scope=hub&stream=log", true, cookie, http.StatusForbidden},
			)
		}
		for _, c := range rows {
			t.Run(f.name+": "+c.name, func(t *testing.T) {
				code, body := webRequest{path: c.path, header: c.header, upgrade: c.upgrade}.do(t, f.f.HTTPURL())
				if code != c.want {
					t.Fatalf("GET %s: %d %.200q, want %d", c.path, code, body, c.want)
				}
			})
		}
	}
}
