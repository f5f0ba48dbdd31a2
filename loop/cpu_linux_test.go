package loop

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns the CPU time (user + system) the test process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
