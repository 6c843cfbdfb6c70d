package fleet

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLateRouteAnswersNotYet: a route held for a role that mounts after
// the server listens answers 503 (retry) until the role mounts it, then
// the role's handler.
func TestLateRouteAnswersNotYet(t *testing.T) {
	h := &httpSide{late: map[string]*lateRoute{"GET /ws/watch": {}}}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.late["GET /ws/watch"].ServeHTTP(rec, httptest.NewRequest("GET", "/ws/watch", nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b)
	}
	if code, _ := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("before the role mounts: %d, want 503", code)
	}
	h.Handle("GET /ws/watch", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "gateway") }))
	if code, body := get(); code != http.StatusOK || body != "gateway" {
		t.Fatalf("after: %d %q", code, body)
	}
}
