//go:build !unix

package bench

import "time"

// processCPU is not measured here: the CPU columns show 0.
func processCPU() time.Duration { return 0 }
