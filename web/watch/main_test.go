package watch

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every connection's
// writer, reader and watch must end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
