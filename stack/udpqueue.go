package stack

import (
	"net/netip"
	"sync"
)

// A UDP socket's receive queue. The loop appends to it (deliver) and the
// readers take from it (take), each under the socket's small lock
// (UDPConn.mu): a read waits only while it is empty. It is a ring of at most
// udpQueueLen datagrams, grown by doubling as it fills (a socket that never
// received holds none; the slots stay once grown), and each datagram's bytes
// are a buffer of a pool (dgramPool, 2 KiB each: a datagram of a 1500-byte
// MTU fits, and a device with a larger MTU does not make every small
// datagram hold that much), given back when it is read: a busy socket
// allocates nothing per datagram. A larger datagram gets a buffer of its
// own.

// datagram is one received datagram: where it came from and its payload,
// b's first n bytes. b is a buffer of dgramPool, or its own (pooled false)
// when the datagram is larger than dgramBufSize.
type datagram struct {
	from   netip.AddrPort
	b      *[]byte
	n      int
	pooled bool
}

// dgramQueue is the ring; slots[head] is the oldest of n datagrams.
type dgramQueue struct {
	slots   []datagram
	head, n int
}

// push appends d, unless the queue holds udpQueueLen datagrams already.
func (q *dgramQueue) push(d datagram) bool {
	if q.n >= udpQueueLen {
		return false
	}
	if q.n == len(q.slots) {
		grown := make([]datagram, min(max(2*len(q.slots), 4), udpQueueLen))
		for i := range q.n {
			grown[i] = q.slots[(q.head+i)%len(q.slots)]
		}
		q.slots, q.head = grown, 0
	}
	q.slots[(q.head+q.n)%len(q.slots)] = d
	q.n++
	return true
}

// pop removes and returns the oldest datagram; the queue must not be empty.
func (q *dgramQueue) pop() datagram {
	d := q.slots[q.head]
	q.slots[q.head] = datagram{}
	q.head = (q.head + 1) % len(q.slots)
	q.n--
	return d
}

// dgramBufSize is the size of dgramPool's buffers.
const dgramBufSize = 2048

// dgramPool holds the receive queues' buffers, of every stack.
var dgramPool = sync.Pool{New: func() any { b := make([]byte, dgramBufSize); return &b }}

// newDatagram copies p, from `from`, into a buffer of the pool (or one of
// its own if it does not fit).
func (s *Stack) newDatagram(from netip.AddrPort, p []byte) datagram {
	d := datagram{from: from, n: len(p)}
	if len(p) <= dgramBufSize {
		d.b, d.pooled = dgramPool.Get().(*[]byte), true
	} else {
		b := make([]byte, len(p))
		d.b = &b
	}
	copy(*d.b, p)
	return d
}

// free gives d's buffer back to the pool.
func (s *Stack) free(d datagram) {
	if d.pooled {
		dgramPool.Put(d.b)
	}
}

// drain empties the queue, giving the buffers back.
func (s *Stack) drain(q *dgramQueue) {
	for q.n > 0 {
		s.free(q.pop())
	}
	*q = dgramQueue{}
}
