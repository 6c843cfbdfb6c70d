package releases

import (
	"embed"
	"io/fs"
	"net/http"
)

// assets are the page, its script and its stylesheet: plain files, no
// build step, nothing fetched from elsewhere.
//
//go:embed assets/index.html assets/releases.js assets/releases.css
var assets embed.FS

// assetFS is assets without its directory prefix.
var assetFS, _ = fs.Sub(assets, "assets")

// page is index.html, read once.
var page, _ = fs.ReadFile(assetFS, "index.html")

// policy lets the page load only its own files (and the watch gateway's
// client, /ws/watch.js) and talk only to its own origin.
const policy = "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"

// servePage serves the page: the list of releases and, with ?id=, one
// release. It holds no data, so it needs no credentials.
func servePage(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	_, _ = w.Write(page)
}

// assetHandler serves releases.js and releases.css.
func assetHandler() http.Handler {
	files := http.FileServerFS(assetFS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "index.html" || r.URL.Path == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
