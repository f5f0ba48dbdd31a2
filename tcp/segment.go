package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// Wire format constants (RFC 9293 3.1, RFC 7323, RFC 2018).
const (
	HeaderMinSize  = 20
	HeaderMaxSize  = 60
	MaxSACKBlocks  = 4
	MaxWindowScale = 14 // RFC 7323 2.3
	DefaultMSS     = 536

	optEOL           = 0
	optNOP           = 1
	optMSS           = 2
	optWS            = 3
	optSACKPermitted = 4
	optSACK          = 5
	optTS            = 8
)

// Flags are the TCP control bits.
type Flags uint8

// The control bits (RFC 9293 3.1, RFC 3168).
const (
	FlagFIN Flags = 1 << iota
	FlagSYN
	FlagRST
	FlagPSH
	FlagACK
	FlagURG
	FlagECE
	FlagCWR
)

var flagNames = [...]string{"FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"}

func (f Flags) String() string {
	if f == 0 {
		return "none"
	}
	var parts []string
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, "|")
}

// Has reports whether every bit of o is set in f.
func (f Flags) Has(o Flags) bool { return f&o == o }

// SACKBlock is one block of a SACK option: the bytes [Start, End).
type SACKBlock struct {
	Start, End seqnum.Value
}

// Options are the TCP options this implementation understands. Unknown options
// are skipped when parsing.
type Options struct {
	MSS    uint16 // valid when HasMSS
	HasMSS bool

	WindowScale uint8 // valid when HasWS; capped at MaxWindowScale by ParseSegment
	HasWS       bool

	SACKPermitted bool

	TS           bool // timestamps present (RFC 7323)
	TSVal, TSEcr uint32

	SACK  [MaxSACKBlocks]SACKBlock
	NSACK int // number of valid blocks in SACK
}

// SACKBlocks returns the SACK blocks present.
func (o *Options) SACKBlocks() []SACKBlock { return o.SACK[:o.NSACK] }

// Segment is a TCP segment: a parsed incoming one, or an outgoing one before
// encoding. Payload aliases the buffer it was parsed from (incoming) or the
// sender's buffer (outgoing); whoever keeps it past the call must copy it,
// but for what PayloadStable allows (see Output).
type Segment struct {
	SrcPort, DstPort uint16
	Seq, Ack         seqnum.Value
	Flags            Flags
	Window           uint16 // the raw field, not scaled
	Urgent           uint16
	Options          Options
	Payload          []byte
	// PayloadStable (outgoing only): Payload is a view into the send
	// buffer's storage, not a temporary copy of a span that wraps, and
	// stays as it is past the Output's Send (Output says how long).
	PayloadStable bool
	// ChunkEnd (outgoing only): the segment ends a chunk of new data (at
	// most half cwnd: gso.go, "Chunks"), as Linux ends an skb; an Output
	// that joins segments into GSO frames joins nothing after it into its
	// frame. Of a TSO segment's pieces, the last alone has it.
	ChunkEnd bool // in PayloadStable's padding
	// GSOSize (outgoing only), when non-zero and Payload is longer, is the
	// payload of each packet the Output sends the segment as (Config.GSOMax):
	// the segment's headers and fields on each, the sequence number moved on,
	// FIN on the last alone (as Linux's tcp_gso_segment; PSH as the segment
	// has it on each, as TCP sends it on every MSS-sized segment:
	// sendDataPSH). CutGSO makes them.
	GSOSize int
}

// Len is the segment's length in sequence space: payload plus SYN and FIN.
func (s *Segment) Len() seqnum.Size {
	n := seqnum.Size(len(s.Payload))
	if s.Flags&FlagSYN != 0 {
		n++
	}
	if s.Flags&FlagFIN != 0 {
		n++
	}
	return n
}

// End is Seq + Len.
func (s *Segment) End() seqnum.Value { return s.Seq.Add(s.Len()) }

func (s *Segment) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d>%d [%s] seq=%d ack=%d win=%d len=%d", s.SrcPort, s.DstPort, s.Flags, uint32(s.Seq), uint32(s.Ack), s.Window, len(s.Payload))
	o := &s.Options
	if o.HasMSS {
		fmt.Fprintf(&b, " mss=%d", o.MSS)
	}
	if o.HasWS {
		fmt.Fprintf(&b, " ws=%d", o.WindowScale)
	}
	if o.SACKPermitted {
		b.WriteString(" sackOK")
	}
	if o.TS {
		fmt.Fprintf(&b, " ts=%d/%d", o.TSVal, o.TSEcr)
	}
	for _, blk := range o.SACKBlocks() {
		fmt.Fprintf(&b, " sack=%d-%d", uint32(blk.Start), uint32(blk.End))
	}
	return b.String()
}

// Errors of ParseSegment.
var (
	ErrShortSegment = errors.New("tcp: segment shorter than its header")
	ErrDataOffset   = errors.New("tcp: bad data offset")
	ErrBadOption    = errors.New("tcp: malformed option")
)

// ParseSegment parses a TCP header and its payload from b (the IP payload). It
// does not verify the checksum, which needs the IP pseudo-header: see
// VerifyChecksum. The Payload of the result aliases b.
//
// Malformed options (a length running past the header, a known option of the
// wrong length, a zero-length option) make the segment invalid: ErrBadOption.
func ParseSegment(b []byte) (Segment, error) {
	var s Segment
	if len(b) < HeaderMinSize {
		return s, ErrShortSegment
	}
	off := int(b[12]>>4) * 4
	if off < HeaderMinSize || off > len(b) {
		return s, ErrDataOffset
	}
	s.SrcPort = binary.BigEndian.Uint16(b[0:])
	s.DstPort = binary.BigEndian.Uint16(b[2:])
	s.Seq = seqnum.Value(binary.BigEndian.Uint32(b[4:]))
	s.Ack = seqnum.Value(binary.BigEndian.Uint32(b[8:]))
	s.Flags = Flags(b[13])
	s.Window = binary.BigEndian.Uint16(b[14:])
	s.Urgent = binary.BigEndian.Uint16(b[18:])
	if err := parseOptions(b[HeaderMinSize:off], &s.Options); err != nil {
		return s, err
	}
	s.Payload = b[off:]
	return s, nil
}

// parseOptions parses the option list (RFC 9293 3.2).
func parseOptions(b []byte, o *Options) error {
	for i := 0; i < len(b); {
		kind := b[i]
		switch kind {
		case optEOL:
			return nil
		case optNOP:
			i++
			continue
		}
		if i+2 > len(b) {
			return ErrBadOption
		}
		l := int(b[i+1])
		if l < 2 || i+l > len(b) {
			return ErrBadOption
		}
		v := b[i+2 : i+l]
		switch kind {
		case optMSS:
			if l != 4 {
				return ErrBadOption
			}
			o.MSS, o.HasMSS = binary.BigEndian.Uint16(v), true
		case optWS:
			if l != 3 {
				return ErrBadOption
			}
			o.WindowScale, o.HasWS = min(v[0], MaxWindowScale), true // RFC 7323 2.3
		case optSACKPermitted:
			if l != 2 {
				return ErrBadOption
			}
			o.SACKPermitted = true
		case optSACK:
			if (l-2)%8 != 0 || l == 2 {
				return ErrBadOption
			}
			o.NSACK = 0
			for j := 0; j+8 <= len(v) && o.NSACK < MaxSACKBlocks; j += 8 {
				o.SACK[o.NSACK] = SACKBlock{
					Start: seqnum.Value(binary.BigEndian.Uint32(v[j:])),
					End:   seqnum.Value(binary.BigEndian.Uint32(v[j+4:])),
				}
				o.NSACK++
			}
		case optTS:
			if l != 10 {
				return ErrBadOption
			}
			o.TS, o.TSVal, o.TSEcr = true, binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:])
		}
		i += l
	}
	return nil
}

// optionsLen returns the encoded length of the options, padded to 4 bytes.
func (o *Options) encodedLen() int {
	n := 0
	if o.HasMSS {
		n += 4
	}
	if o.HasWS {
		n += 4 // NOP + 3
	}
	if o.SACKPermitted && !o.TS {
		n += 4 // NOP NOP + 2
	}
	if o.TS {
		n += 12 // NOP NOP + 10, or SACK-permitted + 10
	}
	if o.NSACK > 0 {
		n += 4 + 8*o.NSACK // NOP NOP + 2 + 8n
	}
	return n
}

// encode writes the options in the layout Linux uses, and returns their length.
func (o *Options) encode(b []byte) int {
	i := 0
	if o.HasMSS {
		b[i], b[i+1] = optMSS, 4
		binary.BigEndian.PutUint16(b[i+2:], o.MSS)
		i += 4
	}
	if o.TS {
		if o.SACKPermitted {
			b[i], b[i+1] = optSACKPermitted, 2
		} else {
			b[i], b[i+1] = optNOP, optNOP
		}
		b[i+2], b[i+3] = optTS, 10
		binary.BigEndian.PutUint32(b[i+4:], o.TSVal)
		binary.BigEndian.PutUint32(b[i+8:], o.TSEcr)
		i += 12
	} else if o.SACKPermitted {
		b[i], b[i+1], b[i+2], b[i+3] = optNOP, optNOP, optSACKPermitted, 2
		i += 4
	}
	if o.HasWS {
		b[i], b[i+1], b[i+2], b[i+3] = optNOP, optWS, 3, o.WindowScale
		i += 4
	}
	if o.NSACK > 0 {
		b[i], b[i+1], b[i+2], b[i+3] = optNOP, optNOP, optSACK, byte(2+8*o.NSACK)
		i += 4
		for _, blk := range o.SACKBlocks() {
			binary.BigEndian.PutUint32(b[i:], uint32(blk.Start))
			binary.BigEndian.PutUint32(b[i+4:], uint32(blk.End))
			i += 8
		}
	}
	return i
}

// ErrOptionsTooLong is returned by Encode when the options exceed 40 bytes.
var ErrOptionsTooLong = errors.New("tcp: options longer than 40 bytes")

// ErrBufferTooSmall is returned by Encode when b cannot hold the segment.
var ErrBufferTooSmall = errors.New("tcp: buffer too small for segment")

// EncodedLen is the length of the encoded segment: header, options, payload.
func (s *Segment) EncodedLen() int {
	return HeaderMinSize + s.Options.encodedLen() + len(s.Payload)
}

// Encode writes the segment (header, options and payload) into b with a zero
// checksum, and returns its length. Use SetChecksum to fill the checksum in.
func (s *Segment) Encode(b []byte) (int, error) {
	ol := s.Options.encodedLen()
	if ol > HeaderMaxSize-HeaderMinSize {
		return 0, ErrOptionsTooLong
	}
	hl := HeaderMinSize + ol
	n := hl + len(s.Payload)
	if len(b) < n {
		return 0, ErrBufferTooSmall
	}
	binary.BigEndian.PutUint16(b[0:], s.SrcPort)
	binary.BigEndian.PutUint16(b[2:], s.DstPort)
	binary.BigEndian.PutUint32(b[4:], uint32(s.Seq))
	binary.BigEndian.PutUint32(b[8:], uint32(s.Ack))
	b[12] = byte(hl/4) << 4
	b[13] = byte(s.Flags)
	binary.BigEndian.PutUint16(b[14:], s.Window)
	b[16], b[17] = 0, 0
	binary.BigEndian.PutUint16(b[18:], s.Urgent)
	s.Options.encode(b[HeaderMinSize:hl])
	copy(b[hl:], s.Payload)
	return n, nil
}

// pseudoHeaderSum is the RFC 1071 sum of the IPv4 or IPv6 pseudo-header (RFC 9293
// 3.1, RFC 8200 8.1).
func pseudoHeaderSum(src, dst netip.Addr, length int) uint16 {
	var buf [40]byte
	n := 0
	if src.Is4() && dst.Is4() {
		s, d := src.As4(), dst.As4()
		n += copy(buf[n:], s[:])
		n += copy(buf[n:], d[:])
		buf[n], buf[n+1] = 0, 6
		binary.BigEndian.PutUint16(buf[n+2:], uint16(length))
		n += 4
	} else {
		s, d := src.As16(), dst.As16()
		n += copy(buf[n:], s[:])
		n += copy(buf[n:], d[:])
		binary.BigEndian.PutUint32(buf[n:], uint32(length))
		// three zero bytes and next header 6
		return checksum.Checksum([]byte{0, 0, 0, 6}, checksum.Checksum(buf[:n+4], 0))
	}
	return checksum.Checksum(buf[:n], 0)
}

// Checksum computes the TCP checksum of the encoded segment b (header with its
// checksum field zero, and payload) between the addresses src and dst.
func Checksum(src, dst netip.Addr, b []byte) uint16 {
	return ^checksum.Checksum(b, pseudoHeaderSum(src, dst, len(b)))
}

// SetChecksum computes and stores the checksum of the encoded segment b.
func SetChecksum(src, dst netip.Addr, b []byte) {
	b[16], b[17] = 0, 0
	binary.BigEndian.PutUint16(b[16:], Checksum(src, dst, b))
}

// VerifyChecksum reports whether the encoded segment b, received from src for
// dst, has a valid checksum.
func VerifyChecksum(src, dst netip.Addr, b []byte) bool {
	if len(b) < HeaderMinSize {
		return false
	}
	return checksum.Checksum(b, pseudoHeaderSum(src, dst, len(b))) == 0xffff
}

// ResetFor returns the RST that answers seg when no connection exists for it
// (RFC 9293 3.10.7.1), and false when none is to be sent (seg is itself a RST).
// The ports are swapped from seg.
func ResetFor(seg *Segment) (Segment, bool) {
	if seg.Flags&FlagRST != 0 {
		return Segment{}, false
	}
	r := Segment{SrcPort: seg.DstPort, DstPort: seg.SrcPort}
	if seg.Flags&FlagACK != 0 {
		r.Seq, r.Flags = seg.Ack, FlagRST // RFC 9293 3.10.7.1: <SEQ=SEG.ACK><CTL=RST>
	} else {
		r.Ack, r.Flags = seg.End(), FlagRST|FlagACK // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>
	}
	return r, true
}

// GSOPieces is how many packets the Output sends s as (GSOSize): one
// unless its payload is longer than a non-zero GSOSize.
func (s *Segment) GSOPieces() int {
	if s.GSOSize <= 0 || len(s.Payload) <= s.GSOSize {
		return 1
	}
	return (len(s.Payload) + s.GSOSize - 1) / s.GSOSize
}

// GSOPiece returns the packet i (from 0, below GSOPieces) of s as a
// segment of its own: GSOSize bytes of the payload from i*GSOSize (the last
// what is left), the sequence number moved on by as much, FIN on the last
// piece alone (as Linux's tcp_gso_segment cuts a TSO skb), every other field
// as s has it; its GSOSize is zero. These are the segments TCP would have
// sent one MSS at a time (Config.GSOMax).
func (s *Segment) GSOPiece(i int) Segment {
	p := *s
	p.GSOSize = 0
	if s.GSOPieces() == 1 {
		return p
	}
	from := i * s.GSOSize
	to := min(from+s.GSOSize, len(s.Payload))
	p.Payload = s.Payload[from:to] // its capacity as s has it: the stack joins views that continue one another (stack/offload.go piece)
	p.Seq = s.Seq.Add(seqnum.Size(from))
	if to < len(s.Payload) {
		p.Flags &^= FlagFIN
		p.ChunkEnd = false
	}
	return p
}
