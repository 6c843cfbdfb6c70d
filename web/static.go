package web

import (
	"io/fs"
	"net/http"
)

// PagePolicy is the Content-Security-Policy of the embedded pages (the
// dashboard, the releases page): they load only their own files and talk
// only to their own origin.
const PagePolicy = "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"

// StaticPage serves one embedded HTML page, revalidated on each load and
// under PagePolicy.
func StaticPage(html []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", PagePolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		_, _ = w.Write(html)
	})
}

// StaticAssets serves the files of an embedded page's directory (its
// script and stylesheet), revalidated on each load; its index.html and the
// directory itself are not served (the page has a route of its own).
// Mount it under http.StripPrefix.
func StaticAssets(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
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
