package stack

import (
	"encoding/binary"
	"net/netip"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
)

// ICMPv6 (RFC 4443): echo requests are answered; a port unreachable that
// quotes a connected UDP socket's own flow fails its next read, as over
// IPv4; other errors are counted and ignored. Neighbour discovery (RFC
// 4861) and MLD (RFC 2710, 3810) have no use on a TUN, which has no link
// layer: the kernel's router solicitations, DAD probes and MLD reports are
// dropped quietly and counted (Drops.NeighborDiscovery). The errors the
// stack sends (port unreachable, parameter problem) go through icmp6Error.

const icmp6HeaderLen = header.ICMPv6MinimumSize // type, code, checksum, 4 bytes of the message's own

// neighborDiscovery reports whether an ICMPv6 type is neighbour discovery
// (router solicitation and advertisement, neighbour solicitation and
// advertisement, redirect) or multicast listener discovery (query, reports,
// done).
func neighborDiscovery(typ byte) bool {
	switch header.ICMPv6Type(typ) {
	case header.ICMPv6RouterSolicit, header.ICMPv6RouterAdvert, header.ICMPv6NeighborSolicit,
		header.ICMPv6NeighborAdvert, header.ICMPv6RedirectMsg,
		header.ICMPv6MulticastListenerQuery, header.ICMPv6MulticastListenerReport,
		header.ICMPv6MulticastListenerDone, header.ICMPv6MulticastListenerV2Report:
		return true
	}
	return false
}

// handleICMPv6 handles an ICMPv6 message b from src to our dst (its IPv6
// header and extension headers checked).
func (s *Stack) handleICMPv6(src, dst netip.Addr, b []byte) {
	d := &s.counters.Drops
	if len(b) < icmp6HeaderLen || checksum.Checksum(b, pseudoHeader(protoICMPv6, src, dst, len(b))) != 0xffff {
		d.BadICMP++ // the checksum is mandatory (RFC 4443 2.3)
		return
	}
	typ, code := header.ICMPv6Type(b[0]), header.ICMPv6Code(b[1])
	switch {
	case s.grp != nil && s.shard != 0 && (typ != header.ICMPv6EchoRequest || code != 0):
		s.handOffICMP(src, dst, b, true) // loops.go: to the first loop
		return
	case s.tcpICMP6(b): // icmptcp.go
		return
	case typ == header.ICMPv6DstUnreachable && code == header.ICMPv6PortUnreachable && s.udpRefused6(b[icmp6HeaderLen:]):
		return
	case typ != header.ICMPv6EchoRequest || code != 0:
		d.ICMPIgnored++ // errors we take no action on; unknown informational messages (RFC 4443 2.4 (b))
		return
	}
	hl := ipv6HeaderLen
	out := s.outBuf(hl + len(b)) // fragmented if larger than the MTU (frag.go)
	reply := out[hl:]
	copy(reply, b)
	reply[0] = byte(header.ICMPv6EchoReply) // RFC 4443 4.2: identifier, sequence and data as they came
	reply[2], reply[3] = 0, 0
	binary.BigEndian.PutUint16(reply[2:], ^checksum.Checksum(reply, pseudoHeader(protoICMPv6, dst, src, len(reply))))
	s.counters.EchoReplies++
	s.writeIPv6(out, dst, src, protoICMPv6)
}

// icmp6Error answers the packet pkt (its IPv6 header first) with an
// ICMPv6 error of type typ and code code, whose 4-byte parameter is param
// (a parameter problem's pointer; 0 else), quoting as much of pkt as keeps
// the error within IPv6's minimum MTU (RFC 4443 2.4 (c)). The caller has
// checked that pkt was for our unicast address from a unicast source (RFC
// 4443 2.4 (e)). Never for an ICMPv6 error (the stack answers UDP to closed
// ports and packets whose headers it could not take; an ICMPv6 error right
// after the IPv6 header is looked for). At most as often as the ICMP rate
// limit lets it.
func (s *Stack) icmp6Error(typ header.ICMPv6Type, code header.ICMPv6Code, param uint32, pkt []byte) {
	src, dst := netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	if len(pkt) > ipv6HeaderLen && pkt[6] == protoICMPv6 && pkt[ipv6HeaderLen] < 128 {
		return // an error about an error
	}
	if s.martianSource(src) != nil {
		return
	}
	if !s.icmpLimit.allow(s.wheel.Now(), src) {
		s.counters.Drops.ICMPRateLimited++
		return
	}
	hl := ipv6HeaderLen
	quote := min(len(pkt), min(ipv6MinMTU, len(s.obuf))-hl-icmp6HeaderLen)
	out := s.obuf[:hl+icmp6HeaderLen+quote]
	m := out[hl:]
	m[0], m[1], m[2], m[3] = byte(typ), byte(code), 0, 0
	binary.BigEndian.PutUint32(m[4:], param)
	copy(m[icmp6HeaderLen:], pkt[:quote])
	binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, pseudoHeader(protoICMPv6, dst, src, len(m))))
	switch typ {
	case header.ICMPv6DstUnreachable:
		s.counters.PortUnreachables++
	case header.ICMPv6TimeExceeded:
		s.counters.TimeExceededSent++
	default:
		s.counters.ParamProblems++
	}
	s.writeIPv6(out, dst, src, protoICMPv6)
}

// portUnreachable6 answers a UDP datagram to a closed port, over IPv6,
// with an ICMPv6 port unreachable (RFC 4443 3.1, code 4): hdr is its IPv6
// header and extension headers, udp the datagram.
func (s *Stack) portUnreachable6(hdr, udp []byte) {
	n := len(hdr) + len(udp)
	pkt := hdr[:n:n] // the datagram follows its header in the packet
	s.icmp6Error(header.ICMPv6DstUnreachable, header.ICMPv6PortUnreachable, 0, pkt)
}

// udpRefused6 is udpRefused for the quote of an ICMPv6 port unreachable:
// the IPv6 header and UDP header of a datagram we sent (we send no
// extension headers).
func (s *Stack) udpRefused6(quote []byte) bool {
	if len(quote) < ipv6HeaderLen+udpHeaderLen || quote[0]>>4 != 6 || quote[6] != protoUDP ||
		!s.isLocal(netip.AddrFrom16([16]byte(quote[8:24]))) {
		return false
	}
	u := header.UDP(quote[ipv6HeaderLen:])
	return s.refuseUDP(u.SourcePort(), netip.AddrPortFrom(netip.AddrFrom16([16]byte(quote[24:40])), u.DestinationPort()))
}
