package header

import (
	"encoding/binary"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

const (
	versIHL     = 0
	tos         = 1
	totalLen    = 2
	id          = 4
	flagsFO     = 6
	ttl         = 8
	protocol    = 9
	v4Checksum  = 10
	v4SrcAddr   = 12
	v4DstAddr   = 16
	v4AddrSize  = 4
	ihlMaxBytes = 60
)

const (
	// IPv4MinimumSize is the size of an IPv4 header without options.
	IPv4MinimumSize = 20
	// IPv4MaximumHeaderSize is the size of an IPv4 header with the most options.
	IPv4MaximumHeaderSize = ihlMaxBytes
	// IPv4AddressSize is the size of an IPv4 address.
	IPv4AddressSize = v4AddrSize
)

// Bits of IPv4's Flags field.
const (
	IPv4FlagMoreFragments = 1 << iota
	IPv4FlagDontFragment
)

// IPv4Fields are the fields of an IPv4 header without options, for Encode.
type IPv4Fields struct {
	TOS            uint8
	TotalLength    uint16
	ID             uint16
	Flags          uint8
	FragmentOffset uint16
	TTL            uint8
	Protocol       uint8
	Checksum       uint16
	SrcAddr        tcpip.Address
	DstAddr        tcpip.Address
}

// IPv4 is an IPv4 packet, from its header on.
type IPv4 []byte

// HeaderLength returns the header's length in bytes (IHL * 4).
func (b IPv4) HeaderLength() uint8 { return (b[versIHL] & 0xf) * 4 }

// SetHeaderLength sets IHL from a length in bytes.
func (b IPv4) SetHeaderLength(hdrLen uint8) {
	b[versIHL] = IPv4Version<<4 | (hdrLen/4)&0xf
}

// TOS returns the Type of Service byte (and 0: IPv4 has no flow label).
func (b IPv4) TOS() (uint8, uint32) { return b[tos], 0 }

// TotalLength returns the Total Length field.
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[totalLen:]) }

// ID returns the Identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[id:]) }

// Flags returns the three flag bits.
func (b IPv4) Flags() uint8 { return uint8(binary.BigEndian.Uint16(b[flagsFO:]) >> 13) }

// More reports whether More Fragments is set.
func (b IPv4) More() bool { return b.Flags()&IPv4FlagMoreFragments != 0 }

// FragmentOffset returns the fragment's offset in bytes.
func (b IPv4) FragmentOffset() uint16 { return binary.BigEndian.Uint16(b[flagsFO:]) << 3 }

// TTL returns the Time to Live field.
func (b IPv4) TTL() uint8 { return b[ttl] }

// Protocol returns the Protocol field.
func (b IPv4) Protocol() uint8 { return b[protocol] }

// TransportProtocol returns the Protocol field as a protocol number.
func (b IPv4) TransportProtocol() tcpip.TransportProtocolNumber {
	return tcpip.TransportProtocolNumber(b.Protocol())
}

// Checksum returns the Header Checksum field.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[v4Checksum:]) }

// SourceAddress returns the source address.
func (b IPv4) SourceAddress() tcpip.Address {
	return tcpip.AddrFrom4([4]byte(b[v4SrcAddr : v4SrcAddr+v4AddrSize]))
}

// DestinationAddress returns the destination address.
func (b IPv4) DestinationAddress() tcpip.Address {
	return tcpip.AddrFrom4([4]byte(b[v4DstAddr : v4DstAddr+v4AddrSize]))
}

// SourceAddressSlice returns the source address's bytes, in b.
func (b IPv4) SourceAddressSlice() []byte { return b[v4SrcAddr : v4SrcAddr+v4AddrSize] }

// DestinationAddressSlice returns the destination address's bytes, in b.
func (b IPv4) DestinationAddressSlice() []byte { return b[v4DstAddr : v4DstAddr+v4AddrSize] }

// Payload returns what follows the header, up to Total Length.
func (b IPv4) Payload() []byte { return b[b.HeaderLength():][:b.PayloadLength()] }

// PayloadLength returns Total Length less the header's length.
func (b IPv4) PayloadLength() uint16 { return b.TotalLength() - uint16(b.HeaderLength()) }

// SetTOS sets the Type of Service byte.
func (b IPv4) SetTOS(v uint8, _ uint32) { b[tos] = v }

// SetTotalLength sets the Total Length field.
func (b IPv4) SetTotalLength(totalLength uint16) {
	binary.BigEndian.PutUint16(b[totalLen:], totalLength)
}

// SetID sets the Identification field.
func (b IPv4) SetID(v uint16) { binary.BigEndian.PutUint16(b[id:], v) }

// SetFlagsFragmentOffset sets the flags and the fragment offset (in bytes, a
// multiple of 8).
func (b IPv4) SetFlagsFragmentOffset(flags uint8, offset uint16) {
	binary.BigEndian.PutUint16(b[flagsFO:], uint16(flags)<<13|offset>>3)
}

// SetTTL sets the Time to Live field.
func (b IPv4) SetTTL(v byte) { b[ttl] = v }

// SetChecksum sets the Header Checksum field.
func (b IPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[v4Checksum:], v) }

// SetSourceAddress sets the source address.
func (b IPv4) SetSourceAddress(addr tcpip.Address) {
	copy(b[v4SrcAddr:v4SrcAddr+v4AddrSize], addr.AsSlice())
}

// SetDestinationAddress sets the destination address.
func (b IPv4) SetDestinationAddress(addr tcpip.Address) {
	copy(b[v4DstAddr:v4DstAddr+v4AddrSize], addr.AsSlice())
}

// CalculateChecksum returns the (uninverted) sum of the header's words; the
// header is intact when it is 0xffff, and SetChecksum(^CalculateChecksum())
// with a zero checksum field fills the field in.
func (b IPv4) CalculateChecksum() uint16 { return checksum.Checksum(b[:b.HeaderLength()], 0) }

// IsChecksumValid reports whether the header checksum is right.
func (b IPv4) IsChecksumValid() bool { return b.CalculateChecksum() == 0xffff }

// Encode writes a header without options from i (IHL 5, version 4).
func (b IPv4) Encode(i *IPv4Fields) {
	b.SetHeaderLength(IPv4MinimumSize)
	b[tos] = i.TOS
	b.SetTotalLength(i.TotalLength)
	b.SetID(i.ID)
	b.SetFlagsFragmentOffset(i.Flags, i.FragmentOffset)
	b[ttl] = i.TTL
	b[protocol] = i.Protocol
	b.SetChecksum(i.Checksum)
	b.SetSourceAddress(i.SrcAddr)
	b.SetDestinationAddress(i.DstAddr)
}

// IsValid reports whether b holds a whole IPv4 header whose lengths fit in a
// packet of pktSize bytes: version 4, IHL at least 5, IHL*4 <= Total Length
// <= pktSize.
func (b IPv4) IsValid(pktSize int) bool {
	if len(b) < IPv4MinimumSize {
		return false
	}
	hlen, tlen := int(b.HeaderLength()), int(b.TotalLength())
	if hlen < IPv4MinimumSize || hlen > tlen || tlen > pktSize || hlen > len(b) {
		return false
	}
	return IPVersion(b) == IPv4Version
}
