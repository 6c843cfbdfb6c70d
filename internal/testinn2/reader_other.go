//go:build !unix

package testinn2

import "testing"

// Reader needs a Unix host (INN runs on one); elsewhere it skips t.
func Reader(t testing.TB) string {
	t.Helper()
	Addr(t)
	t.Skip("testinn2: nnrpd needs a Unix host")
	return ""
}
