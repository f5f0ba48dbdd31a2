package replay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// Link types ParseCapture understands.
const (
	linkEthernet = 1
	linkRaw      = 101
	linkSLL      = 113
	linkIPv4     = 228
)

// maxRecord bounds a record's length (libpcap's MAXIMUM_SNAPLEN), so that a
// corrupt header cannot make the reader allocate gigabytes.
const maxRecord = 262144

// ErrCapture is wrapped by every error about a capture's content.
var ErrCapture = errors.New("replay: bad capture")

// Packet is one IPv4/TCP packet of a capture.
type Packet struct {
	N        int       // the packet's number in the capture, from 1
	Time     time.Time // the capture's timestamp
	Raw      []byte    // the IPv4 packet, without link header or padding
	Src, Dst netip.AddrPort
	Seg      tcp.Segment // Payload aliases Raw
}

func (p *Packet) String() string {
	return fmt.Sprintf("packet %d (%v -> %v %v)", p.N, p.Src, p.Dst, p.Seg.Flags)
}

func packetErr(n int, format string, a ...any) error {
	return fmt.Errorf("%w: packet %d: %s", ErrCapture, n, fmt.Sprintf(format, a...))
}

// ParseCapture reads a pcap capture of IPv4/TCP packets. It fails, naming the
// packet, on a truncated file, an unknown format or link type, and a packet
// that is not a well-formed IPv4/TCP packet.
func ParseCapture(r io.Reader) ([]Packet, error) {
	var hdr [24]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: not a pcap file: header: %v", ErrCapture, err)
	}
	var bo binary.ByteOrder
	nano := false
	switch magic := binary.LittleEndian.Uint32(hdr[:]); magic {
	case 0xa1b2c3d4:
		bo = binary.LittleEndian
	case 0xa1b23c4d:
		bo, nano = binary.LittleEndian, true
	case 0xd4c3b2a1:
		bo = binary.BigEndian
	case 0x4d3cb2a1:
		bo, nano = binary.BigEndian, true
	case 0x0a0d0d0a:
		return parsePcapng(io.MultiReader(bytes.NewReader(hdr[:]), r))
	default:
		return nil, fmt.Errorf("%w: not a pcap file (magic %#08x)", ErrCapture, magic)
	}
	link := bo.Uint32(hdr[20:]) & 0x0fffffff // the upper bits are FCS information
	switch link {
	case linkRaw, linkIPv4, linkEthernet, linkSLL:
	default:
		return nil, fmt.Errorf("%w: link type %d is not supported (want RAW 101, IPV4 228, Ethernet 1 or Linux SLL 113)", ErrCapture, link)
	}
	var pkts []Packet
	for n := 1; ; n++ {
		var rh [16]byte
		if _, err := io.ReadFull(r, rh[:]); err != nil {
			if err == io.EOF {
				return pkts, nil
			}
			return nil, packetErr(n, "truncated record header: %v", err)
		}
		sec, frac := int64(bo.Uint32(rh[0:])), int64(bo.Uint32(rh[4:]))
		if !nano {
			frac *= 1000
		}
		capLen, origLen := bo.Uint32(rh[8:]), bo.Uint32(rh[12:])
		if capLen > maxRecord {
			return nil, packetErr(n, "record length %d exceeds %d", capLen, maxRecord)
		}
		data := make([]byte, capLen)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, packetErr(n, "truncated record (%d bytes announced): %v", capLen, err)
		}
		if capLen < origLen {
			return nil, packetErr(n, "cut short by the snap length (%d of %d bytes)", capLen, origLen)
		}
		ip, err := stripLink(link, data)
		if err != nil {
			return nil, packetErr(n, "%v", err)
		}
		p, err := parseIPv4TCP(ip)
		if err != nil {
			return nil, packetErr(n, "%v", err)
		}
		p.N, p.Time = n, time.Unix(sec, frac)
		pkts = append(pkts, p)
	}
}

// parsePcapng reads the packets of a pcapng file that no tcpwheel recorder
// wrote (a flight recording is for Replay, which runs it exactly).
func parsePcapng(r io.Reader) ([]Packet, error) {
	rec, err := record.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCapture, err)
	}
	if rec.Header != nil {
		return nil, fmt.Errorf("%w: a tcpwheel flight recording: replay it whole (OpenRecording, Replay; tcpwheel replay does)", ErrCapture)
	}
	var pkts []Packet
	for n, e := range rec.Packets() {
		link := uint32(e.Port)
		switch link {
		case linkRaw, linkIPv4, linkEthernet, linkSLL:
		default:
			return nil, packetErr(n+1, "link type %d is not supported (want RAW 101, IPV4 228, Ethernet 1 or Linux SLL 113)", link)
		}
		ip, err := stripLink(link, e.Data)
		if err != nil {
			return nil, packetErr(n+1, "%v", err)
		}
		p, err := parseIPv4TCP(ip)
		if err != nil {
			return nil, packetErr(n+1, "%v", err)
		}
		p.N, p.Time = n+1, time.Unix(0, int64(e.T))
		pkts = append(pkts, p)
	}
	return pkts, nil
}

func stripLink(link uint32, b []byte) ([]byte, error) {
	switch link {
	case linkEthernet:
		if len(b) < 14 || binary.BigEndian.Uint16(b[12:]) != 0x0800 {
			return nil, errors.New("not an Ethernet frame carrying IPv4")
		}
		return b[14:], nil
	case linkSLL:
		if len(b) < 16 || binary.BigEndian.Uint16(b[14:]) != 0x0800 {
			return nil, errors.New("not a Linux cooked frame carrying IPv4")
		}
		return b[16:], nil
	}
	return b, nil
}

func parseIPv4TCP(b []byte) (Packet, error) {
	var p Packet
	if len(b) < header.IPv4MinimumSize || b[0]>>4 != 4 {
		return p, errors.New("not an IPv4 packet")
	}
	ip := header.IPv4(b)
	hl, total := int(ip.HeaderLength()), int(ip.TotalLength())
	if hl < header.IPv4MinimumSize || total < hl || total > len(b) {
		return p, errors.New("malformed IPv4 header")
	}
	if ip.Protocol() != uint8(header.TCPProtocolNumber) {
		return p, fmt.Errorf("IP protocol %d is not TCP", ip.Protocol())
	}
	if ip.More() || ip.FragmentOffset() != 0 {
		return p, errors.New("an IPv4 fragment")
	}
	p.Raw = b[:total]
	src := netip.AddrFrom4(ip.SourceAddress().As4())
	dst := netip.AddrFrom4(ip.DestinationAddress().As4())
	seg, err := tcp.ParseSegment(p.Raw[hl:])
	if err != nil {
		return p, err
	}
	p.Seg = seg
	p.Src, p.Dst = netip.AddrPortFrom(src, seg.SrcPort), netip.AddrPortFrom(dst, seg.DstPort)
	return p, nil
}

// parseIPv6TCP is parseIPv4TCP for an IPv6 packet whose next header is TCP
// (a flight recording's: the stack sends no extension headers).
func parseIPv6TCP(b []byte) (Packet, error) {
	var p Packet
	if len(b) < header.IPv6MinimumSize || b[0]>>4 != 6 {
		return p, errors.New("not an IPv6 packet")
	}
	ip := header.IPv6(b)
	total := header.IPv6MinimumSize + int(ip.PayloadLength())
	if total > len(b) {
		return p, errors.New("malformed IPv6 header")
	}
	if ip.NextHeader() != uint8(header.TCPProtocolNumber) {
		return p, fmt.Errorf("IPv6 next header %d is not TCP", ip.NextHeader())
	}
	p.Raw = b[:total]
	seg, err := tcp.ParseSegment(p.Raw[header.IPv6MinimumSize:])
	if err != nil {
		return p, err
	}
	p.Seg = seg
	src, dst := netip.AddrFrom16(ip.SourceAddress().As16()), netip.AddrFrom16(ip.DestinationAddress().As16())
	p.Src, p.Dst = netip.AddrPortFrom(src, seg.SrcPort), netip.AddrPortFrom(dst, seg.DstPort)
	return p, nil
}

// Session is a capture split into the stack's and the peer's packets.
type Session struct {
	Packets     []Packet
	FromStack   []bool         // by index into Packets
	Stack, Peer netip.AddrPort // the connection's two ends
	Passive     bool           // the peer sent the first SYN
	PeerISN     seqnum.Value   // from the peer's SYN
	StackISN    seqnum.Value   // valid when HasStackISN
	HasStackISN bool           // the stack sent a SYN
}

// NewSession checks that pkts are one connection that starts with a SYN and
// tells the stack's packets from the peer's. stackAddr names the stack; the
// zero Addr means the receiver of the first SYN.
func NewSession(pkts []Packet, stackAddr netip.Addr) (*Session, error) {
	if len(pkts) == 0 {
		return nil, fmt.Errorf("%w: no packets", ErrCapture)
	}
	// A tap writes a packet's record after the device took it, so a reply can
	// be recorded before the packet it answers: order by timestamp.
	pkts = slices.Clone(pkts)
	slices.SortStableFunc(pkts, func(a, b Packet) int { return a.Time.Compare(b.Time) })
	first := &pkts[0]
	if first.Seg.Flags&(tcp.FlagSYN|tcp.FlagACK|tcp.FlagRST) != tcp.FlagSYN {
		return nil, packetErr(first.N, "the capture does not start with a handshake: want a SYN, got %v", first.Seg.Flags)
	}
	s := &Session{Packets: pkts, FromStack: make([]bool, len(pkts))}
	switch {
	case !stackAddr.IsValid() || stackAddr == first.Dst.Addr():
		s.Stack, s.Peer, s.Passive = first.Dst, first.Src, true
	case stackAddr == first.Src.Addr():
		s.Stack, s.Peer = first.Src, first.Dst
	default:
		return nil, packetErr(first.N, "the stack's address %v is neither end of the SYN %v -> %v", stackAddr, first.Src, first.Dst)
	}
	havePeer := false
	for i := range pkts {
		p := &pkts[i]
		switch {
		case p.Src == s.Stack && p.Dst == s.Peer:
			s.FromStack[i] = true
		case p.Src == s.Peer && p.Dst == s.Stack:
		default:
			return nil, packetErr(p.N, "%v -> %v belongs to another connection than %v <-> %v (replay takes one)", p.Src, p.Dst, s.Stack, s.Peer)
		}
		if p.Seg.Flags&tcp.FlagSYN == 0 {
			continue
		}
		if s.FromStack[i] && !s.HasStackISN {
			s.StackISN, s.HasStackISN = p.Seg.Seq, true
		} else if !s.FromStack[i] && !havePeer {
			s.PeerISN, havePeer = p.Seg.Seq, true
		}
	}
	return s, nil
}
