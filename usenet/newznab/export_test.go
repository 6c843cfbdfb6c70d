package newznab

import (
	"net/http"
	"time"
)

// HandlerAt is Handler with now as the clock a search's budget starts
// from, so that a test can start it in the past.
func HandlerAt(cfg Config, now func() time.Time) http.Handler {
	h := newHandler(cfg)
	h.now = now
	return h
}
