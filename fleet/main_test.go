package fleet

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a fleet starts ends with its Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
