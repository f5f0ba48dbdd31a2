package stack

import (
	"encoding/binary"
	"net/netip"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

// Fragmenting on output: a UDP datagram or an ICMP echo reply larger than
// the MTU goes out in fragments, as a host's does (RFC 791 2.3, RFC 8200
// 4.5: only the source fragments over IPv6). TCP never needs it: its
// segments fit the MSS. Over IPv4 the fragments carry DF clear, the
// datagram's identification (the stack's one counter); over IPv6 a
// fragment header with an identification from a counter of its own (RFC
// 7739 would rather have them unpredictable per destination; a counter
// keeps a flight recording's replay exact). Each fragment but the last
// holds the most multiple of 8 bytes the MTU leaves room for.

// outBuf returns a buffer of n bytes for a packet to send: the stack's
// output buffer when the packet fits the MTU, else one that grows to the
// largest datagram (the packet is then sent in fragments).
func (s *Stack) outBuf(n int) []byte {
	if n <= len(s.obuf) {
		return s.obuf[:n]
	}
	if cap(s.bigbuf) < n {
		s.bigbuf = make([]byte, n)
	}
	return s.bigbuf[:n]
}

// tooBig reports whether a packet of n bytes is larger than any datagram
// (IPv4: 65,535 bytes in all; IPv6: a payload of 65,535 bytes).
func tooBig(n int, a netip.Addr) bool {
	if a.Is4() {
		return n > maxDatagram
	}
	return n-ipv6HeaderLen > maxDatagram
}

// writeFragments4 sends pkt, an IPv4 datagram whose header is filled in
// (with DF set by fillIPv4) and larger than the MTU, in fragments.
func (s *Stack) writeFragments4(pkt []byte) {
	data := pkt[ipv4HeaderLen:]
	chunk := (len(s.obuf) - ipv4HeaderLen) &^ 7
	for off := 0; off < len(data); off += chunk {
		n := min(chunk, len(data)-off)
		out := s.obuf[:ipv4HeaderLen+n]
		copy(out, pkt[:ipv4HeaderLen])
		copy(out[ipv4HeaderLen:], data[off:off+n])
		binary.BigEndian.PutUint16(out[2:], uint16(len(out)))
		fo := uint16(off / 8)
		if off+n < len(data) {
			fo |= 0x2000 // MF
		}
		binary.BigEndian.PutUint16(out[6:], fo) // DF clear
		out[10], out[11] = 0, 0
		binary.BigEndian.PutUint16(out[10:], ^checksum.Checksum(out[:ipv4HeaderLen], 0))
		s.writeFragment(out)
	}
}

// writeFragments6 sends pkt, an IPv6 packet (no extension headers) whose
// header is filled in and which is larger than the MTU, in fragments, each
// with a fragment header.
func (s *Stack) writeFragments6(pkt []byte) {
	const fh = 8
	data := pkt[ipv6HeaderLen:]
	chunk := (len(s.obuf) - ipv6HeaderLen - fh) &^ 7
	s.fragID6++
	for off := 0; off < len(data); off += chunk {
		n := min(chunk, len(data)-off)
		out := s.obuf[:ipv6HeaderLen+fh+n]
		copy(out, pkt[:ipv6HeaderLen])
		binary.BigEndian.PutUint16(out[4:], uint16(fh+n))
		out[6] = nhFragment
		f := out[ipv6HeaderLen:]
		f[0], f[1] = pkt[6], 0
		offM := uint16(off)
		if off+n < len(data) {
			offM |= 1 // M
		}
		binary.BigEndian.PutUint16(f[2:], offM)
		binary.BigEndian.PutUint32(f[4:], s.fragID6)
		copy(f[fh:], data[off:off+n])
		s.writeFragment(out)
	}
}

// writeFragment records and writes one fragment.
func (s *Stack) writeFragment(out []byte) {
	s.counters.FragmentsOut++
	if s.rec != nil {
		s.recordOut(out)
	}
	s.writePacket(out)
}
