package nntptest

import (
	"context"
	"testing"
	"time"
)

// stopWait bounds the Stop that Start registers as the test's cleanup.
const stopWait = 10 * time.Second

// Start starts a server for one test, as httptest.NewServer does: it is
// listening when Start returns and stopped when the test ends. cfg is
// optional (the zero Config when absent; only the first is used). Add the
// groups with AddGroup before connecting to it.
func Start(t testing.TB, cfg ...Config) *Server {
	t.Helper()
	var c Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	s := New(c)
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("nntptest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopWait)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("nntptest: %v", err)
		}
	})
	return s
}
