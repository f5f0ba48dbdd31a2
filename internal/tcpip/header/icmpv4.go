package header

import "encoding/binary"

const (
	icmpv4Checksum = 2
	icmpv4Ident    = 4
	icmpv4Sequence = 6
	icmpv4MTU      = 6
	icmpv4Pointer  = 4
	// ICMPv4MinimumSize is the size of an ICMPv4 header (type, code,
	// checksum and the 4 bytes that depend on the type).
	ICMPv4MinimumSize = 8
	// ICMPv4PayloadOffset is where an ICMPv4 message's payload starts.
	ICMPv4PayloadOffset = 8
)

// ICMPv4Type is the Type field of an ICMPv4 message.
type ICMPv4Type byte

// ICMPv4 types (RFC 792).
const (
	ICMPv4EchoReply      ICMPv4Type = 0
	ICMPv4DstUnreachable ICMPv4Type = 3
	ICMPv4Echo           ICMPv4Type = 8
	ICMPv4TimeExceeded   ICMPv4Type = 11
	ICMPv4ParamProblem   ICMPv4Type = 12
)

// ICMPv4Code is the Code field of an ICMPv4 message.
type ICMPv4Code byte

// Codes of ICMPv4DstUnreachable (RFC 792, RFC 1191).
const (
	ICMPv4NetUnreachable      ICMPv4Code = 0
	ICMPv4HostUnreachable     ICMPv4Code = 1
	ICMPv4ProtoUnreachable    ICMPv4Code = 2
	ICMPv4PortUnreachable     ICMPv4Code = 3
	ICMPv4FragmentationNeeded ICMPv4Code = 4
)

// Codes of ICMPv4TimeExceeded.
const (
	ICMPv4TTLExceeded       ICMPv4Code = 0
	ICMPv4ReassemblyTimeout ICMPv4Code = 1
)

// ICMPv4 is an ICMPv4 message, from its header on.
type ICMPv4 []byte

// Type returns the Type field.
func (b ICMPv4) Type() ICMPv4Type { return ICMPv4Type(b[0]) }

// SetType sets the Type field.
func (b ICMPv4) SetType(t ICMPv4Type) { b[0] = byte(t) }

// Code returns the Code field.
func (b ICMPv4) Code() ICMPv4Code { return ICMPv4Code(b[1]) }

// SetCode sets the Code field.
func (b ICMPv4) SetCode(c ICMPv4Code) { b[1] = byte(c) }

// Pointer returns a Parameter Problem's pointer.
func (b ICMPv4) Pointer() byte { return b[icmpv4Pointer] }

// SetPointer sets a Parameter Problem's pointer.
func (b ICMPv4) SetPointer(c byte) { b[icmpv4Pointer] = c }

// Checksum returns the Checksum field.
func (b ICMPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpv4Checksum:]) }

// SetChecksum sets the Checksum field.
func (b ICMPv4) SetChecksum(cs uint16) { binary.BigEndian.PutUint16(b[icmpv4Checksum:], cs) }

// Payload returns what follows the 8-byte header.
func (b ICMPv4) Payload() []byte { return b[ICMPv4PayloadOffset:] }

// MTU returns a Fragmentation Needed message's Next-Hop MTU (RFC 1191).
func (b ICMPv4) MTU() uint16 { return binary.BigEndian.Uint16(b[icmpv4MTU:]) }

// SetMTU sets a Fragmentation Needed message's Next-Hop MTU.
func (b ICMPv4) SetMTU(mtu uint16) { binary.BigEndian.PutUint16(b[icmpv4MTU:], mtu) }

// Ident returns an echo message's Identifier.
func (b ICMPv4) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpv4Ident:]) }

// SetIdent sets an echo message's Identifier.
func (b ICMPv4) SetIdent(ident uint16) { binary.BigEndian.PutUint16(b[icmpv4Ident:], ident) }

// Sequence returns an echo message's Sequence Number.
func (b ICMPv4) Sequence() uint16 { return binary.BigEndian.Uint16(b[icmpv4Sequence:]) }

// SetSequence sets an echo message's Sequence Number.
func (b ICMPv4) SetSequence(sequence uint16) {
	binary.BigEndian.PutUint16(b[icmpv4Sequence:], sequence)
}
