// Package testdisk gives a test a small filesystem of its own, to fill up or
// make read-only: a tmpfs mounted under t.TempDir() (Linux, as root). Where
// that cannot be done the test skips, saying why, except under CI=true,
// where it fails: CI must run the disk tests.
package testdisk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// unavailable skips t, or fails it under CI=true.
func unavailable(t testing.TB, why string) {
	t.Helper()
	msg := fmt.Sprintf("testdisk: no small filesystem for this test: %s", why)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI must run it)")
	}
	t.Skip(msg)
}

// Files lists every file and directory under dir, dir itself excluded, for
// tests that check what an operation left on disk.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Fill writes a ballast file in dir until the filesystem is full (a write
// fails with ENOSPC) and returns its path; removing it makes room again.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return p
			}
			t.Fatal(err)
		}
	}
}
