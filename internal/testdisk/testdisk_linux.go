package testdisk

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
)

// Small mounts a tmpfs of size bytes on a new directory under t.TempDir()
// and returns the directory; it is unmounted when the test ends.
func Small(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := syscall.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		unavailable(t, fmt.Sprintf("mount tmpfs (needs root on Linux): %v", err))
	}
	// Registered after TempDir's own cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("testdisk: unmount: %v", err)
		}
	})
	return dir
}

// ReadOnly remounts the filesystem of Small at dir read-only (ro true) or
// writable again. Root ignores permission bits, so a mount flag is the way
// to make a directory read-only for it. Linux refuses (EBUSY) while a file
// on it is open for writing.
func ReadOnly(t testing.TB, dir string, ro bool) {
	t.Helper()
	flags := uintptr(syscall.MS_REMOUNT)
	if ro {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("", dir, "", flags, ""); err != nil {
		t.Fatalf("testdisk: remount (read-only %v): %v", ro, err)
	}
}
