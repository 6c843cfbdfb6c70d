package testpersist

import (
	"testing"

	"go.uber.org/goleak"
)

// Every fleet an Env starts ends with the test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
