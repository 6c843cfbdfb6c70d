package web

import (
	"io/fs"
	"net/http"
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
