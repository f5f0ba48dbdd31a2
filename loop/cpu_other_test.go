//go:build !linux

package loop

import "time"

// processCPU is not measured off Linux.
func processCPU() time.Duration { return 0 }
