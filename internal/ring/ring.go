// Package ring is a growable byte ring: a FIFO queue of bytes whose storage
// is reused without ever sliding its contents (tcp's send and receive
// buffers, and the stack's per-connection buffers, are rings). It is not safe
// for concurrent use; its users guard it themselves.
package ring

// minCap is the smallest storage a ring allocates: a connection that moves a
// few small messages holds little.
const minCap = 1 << 10

// MinCap is the size of the smallest storage a ring allocates, the storage
// worth handing from a ring that is done to a new one (Release, Adopt): the
// most a connection that moves a few small messages holds.
const MinCap = minCap

// Buffer is a byte ring. The zero value is an empty ring with no storage: the
// storage is allocated by the first Write or Grow, and doubles as needed. Its
// capacity is always a power of two.
type Buffer struct {
	b       []byte // storage; len(b) is the capacity, 0 or a power of two
	head, n int    // the first byte's index in b, and the count of bytes held
	scratch []byte // At's copy of a span that wraps
}

// Len is the number of bytes held.
func (r *Buffer) Len() int { return r.n }

// Cap is the size of the storage.
func (r *Buffer) Cap() int { return len(r.b) }

// Grow makes room for k more bytes than the ring holds, reallocating (and
// unwrapping the contents) if it must.
func (r *Buffer) Grow(k int) {
	need := r.n + k
	if need <= len(r.b) {
		return
	}
	c := max(len(r.b), minCap)
	for c < need {
		c *= 2
	}
	nb := make([]byte, c)
	r.copyOut(nb, 0, r.n)
	r.b, r.head = nb, 0
}

// Write appends p, growing the storage if it must.
func (r *Buffer) Write(p []byte) {
	r.Grow(len(p))
	a, b := r.Free()
	k := copy(a, p)
	copy(b, p[k:])
	r.n += len(p)
}

// Free returns the free space after the contents as up to two slices, in
// order (b is empty unless the free space wraps). Bytes written there join the
// contents with Commit.
func (r *Buffer) Free() (a, b []byte) {
	if len(r.b) == 0 {
		return nil, nil
	}
	tail := (r.head + r.n) & (len(r.b) - 1)
	if r.n == len(r.b) {
		return nil, nil
	}
	if tail >= r.head {
		return r.b[tail:], r.b[:r.head]
	}
	return r.b[tail:r.head], nil
}

// Commit appends k bytes written into Free's slices to the contents.
func (r *Buffer) Commit(k int) {
	if k < 0 || r.n+k > len(r.b) {
		panic("ring: Commit beyond the free space")
	}
	r.n += k
}

// Peek returns the contents as up to two slices, in order (b is empty unless
// the contents wrap). They alias the storage: valid until the next call that
// changes the ring.
func (r *Buffer) Peek() (a, b []byte) {
	if r.n == 0 {
		return nil, nil
	}
	if end := r.head + r.n; end <= len(r.b) {
		return r.b[r.head:end], nil
	}
	return r.b[r.head:], r.b[:r.n-(len(r.b)-r.head)]
}

// Consume drops the first k bytes (k <= Len). An emptied ring starts again
// at the front of its storage.
func (r *Buffer) Consume(k int) {
	if k < 0 || k > r.n {
		panic("ring: Consume beyond the contents")
	}
	r.n -= k
	if r.n == 0 {
		r.head = 0
		return
	}
	r.head = (r.head + k) & (len(r.b) - 1)
}

// Read copies the first bytes into p, drops them, and returns their count.
func (r *Buffer) Read(p []byte) int {
	k := min(len(p), r.n)
	r.copyOut(p, 0, k)
	r.Consume(k)
	return k
}

// At returns k bytes from offset i of the contents (i+k <= Len) as one slice:
// the storage itself when the span does not wrap, else a copy in a scratch
// buffer that the next At that wraps reuses.
func (r *Buffer) At(i, k int) []byte {
	if i < 0 || k < 0 || i+k > r.n {
		panic("ring: At beyond the contents")
	}
	if k == 0 {
		return nil
	}
	if r.Stable(i, k) {
		start := (r.head + i) & (len(r.b) - 1)
		return r.b[start : start+k]
	}
	if cap(r.scratch) < k {
		r.scratch = make([]byte, k)
	}
	s := r.scratch[:k]
	r.copyOut(s, i, k)
	return s
}

// Stable reports whether At(i, k) returns the storage itself, not the
// scratch copy of a span that wraps (the same rule as At's).
func (r *Buffer) Stable(i, k int) bool {
	return k == 0 || (r.head+i)&(len(r.b)-1)+k <= len(r.b)
}

// Reset empties the ring and lets its storage go.
func (r *Buffer) Reset() { *r = Buffer{} }

// Release empties the ring, as Reset, and returns its storage for another
// ring to Adopt (nil if it had none). Nothing may use the storage through r
// afterwards.
func (r *Buffer) Release() []byte {
	b := r.b
	*r = Buffer{}
	return b
}

// Adopt gives an empty ring without storage b, of MinCap bytes, as its
// storage (another ring's, from Release), instead of the allocation of its
// first Write or Grow. It reports whether it took b: not when the ring has
// storage or contents, nor a b of another size.
func (r *Buffer) Adopt(b []byte) bool {
	if len(r.b) != 0 || r.n != 0 || len(b) != MinCap {
		return false
	}
	r.b, r.head = b, 0
	return true
}

// copyOut copies k bytes from offset i of the contents into p.
func (r *Buffer) copyOut(p []byte, i, k int) {
	if k == 0 {
		return
	}
	start := (r.head + i) & (len(r.b) - 1)
	m := copy(p[:k], r.b[start:])
	copy(p[m:k], r.b)
}
