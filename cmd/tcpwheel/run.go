package main

import (
	"errors"
	"io"
)

// cmdRun will bring the stack up on a TUN device; the stack itself lands with the
// stack issue. Until then it says so and fails.
func cmdRun(args []string, stdout, stderr io.Writer) error {
	return errors.New("run: the TCP stack is not built yet (see issue 'A TUN-attached userspace TCP/IP stack')")
}
