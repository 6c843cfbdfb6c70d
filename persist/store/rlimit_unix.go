//go:build unix

package store

import "syscall"

// NoFileLimit returns the process's file descriptor limit (soft
// RLIMIT_NOFILE; Go raises it to the hard one at start on Linux), 0 when it
// cannot be read.
func NoFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
