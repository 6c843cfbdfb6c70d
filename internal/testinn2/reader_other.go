//go:build !unix

package testinn2

import (
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testci"
)

// Reader needs a Unix host (INN runs on one); elsewhere it skips t, or
// fails it under CI=true.
func Reader(t testing.TB) string {
	t.Helper()
	Addr(t)
	testci.Missing(t, "testinn2: nnrpd needs a Unix host")
	return ""
}
