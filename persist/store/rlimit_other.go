//go:build !unix

package store

// NoFileLimit returns 0 (unknown) where there is no RLIMIT_NOFILE.
func NoFileLimit() uint64 { return 0 }
