package watch

import (
	"embed"
	"net/http"

	"github.com/switchyard-dev/switchyard/web"
)

// static holds the JS client and the page, served as they are.
//
//go:embed static/watch.js static/watch.html
var static embed.FS

func staticFile(name, contentType string) http.Handler {
	return web.StaticFile(static, "static/"+name, contentType)
}
