package header

import (
	"encoding/binary"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

const (
	icmpv6Checksum = 2
	icmpv6MTU      = 4
	icmpv6Ident    = 4
	icmpv6Sequence = 6
	// ICMPv6HeaderSize is the size of the part every ICMPv6 message has:
	// type, code and checksum.
	ICMPv6HeaderSize = 4
	// ICMPv6MinimumSize is the size of the smallest valid ICMPv6 message.
	ICMPv6MinimumSize = 8
	// ICMPv6PayloadOffset is where an error or echo message's payload starts.
	ICMPv6PayloadOffset = 8
	// ICMPv6ErrorHeaderSize is the size of an error message's header.
	ICMPv6ErrorHeaderSize = 8
)

// ICMPv6Type is the Type field of an ICMPv6 message.
type ICMPv6Type byte

// ICMPv6 types (RFC 4443, RFC 4861, RFC 2710, RFC 3810).
const (
	ICMPv6DstUnreachable ICMPv6Type = 1
	ICMPv6PacketTooBig   ICMPv6Type = 2
	ICMPv6TimeExceeded   ICMPv6Type = 3
	ICMPv6ParamProblem   ICMPv6Type = 4
	ICMPv6EchoRequest    ICMPv6Type = 128
	ICMPv6EchoReply      ICMPv6Type = 129

	ICMPv6MulticastListenerQuery  ICMPv6Type = 130
	ICMPv6MulticastListenerReport ICMPv6Type = 131
	ICMPv6MulticastListenerDone   ICMPv6Type = 132

	ICMPv6RouterSolicit   ICMPv6Type = 133
	ICMPv6RouterAdvert    ICMPv6Type = 134
	ICMPv6NeighborSolicit ICMPv6Type = 135
	ICMPv6NeighborAdvert  ICMPv6Type = 136
	ICMPv6RedirectMsg     ICMPv6Type = 137

	ICMPv6MulticastListenerV2Report ICMPv6Type = 143
)

// ICMPv6Code is the Code field of an ICMPv6 message.
type ICMPv6Code byte

// Codes of ICMPv6DstUnreachable.
const (
	ICMPv6NetworkUnreachable ICMPv6Code = 0
	ICMPv6Prohibited         ICMPv6Code = 1
	ICMPv6BeyondScope        ICMPv6Code = 2
	ICMPv6AddressUnreachable ICMPv6Code = 3
	ICMPv6PortUnreachable    ICMPv6Code = 4
)

// Codes of ICMPv6TimeExceeded.
const (
	ICMPv6HopLimitExceeded  ICMPv6Code = 0
	ICMPv6ReassemblyTimeout ICMPv6Code = 1
)

// Codes of ICMPv6ParamProblem.
const (
	ICMPv6ErroneousHeader ICMPv6Code = 0
	ICMPv6UnknownHeader   ICMPv6Code = 1
	ICMPv6UnknownOption   ICMPv6Code = 2
)

// ICMPv6 is an ICMPv6 message, from its header on.
type ICMPv6 []byte

// Type returns the Type field.
func (b ICMPv6) Type() ICMPv6Type { return ICMPv6Type(b[0]) }

// SetType sets the Type field.
func (b ICMPv6) SetType(t ICMPv6Type) { b[0] = byte(t) }

// Code returns the Code field.
func (b ICMPv6) Code() ICMPv6Code { return ICMPv6Code(b[1]) }

// SetCode sets the Code field.
func (b ICMPv6) SetCode(c ICMPv6Code) { b[1] = byte(c) }

// TypeSpecific returns the 4 bytes after the checksum (a Parameter
// Problem's pointer, for one).
func (b ICMPv6) TypeSpecific() uint32 { return binary.BigEndian.Uint32(b[icmpv6MTU:]) }

// SetTypeSpecific sets the 4 bytes after the checksum.
func (b ICMPv6) SetTypeSpecific(val uint32) { binary.BigEndian.PutUint32(b[icmpv6MTU:], val) }

// Checksum returns the Checksum field.
func (b ICMPv6) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpv6Checksum:]) }

// SetChecksum sets the Checksum field.
func (b ICMPv6) SetChecksum(cs uint16) { binary.BigEndian.PutUint16(b[icmpv6Checksum:], cs) }

// MTU returns a Packet Too Big message's MTU.
func (b ICMPv6) MTU() uint32 { return binary.BigEndian.Uint32(b[icmpv6MTU:]) }

// SetMTU sets a Packet Too Big message's MTU.
func (b ICMPv6) SetMTU(mtu uint32) { binary.BigEndian.PutUint32(b[icmpv6MTU:], mtu) }

// Ident returns an echo message's Identifier.
func (b ICMPv6) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpv6Ident:]) }

// SetIdent sets an echo message's Identifier.
func (b ICMPv6) SetIdent(ident uint16) { binary.BigEndian.PutUint16(b[icmpv6Ident:], ident) }

// Sequence returns an echo message's Sequence Number.
func (b ICMPv6) Sequence() uint16 { return binary.BigEndian.Uint16(b[icmpv6Sequence:]) }

// SetSequence sets an echo message's Sequence Number.
func (b ICMPv6) SetSequence(sequence uint16) {
	binary.BigEndian.PutUint16(b[icmpv6Sequence:], sequence)
}

// MessageBody returns what follows the 4-byte header.
func (b ICMPv6) MessageBody() []byte { return b[ICMPv6HeaderSize:] }

// Payload returns what follows the 8-byte header of an error or echo message.
func (b ICMPv6) Payload() []byte { return b[ICMPv6PayloadOffset:] }

// ICMPv6ChecksumParams is what ICMPv6Checksum covers: the message's header
// (Header, all of it but the checksum field), the pseudo-header's addresses,
// and a payload that is not in Header, given by its sum and length.
type ICMPv6ChecksumParams struct {
	Header      ICMPv6
	Src         tcpip.Address
	Dst         tcpip.Address
	PayloadCsum uint16
	PayloadLen  int
}

// ICMPv6Checksum returns the checksum to put in an ICMPv6 message (inverted,
// ready for SetChecksum): pseudo-header, payload and header, skipping the
// header's checksum field.
func ICMPv6Checksum(params ICMPv6ChecksumParams) uint16 {
	h := params.Header
	xsum := PseudoHeaderChecksum(ICMPv6ProtocolNumber, params.Src, params.Dst, uint16(len(h)+params.PayloadLen))
	xsum = checksum.Combine(xsum, params.PayloadCsum)
	xsum = checksum.Checksum(h[:icmpv6Checksum], xsum)
	xsum = checksum.Checksum(h[icmpv6Checksum+2:], xsum)
	return ^xsum
}
