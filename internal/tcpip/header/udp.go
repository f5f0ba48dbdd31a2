package header

import (
	"encoding/binary"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
	// UDPMinimumSize is the size of a UDP header.
	UDPMinimumSize = 8
)

// UDPFields are the fields of a UDP header, for Encode.
type UDPFields struct {
	SrcPort  uint16
	DstPort  uint16
	Length   uint16
	Checksum uint16
}

// UDP is a UDP datagram, from its header on.
type UDP []byte

// SourcePort returns the source port.
func (b UDP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[udpSrcPort:]) }

// DestinationPort returns the destination port.
func (b UDP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[udpDstPort:]) }

// Length returns the Length field (header and payload).
func (b UDP) Length() uint16 { return binary.BigEndian.Uint16(b[udpLength:]) }

// Payload returns what follows the header.
func (b UDP) Payload() []byte { return b[UDPMinimumSize:] }

// Checksum returns the Checksum field.
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[udpChecksum:]) }

// SetSourcePort sets the source port.
func (b UDP) SetSourcePort(port uint16) { binary.BigEndian.PutUint16(b[udpSrcPort:], port) }

// SetDestinationPort sets the destination port.
func (b UDP) SetDestinationPort(port uint16) { binary.BigEndian.PutUint16(b[udpDstPort:], port) }

// SetChecksum sets the Checksum field.
func (b UDP) SetChecksum(xsum uint16) { binary.BigEndian.PutUint16(b[udpChecksum:], xsum) }

// SetLength sets the Length field.
func (b UDP) SetLength(length uint16) { binary.BigEndian.PutUint16(b[udpLength:], length) }

// CalculateChecksum adds the header's words to partialChecksum (the sum of
// the pseudo-header and the payload) and returns the (uninverted) sum.
func (b UDP) CalculateChecksum(partialChecksum uint16) uint16 {
	return checksum.Checksum(b[:UDPMinimumSize], partialChecksum)
}

// IsChecksumValid reports whether the checksum is right, given the sum of
// the payload.
func (b UDP) IsChecksumValid(src, dst tcpip.Address, payloadChecksum uint16) bool {
	xsum := PseudoHeaderChecksum(UDPProtocolNumber, src, dst, b.Length())
	xsum = checksum.Combine(xsum, payloadChecksum)
	return b.CalculateChecksum(xsum) == 0xffff
}

// Encode writes a header from u.
func (b UDP) Encode(u *UDPFields) {
	b.SetSourcePort(u.SrcPort)
	b.SetDestinationPort(u.DstPort)
	b.SetLength(u.Length)
	b.SetChecksum(u.Checksum)
}
