package tcp

import "github.com/tcpwheel/tcpwheel/internal/ring"

// buffer is a byte queue: data is appended at the end and consumed from the
// front. It is a ring (internal/ring): its storage is reused without sliding
// the contents, so a Write that finds the end of the storage taken costs no
// more than one that does not. (The slice it replaced slid the whole
// unacknowledged send buffer to the front on every such Write: about 40% of
// the CPU of BenchmarkTransfer.) The send buffer's bytes may instead be held
// by a Source (Endpoint.SetSource): the buffer then only counts them.
type buffer struct {
	r   ring.Buffer
	src Source // holds the bytes in place of r, if set
	n   int    // with src: the bytes appended (Append) and not consumed
}

func (b *buffer) len() int {
	if b.src != nil {
		return b.n
	}
	return b.r.Len()
}

func (b *buffer) consume(n int) {
	if b.src != nil {
		b.n -= n
		b.src.Consume(n)
		return
	}
	b.r.Consume(n)
}

// at returns n bytes at offset i as one slice: the storage, or, for a span
// that wraps, a copy valid until the next at (a segment's Payload is valid
// only during the Output call, config.go).
func (b *buffer) at(i, n int) []byte {
	if b.src != nil {
		return b.src.At(i, n)
	}
	return b.r.At(i, n)
}

func (b *buffer) write(p []byte)    { b.r.Write(p) }
func (b *buffer) read(p []byte) int { return b.r.Read(p) }

// Source holds an endpoint's send data in place of the endpoint's send
// buffer (SetSource), the mirror of Sink on the receive side: the owner
// writes the bytes into its own storage and hands them over with Append, by
// count; the endpoint reads its segments' payloads from there (At) and drops
// what is acknowledged (Consume). The stack's Conn is one (a ring.Shared the
// application's Write copies into): the bytes are then copied once, not a
// second time into the endpoint's buffer, on the loop. The send buffer's size
// bounds Append as it bounds Write, counting the bytes the Source holds for
// the endpoint, so flow control is the same.
type Source interface {
	// At returns k bytes from offset i of what the endpoint holds (appended
	// and not consumed): the storage itself, not written to until those
	// bytes are consumed, or, for a span the storage does not hold in one
	// piece, a copy valid until the next such At.
	At(i, k int) []byte
	// Consume drops the first k bytes the endpoint holds: acknowledged.
	Consume(k int)
}

// SetSource makes s hold the send buffer's bytes, which Append then hands
// over; Write no longer takes any (it fails with ErrInvalidConfig). It must be
// set before anything is written.
func (e *Endpoint) SetSource(s Source) { e.snd.buf.src = s }
