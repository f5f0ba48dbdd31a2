//go:build !unix

package stack

// rawReads: ReadFrom goes through io.Copy's buffer on this platform.
const rawReads = false

func rawRead(uintptr, []byte) (int, error) { panic("stack: rawRead without rawReads") }
