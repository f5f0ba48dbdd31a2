package header

import (
	"encoding/binary"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
)

const (
	v6VersTCFL      = 0
	v6PayloadLen    = 4
	v6NextHeader    = 6
	v6HopLimit      = 7
	v6SrcAddr       = 8
	v6DstAddr       = 24
	v6AddrSize      = 16
	IPv6MinimumSize = 40   // the fixed header's size
	IPv6AddressSize = 16   // the size of an IPv6 address
	IPv6MinimumMTU  = 1280 // RFC 8200 section 5
)

// IPv6Fields are the fields of a fixed IPv6 header, for Encode.
type IPv6Fields struct {
	TrafficClass      uint8
	FlowLabel         uint32
	PayloadLength     uint16
	TransportProtocol tcpip.TransportProtocolNumber
	HopLimit          uint8
	SrcAddr           tcpip.Address
	DstAddr           tcpip.Address
}

// IPv6 is an IPv6 packet, from its fixed header on.
type IPv6 []byte

// PayloadLength returns the Payload Length field.
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[v6PayloadLen:]) }

// HopLimit returns the Hop Limit field.
func (b IPv6) HopLimit() uint8 { return b[v6HopLimit] }

// NextHeader returns the Next Header field.
func (b IPv6) NextHeader() uint8 { return b[v6NextHeader] }

// TransportProtocol returns Next Header as a protocol number (extension
// headers are not followed).
func (b IPv6) TransportProtocol() tcpip.TransportProtocolNumber {
	return tcpip.TransportProtocolNumber(b.NextHeader())
}

// Payload returns what follows the fixed header, up to Payload Length.
func (b IPv6) Payload() []byte { return b[IPv6MinimumSize:][:b.PayloadLength()] }

// SourceAddress returns the source address.
func (b IPv6) SourceAddress() tcpip.Address {
	return tcpip.AddrFrom16([16]byte(b[v6SrcAddr : v6SrcAddr+v6AddrSize]))
}

// DestinationAddress returns the destination address.
func (b IPv6) DestinationAddress() tcpip.Address {
	return tcpip.AddrFrom16([16]byte(b[v6DstAddr : v6DstAddr+v6AddrSize]))
}

// SourceAddressSlice returns the source address's bytes, in b.
func (b IPv6) SourceAddressSlice() []byte { return b[v6SrcAddr : v6SrcAddr+v6AddrSize] }

// DestinationAddressSlice returns the destination address's bytes, in b.
func (b IPv6) DestinationAddressSlice() []byte { return b[v6DstAddr : v6DstAddr+v6AddrSize] }

// TOS returns the Traffic Class and the Flow Label.
func (b IPv6) TOS() (uint8, uint32) {
	v := binary.BigEndian.Uint32(b[v6VersTCFL:])
	return uint8(v >> 20), v & 0xfffff
}

// SetTOS sets the version (6), Traffic Class and Flow Label.
func (b IPv6) SetTOS(t uint8, l uint32) {
	binary.BigEndian.PutUint32(b[v6VersTCFL:], IPv6Version<<28|uint32(t)<<20|l&0xfffff)
}

// SetPayloadLength sets the Payload Length field.
func (b IPv6) SetPayloadLength(payloadLength uint16) {
	binary.BigEndian.PutUint16(b[v6PayloadLen:], payloadLength)
}

// SetSourceAddress sets the source address.
func (b IPv6) SetSourceAddress(addr tcpip.Address) {
	copy(b[v6SrcAddr:v6SrcAddr+v6AddrSize], addr.AsSlice())
}

// SetDestinationAddress sets the destination address.
func (b IPv6) SetDestinationAddress(addr tcpip.Address) {
	copy(b[v6DstAddr:v6DstAddr+v6AddrSize], addr.AsSlice())
}

// SetHopLimit sets the Hop Limit field.
func (b IPv6) SetHopLimit(v uint8) { b[v6HopLimit] = v }

// SetNextHeader sets the Next Header field.
func (b IPv6) SetNextHeader(v uint8) { b[v6NextHeader] = v }

// Encode writes a fixed header (no extension headers) from i.
func (b IPv6) Encode(i *IPv6Fields) {
	b.SetTOS(i.TrafficClass, i.FlowLabel)
	b.SetPayloadLength(i.PayloadLength)
	b[v6HopLimit] = i.HopLimit
	b.SetSourceAddress(i.SrcAddr)
	b.SetDestinationAddress(i.DstAddr)
	b[v6NextHeader] = uint8(i.TransportProtocol)
}

// IsValid reports whether b holds a fixed IPv6 header whose payload fits in a
// packet of pktSize bytes.
func (b IPv6) IsValid(pktSize int) bool {
	if len(b) < IPv6MinimumSize {
		return false
	}
	if int(b.PayloadLength()) > pktSize-IPv6MinimumSize {
		return false
	}
	return IPVersion(b) == IPv6Version
}
