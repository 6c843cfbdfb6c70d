package nntp

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/switchyard-dev/switchyard/nntp/nntptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testGroup = "alt.binaries.test"

// startServer runs a real nntptest server on a loopback port for one test,
// with testGroup holding n articles of small parts.
func startServer(t *testing.T, cfg nntptest.Config, n int64) *nntptest.Server {
	t.Helper()
	if cfg.PartSize == 0 {
		cfg.PartSize = 2000
	}
	s := nntptest.Start(t, cfg)
	s.AddGroup(testGroup, n)
	return s
}

func dial(t *testing.T, cfg Config) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
