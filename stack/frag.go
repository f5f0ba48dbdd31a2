package stack

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

// Fragmenting on output: a UDP datagram or an ICMP echo reply larger than
// the MTU goes out in fragments, as a host's does (RFC 791 2.3, RFC 8200
// 4.5: only the source fragments over IPv6). TCP never needs it: its
// segments fit the MSS. Over IPv4 the fragments carry DF clear, the
// datagram's identification (the stack's one counter); over IPv6 a
// fragment header with an identification that is unpredictable per
// destination (fragIDs, RFC 7739 5.3.3). Each fragment but the last holds
// the most multiple of 8 bytes the MTU leaves room for.

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
	id := s.fragIDs.next(pkt[8:40])
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
		binary.BigEndian.PutUint32(f[4:], id)
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

// fragIDs picks the identification of each fragmented IPv6 datagram as
// RFC 7739 5.3.3's hash-based algorithm does: F(src, dst, secret) +
// counter[G(src, dst, secret)]. Over one pair of addresses the values
// follow a counter, so they do not repeat soon; from one destination's
// values nothing can be learned of another's (an off-path attacker could
// otherwise forge fragments that poison a reassembly, or count our
// traffic). A counter over all destinations (Linux before 3.x, this stack
// until 2026-11-24) had both faults. A flight recording's replay picks
// other values: Playback's SentMatches skips the field, as it skips IPv4's
// ID.
type fragIDs struct {
	seed maphash.Seed // the secret; the zero fragIDs has none until the first
	ok   bool
	ctr  [64]uint32
}

// next returns the identification of the next datagram between the
// addresses in addrs (an IPv6 header's source and destination, 32 bytes).
func (f *fragIDs) next(addrs []byte) uint32 {
	if !f.ok {
		f.seed, f.ok = maphash.MakeSeed(), true
	}
	h := maphash.Bytes(f.seed, addrs)
	c := &f.ctr[h>>58] // G: the hash's top 6 bits; F: its low 32
	*c++
	return uint32(h) + *c
}
