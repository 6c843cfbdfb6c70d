package watch

import (
	"embed"
	"net/http"
)

// static holds the JS client and the live page, served as they are: no
// build step, nothing fetched from elsewhere.
//
//go:embed static/watch.js static/watch.html
var static embed.FS

// staticFile serves one embedded file. The page's policy lets it load only
// its own script and connect only to its own origin.
func staticFile(name, contentType string) http.Handler {
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		panic("watch: embedded " + name + " missing: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
		_, _ = w.Write(b)
	})
}
