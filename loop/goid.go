package loop

import (
	"runtime"
	"strings"
)

// goroutineID returns the calling goroutine's id from the first line of its
// stack trace, "goroutine 42 [running]:". It is not fast: Close and Watch
// use it, not the loop's turns.
func goroutineID() string {
	var buf [64]byte
	f := strings.Fields(string(buf[:runtime.Stack(buf[:], false)]))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}
