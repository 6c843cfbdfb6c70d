//go:build !linux

package testdisk

import "testing"

// Small mounts a small filesystem; only on Linux, so here the test skips
// (or fails under CI=true).
func Small(t testing.TB, size int64) string {
	t.Helper()
	unavailable(t, "tmpfs mounts are Linux-only")
	return ""
}

// ReadOnly is only reached after Small, which never returns here.
func ReadOnly(t testing.TB, dir string, ro bool) {
	t.Helper()
	unavailable(t, "tmpfs mounts are Linux-only")
}
