package stack

import (
	"net/netip"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// The SYN stash (Config.SYNStash, issue 11): under a burst of new
// connections the device's queue is first in, first out, and a client whose
// SYN came early sends its first data right after our SYN-ACK, which then
// waits behind the SYNs of every client that came after it. Its RTT was
// measured while the queue was short, so the wait outgrows its tail-loss
// probe's timeout (Linux: 2·SRTT + 200 ms) and the kernel resends the data:
// at 20,000 connections 2-5% of the segments sent. With the stash, a pure
// SYN for a listener that opens a new connection (no connection has its
// 4-tuple, not even in TIME-WAIT, and the listener has no half-open one: a
// retransmitted SYN is handled at once) is copied aside while the direct
// path reads on, and the segments of the connections that exist are handled
// as they come. The stashed SYNs are handled, oldest first, at most
// maxReadBatch per turn:
//
//   - when a read finds the device drained, and then on posted turns until
//     the stash is empty (expiry runs between them: a SYN stops no timer);
//   - after a full batch, those stashed synStashWait ago or more: a device
//     that does not drain (the connections' own traffic keeps it busy)
//     does not hold a SYN near the peer's 1 s retransmission of it;
//   - when the stash is full, the oldest at once, before the new one is
//     stashed: a SYN flood gets the handling it gets without the stash, SYN
//     cookies and the half-open limit applying as each is handled.
//
// Only new connections' SYNs are reordered, behind segments of connections
// that exist: their SYN-ACKs go out a little later (the peer resends a SYN
// only after 1 s), and their RTT then includes the wait.

// synStashWait is the longest a stashed SYN waits for the device to
// drain: the peer resends it after 1 s (RFC 6298's initial RTO). At 20,000
// connections on the 2-vCPU VM, without this bound (the SYNs held until the
// device drained, or for as many batches as its queue holds) the last few
// thousand waited past 1 s in some runs; with 250 ms, (see README, "The SYN
// stash").
const synStashWait = 250 * time.Millisecond

// stashedSYN is a SYN's TCP segment, copied, with its addresses and the
// wheel's Now when it was stashed.
type stashedSYN struct {
	src, dst netip.Addr
	b        []byte
	at       time.Duration
}

// synStash is the ring of stashed SYNs (loop only).
type synStash struct {
	ring     []stashedSYN // Config.SYNStash slots; nil: no stash
	head, n  int          // the oldest, and how many are stashed
	on       bool         // a read of the direct path is under way: SYNs may be stashed
	posted   bool         // a turn is posted to handle more
	handling bool         // a stashed SYN is being handled: it is not stashed again
}

// newSYNStash returns a stash of size slots.
func newSYNStash(size int) synStash {
	if size <= 0 {
		return synStash{}
	}
	return synStash{ring: make([]stashedSYN, size)}
}

// stashSYN stashes the SYN seg (its bytes b) for id, to the listener l, if it
// opens a new connection and a read of the direct path is under way. It
// reports whether it did; a full stash first hands its oldest to the
// listener.
func (s *Stack) stashSYN(l *Listener, id tcp.ID, src, dst netip.Addr, seg *tcp.Segment, b []byte) bool {
	st := &s.syns
	if !st.on || st.handling || seg.Flags&(tcp.FlagSYN|tcp.FlagACK|tcp.FlagRST|tcp.FlagFIN) != tcp.FlagSYN || l.tl.HasHalfOpen(id) {
		return false
	}
	in := &s.inputStats
	if st.n == len(st.ring) {
		in.SYNsEarly++
		s.handleStashed() // the oldest, before its slot is taken
	}
	e := &st.ring[(st.head+st.n)%len(st.ring)]
	e.src, e.dst, e.b, e.at = src, dst, append(e.b[:0], b...), s.wheel.Now()
	st.n++
	in.SYNsStashed++
	in.SYNStashMax = max(in.SYNStashMax, st.n)
	return true
}

// handleStashed hands the oldest stashed SYN to its listener, as handleTCP
// would have: the connections and listeners are looked up again, the
// checksum and header having been checked when it was read.
func (s *Stack) handleStashed() {
	st := &s.syns
	e := &st.ring[st.head]
	st.head = (st.head + 1) % len(st.ring)
	st.n--
	seg, err := tcp.ParseSegment(e.b)
	if err != nil { // parsed when read: cannot happen, but is counted if it does
		s.counters.Drops.BadTCPHeader++
		return
	}
	s.wheel.MoveNow(s.wheel.Clock().Now())
	s.inBatch = true // until the caller's endBatch
	st.handling = true
	s.demuxTCP(e.src, e.dst, &seg, e.b) // ipv4.go
	st.handling = false
}

// stashDue runs at the end of a read of the direct path (more: it stopped at
// a full batch): it handles up to maxReadBatch stashed SYNs, those stashed
// synStashWait ago or more after a full batch, any if the device was
// drained, and then posts a turn for the rest. It returns how many it
// handled.
func (s *Stack) stashDue(more bool) int {
	st := &s.syns
	st.on = false
	if st.n == 0 {
		return 0
	}
	if more {
		n := 0
		for ; n < maxReadBatch && st.n > 0 && s.wheel.Clock().Now()-st.ring[st.head].at >= synStashWait; n++ {
			s.handleStashed()
		}
		s.inputStats.SYNsAged += uint64(n)
		return n
	}
	n := s.handleStashedBatch()
	if !st.posted {
		s.postSYNs()
	}
	return n
}

// postSYNs posts a turn for the SYNs still stashed, if any (posted is set
// first: a manual loop runs what is posted at once).
func (s *Stack) postSYNs() {
	st := &s.syns
	if st.n == 0 || s.closing {
		return
	}
	st.posted = true
	if s.run.Post(s.postedSYNs) != nil {
		st.posted = false // closed: the SYNs go with the stack
	}
}

// handleStashedBatch handles up to maxReadBatch stashed SYNs, oldest first.
func (s *Stack) handleStashedBatch() int {
	n := min(s.syns.n, maxReadBatch)
	for range n {
		s.handleStashed()
	}
	return n
}

// postedSYNs is a turn's share of the stash left when the device drained:
// a batch of its own, then another turn for the rest, so that expiry runs
// between batches.
func (s *Stack) postedSYNs() {
	st := &s.syns
	st.posted = false
	if st.n == 0 || s.closing {
		return
	}
	if s.handleStashedBatch() > 0 {
		s.endBatch()
	}
	s.postSYNs()
}
