// Package seqnum holds TCP sequence numbers: 32-bit values compared and
// added modulo 2^32 (RFC 9293 section 3.4), so that wrapping works.
//
// Its identifiers are those of gVisor's tcpip/seqnum, which tcpwheel used
// before; tcp's exported API (Segment, SACK blocks, ISNFunc) is written in them.
package seqnum

// Value is a sequence number.
type Value uint32

// Size is the length of a span of sequence numbers.
type Size uint32

// LessThan reports whether v is before w (modulo 2^32).
func (v Value) LessThan(w Value) bool {
	return int32(v-w) < 0
}

// LessThanEq reports whether v is w or before it.
func (v Value) LessThanEq(w Value) bool {
	return v == w || v.LessThan(w)
}

// InRange reports whether v is in [a, b).
func (v Value) InRange(a, b Value) bool {
	return v-a < b-a
}

// InWindow reports whether v is in the window of size sequence numbers that
// starts at first.
func (v Value) InWindow(first Value, size Size) bool {
	return v.InRange(first, first.Add(size))
}

// Add returns the sequence number that follows the span [v, v+s).
func (v Value) Add(s Size) Value {
	return v + Value(s)
}

// Size returns the length of the span [v, w).
func (v Value) Size(w Value) Size {
	return Size(w - v)
}

// UpdateForward moves v forward by s.
func (v *Value) UpdateForward(s Size) {
	*v += Value(s)
}
