package stack

import (
	"encoding/binary"
	"net/netip"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp"
)

const (
	ipv4HeaderLen = header.IPv4MinimumSize
	protoTCP      = uint8(header.TCPProtocolNumber)
	protoICMP     = uint8(header.ICMPv4ProtocolNumber)
)

// handlePacket validates an IPv4 packet from the device and hands its payload to
// TCP, UDP or ICMP. Anything malformed is dropped and counted by reason.
func (s *Stack) handlePacket(pkt []byte) {
	s.counters.PacketsIn++
	d := &s.counters.Drops
	if len(pkt) > 0 && pkt[0]>>4 == 6 {
		s.handleIPv6(pkt) // ipv6.go
		return
	}
	if len(pkt) < ipv4HeaderLen {
		d.BadIPHeader++
		return
	}
	ip := header.IPv4(pkt)
	if pkt[0]>>4 != 4 {
		d.NotIPv4++
		return
	}
	hl := int(ip.HeaderLength())
	total := int(ip.TotalLength())
	if hl < ipv4HeaderLen || hl > len(pkt) || total < hl || total > len(pkt) {
		d.BadIPHeader++
		return
	}
	pkt = pkt[:total] // drop link padding
	ip = header.IPv4(pkt)
	if checksum.Checksum(pkt[:hl], 0) != 0xffff {
		d.BadIPChecksum++
		return
	}
	src, dst := netip.AddrFrom4(ip.SourceAddress().As4()), netip.AddrFrom4(ip.DestinationAddress().As4())
	if !s.isLocal(dst) && !s.forwards(dst) { // forward.go
		d.NotForUs++
		return
	}
	if drop := s.martianSource(src); drop != nil {
		*drop++
		return
	}
	if ip.More() || ip.FragmentOffset() != 0 {
		s.fragment4(pkt, hl, src, dst) // reasm.go
		return
	}
	s.deliverIPv4(src, dst, pkt[:hl], pkt[hl:])
}

// deliverIPv4 hands the payload of a whole IPv4 datagram (its header hdr,
// checked) to TCP, UDP or ICMP.
func (s *Stack) deliverIPv4(src, dst netip.Addr, hdr, payload []byte) {
	switch hdr[9] {
	case protoTCP:
		s.handleTCP(src, dst, payload)
	case protoUDP:
		s.handleUDP(src, dst, hdr, payload)
	case protoICMP:
		s.handleICMP(src, dst, payload)
	default:
		s.counters.Drops.UnknownProtocol++
	}
}

// limitedBroadcast is 255.255.255.255 (RFC 919, RFC 1122 3.2.1.3 (c)).
var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// martianSource returns the drop counter for a source address that no packet
// may carry, or nil for a good one. RFC 1122 3.2.1.3 forbids a broadcast or
// multicast source, {0, 0} and {127, any} outside their own host, and 4.2.3.10
// makes TCP drop a SYN from such a source; like Linux (martian sources in
// ip_route_input_slow and fib_validate_source), every protocol's packet is
// dropped, so no SYN gets a SYN-ACK and no ping a reply: the limited broadcast,
// the link's subnet broadcast (with Config.Prefix), 224.0.0.0/4, 240.0.0.0/4
// (class E, reserved), 0.0.0.0/8, 127.0.0.0/8, and our own address (a "land"
// packet, which would make a connection with itself).
func (s *Stack) martianSource(src netip.Addr) *uint64 {
	if !src.Is4() {
		return s.martianSource6(src)
	}
	d := &s.counters.Drops
	b := src.As4()
	switch {
	case src == limitedBroadcast || src == s.subnetBroadcast:
		return &d.MartianBroadcast
	case b[0]&0xf0 == 224:
		return &d.MartianMulticast
	case b[0]&0xf0 == 240:
		return &d.MartianReserved
	case b[0] == 0:
		return &d.MartianZeroNet
	case b[0] == 127:
		return &d.MartianLoopback
	case s.isLocal(src):
		return &d.MartianLand
	}
	return nil
}

// directedBroadcast returns the broadcast address of p, {<network>, -1}, or
// the zero Addr when p has none (no prefix, or a /31 or /32: RFC 3021).
func directedBroadcast(p netip.Prefix) netip.Addr {
	if !p.IsValid() || p.Bits() > 30 {
		return netip.Addr{}
	}
	b := p.Masked().Addr().As4()
	host := ^uint32(0) >> p.Bits()
	for i := range b {
		b[i] |= byte(host >> (24 - 8*i))
	}
	return netip.AddrFrom4(b)
}

// handleTCP demultiplexes a segment: to the connection with its 4-tuple, else to
// the listener on its port, else it answers with a RST (RFC 9293 3.10.7.1).
func (s *Stack) handleTCP(src, dst netip.Addr, b []byte) {
	d := &s.counters.Drops
	if !s.skipChecksum && !s.csumValid && !tcp.VerifyChecksum(src, dst, b) {
		d.BadTCPChecksum++
		return
	}
	seg, err := tcp.ParseSegment(b)
	if err != nil {
		d.BadTCPHeader++
		return
	}
	s.counters.SegmentsIn++
	s.demuxTCP(src, dst, &seg, b)
}

// demuxTCP is handleTCP's demultiplexing of the checked segment seg (its
// bytes b); a stashed SYN (synstash.go) comes back here.
func (s *Stack) demuxTCP(src, dst netip.Addr, seg *tcp.Segment, b []byte) {
	d := &s.counters.Drops
	id := tcp.ID{Local: netip.AddrPortFrom(dst, seg.DstPort), Remote: netip.AddrPortFrom(src, seg.SrcPort)}
	if c := s.conns[id]; c != nil {
		// RFC 6191: a new SYN on the 4-tuple of a connection in TIME-WAIT
		// (one the application has not closed: else a record keeps it)
		// opens a new connection when its timestamp or sequence number is
		// newer; the listener closes the old one (its EventClosed makes the
		// Conn forget the tuple) and answers with a SYN-ACK.
		if seg.Flags&tcp.FlagSYN != 0 && s.newIncarnation(id, dst, seg, b, // timewait.go
			func(l *tcp.Listener) bool { return l.ReuseTimeWait(c.ep, seg) },
			func() bool { return tcp.ReplaceTimeWait(c.ep, seg) }) {
			return
		}
		s.flushBeforeAck(id, seg) // offload.go
		c.ep.HandleSegment(seg)
		return
	}
	if s.tws.Len() > 0 && s.timeWaitSegment(id, dst, seg, b) { // timewait.go
		return
	}
	if s.grp != nil && s.handOffTCP(id, src, dst, b) { // loops.go: another loop's
		return
	}
	if l := s.listenerFor(seg.DstPort, dst); l != nil {
		if s.syns.ring != nil && s.stashSYN(l, id, src, dst, seg, b) { // synstash.go
			return
		}
		l.tl.HandleSegment(id, seg)
		if s.grp != nil && seg.Flags&tcp.FlagSYN != 0 {
			s.claimHalfOpen(l, id)
		}
		return
	}
	if s.fwd != nil && s.fwd.segment(id, seg, b) { // forward.go
		return
	}
	d.NoListener++
	if r, ok := tcp.ResetFor(seg); ok { // RFC 9293 3.10.7.1: CLOSED, answer with a RST
		s.counters.ResetsSent++
		s.sendSegment(id, &r)
	}
}

// handleICMP answers echo requests (ping) and hands a port unreachable for a
// connected UDP socket to it (udpRefused); other ICMP messages are counted
// and dropped.
func (s *Stack) handleICMP(src, dst netip.Addr, b []byte) {
	d := &s.counters.Drops
	if !s.isLocal(dst) { // forwarded destinations (forward.go) are not pinged
		d.NotForUs++
		return
	}
	if len(b) < header.ICMPv4MinimumSize {
		d.BadICMP++
		return
	}
	if checksum.Checksum(b, 0) != 0xffff {
		d.BadICMP++
		return
	}
	icmp := header.ICMPv4(b)
	if s.grp != nil && s.shard != 0 && (icmp.Type() != header.ICMPv4Echo || icmp.Code() != 0) {
		s.handOffICMP(src, dst, b, false) // loops.go: to the first loop
		return
	}
	if s.tcpICMP4(b) { // icmptcp.go
		return
	}
	if icmp.Type() == header.ICMPv4DstUnreachable && icmp.Code() == header.ICMPv4PortUnreachable && s.udpRefused(b[header.ICMPv4MinimumSize:]) {
		return
	}
	if icmp.Type() != header.ICMPv4Echo || icmp.Code() != 0 {
		d.ICMPIgnored++
		return
	}
	out := s.outBuf(ipv4HeaderLen + len(b)) // fragmented if larger than the MTU (frag.go)
	reply := out[ipv4HeaderLen:]
	copy(reply, b)
	reply[0] = byte(header.ICMPv4EchoReply)
	reply[2], reply[3] = 0, 0
	binary.BigEndian.PutUint16(reply[2:], ^checksum.Checksum(reply, 0))
	s.counters.EchoReplies++
	s.writeIPv4(out, dst, src, protoICMP)
}

// writeIPv4 fills in the IPv4 header at the front of pkt (whose payload is in
// place) and writes the packet to the device. DF is set: TCP sizes its segments
// to the MTU instead. A packet larger than the MTU goes in fragments (frag.go).
func (s *Stack) writeIPv4(pkt []byte, src, dst netip.Addr, proto uint8) {
	s.fillIPv4(pkt, src, dst, proto)
	if len(pkt) > len(s.obuf) {
		s.writeFragments4(pkt) // frag.go
		return
	}
	if s.rec != nil {
		s.recordOut(pkt)
	}
	s.writePacket(pkt)
}

// writePacket writes a whole packet to the device, or queues it for the
// device writer (writer.go): after the frame of TCP segments that waits
// (offload.go), if one does.
func (s *Stack) writePacket(pkt []byte) {
	s.flushFrame()
	if s.writing() { // writer.go
		s.wr.queuePacket(pkt)
		s.counters.PacketsOut++
		return
	}
	if err := s.devWrite(pkt); err != nil { // udpsend.go
		s.counters.DeviceErrors++
		s.counters.Drops.DeviceWrite++
		return
	}
	s.counters.PacketsOut++
}

// fillIPv4 fills in the IPv4 header at the front of pkt.
func (s *Stack) fillIPv4(pkt []byte, src, dst netip.Addr, proto uint8) {
	s.ipID++
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(pkt)),
		ID:          s.ipID,
		Flags:       header.IPv4FlagDontFragment,
		TTL:         s.cfg.TTL,
		Protocol:    proto,
		SrcAddr:     tcpip.AddrFrom4(src.As4()),
		DstAddr:     tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
}
