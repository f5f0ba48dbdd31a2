// Package tuntest provides in-memory implementations of tun.Device for
// tests: Pipe joins two devices back to back, like a cable; PollableFake is
// a tun.Pollable the test feeds, for checking that a wrapper keeps the
// Pollable path (Linux only: its descriptor is an eventfd); Frames is a
// tun.Offloader that keeps the frames written and hands out frames queued,
// for checking a wrapper's frame paths (GSOFrame and Segments build and take
// apart the frames). None wraps another device, so none has an optional
// interface to forward.
package tuntest

import (
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/tcpwheel/tcpwheel/tun"
)

// DefaultQueueLen is the number of packets each direction of a pipe holds
// when PipeConfig.QueueLen is zero.
const DefaultQueueLen = 1024

// PipeConfig configures NewPipe.
type PipeConfig struct {
	// MTU is the largest packet either end accepts; 0 means tun.DefaultMTU.
	MTU int

	// QueueLen is the number of packets written but not yet read that
	// each direction holds; a packet that finds its queue full is dropped
	// and counted, as a real link would. 0 means DefaultQueueLen.
	QueueLen int

	// Names are the ends' names, as returned by Name; empty means "pipe-a"
	// and "pipe-b".
	Names [2]string
}

// Pipe returns the two ends of an in-memory link with the given MTU (0
// means tun.DefaultMTU) and DefaultQueueLen: what one end writes, the
// other reads, one packet at a time. See Endpoint.
func Pipe(mtu int) (a, b tun.Device) {
	ea, eb := NewPipe(PipeConfig{MTU: mtu})
	return ea, eb
}

// NewPipe is Pipe with every setting. It panics if cfg.MTU or cfg.QueueLen
// is negative.
func NewPipe(cfg PipeConfig) (a, b *Endpoint) {
	if cfg.MTU == 0 {
		cfg.MTU = tun.DefaultMTU
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.MTU < 0 || cfg.QueueLen < 0 {
		panic(fmt.Sprintf("tuntest: NewPipe: negative MTU (%d) or queue length (%d)", cfg.MTU, cfg.QueueLen))
	}
	if cfg.Names[0] == "" {
		cfg.Names[0] = "pipe-a"
	}
	if cfg.Names[1] == "" {
		cfg.Names[1] = "pipe-b"
	}
	ab, ba := newQueue(cfg.QueueLen), newQueue(cfg.QueueLen)
	a = &Endpoint{name: cfg.Names[0], mtu: cfg.MTU, in: ba, out: ab}
	b = &Endpoint{name: cfg.Names[1], mtu: cfg.MTU, in: ab, out: ba}
	return a, b
}

// Endpoint is one end of a pipe. It implements tun.Device:
//
//   - WritePacket copies the packet into the peer's queue, or drops it
//     (returning nil, and counting it in Stats().Dropped) if the queue is
//     full. It never blocks.
//   - ReadPacket takes the oldest packet from this end's queue, blocking
//     while it is empty.
//   - Close closes the whole pipe, both ends: pending and later
//     ReadPacket and WritePacket calls on either end fail with an error
//     wrapping net.ErrClosed, and queued packets are discarded.
//
// All methods are safe for concurrent use.
type Endpoint struct {
	name string
	mtu  int
	in   *queue // packets for this end to read
	out  *queue // packets for the peer to read
}

var _ tun.Device = (*Endpoint)(nil)

// PipeStats counts one end's packets.
type PipeStats struct {
	Sent     uint64 // written by this end and queued for the peer
	Dropped  uint64 // written by this end and dropped: the peer's queue was full
	Received uint64 // read by this end
}

// Stats returns this end's counters.
func (e *Endpoint) Stats() PipeStats {
	var s PipeStats
	e.out.mu.Lock()
	s.Sent, s.Dropped = e.out.sent, e.out.dropped
	e.out.mu.Unlock()
	e.in.mu.Lock()
	s.Received = e.in.received
	e.in.mu.Unlock()
	return s
}

// ReadPacket implements tun.Device.
func (e *Endpoint) ReadPacket(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("tuntest %s: read: %w", e.name, io.ErrShortBuffer)
	}
	q := e.in
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n == 0 && !q.closed {
		q.nonEmpty.Wait()
	}
	if q.closed {
		return 0, fmt.Errorf("tuntest %s: read: %w", e.name, net.ErrClosed)
	}
	pkt := q.slots[q.head]
	q.head = (q.head + 1) % len(q.slots)
	q.n--
	q.received++
	n := copy(buf, pkt)
	if n < len(pkt) {
		return n, fmt.Errorf("tuntest %s: read: packet of %d bytes: %w", e.name, len(pkt), io.ErrShortBuffer)
	}
	return n, nil
}

// WritePacket implements tun.Device.
func (e *Endpoint) WritePacket(pkt []byte) error {
	if len(pkt) == 0 || len(pkt) > e.mtu {
		return fmt.Errorf("tuntest %s: write: %d bytes, MTU %d: %w", e.name, len(pkt), e.mtu, tun.ErrPacketSize)
	}
	q := e.out
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Errorf("tuntest %s: write: %w", e.name, net.ErrClosed)
	}
	if q.n == len(q.slots) {
		q.dropped++
		return nil
	}
	i := (q.head + q.n) % len(q.slots)
	// Slots keep their buffers: after the first lap, writes do not allocate.
	if cap(q.slots[i]) < len(pkt) {
		q.slots[i] = make([]byte, 0, e.mtu)
	}
	q.slots[i] = append(q.slots[i][:0], pkt...)
	q.n++
	q.sent++
	q.nonEmpty.Signal()
	return nil
}

// MTU implements tun.Device.
func (e *Endpoint) MTU() int { return e.mtu }

// Name implements tun.Device.
func (e *Endpoint) Name() string { return e.name }

// Close implements tun.Device. It closes both ends; see Endpoint.
func (e *Endpoint) Close() error {
	e.in.close()
	e.out.close()
	return nil
}

// queue is one direction of a pipe: a ring of packets.
type queue struct {
	mu       sync.Mutex
	nonEmpty sync.Cond // L is &mu; signalled on write, broadcast on close
	slots    [][]byte  // ring; slots[head] is the oldest of n packets
	head, n  int
	closed   bool

	sent, dropped, received uint64
}

func newQueue(n int) *queue {
	q := &queue{slots: make([][]byte, n)}
	q.nonEmpty.L = &q.mu
	return q
}

func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.slots = nil
		q.n = 0
		q.nonEmpty.Broadcast()
	}
}
