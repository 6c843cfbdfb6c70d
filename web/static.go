package web

import (
	"io/fs"
	"net/http"
	"path"
)

// PageCSP is the Content-Security-Policy of the pages the gateways embed:
// their own scripts (and inline ones) only, connections to their own
// origin only, no image but their own and data: URLs (the empty favicon).
const PageCSP = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:"

// StaticFile serves the file name of fsys as it is (no build step, nothing
// fetched from elsewhere), with contentType and PageCSP. A missing file
// panics: embedded files are part of the program.
func StaticFile(fsys fs.FS, name, contentType string) http.Handler {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		panic("web: embedded " + name + " missing: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", PageCSP)
		_, _ = w.Write(b)
	})
}

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
		// Cleaned, as the file server cleans it: "%2e/" (which the mux
		// does not clean) or "%2findex.html" named the page too, served
		// without its route's credentials and PagePolicy.
		if p := path.Clean("/" + r.URL.Path); p == "/" || p == "/index.html" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
