package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

// assets are the page, its script and its stylesheet: plain files, no
// build step, nothing fetched from elsewhere.
//
//go:embed assets/index.html assets/dashboard.js assets/dashboard.css
var assets embed.FS

// assetFS is assets without its directory prefix.
var assetFS, _ = fs.Sub(assets, "assets")

// page is index.html, read once.
var page, _ = fs.ReadFile(assetFS, "index.html")

// servePage serves the dashboard page.
func servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	// The page loads only its own script and stylesheet and talks only to
	// its own WebSocket.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(page)
}

// assetHandler serves dashboard.js and dashboard.css.
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
