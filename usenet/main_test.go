package usenet

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: the
// settle loop and Apply's merges must all stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
