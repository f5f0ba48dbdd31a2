package stack

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
)

// UDP's direct send path. A datagram changes nothing the loop owns (no
// state, no timer): a stack on a real loop that is not recording
// (Stack.udpDirect) builds it on the caller's goroutine, in a buffer of its
// own (Stack.bufs), and writes it to the device there, with no trip to the
// loop. The device's writes, the loop's and these, take Stack.wmu, so that
// a tun.Device need not be safe for concurrent writers (its contract promises
// only a WritePacket concurrent with ReadPacket); the loop holds it for one
// write at a time, as the callers do. What the direct path counts (the
// datagrams, the packets written, the device's failures) is counted in
// atomics (udpDirectCounters) that Stats adds to the loop's counters.
//
// It takes datagrams that fit one packet of the MTU (onePacket), the pool's
// buffers' size. A recording stack (Config.Record) and a manual one
// (NewManual, a Playback) send on the loop, as before: the flight recorder must see each send
// (record.UDPSend) at its instant among the loop's events, and a manual
// loop runs a post at once anyway.
//
// The IPv4 header's ID is the socket's own counter (UDPConn.ipID), as Linux
// does for a connected socket (ip_select_ident: inet_id); with DF set it is
// not used for reassembly (RFC 6864 4.1), and the loop's counter (Stack.ipID)
// stays the loop's.

// udpDirectCounters is what the direct path counts, for Stats.
type udpDirectCounters struct {
	datagrams, packets, deviceErrors atomic.Uint64
}

// addTo adds the direct path's counts to the loop's.
func (d *udpDirectCounters) addTo(c *Counters) {
	c.DatagramsOut += d.datagrams.Load()
	c.PacketsOut += d.packets.Load()
	n := d.deviceErrors.Load()
	c.DeviceErrors += n
	c.Drops.DeviceWrite += n
}

// sendDirect sends the datagram p from u's port to `to` (checked by send)
// on the caller's goroutine.
func (u *UDPConn) sendDirect(to netip.AddrPort, p []byte) error {
	select {
	case <-u.closed: // closed since send looked
		return net.ErrClosed
	default:
	}
	return u.s.writeUDP(u.source(to.Addr()), to, uint16(u.ipID.Add(1)), p)
}

// onePacket reports whether a datagram of n payload bytes to a fits one
// packet of the MTU, and so a buffer of the pool: the direct path sends no
// other (a larger one would need the loop's fragmentation).
func (s *Stack) onePacket(a netip.Addr, n int) bool {
	return ipHeaderLen(a)+udpHeaderLen+n <= s.mtu
}

// writeUDP builds the datagram p from src to dst (onePacket), with id as its IPv4 ID, in a buffer of the pool and writes it to
// the device, on the caller's goroutine. A device error is counted, not
// returned (as on the loop: the datagram is lost on the link), unless the
// stack is closed: then net.ErrClosed.
func (s *Stack) writeUDP(src, dst netip.AddrPort, id uint16, p []byte) error {
	hl := ipHeaderLen(dst.Addr())
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	b := (*bp)[:hl+udpHeaderLen+len(p)]
	putUDP(b[hl:], src.Addr(), dst.Addr(), src.Port(), dst.Port(), p)
	if hl == ipv4HeaderLen {
		putIPv4Header(b, src.Addr(), dst.Addr(), protoUDP, s.cfg.TTL, id)
	} else {
		putIPv6Header(b, src.Addr(), dst.Addr(), protoUDP, s.cfg.TTL)
	}
	st := &s.udpOut
	st.datagrams.Add(1)
	st.packets.Add(1) // before the write: a peer that got it sees it counted
	if err := s.devWrite(b); err != nil {
		st.packets.Add(^uint64(0))
		if s.isDone() {
			st.datagrams.Add(^uint64(0))
			return net.ErrClosed // the device is closed with the stack
		}
		st.deviceErrors.Add(1) // sent and lost on the link, as on the loop
	}
	return nil
}

// devWrite writes pkt to the device, one writer at a time (wmu).
func (s *Stack) devWrite(pkt []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.dev.WritePacket(pkt)
}

// devWriteFrame writes a frame to the offloading device, under wmu as
// devWrite.
func (s *Stack) devWriteFrame(frame []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.gso.dev.WriteFrame(frame)
}

// putUDP encodes into b (header and payload, len(p)+8 bytes) the datagram p
// from sport to dport, with its checksum over the pseudo-header of src and
// dst (RFC 768; a sum of zero is sent as 0xffff, zero meaning none).
func putUDP(b []byte, src, dst netip.Addr, sport, dport uint16, p []byte) {
	u := header.UDP(b)
	u.Encode(&header.UDPFields{SrcPort: sport, DstPort: dport, Length: uint16(len(b))})
	copy(u.Payload(), p)
	sum := ^checksum.Checksum(u, pseudoHeader(protoUDP, src, dst, len(b)))
	if sum == 0 {
		sum = 0xffff
	}
	u.SetChecksum(sum)
}

// putIPv4Header encodes the 20-byte IPv4 header of pkt (len(pkt) bytes in
// all): DF set, as fillIPv4 does, with the given ID.
func putIPv4Header(pkt []byte, src, dst netip.Addr, proto, ttl uint8, id uint16) {
	pkt[0], pkt[1] = 0x45, 0
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	binary.BigEndian.PutUint16(pkt[4:], id)
	pkt[6], pkt[7] = 0x40, 0 // DF, offset 0
	pkt[8], pkt[9] = ttl, proto
	pkt[10], pkt[11] = 0, 0
	s4, d4 := src.As4(), dst.As4()
	copy(pkt[12:16], s4[:])
	copy(pkt[16:20], d4[:])
	binary.BigEndian.PutUint16(pkt[10:], ^checksum.Checksum(pkt[:ipv4HeaderLen], 0))
}
