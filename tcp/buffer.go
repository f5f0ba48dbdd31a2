package tcp

import "github.com/tcpwheel/tcpwheel/internal/ring"

// buffer is a byte queue: data is appended at the end and consumed from the
// front. It is a ring (internal/ring): its storage is reused without sliding
// the contents, so a Write that finds the end of the storage taken costs no
// more than one that does not. (The slice it replaced slid the whole
// unacknowledged send buffer to the front on every such Write: about 40% of
// the CPU of BenchmarkTransfer.)
type buffer struct{ r ring.Buffer }

func (b *buffer) len() int      { return b.r.Len() }
func (b *buffer) consume(n int) { b.r.Consume(n) }

// at returns n bytes at offset i as one slice: the storage, or, for a span
// that wraps, a copy valid until the next at (a segment's Payload is valid
// only during the Output call, config.go).
func (b *buffer) at(i, n int) []byte { return b.r.At(i, n) }
func (b *buffer) write(p []byte)     { b.r.Write(p) }
func (b *buffer) read(p []byte) int  { return b.r.Read(p) }

// stable reports whether at(i, n) returns the storage itself, not a copy:
// the span lies within one of the contents' two pieces (Segment.PayloadStable).
func (b *buffer) stable(i, n int) bool {
	a, _ := b.r.Peek()
	return i+n <= len(a) || i >= len(a)
}
