// Package header reads and writes the IPv4, IPv6, TCP, UDP, ICMPv4 and ICMPv6
// headers of packets held in byte slices, and computes their checksums.
//
// Its identifiers (types, fields, methods, constants) are those of gVisor's
// tcpip/header, which tcpwheel used before; only the part tcpwheel uses is
// here. As there, the accessors do not check lengths: the caller checks a
// packet's length (IsValid, the *MinimumSize constants) before reading it.
package header

import (
	"encoding/binary"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

// Transport protocol numbers (IPv4's Protocol, IPv6's Next Header).
const (
	ICMPv4ProtocolNumber tcpip.TransportProtocolNumber = 1
	TCPProtocolNumber    tcpip.TransportProtocolNumber = 6
	UDPProtocolNumber    tcpip.TransportProtocolNumber = 17
	ICMPv6ProtocolNumber tcpip.TransportProtocolNumber = 58
)

// Network protocol numbers (EtherTypes).
const (
	IPv4ProtocolNumber tcpip.NetworkProtocolNumber = 0x0800
	IPv6ProtocolNumber tcpip.NetworkProtocolNumber = 0x86dd
)

// IP versions, as IPVersion returns them.
const (
	IPv4Version = 4
	IPv6Version = 6
)

// IPVersion returns the version in the first byte of an IP packet, or -1 for
// an empty one.
func IPVersion(b []byte) int {
	if len(b) < 1 {
		return -1
	}
	return int(b[0] >> 4)
}

// PseudoHeaderChecksum returns the checksum of the pseudo-header (RFC 9293
// section 3.1, RFC 8200 section 8.1) that TCP, UDP and ICMPv6 include in
// theirs: the addresses, the transport length and the protocol.
func PseudoHeaderChecksum(protocol tcpip.TransportProtocolNumber, srcAddr tcpip.Address, dstAddr tcpip.Address, totalLen uint16) uint16 {
	xsum := checksum.Checksum(srcAddr.AsSlice(), 0)
	xsum = checksum.Checksum(dstAddr.AsSlice(), xsum)
	var tmp [4]byte
	binary.BigEndian.PutUint16(tmp[:], totalLen)
	tmp[3] = uint8(protocol)
	return checksum.Checksum(tmp[:], xsum)
}
