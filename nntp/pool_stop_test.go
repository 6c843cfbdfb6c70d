package nntp

import (
	"testing"

	"github.com/switchyard-dev/switchyard/internal/lifecycle/lifecycletest"
	"go.uber.org/goleak"
)

// TestPoolStartAfterStop: a stopped pool stays stopped. Start must neither
// start a health loop nobody will stop nor report success.
//
// Not parallel: VerifyNone sees every goroutine of the process, and the
// parallel tests' servers and pools would be counted as this test's leaks.
// A sequential test runs while the parallel ones still wait to start.
func TestPoolStartAfterStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p, err := NewPool(PoolConfig{Conn: Config{Addr: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	lifecycletest.Stop(t, p)
}

// TestPoolStartTwice: a second Start is refused, and Stop ends the one
// health loop the first started.
func TestPoolStartTwice(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p, err := NewPool(PoolConfig{Conn: Config{Addr: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	lifecycletest.Start(t, p)
	lifecycletest.Stop(t, p)
}
