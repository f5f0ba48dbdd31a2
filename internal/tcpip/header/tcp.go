package header

import (
	"encoding/binary"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

const (
	tcpSrcPort     = 0
	tcpDstPort     = 2
	tcpSeqNum      = 4
	tcpAckNum      = 8
	tcpDataOffset  = 12
	TCPFlagsOffset = 13
	tcpWinSize     = 14
	tcpChecksum    = 16
	tcpUrgentPtr   = 18
)

const (
	// TCPMinimumSize is the size of a TCP header without options.
	TCPMinimumSize = 20
	// TCPChecksumOffset is the offset of the checksum field.
	TCPChecksumOffset = tcpChecksum
	// TCPProtocolNumber is above, with the other protocol numbers.
)

// TCPFlags are the eight flag bits of a TCP header.
type TCPFlags uint8

// The TCP flags.
const (
	TCPFlagFin TCPFlags = 1 << iota
	TCPFlagSyn
	TCPFlagRst
	TCPFlagPsh
	TCPFlagAck
	TCPFlagUrg
	TCPFlagEce
	TCPFlagCwr
)

// Intersects reports whether f and o share a flag.
func (f TCPFlags) Intersects(o TCPFlags) bool { return f&o != 0 }

// Contains reports whether f has every flag of o.
func (f TCPFlags) Contains(o TCPFlags) bool { return f&o == o }

// String returns "FSRPAUEC" with a space for each flag that is not set.
func (f TCPFlags) String() string {
	s := []byte("FSRPAUEC")
	for i := range s {
		if f&(1<<uint(i)) == 0 {
			s[i] = ' '
		}
	}
	return string(s)
}

// TCPFields are the fields of a TCP header, for Encode.
type TCPFields struct {
	SrcPort       uint16
	DstPort       uint16
	SeqNum        uint32
	AckNum        uint32
	DataOffset    uint8 // the header's length in bytes
	Flags         TCPFlags
	WindowSize    uint16
	Checksum      uint16
	UrgentPointer uint16
}

// TCP is a TCP segment, from its header on.
type TCP []byte

// SourcePort returns the source port.
func (b TCP) SourcePort() uint16 { return binary.BigEndian.Uint16(b[tcpSrcPort:]) }

// DestinationPort returns the destination port.
func (b TCP) DestinationPort() uint16 { return binary.BigEndian.Uint16(b[tcpDstPort:]) }

// SequenceNumber returns the sequence number.
func (b TCP) SequenceNumber() uint32 { return binary.BigEndian.Uint32(b[tcpSeqNum:]) }

// AckNumber returns the acknowledgment number.
func (b TCP) AckNumber() uint32 { return binary.BigEndian.Uint32(b[tcpAckNum:]) }

// DataOffset returns the header's length in bytes (Data Offset * 4).
func (b TCP) DataOffset() uint8 { return (b[tcpDataOffset] >> 4) * 4 }

// Payload returns what follows the header.
func (b TCP) Payload() []byte { return b[b.DataOffset():] }

// Options returns the header's options.
func (b TCP) Options() []byte { return b[TCPMinimumSize:b.DataOffset()] }

// Flags returns the flags.
func (b TCP) Flags() TCPFlags { return TCPFlags(b[TCPFlagsOffset]) }

// WindowSize returns the Window field.
func (b TCP) WindowSize() uint16 { return binary.BigEndian.Uint16(b[tcpWinSize:]) }

// Checksum returns the Checksum field.
func (b TCP) Checksum() uint16 { return binary.BigEndian.Uint16(b[tcpChecksum:]) }

// UrgentPointer returns the Urgent Pointer field.
func (b TCP) UrgentPointer() uint16 { return binary.BigEndian.Uint16(b[tcpUrgentPtr:]) }

// SetSourcePort sets the source port.
func (b TCP) SetSourcePort(port uint16) { binary.BigEndian.PutUint16(b[tcpSrcPort:], port) }

// SetDestinationPort sets the destination port.
func (b TCP) SetDestinationPort(port uint16) { binary.BigEndian.PutUint16(b[tcpDstPort:], port) }

// SetSequenceNumber sets the sequence number.
func (b TCP) SetSequenceNumber(seqNum uint32) { binary.BigEndian.PutUint32(b[tcpSeqNum:], seqNum) }

// SetAckNumber sets the acknowledgment number.
func (b TCP) SetAckNumber(ackNum uint32) { binary.BigEndian.PutUint32(b[tcpAckNum:], ackNum) }

// SetDataOffset sets Data Offset from a header length in bytes.
func (b TCP) SetDataOffset(headerLen uint8) { b[tcpDataOffset] = (headerLen / 4) << 4 }

// SetFlags sets the flags.
func (b TCP) SetFlags(flags uint8) { b[TCPFlagsOffset] = flags }

// SetWindowSize sets the Window field.
func (b TCP) SetWindowSize(rcvwnd uint16) { binary.BigEndian.PutUint16(b[tcpWinSize:], rcvwnd) }

// SetChecksum sets the Checksum field.
func (b TCP) SetChecksum(xsum uint16) { binary.BigEndian.PutUint16(b[tcpChecksum:], xsum) }

// SetUrgentPointer sets the Urgent Pointer field.
func (b TCP) SetUrgentPointer(urgentPointer uint16) {
	binary.BigEndian.PutUint16(b[tcpUrgentPtr:], urgentPointer)
}

// CalculateChecksum adds the header's words to partialChecksum (the sum of
// the pseudo-header and the payload) and returns the (uninverted) sum.
func (b TCP) CalculateChecksum(partialChecksum uint16) uint16 {
	return checksum.Checksum(b[:b.DataOffset()], partialChecksum)
}

// IsChecksumValid reports whether the checksum is right, given the sum of
// the payload and its length.
func (b TCP) IsChecksumValid(src, dst tcpip.Address, payloadChecksum, payloadLength uint16) bool {
	xsum := PseudoHeaderChecksum(TCPProtocolNumber, src, dst, uint16(b.DataOffset())+payloadLength)
	xsum = checksum.Combine(xsum, payloadChecksum)
	return b.CalculateChecksum(xsum) == 0xffff
}

// Encode writes a header from t.
func (b TCP) Encode(t *TCPFields) {
	b.SetSourcePort(t.SrcPort)
	b.SetDestinationPort(t.DstPort)
	b.SetSequenceNumber(t.SeqNum)
	b.SetAckNumber(t.AckNum)
	b.SetDataOffset(t.DataOffset)
	b[TCPFlagsOffset] = uint8(t.Flags)
	b.SetWindowSize(t.WindowSize)
	b.SetChecksum(t.Checksum)
	b.SetUrgentPointer(t.UrgentPointer)
}
