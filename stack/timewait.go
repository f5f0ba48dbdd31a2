package stack

import (
	"net/netip"

	"github.com/tcpwheel/tcpwheel/tcp"
)

// A connection that the application closed and that reached TIME-WAIT is
// handed from its Conn and endpoint to a tcp.TimeWait record (about 200
// bytes where the two took some 3 KB), which holds its 4-tuple, its port and
// its claim with other loops for the rest of 2*MSL, and answers what comes
// for it as the endpoint would have (Linux's inet_timewait_sock). A server
// that closes first keeps one per connection it served in the last minute.

// toTimeWait hands c's endpoint, in TIME-WAIT after Close, to a record
// (on its EventTimeWait). The endpoint's EventClosed follows: forget finds
// the record and leaves the 4-tuple and port to it.
func (s *Stack) toTimeWait(c *Conn) {
	if s.conns[c.id] != c || s.closing {
		return
	}
	c.ep.TimeWait(&s.tws)
}

// retire has c's endpoint go back to the spares (recycleEndpoints) if it
// is done with: the application closed c (its callers see to that), the
// endpoint is CLOSED (or handed its TIME-WAIT to a record) and the stack
// has forgotten c. forget calls it for a Conn closed before its endpoint
// was; Close's part on the loop, for an endpoint a reset closed first. A
// playback's Conns keep theirs (its calls reach them by ID).
func (s *Stack) retire(c *Conn) {
	n := len(s.retired)
	if c.ep != nil && c.ep.State() == tcp.StateClosed && s.conns[c.id] != c && s.play == nil && (n == 0 || s.retired[n-1] != c) {
		s.retired = append(s.retired, c)
	}
}

// recycleEndpoints puts the endpoints of the Conns retired since it last
// ran back to the spares that the listeners' new connections take theirs
// from. It runs at the end of a batch of input (endBatch, after flushAcks)
// and at the start of one (handlePacketNow, for a Conn retired by a posted
// Close), when no endpoint method is under way and no list of the stack's
// holds an endpoint (heldAcks is empty); their Conns forget them (Conn.ep
// nil: the loop's paths of a closed Conn check it). A Conn retired twice
// (a reset's forget, then its Close's part) is recycled once.
func (s *Stack) recycleEndpoints() {
	for i, c := range s.retired {
		s.retired[i] = nil
		if ep := c.ep; ep != nil {
			c.ep = nil
			s.epSpares.Put(ep)
		}
	}
	s.retired = s.retired[:0]
}

// forgetTimeWait releases the 4-tuple and port of a record that reached
// CLOSED (tws.Closed).
func (s *Stack) forgetTimeWait(id tcp.ID) { s.release(id) }

// timeWaitSegment hands a segment for a 4-tuple in TIME-WAIT to its record,
// or to the listener (or forwarder) that a new SYN may replace the record
// for (RFC 6191), and reports whether there was a record.
func (s *Stack) timeWaitSegment(id tcp.ID, dst netip.Addr, seg *tcp.Segment, b []byte) bool {
	t, ok := s.tws.Lookup(id)
	if !ok {
		return false
	}
	if seg.Flags&tcp.FlagSYN != 0 && s.newIncarnation(id, dst, seg, b,
		func(l *tcp.Listener) bool { return l.ReuseTimeWaitRecord(t, seg) },
		func() bool { return t.Replace(seg) }) {
		return true
	}
	t.HandleSegment(seg)
	return true
}

// newIncarnation offers seg, a SYN for the 4-tuple id of a connection in
// TIME-WAIT (an endpoint's or a record's), as a new incarnation's (RFC
// 6191): to the listener of its port (reuse: Listener.ReuseTimeWait or
// ReuseTimeWaitRecord), then to the forwarder (replace: tcp.ReplaceTimeWait
// or TimeWait.Replace), each of which closes the old connection when it
// takes the SYN. It reports whether one did.
func (s *Stack) newIncarnation(id tcp.ID, dst netip.Addr, seg *tcp.Segment, b []byte, reuse func(*tcp.Listener) bool, replace func() bool) bool {
	if l := s.listenerFor(seg.DstPort, dst); l != nil && reuse(l.tl) {
		if s.grp != nil {
			s.claimHalfOpen(l, id) // loops.go
		}
		return true
	}
	return s.fwd != nil && s.fwd.timeWaitSYN(id, seg, b, replace) // forward.go
}

// inUse reports whether a connection, or a TIME-WAIT record, has id.
func (s *Stack) inUse(id tcp.ID) bool {
	_, c := s.conns[id]
	_, t := s.tws.Lookup(id)
	return c || t
}
