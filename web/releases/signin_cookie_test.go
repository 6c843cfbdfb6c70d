package releases_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"

	"github.com/switchyard-dev/switchyard/usenet/newznab"
	"github.com/switchyard-dev/switchyard/web/releases"
)

// TestSignInKeyCookieRoundTrip: a key the API accepts signs the page in
// whatever bytes it holds (non-ASCII letters and a ';' here). The cookie
// held the key as it was, and net/http dropped what a cookie value cannot
// hold: the sign-in answered 200 and every later request was 401.
func TestSignInKeyCookieRoundTrip(t *testing.T) {
	t.Parallel()
	const key = "clé-secrète;du-serveur-2024"
	e := newEnv(t, func(c *releases.Config) { c.APIKeys = newznab.KeyChecker(key) })
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	resp, err := browser.PostForm(e.srv.URL+"/releases/api/key", url.Values{"key": {key}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %d %s", resp.StatusCode, b)
	}
	resp, err = browser.Get(e.srv.URL + "/releases/api/info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info releases.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if !info.SignedIn {
		u, _ := url.Parse(e.srv.URL)
		t.Fatalf("sign-in answered 200, yet the next request is not signed in (%q); the browser holds the cookie %v", info.Problem, jar.Cookies(u))
	}
}
