package stack

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// IPv6 (RFC 8200) beside IPv4: the stack has one IPv6 address
// (Config.Addr6) besides its IPv4 one. A packet's extension headers are
// walked up to maxExtHeaders of them; fragments are reassembled
// (reasm.go); what RFC 8200 4 says to answer with an ICMPv6
// parameter problem is answered (icmp6.go), within the ICMP rate limit.
// There is no neighbour discovery: a TUN has no link layer.

const (
	ipv6HeaderLen = header.IPv6MinimumSize
	protoICMPv6   = uint8(header.ICMPv6ProtocolNumber)
	// ipv6MinMTU is the smallest link MTU IPv6 allows (RFC 8200 5): a
	// stack with an IPv6 address needs a device at least this large.
	ipv6MinMTU = header.IPv6MinimumMTU
	// maxExtHeaders bounds the extension headers walked in one packet:
	// more is a counted drop (Drops.IPv6ExtChain). Linux walks as many as
	// the packet holds; real packets carry one or two.
	maxExtHeaders = 8
	// maxOptPadding is the most padding (Pad1, PadN) allowed in a row in
	// an options header, as Linux (IPV6_TLV_PAD_MAX? ip6_parse_tlv: more
	// than 7 bytes is a covert channel, RFC 8504 5.3).
	maxOptPadding = 7
)

// The extension headers' Next Header values (RFC 8200 4).
const (
	nhHopByHop = 0
	nhRouting  = 43
	nhFragment = 44
	nhNoNext   = 59
	nhDestOpts = 60
)

// ipv6Chain is what walkIPv6 found: the upper-layer protocol and where it
// starts, or why the packet is dropped and the parameter problem to send.
type ipv6Chain struct {
	proto uint8 // the upper-layer protocol
	// frag: a fragment (not an atomic one), its fragment header at off,
	// named by the Next Header at nhOff.
	frag  bool
	off   int // where its header starts in the packet
	nhOff int // the offset of the Next Header field that names it
	// drop, if not nil, is the counter of a packet to drop; with icmp, a
	// parameter problem of code code pointing at ptr answers it.
	drop *uint64
	icmp bool
	code header.ICMPv6Code
	ptr  int
}

// problem is a drop answered with a parameter problem (RFC 4443 3.4).
func problem(drop *uint64, code header.ICMPv6Code, ptr int) ipv6Chain {
	return ipv6Chain{drop: drop, icmp: true, code: code, ptr: ptr}
}

// walkIPv6 walks the extension headers of pkt (its IPv6 header and the
// payload length's worth after it) as RFC 8200 4 says: Hop-by-Hop options
// only first, options processed by their type's two high bits, a routing
// header with segments left unknown (we route nothing), a fragment handed
// to reassembly unless atomic (RFC 6946: processed as a whole packet). At
// most maxExtHeaders; each is at least 8 bytes and inside the packet, so
// the walk ends.
func walkIPv6(pkt []byte, d *Drops) ipv6Chain {
	nh, nhOff, off := pkt[6], 6, ipv6HeaderLen
	for n := 0; ; n++ {
		switch nh {
		case nhHopByHop, nhRouting, nhFragment, nhDestOpts:
		case nhNoNext:
			return ipv6Chain{drop: &d.IPv6NoNextHeader}
		default:
			return ipv6Chain{proto: nh, off: off, nhOff: nhOff}
		}
		if n == maxExtHeaders {
			return ipv6Chain{drop: &d.IPv6ExtChain}
		}
		if nh == nhHopByHop && off != ipv6HeaderLen {
			return problem(&d.IPv6UnknownHeader, 1, nhOff) // RFC 8200 4.3: not first, unrecognised
		}
		h := pkt[off:]
		if len(h) < 8 {
			return ipv6Chain{drop: &d.IPv6BadExtHeader}
		}
		hl := (int(h[1]) + 1) * 8
		if nh == nhFragment {
			hl = 8 // its second byte is reserved
		}
		if hl > len(h) {
			return ipv6Chain{drop: &d.IPv6BadExtHeader}
		}
		switch nh {
		case nhHopByHop, nhDestOpts:
			if c := walkOptions(pkt, off, hl, d); c.drop != nil {
				return c
			}
		case nhRouting:
			if h[3] != 0 { // segments left: we know no routing type (RFC 8200 4.4)
				return problem(&d.IPv6UnknownHeader, 0, off+2)
			}
		case nhFragment:
			if binary.BigEndian.Uint16(h[2:])&^6 != 0 { // an offset or M: a real fragment
				return ipv6Chain{frag: true, off: off, nhOff: nhOff} // reassembled (reasm.go)
			}
		}
		nh, nhOff, off = h[0], off, off+hl
	}
}

// walkOptions processes the options of the Hop-by-Hop or Destination
// Options header at pkt[off:off+hl] (RFC 8200 4.2). We know only the
// padding ones; an unknown option is skipped or makes the packet dropped,
// as its type's two high bits say.
func walkOptions(pkt []byte, off, hl int, d *Drops) ipv6Chain {
	pad := 0
	for i, end := off+2, off+hl; i < end; {
		t := pkt[i]
		if t == 0 { // Pad1
			if pad++; pad > maxOptPadding {
				return ipv6Chain{drop: &d.IPv6BadExtHeader}
			}
			i++
			continue
		}
		if i+2 > end || i+2+int(pkt[i+1]) > end {
			return ipv6Chain{drop: &d.IPv6BadExtHeader}
		}
		n := 2 + int(pkt[i+1])
		if t == 1 { // PadN
			if pad += n; pad > maxOptPadding {
				return ipv6Chain{drop: &d.IPv6BadExtHeader}
			}
			i += n
			continue
		}
		pad = 0
		switch t >> 6 {
		case 1:
			return ipv6Chain{drop: &d.IPv6UnknownOption}
		case 2, 3: // with an ICMP (3: unless the destination is multicast, and we answer none)
			return problem(&d.IPv6UnknownOption, 2, i)
		}
		i += n // 0: skip it (the Router Alert of MLD among them)
	}
	return ipv6Chain{}
}

// handleIPv6 validates an IPv6 packet from the device and hands its payload
// to TCP, UDP or ICMPv6. Anything malformed or not for us is dropped and
// counted by reason.
func (s *Stack) handleIPv6(pkt []byte) {
	d := &s.counters.Drops
	if !s.cfg.Addr6.IsValid() {
		d.NotIPv4++ // a version we do not speak
		return
	}
	if len(pkt) < ipv6HeaderLen {
		d.BadIPHeader++
		return
	}
	plen := int(binary.BigEndian.Uint16(pkt[4:]))
	if ipv6HeaderLen+plen > len(pkt) { // a jumbogram (RFC 2675) is larger than any TUN's MTU: its option is unknown
		d.BadIPHeader++
		return
	}
	pkt = pkt[:ipv6HeaderLen+plen] // drop link padding
	src, dst := netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	if !s.isLocal(dst) && !dst.IsMulticast() && !s.forwards(dst) { // forward.go
		d.NotForUs++
		return
	}
	c := walkIPv6(pkt, d)
	if c.drop == nil && c.proto == protoICMPv6 && c.off < len(pkt) && neighborDiscovery(pkt[c.off]) {
		d.NeighborDiscovery++ // the kernel's router solicitations, DAD, MLD reports: no link layer here
		return
	}
	if !s.isLocal(dst) && !s.forwards(dst) {
		d.NotForUs++ // a multicast group: we join none
		return
	}
	if drop := s.martianSource(src); drop != nil {
		*drop++
		return
	}
	if c.drop != nil {
		*c.drop++
		if c.icmp {
			s.icmp6Error(header.ICMPv6ParamProblem, c.code, uint32(c.ptr), pkt)
		}
		return
	}
	if c.frag {
		s.fragment6(pkt, c, src, dst) // reasm.go
		return
	}
	hdr, payload := pkt[:c.off], pkt[c.off:]
	switch c.proto {
	case protoTCP:
		s.handleTCP(src, dst, payload)
	case protoUDP:
		s.handleUDP(src, dst, hdr, payload)
	case protoICMPv6:
		if !s.isLocal(dst) { // forwarded destinations (forward.go) are not pinged
			d.NotForUs++
			return
		}
		s.handleICMPv6(src, dst, payload)
	default: // RFC 8200 4: an unrecognised Next Header, pointed at
		d.UnknownProtocol++
		s.icmp6Error(header.ICMPv6ParamProblem, header.ICMPv6UnknownHeader, uint32(c.nhOff), pkt)
	}
}

// martianSource6 is martianSource for an IPv6 source: multicast, the
// unspecified address, the loopback, IPv4-mapped addresses (RFC 4291
// 2.5.5.2: not on the wire; their IPv4 twin would bypass the IPv4 checks)
// and our own address.
func (s *Stack) martianSource6(src netip.Addr) *uint64 {
	d := &s.counters.Drops
	switch {
	case src.IsMulticast():
		return &d.MartianMulticast
	case src.IsUnspecified():
		return &d.MartianZeroNet
	case src.IsLoopback():
		return &d.MartianLoopback
	case src.Is4In6():
		return &d.MartianV4Mapped
	case s.isLocal(src):
		return &d.MartianLand
	}
	return nil
}

// writeIP writes a packet whose payload is in place after its IP header,
// which it fills in: IPv4 or IPv6 as the addresses are.
func (s *Stack) writeIP(pkt []byte, src, dst netip.Addr, proto uint8) {
	if src.Is4() {
		s.writeIPv4(pkt, src, dst, proto)
		return
	}
	s.writeIPv6(pkt, src, dst, proto)
}

// ipHeaderLen is the length of the IP header the stack puts on a packet
// to or from a: 20 for IPv4, 40 for IPv6 (no extension headers).
func ipHeaderLen(a netip.Addr) int {
	if a.Is4() {
		return ipv4HeaderLen
	}
	return ipv6HeaderLen
}

// writeIPv6 fills in the IPv6 header at the front of pkt (whose payload is
// in place) and writes the packet to the device: traffic class and flow
// label 0, the hop limit Config.TTL.
func (s *Stack) writeIPv6(pkt []byte, src, dst netip.Addr, proto uint8) {
	putIPv6Header(pkt, src, dst, proto, s.cfg.TTL)
	if len(pkt) > len(s.obuf) {
		s.writeFragments6(pkt) // frag.go
		return
	}
	if s.rec != nil {
		s.recordOut(pkt)
	}
	s.writePacket(pkt)
}

// putIPv6Header encodes an IPv6 header, of a packet of len(pkt) bytes, into
// pkt's first 40 bytes.
func putIPv6Header(pkt []byte, src, dst netip.Addr, proto, hopLimit uint8) {
	binary.BigEndian.PutUint32(pkt, 6<<28)
	binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)-ipv6HeaderLen))
	pkt[6], pkt[7] = proto, hopLimit
	s16, d16 := src.As16(), dst.As16()
	copy(pkt[8:], s16[:])
	copy(pkt[24:], d16[:])
}

// pseudoHeader is the checksum of the pseudo-header of a transport segment
// of n bytes between src and dst: IPv4's (RFC 768, RFC 9293 3.1) or IPv6's
// (RFC 8200 8.1).
func pseudoHeader(proto uint8, src, dst netip.Addr, n int) uint16 {
	return header.PseudoHeaderChecksum(tcpip.TransportProtocolNumber(proto), tcpip.AddrFromSlice(src.AsSlice()), tcpip.AddrFromSlice(dst.AsSlice()), uint16(n))
}

// localFor is the stack's address for talking to a: its IPv4 address, or
// its IPv6 one (the zero Addr without one).
func (s *Stack) localFor(a netip.Addr) netip.Addr {
	if a.Is4() {
		return s.cfg.Addr
	}
	return s.cfg.Addr6
}

// Addr6 returns the stack's IPv6 address (Config.Addr6), or the zero Addr.
func (s *Stack) Addr6() netip.Addr { return s.cfg.Addr6 }

// The IP versions a listener or an unconnected UDP socket takes, from its
// network: "tcp" and "udp" take both (dual stack), the others one, as in
// package net.
const (
	netBoth = 0
	net4    = 4
	net6    = 6
)

// netOf returns the IP version network ("tcp", "tcp4", "tcp6", or proto's
// equivalents) names, and false for another network.
func netOf(network, proto string) (uint8, bool) {
	switch strings.TrimPrefix(network, proto) {
	case "":
		return netBoth, network == proto
	case "4":
		return net4, true
	case "6":
		return net6, true
	}
	return 0, false
}

// takes reports whether a listener or socket of IP version n takes a
// packet to a.
func takes(n uint8, a netip.Addr) bool {
	return n == netBoth || (n == net4) == a.Is4()
}

// localNet returns the IP version a local address to listen on ("host:port")
// restricts a listener of version n to: the stack's IPv6 address makes it
// IPv6, its IPv4 one IPv4; the error is for one that contradicts n.
func (s *Stack) localNet(n uint8, address string) (uint8, error) {
	if n == net6 && !s.cfg.Addr6.IsValid() {
		return n, fmt.Errorf("the stack has no IPv6 address: %w", syscall.EAFNOSUPPORT)
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return n, nil // localPort reports a bad one
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return n, nil
	}
	v := uint8(net6)
	if a.Is4() {
		v = net4
	}
	switch {
	case n != netBoth && n != v:
		return n, fmt.Errorf("address %s is not of the network's IP version", host)
	case a.IsUnspecified():
		return n, nil
	case v == net6 && !s.cfg.Addr6.IsValid():
		return n, fmt.Errorf("address %s: the stack has no IPv6 address: %w", host, syscall.EADDRNOTAVAIL)
	}
	return v, nil
}

// checkRemote checks a remote address to dial over network's IP version n:
// IPv6 needs the stack's IPv6 address, and a version-specific network its
// own version.
func (s *Stack) checkRemote(n uint8, ap netip.AddrPort) error {
	a := ap.Addr()
	switch {
	case !takes(n, a):
		return fmt.Errorf("address %v is not of the network's IP version", a)
	case a.Is6() && !s.cfg.Addr6.IsValid():
		return fmt.Errorf("address %v: the stack has no IPv6 address: %w", a, syscall.ENETUNREACH)
	case a.Is6() && (a.IsMulticast() || a.Zone() != ""):
		return fmt.Errorf("address %v is not a unicast address without a zone: %w", a, syscall.EINVAL)
	}
	return nil
}

// checkAddr6 checks Config.Addr6: a unicast IPv6 address (not IPv4-mapped,
// not the loopback) on a device that carries IPv6's minimum MTU.
func checkAddr6(a netip.Addr, mtu int) error {
	switch {
	case !a.Is6() || a.Is4In6() || a.Zone() != "":
		return fmt.Errorf("%w: address %v is not IPv6", ErrConfig, a)
	case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
		return fmt.Errorf("%w: address %v is not a unicast IPv6 address", ErrConfig, a)
	case mtu < ipv6MinMTU:
		return fmt.Errorf("%w: device MTU %d is below IPv6's %d", ErrConfig, mtu, ipv6MinMTU)
	}
	return nil
}

// transportOf finds the transport header of an IPv4 or IPv6 packet: the
// addresses, the protocol, and where the transport header and the packet
// end. ok is false for a malformed packet or a fragment. For the flight
// recorder and the Playback, which see the packets the stack handles and
// sends without handling them.
func transportOf(pkt []byte) (src, dst netip.Addr, proto uint8, off, end int, ok bool) {
	if len(pkt) >= ipv6HeaderLen && pkt[0]>>4 == 6 {
		end = ipv6HeaderLen + int(binary.BigEndian.Uint16(pkt[4:]))
		if end > len(pkt) {
			return
		}
		var d Drops
		c := walkIPv6(pkt[:end], &d)
		if c.drop != nil || c.frag {
			return
		}
		return netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40])), c.proto, c.off, end, true
	}
	if len(pkt) < ipv4HeaderLen || pkt[0]>>4 != 4 {
		return
	}
	off = int(pkt[0]&0x0f) * 4
	end = int(binary.BigEndian.Uint16(pkt[2:]))
	if off < ipv4HeaderLen || end < off || end > len(pkt) || binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 {
		return // malformed, or a fragment
	}
	return netip.AddrFrom4([4]byte(pkt[12:16])), netip.AddrFrom4([4]byte(pkt[16:20])), pkt[9], off, end, true
}

// listenerFor is the listener on port that takes a segment to dst, if any.
func (s *Stack) listenerFor(port uint16, dst netip.Addr) *Listener {
	if l := s.listeners[port]; l != nil && takes(l.net, dst) && s.isLocal(dst) && (!l.bound.IsValid() || l.bound == dst) {
		return l
	}
	return nil
}

// listenData is a Listen event's Data: the SYN-cookie key, and after it
// the IP version of a listener that takes one only, and after that, on a
// stack with Config.MoreAddrs, the address it is bound to, if any.
func (s *Stack) listenData(key []byte, n uint8, bound netip.Addr) []byte {
	if n == netBoth {
		return key
	}
	d := append(key[:len(key):len(key)], n)
	if s.more != nil && bound.IsValid() {
		d = append(d, bound.AsSlice()...)
	}
	return d
}

// splitListenData undoes listenData.
func splitListenData(data []byte) (key []byte, n uint8, bound netip.Addr) {
	if len(data) <= tcp.CookieKeySize {
		return data, netBoth, bound
	}
	bound, _ = netip.AddrFromSlice(data[tcp.CookieKeySize+1:])
	return data[:tcp.CookieKeySize], data[tcp.CookieKeySize], bound
}
