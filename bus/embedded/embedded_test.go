package embedded_test

import (
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/bus/embedded"
)

func TestPortInUse(t *testing.T) {
	t.Parallel()
	// Two servers on one port: the second must fail with a clear error, not hang.
	first, err := embedded.Start(embedded.Config{Port: embedded.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Shutdown()
	port := first.Port()
	_, err = embedded.Start(embedded.Config{Port: port, ReadyTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("second server on the same port started")
	}
}
