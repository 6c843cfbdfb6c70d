package search

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a follower's goroutines (or a
// watcher's) outlive them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
