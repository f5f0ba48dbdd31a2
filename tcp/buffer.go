package tcp

import "github.com/tcpwheel/tcpwheel/internal/ring"

// buffer is the receive buffer, a byte queue: data is appended at the end
// and read from the front. It is a ring (internal/ring): its storage is reused without sliding
// the contents, so a Write that finds the end of the storage taken costs no
// more than one that does not. (The slice it replaced slid the whole
// unacknowledged send buffer to the front on every such Write: about 40% of
// the CPU of BenchmarkTransfer.)
type buffer struct{ r ring.Buffer }

func (b *buffer) len() int          { return b.r.Len() }
func (b *buffer) write(p []byte)    { b.r.Write(p) }
func (b *buffer) read(p []byte) int { return b.r.Read(p) }

// Source holds an endpoint's send data in place of a send buffer of its own
// (SetSource), the mirror of Sink on the receive side: the owner writes the
// bytes into its own storage and hands them over with Append, by count; the
// endpoint reads its segments' payloads from there (At) and drops what is
// acknowledged (Consume). The stack's Conn is one (a ring.Shared the
// application's Write copies into): the bytes are then copied once, not a
// second time into the endpoint's buffer, on the loop. The send buffer's size
// bounds Append as it bounds Write, counting the bytes the Source holds for
// the endpoint, so flow control is the same.
type Source interface {
	// Take adds the owner's next k bytes to what the endpoint holds.
	Take(k int)
	// Len is what the endpoint holds: taken and not consumed.
	Len() int
	// At returns k bytes from offset i of what the endpoint holds: the
	// storage itself, not written to until those bytes are consumed, or,
	// for a span the storage does not hold in one piece, a copy valid until
	// the next such At.
	At(i, k int) []byte
	// Stable reports whether At(i, k) returns the storage itself, not a
	// copy (Segment.PayloadStable).
	Stable(i, k int) bool
	// Consume drops the first k bytes the endpoint holds: acknowledged.
	Consume(k int)
}

// SetSource makes s hold the send buffer's bytes, which Append then hands
// over; Write no longer takes any (it fails with ErrInvalidConfig). It must be
// set before anything is written.
func (e *Endpoint) SetSource(s Source) { e.snd.buf.src = s }

// sendBuffer is the unacknowledged and unsent data: a Source's (SetSource),
// or the endpoint's own ring (ownSource), made by the first Write. An
// endpoint with a Source carries no ring of its own: 48 bytes less per
// connection.
type sendBuffer struct{ src Source }

// ownSource is the send buffer's bytes that Write copied in.
type ownSource struct{ r ring.Buffer }

func (o *ownSource) Take(int)             {} // Write appended them already
func (o *ownSource) Len() int             { return o.r.Len() }
func (o *ownSource) At(i, k int) []byte   { return o.r.At(i, k) }
func (o *ownSource) Consume(k int)        { o.r.Consume(k) }
func (o *ownSource) Stable(i, k int) bool { return o.r.Stable(i, k) }

func (b *sendBuffer) len() int {
	if b.src == nil {
		return 0
	}
	return b.src.Len()
}

func (b *sendBuffer) consume(n int) {
	if n > 0 {
		b.src.Consume(n)
	}
}

// at returns n bytes at offset i as one slice: the storage, or, for a span
// that wraps, a copy valid until the next at (a segment's Payload is valid
// only during the Output call, config.go).
func (b *sendBuffer) at(i, n int) []byte { return b.src.At(i, n) }

// stable reports whether at(i, n) returns the storage itself, not a copy
// (Segment.PayloadStable).
func (b *sendBuffer) stable(i, n int) bool { return b.src.Stable(i, n) }

// own returns the endpoint's own ring, making it if nothing is held yet; nil
// if a Source holds the bytes.
func (b *sendBuffer) own() *ownSource {
	if b.src == nil {
		o := &ownSource{}
		b.src = o
		return o
	}
	o, _ := b.src.(*ownSource)
	return o
}

// external reports whether a Source of the endpoint's user holds the bytes.
func (b *sendBuffer) external() bool {
	_, own := b.src.(*ownSource)
	return b.src != nil && !own
}
