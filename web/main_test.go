package web

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every server a
// test starts must end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
