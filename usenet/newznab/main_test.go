package newznab_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if the follower, its watcher or a
// test server outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
