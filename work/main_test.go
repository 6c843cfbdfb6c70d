package work

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// loop of the coordinator, worker, prefetcher and share must be stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
