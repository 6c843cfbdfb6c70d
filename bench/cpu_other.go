//go:build !unix

package bench

import (
	"os"
	"time"
)

// processCPU is not measured here: the CPU columns show 0.
func processCPU() time.Duration { return 0 }

// allocated is a file's length where blocks are not reported.
func allocated(info os.FileInfo) int64 { return info.Size() }
