package stack

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// ICMP errors about our TCP connections (RFC 1122 4.2.3.9, RFC 5927): a
// destination unreachable, time exceeded, "fragmentation needed" (RFC
// 1191) or "packet too big" (RFC 8201) that quotes a segment we sent is
// handed to the connection of the quoted 4-tuple, which checks the quoted
// sequence number (tcp/icmp.go). The errors and whether they are hard are
// Linux's (icmp_err_convert, icmpv6_err_convert). One that quotes no
// connection of ours (Drops.ICMPNoConnection), a sequence number outside
// what is in flight (Drops.ICMPBadSeq; so is one about a connection in
// TIME-WAIT, which has nothing in flight), or a quote too short or not from
// our address (Drops.ICMPBadQuote) is dropped and counted. A hard error
// about a listener's half-open connection drops it (tcp/icmp.go).

// icmpErr4 is how Linux's icmp_err_convert takes an IPv4 destination
// unreachable, by code: the error and whether it is hard.
var icmpErr4 = [...]struct {
	errno syscall.Errno
	hard  bool
}{
	{syscall.ENETUNREACH, false},  // net unreachable
	{syscall.EHOSTUNREACH, false}, // host unreachable
	{syscall.ENOPROTOOPT, true},   // protocol unreachable
	{syscall.ECONNREFUSED, true},  // port unreachable
	{syscall.EMSGSIZE, false},     // fragmentation needed (PMTU, not here)
	{syscall.EOPNOTSUPP, false},   // source route failed
	{syscall.ENETUNREACH, true},   // net unknown
	{syscall.EHOSTDOWN, true},     // host unknown
	{syscall.ENONET, true},        // host isolated
	{syscall.ENETUNREACH, true},   // net prohibited
	{syscall.EHOSTUNREACH, true},  // host prohibited
	{syscall.ENETUNREACH, false},  // net unreachable for TOS
	{syscall.EHOSTUNREACH, false}, // host unreachable for TOS
	{syscall.EHOSTUNREACH, true},  // administratively prohibited
	{syscall.EHOSTUNREACH, true},  // host precedence violation
	{syscall.EHOSTUNREACH, true},  // precedence cutoff
}

// icmpErr6 is icmpv6_err_convert's table for ICMPv6 destination
// unreachable, by code.
var icmpErr6 = [...]struct {
	errno syscall.Errno
	hard  bool
}{
	{syscall.ENETUNREACH, false},  // no route
	{syscall.EACCES, true},        // administratively prohibited
	{syscall.EHOSTUNREACH, false}, // beyond the scope of the source address
	{syscall.EHOSTUNREACH, false}, // address unreachable
	{syscall.ECONNREFUSED, true},  // port unreachable
	{syscall.EACCES, true},        // source address failed policy
	{syscall.EACCES, true},        // reject route
}

// icmpCause is the error a connection reports for an ICMP error: the
// errno, and tcp.ErrConnectionRefused beside ECONNREFUSED so that it reads
// as a refused connection does.
func icmpCause(what string, errno syscall.Errno) error {
	if errno == syscall.ECONNREFUSED {
		return fmt.Errorf("%w (ICMP %s): %w", tcp.ErrConnectionRefused, what, errno)
	}
	return fmt.Errorf("ICMP %s: %w", what, errno)
}

// tcpICMP4 handles an ICMP error m (its header checked) if it quotes a
// TCP segment, and reports whether it did.
func (s *Stack) tcpICMP4(m []byte) bool {
	typ, code := header.ICMPv4Type(m[0]), int(m[1])
	if typ != header.ICMPv4DstUnreachable && typ != header.ICMPv4TimeExceeded {
		return false
	}
	q := m[header.ICMPv4MinimumSize:]
	if len(q) < ipv4HeaderLen || q[9] != protoTCP {
		return false
	}
	hl := int(q[0]&0x0f) * 4
	if q[0]>>4 != 4 || hl < ipv4HeaderLen || len(q) < hl+8 || !s.isLocal(netip.AddrFrom4([4]byte(q[12:16]))) {
		s.counters.Drops.ICMPBadQuote++
		return true
	}
	c, seq := s.quotedConn(netip.AddrFrom4([4]byte(q[12:16])), netip.AddrFrom4([4]byte(q[16:20])), q[hl:], m)
	if c == nil {
		return true
	}
	var ok bool
	switch {
	case typ == header.ICMPv4TimeExceeded:
		ok = c.ICMPError(seq, icmpCause("time exceeded", syscall.EHOSTUNREACH), false)
	case code == int(header.ICMPv4FragmentationNeeded):
		mtu := int(binary.BigEndian.Uint16(m[6:])) // RFC 1191 4: the next-hop MTU
		if ok = c.ICMPTooBig(seq, mtu); ok {
			s.learnPMTU(c.ID().Remote.Addr(), mtu) // pmtu.go
		}
	case code < len(icmpErr4):
		ok = c.ICMPError(seq, icmpCause("destination unreachable", icmpErr4[code].errno), icmpErr4[code].hard)
	default:
		s.counters.Drops.ICMPIgnored++
		return true
	}
	s.countTCPICMP(ok)
	return true
}

// tcpICMP6 is tcpICMP4 for ICMPv6: destination unreachable, packet too
// big and time exceeded (RFC 4443 3.1-3.3), quoting an IPv6 header (we
// send no extension headers) and a TCP header.
func (s *Stack) tcpICMP6(m []byte) bool {
	typ, code := header.ICMPv6Type(m[0]), int(m[1])
	if typ != header.ICMPv6DstUnreachable && typ != header.ICMPv6PacketTooBig && typ != header.ICMPv6TimeExceeded {
		return false
	}
	q := m[icmp6HeaderLen:]
	if len(q) < ipv6HeaderLen || q[6] != protoTCP {
		return false
	}
	if q[0]>>4 != 6 || len(q) < ipv6HeaderLen+8 || !s.isLocal(netip.AddrFrom16([16]byte(q[8:24]))) {
		s.counters.Drops.ICMPBadQuote++
		return true
	}
	c, seq := s.quotedConn(netip.AddrFrom16([16]byte(q[8:24])), netip.AddrFrom16([16]byte(q[24:40])), q[ipv6HeaderLen:], m)
	if c == nil {
		return true
	}
	var ok bool
	switch {
	case typ == header.ICMPv6TimeExceeded:
		ok = c.ICMPError(seq, icmpCause("time exceeded", syscall.EHOSTUNREACH), false)
	case typ == header.ICMPv6PacketTooBig:
		mtu := int(min(binary.BigEndian.Uint32(m[4:]), maxDatagram)) // RFC 4443 3.2: the MTU
		if ok = c.ICMPTooBig(seq, mtu); ok {
			s.learnPMTU(c.ID().Remote.Addr(), mtu)
		}
	case code < len(icmpErr6):
		ok = c.ICMPError(seq, icmpCause("destination unreachable", icmpErr6[code].errno), icmpErr6[code].hard)
	default:
		s.counters.Drops.ICMPIgnored++
		return true
	}
	s.countTCPICMP(ok)
	return true
}

// quotedConn finds the connection whose segment to remote a quote's TCP
// header (at least its first 8 bytes: ports and sequence number) is (a
// listener's half-open one too), or counts a drop.
// With several loops, an error m about another loop's connection is handed
// to that loop (loops.go), and quotedConn returns nil.
func (s *Stack) quotedConn(local, remote netip.Addr, th, m []byte) (*tcp.Endpoint, seqnum.Value) {
	sport, dport := binary.BigEndian.Uint16(th), binary.BigEndian.Uint16(th[2:])
	id := tcp.ID{Local: netip.AddrPortFrom(local, sport), Remote: netip.AddrPortFrom(remote, dport)}
	seq := seqnum.Value(binary.BigEndian.Uint32(th[4:]))
	if c := s.conns[id]; c != nil {
		return c.ep, seq
	}
	if l := s.listenerFor(sport, id.Local.Addr()); l != nil {
		if ep := l.tl.HalfOpenConn(id); ep != nil {
			return ep, seq // our SYN-ACK's
		}
	}
	if _, tw := s.tws.Lookup(id); tw {
		// A connection in TIME-WAIT, held by its record (timewait.go):
		// nothing of it is in flight, so the error is dropped as its
		// endpoint would have dropped it (RFC 5927 4.1), and counted
		// alike; Linux's tcp_v4_err ignores it too.
		s.counters.Drops.ICMPBadSeq++
		return nil, 0
	}
	if s.grp != nil && s.handOffQuoted(id, m, !local.Is4()) {
		return nil, 0
	}
	s.counters.Drops.ICMPNoConnection++
	return nil, 0
}

// countTCPICMP counts an ICMP error a connection took, or dropped for its
// sequence number.
func (s *Stack) countTCPICMP(ok bool) {
	if ok {
		s.counters.TCPICMPErrors++
		return
	}
	s.counters.Drops.ICMPBadSeq++
}
