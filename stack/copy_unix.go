//go:build unix

package stack

import "syscall"

// rawReads: ReadFrom reads a syscall.Conn's descriptor itself.
const rawReads = true

// rawRead is read(2) on a descriptor of a syscall.RawConn.
func rawRead(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }
