//go:build !linux

package bench

import (
	"errors"
	"time"
)

var errNoProc = errors.New("another process's CPU and RSS are read from /proc, which only Linux has")

func procCPU(pid int) (time.Duration, error) { return 0, errNoProc }

func procRSS(pid int) (int64, error) { return 0, errNoProc }
