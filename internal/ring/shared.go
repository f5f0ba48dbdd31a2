package ring

// Shared is a byte ring that one goroutine, the producer, appends to while
// another, the consumer, reads what it has taken of it in place and drops it
// once done: the bytes are copied once, into the ring, and never from it into
// another buffer. The stack's Conn is the producer (its Write) and its
// endpoint, on the loop, the consumer (a tcp.Source): the endpoint sends
// straight from the storage the application's bytes were copied into.
//
// The byte at position t of the stream (counting every byte ever written)
// lives at t mod the storage's size, in whatever storage the ring has.
// Growing copies the bytes held into new storage and leaves the old one as it
// was: the consumer, which keeps the storage it saw last (Sync) until its
// next Sync, reads the same bytes from either.
//
// Its methods are split by who calls them and how:
//   - the producer's, with the user's lock held: Held, Write;
//   - the consumer's, with the lock held: Sync, Pending, Drop;
//   - the consumer's alone, without the lock: Take, Len, At, Consume.
//
// Storage holding bytes the consumer has taken and not consumed is never
// written to: the producer writes only past the bytes held, and bytes the
// consumer consumed count as held until its next Sync gives them back. So
// At's views stay valid until those bytes are consumed and a Sync has passed.
type Shared struct {
	// The lock's.
	b     []byte // the storage Write copies into; len 0 or a power of two
	wr    uint32 // bytes written, in all (modulo 2^32, as every count here)
	freed uint32 // bytes given back by the consumer (Sync), in all
	// The consumer's.
	cwr     uint32 // wr as of the last Sync: cb holds the bytes up to it
	head    uint32 // bytes consumed, in all
	taken   uint32 // bytes taken (Take), in all: head <= taken <= cwr <= wr
	drops   uint32 // Drop's calls: a Span reserved before one is not committed
	cb      []byte // the storage as of the last Sync
	scratch []byte // At's copy of a span that wraps
}

// The counts are positions in the stream modulo 2^32: their differences
// (at most the storage's size, 1 GiB) are exact, and so is a position's
// place in the storage (its size divides 2^32).

// Held is what the ring holds, as the producer sees it: bytes written and not
// yet given back by the consumer (taken or not). Lock held.
func (r *Shared) Held() int { return int(r.wr - r.freed) }

// Free is the room the storage has past the bytes held: what a Reserve
// takes without growing it. Lock held.
func (r *Shared) Free() int { return len(r.b) - r.Held() }

// Write appends p, growing the storage if it must. Producer, lock held.
func (r *Shared) Write(p []byte) {
	if len(p) == 0 {
		return
	}
	r.grow(len(p))
	r.wr += uint32(fill(r.b, r.wr, p))
}

// A Span is room Reserve set aside for the producer to copy into without
// the lock, until Commit counts it as written.
type Span struct {
	b    []byte
	at   uint32
	gen  uint32
	size int
}

// Reserve sets aside room for the next k bytes after what was written,
// growing the storage if it must, for the producer to Fill without the
// lock: the room is past the bytes held, so the consumer, which reads only
// bytes written, never reaches it. Producer, lock held; one Span at a time.
func (r *Shared) Reserve(k int) Span {
	r.grow(k)
	return Span{b: r.b, at: r.wr, gen: r.drops, size: k}
}

// Fill copies p (len(p) == the span's size) into the span. Producer,
// without the lock.
func (s Span) Fill(p []byte) { fill(s.b, s.at, p[:s.size]) }

// Pieces returns the span's room as the storage's one or two slices (two
// when it wraps), in order: for the producer to fill in place without the
// lock, as Fill does (a read(2) straight into the ring). Producer.
func (s Span) Pieces() (a, b []byte) {
	if s.size == 0 {
		return nil, nil
	}
	start := int(s.at) & (len(s.b) - 1)
	if start+s.size <= len(s.b) {
		return s.b[start : start+s.size], nil
	}
	return s.b[start:], s.b[:s.size-(len(s.b)-start)]
}

// Cut returns the span's first k bytes (0 <= k <= its size), for Commit to
// count only what the producer filled of it. Producer.
func (s Span) Cut(k int) Span {
	if k < 0 || k > s.size {
		panic("ring: Cut beyond the span")
	}
	s.size = k
	return s
}

// Commit counts the span's bytes as written, unless a Drop came after
// Reserve: then they are discarded and Commit reports false. Producer, lock
// held.
func (r *Shared) Commit(s Span) bool {
	if s.gen != r.drops || s.at != r.wr {
		return false
	}
	r.wr += uint32(s.size)
	return true
}

// fill copies p into b at stream position at (wrapping), and returns len(p).
func fill(b []byte, at uint32, p []byte) int {
	n := 0
	for len(p) > 0 {
		k := copy(b[int(at)&(len(b)-1):], p)
		p, at, n = p[k:], at+uint32(k), n+k
	}
	return n
}

// grow makes the storage hold Held()+k bytes.
func (r *Shared) grow(k int) {
	if need := r.Held() + k; need > len(r.b) {
		c := max(len(r.b), minCap)
		for c < need {
			c *= 2
		}
		nb := make([]byte, c)
		for t := r.freed; t != r.wr; {
			from := r.b[int(t)&(len(r.b)-1):]
			from = from[:min(len(from), int(r.wr-t))]
			// A piece ends at a multiple of the old size, never past one
			// of c's: it goes in one piece.
			t += uint32(copy(nb[int(t)&(c-1):], from))
		}
		r.b = nb
	}
}

// Release returns the storage for another ring to Adopt, and leaves r empty,
// without storage, when r holds nothing: every byte written was taken,
// consumed and given back (Sync), so that neither side can reach the storage
// through r again. Otherwise, or without storage, it returns nil and
// changes nothing. Both sides: lock held, and the consumer done with the
// views At returned.
func (r *Shared) Release() []byte {
	if r.Held() != 0 || len(r.b) == 0 { // given back: taken and consumed, as head <= taken <= wr
		return nil
	}
	b := r.b
	*r = Shared{}
	return b
}

// Adopt gives an empty ring that has no storage b, of MinCap bytes, as its
// storage (from Release), instead of the allocation of its first Write. It
// reports whether it took b: not when the ring has storage or has been
// written to, nor a b of another size. Producer and consumer alike: before
// either uses r.
func (r *Shared) Adopt(b []byte) bool {
	if len(r.b) != 0 || len(r.cb) != 0 || r.wr != 0 || r.freed != 0 || len(b) != MinCap {
		return false
	}
	r.b = b
	return true
}

// Sync gives the producer back the room of the bytes consumed, takes the
// producer's storage as the one At reads, and returns Pending. Consumer, lock
// held.
func (r *Shared) Sync() int {
	r.freed = r.head
	r.cb, r.cwr = r.b, r.wr
	return r.Pending()
}

// Pending is what the producer wrote and the consumer has not taken.
// Consumer, lock held.
func (r *Shared) Pending() int { return int(r.wr - r.taken) }

// Drop discards what the consumer has not taken (the producer's bytes that
// will never be sent), and gives back what it consumed. Consumer, lock held.
func (r *Shared) Drop() {
	r.drops++
	r.wr = r.taken
	r.Sync()
}

// Take adds the next k bytes of the producer's (k <= Pending as of the last
// Sync) to what the consumer holds. Consumer.
func (r *Shared) Take(k int) {
	if k < 0 || k > int(r.cwr-r.taken) {
		panic("ring: Take beyond what was written")
	}
	r.taken += uint32(k)
}

// Len is what the consumer holds: taken and not consumed. Consumer.
func (r *Shared) Len() int { return int(r.taken - r.head) }

// Consume drops the first k bytes the consumer holds (k <= Len); their room
// goes back to the producer at the next Sync. Consumer.
func (r *Shared) Consume(k int) {
	if k < 0 || k > r.Len() {
		panic("ring: Consume beyond the contents")
	}
	r.head += uint32(k)
}

// Stable reports whether At(i, k) returns the storage itself, not the
// scratch copy of a span that wraps (the same rule as At's). Consumer.
func (r *Shared) Stable(i, k int) bool {
	start := int(r.head+uint32(i)) & (len(r.cb) - 1)
	return k == 0 || start+k <= len(r.cb)
}

// At returns k bytes from offset i of what the consumer holds (i+k <= Len),
// as one slice: the storage itself when the span does not wrap, else a copy
// in a scratch buffer that the next At that wraps reuses. Consumer.
func (r *Shared) At(i, k int) []byte {
	if i < 0 || k < 0 || i+k > r.Len() {
		panic("ring: At beyond the contents")
	}
	if k == 0 {
		return nil
	}
	start := int(r.head+uint32(i)) & (len(r.cb) - 1)
	if r.Stable(i, k) {
		return r.cb[start : start+k]
	}
	if cap(r.scratch) < k {
		r.scratch = make([]byte, k)
	}
	s := r.scratch[:k]
	m := copy(s, r.cb[start:])
	copy(s[m:], r.cb)
	return s
}
