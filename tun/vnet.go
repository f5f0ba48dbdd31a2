package tun

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

// VnetHdrLen is the size of struct virtio_net_hdr (linux/virtio_net.h), the
// header in front of every packet of a TUN opened with IFF_VNET_HDR (the
// size TUNSETVNETHDRSZ sets).
const VnetHdrLen = 10

// MaxFrame is the largest frame (virtio-net header and packet) a device with
// offloads reads or writes: a 64 KiB IPv4 packet behind its header.
const MaxFrame = VnetHdrLen + MaxMTU

// virtio_net_hdr flags and gso_type values (linux/virtio_net.h).
const (
	VnetFlagNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM: the checksum at CsumStart+CsumOffset holds the pseudo-header's sum only
	VnetFlagDataValid = 2 // VIRTIO_NET_HDR_F_DATA_VALID: the checksums were verified

	GSONone  = 0    // VIRTIO_NET_HDR_GSO_NONE
	GSOTCPv4 = 1    // VIRTIO_NET_HDR_GSO_TCPV4
	GSOUDP   = 3    // VIRTIO_NET_HDR_GSO_UDP
	GSOTCPv6 = 4    // VIRTIO_NET_HDR_GSO_TCPV6
	GSOUDPL4 = 5    // VIRTIO_NET_HDR_GSO_UDP_L4
	GSOECN   = 0x80 // VIRTIO_NET_HDR_GSO_ECN, or'ed into the type
)

// VnetHdr is a virtio_net_hdr. Its 16-bit fields are little-endian on the
// wire: a TUN's header is (TUNSETVNETLE aside) in the host's legacy virtio
// byte order, little-endian on every platform Go's linux ports run on except
// the big-endian ones, which this module does not support for offloads.
type VnetHdr struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16 // length of the headers (IP and TCP) of each segment
	GSOSize    uint16 // payload bytes per segment (the MSS)
	CsumStart  uint16 // where the checksummed part starts, from the IP header
	CsumOffset uint16 // where the checksum is, from CsumStart
}

// Errors of a bad virtio-net header, each wrapping ErrBadVnetHdr: the stack
// counts a drop for each (stack.Drops).
var (
	ErrBadVnetHdr = errors.New("tun: bad virtio-net header")
	// ErrVnetGSO: a GSO frame that is not one TCP segment as announced
	// (over IPv4 for GSOTCPv4, IPv6 for GSOTCPv6): a type we did not enable, gso_size 0, an IP total length
	// that is not the frame's, headers past hdr_len.
	ErrVnetGSO = fmt.Errorf("%w: bad GSO frame", ErrBadVnetHdr)
	// ErrVnetCsum: csum_start/csum_offset outside the packet, or not the
	// TCP checksum of a GSO frame.
	ErrVnetCsum = fmt.Errorf("%w: bad checksum offsets", ErrBadVnetHdr)
)

// ParseVnetHdr decodes the header at the front of b.
func ParseVnetHdr(b []byte) (VnetHdr, error) {
	if len(b) < VnetHdrLen {
		return VnetHdr{}, fmt.Errorf("%w: %d bytes", ErrBadVnetHdr, len(b))
	}
	le := binary.LittleEndian
	return VnetHdr{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     le.Uint16(b[2:]),
		GSOSize:    le.Uint16(b[4:]),
		CsumStart:  le.Uint16(b[6:]),
		CsumOffset: le.Uint16(b[8:]),
	}, nil
}

// Put encodes h into b[:VnetHdrLen].
func (h VnetHdr) Put(b []byte) {
	le := binary.LittleEndian
	b[0], b[1] = h.Flags, h.GSOType
	le.PutUint16(b[2:], h.HdrLen)
	le.PutUint16(b[4:], h.GSOSize)
	le.PutUint16(b[6:], h.CsumStart)
	le.PutUint16(b[8:], h.CsumOffset)
}

// IsGSO reports whether h announces a frame of several segments.
func (h VnetHdr) IsGSO() bool { return h.GSOType&^GSOECN != GSONone }

// Check validates h against the IP packet pkt it came with. A GSO frame
// must be one TCP segment, over IPv4 (GSOTCPv4) or IPv6 (GSOTCPv6, with no
// extension headers), ECN bit allowed, whose IP length is len(pkt), with gso_size > 0, hdr_len no more than the packet,
// and its partial checksum at the TCP checksum; a frame that needs its
// checksum completed must have both offsets inside the packet. Check reads
// only pkt's headers, and never panics.
func (h VnetHdr) Check(pkt []byte) error {
	if h.Flags&^(VnetFlagNeedsCsum|VnetFlagDataValid) != 0 {
		return fmt.Errorf("%w: flags %#x", ErrBadVnetHdr, h.Flags)
	}
	if h.Flags&VnetFlagNeedsCsum != 0 {
		if int(h.CsumStart)+int(h.CsumOffset)+2 > len(pkt) || h.CsumOffset&1 != 0 {
			return fmt.Errorf("%w: start %d offset %d in %d bytes", ErrVnetCsum, h.CsumStart, h.CsumOffset, len(pkt))
		}
	}
	if !h.IsGSO() {
		if h.GSOType != GSONone {
			return fmt.Errorf("%w: type %#x", ErrVnetGSO, h.GSOType)
		}
		return nil
	}
	typ := h.GSOType &^ GSOECN
	if typ != GSOTCPv4 && typ != GSOTCPv6 {
		return fmt.Errorf("%w: type %#x", ErrVnetGSO, h.GSOType)
	}
	if h.GSOSize == 0 {
		return fmt.Errorf("%w: gso_size 0", ErrVnetGSO)
	}
	ihl, thl, v6, ok := tcpHeaders(pkt)
	if !ok || v6 != (typ == GSOTCPv6) {
		return fmt.Errorf("%w: type %#x, not a TCP packet of its IP version (%d bytes)", ErrVnetGSO, h.GSOType, len(pkt))
	}
	if int(h.HdrLen) > len(pkt) {
		return fmt.Errorf("%w: hdr_len %d in %d bytes", ErrVnetGSO, h.HdrLen, len(pkt))
	}
	if h.Flags&VnetFlagNeedsCsum == 0 || int(h.CsumStart) != ihl || h.CsumOffset != 16 {
		return fmt.Errorf("%w: GSO frame's checksum at %d+%d, TCP's at %d+16", ErrVnetCsum, h.CsumStart, h.CsumOffset, ihl)
	}
	if ihl+thl > len(pkt) {
		return fmt.Errorf("%w: headers past the packet", ErrVnetGSO)
	}
	return nil
}

// tcpHeaders returns the IP and TCP header lengths of pkt, and whether it
// is IPv6, if it is a TCP packet over IPv4 (not a fragment) or IPv6 (TCP
// the first next header: no extension headers) whose IP length is
// len(pkt), with both headers inside it.
func tcpHeaders(pkt []byte) (ihl, thl int, v6, ok bool) {
	be := binary.BigEndian
	switch {
	case len(pkt) >= 40 && pkt[0]>>4 == 4 && pkt[9] == 6:
		ihl = int(pkt[0]&0xf) * 4
		if ihl < 20 || int(be.Uint16(pkt[2:])) != len(pkt) || be.Uint16(pkt[6:])&0x3fff != 0 {
			return 0, 0, false, false
		}
	case len(pkt) >= 60 && pkt[0]>>4 == 6 && pkt[6] == 6:
		ihl, v6 = 40, true
		if 40+int(be.Uint16(pkt[4:])) != len(pkt) {
			return 0, 0, false, false
		}
	default:
		return 0, 0, false, false
	}
	if ihl+20 > len(pkt) {
		return 0, 0, false, false
	}
	thl = int(pkt[ihl+12]>>4) * 4
	if thl < 20 || ihl+thl > len(pkt) {
		return 0, 0, false, false
	}
	return ihl, thl, v6, true
}

// CompleteChecksum fills in the checksum that a frame with
// VnetFlagNeedsCsum left partial (the pseudo-header's sum), as the kernel's
// skb_checksum_help does: the one's complement of the sum from CsumStart to
// the end, the field included, and 0xffff for a result of zero (its
// CSUM_MANGLED_0: the same one's-complement value, and the only one a UDP
// checksum may take, RFC 768, RFC 8200 8.1: a zero UDP checksum means none,
// which IPv6 does not allow). h must have passed Check against pkt. A GSO
// frame's checksum covers its full length; Segment computes each segment's.
func CompleteChecksum(h VnetHdr, pkt []byte) {
	if h.Flags&VnetFlagNeedsCsum == 0 {
		return
	}
	at := int(h.CsumStart) + int(h.CsumOffset)
	c := ^checksum.Checksum(pkt[h.CsumStart:], 0)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(pkt[at:], c)
}

// PseudoSum4 is the sum of the IPv4 pseudo-header of a TCP segment of
// length tcpLen (RFC 9293 3.1), unfolded into 16 bits and not complemented:
// what a partial checksum field holds (VnetFlagNeedsCsum).
func PseudoSum4(src, dst [4]byte, tcpLen int) uint16 {
	s := checksum.Checksum(src[:], 0)
	s = checksum.Checksum(dst[:], s)
	return checksum.Combine(s, checksum.Combine(6, uint16(tcpLen)))
}

// PseudoSum6 is PseudoSum4 for IPv6 (RFC 8200 8.1).
func PseudoSum6(src, dst [16]byte, tcpLen int) uint16 {
	s := checksum.Checksum(src[:], 0)
	s = checksum.Checksum(dst[:], s)
	s = checksum.Combine(s, uint16(tcpLen>>16))
	return checksum.Combine(s, checksum.Combine(6, uint16(tcpLen)))
}

// pseudoSum is the pseudo-header's sum of the TCP segment in p (IPv4, or
// IPv6 with v6).
func pseudoSum(p []byte, v6 bool, tcpLen int) uint16 {
	if v6 {
		return PseudoSum6([16]byte(p[8:24]), [16]byte(p[24:40]), tcpLen)
	}
	return PseudoSum4([4]byte(p[12:16]), [4]byte(p[16:20]), tcpLen)
}

// SegmentCount returns how many packets Segment makes of a frame: 1 unless
// h is a GSO frame, else one per gso_size bytes of payload (at least one).
func SegmentCount(h VnetHdr, pkt []byte) int {
	if !h.IsGSO() || h.GSOSize == 0 {
		return 1
	}
	ihl, thl, _, ok := tcpHeaders(pkt)
	if !ok {
		return 1
	}
	payload := len(pkt) - ihl - thl
	return max(1, (payload+int(h.GSOSize)-1)/int(h.GSOSize))
}

// Segment splits a frame (header h, IP packet pkt; h passed Check) into
// the packets a NIC doing TSO would send, and calls emit with each, built in
// scratch (which needs room for the largest: the headers and gso_size
// bytes, or the whole packet of a frame that is not GSO): their IP headers
// (length; for IPv4 also ID, incremented per packet, and checksum), TCP
// sequence numbers and flags (fixHeaders) and full TCP checksums. A frame
// that is not GSO is emitted as a copy in scratch, its partial checksum
// completed (as it is when it has none). emit must not keep the packet; an
// error from it stops Segment and is returned.
func Segment(h VnetHdr, pkt, scratch []byte, emit func(pkt []byte) error) error {
	return segment(h, pkt, scratch, true, emit)
}

// SegmentHeaders is Segment for a look at the packets (a wrapper's drop
// decisions, a watcher): every header field right but the TCP checksum,
// which is left as the frame has it, partial or not, and a frame that is not
// GSO is emitted as it is.
func SegmentHeaders(h VnetHdr, pkt, scratch []byte, emit func(pkt []byte) error) error {
	return segment(h, pkt, scratch, false, emit)
}

func segment(h VnetHdr, pkt, scratch []byte, csum bool, emit func(pkt []byte) error) error {
	if !h.IsGSO() {
		if !csum || h.Flags&VnetFlagNeedsCsum == 0 {
			return emit(pkt)
		}
		if len(scratch) < len(pkt) {
			return fmt.Errorf("tun: segment: %d-byte scratch for a %d-byte packet", len(scratch), len(pkt))
		}
		p := scratch[:len(pkt)]
		copy(p, pkt)
		CompleteChecksum(h, p)
		return emit(p)
	}
	ihl, thl, v6, ok := tcpHeaders(pkt)
	if !ok || h.GSOSize == 0 {
		return fmt.Errorf("%w: cannot segment", ErrVnetGSO)
	}
	hl := ihl + thl
	payload := pkt[hl:]
	mss := int(h.GSOSize)
	if len(scratch) < hl+min(mss, len(payload)) {
		return fmt.Errorf("tun: segment: %d-byte scratch for %d-byte segments", len(scratch), hl+mss)
	}
	segs := SegmentCount(h, pkt)
	for i := range segs {
		from, to := i*mss, min((i+1)*mss, len(payload))
		seg := scratch[:hl+to-from]
		copy(seg, pkt[:hl])
		copy(seg[hl:], payload[from:to])
		fixHeaders(seg, pkt, ihl, v6, i, i+1 == segs, from)
		if t := seg[ihl:]; csum {
			t[16], t[17] = 0, 0
			binary.BigEndian.PutUint16(t[16:], ^checksum.Checksum(t, pseudoSum(seg, v6, len(t))))
		}
		if err := emit(seg); err != nil {
			return err
		}
	}
	return nil
}

// fixHeaders makes the headers of p, which were copied from the GSO
// frame's packet pkt, those of the part of it that starts with its packet
// i, at payload offset from, and is the last with last: the IP length (and
// for IPv4 the ID, incremented per packet, and checksum), the TCP sequence
// number, and the flags as Linux's tcp_gso_segment leaves them (CWR on the
// first packet only, PSH and FIN on the last only). The TCP checksum is the
// caller's.
func fixHeaders(p, pkt []byte, ihl int, v6 bool, i int, last bool, from int) {
	be := binary.BigEndian
	if v6 {
		be.PutUint16(p[4:], uint16(len(p)-40))
	} else {
		be.PutUint16(p[2:], uint16(len(p)))
		be.PutUint16(p[4:], be.Uint16(pkt[4:])+uint16(i))
		p[10], p[11] = 0, 0
		be.PutUint16(p[10:], ^checksum.Checksum(p[:ihl], 0))
	}
	t := p[ihl:]
	be.PutUint32(t[4:], be.Uint32(pkt[ihl+4:])+uint32(from))
	if i > 0 {
		t[13] &^= 0x80 // CWR
	}
	if !last {
		t[13] &^= 0x01 | 0x08 // FIN, PSH
	}
}

// SplitFrame checks frame (a header and its packet) and calls emit with
// each of its packets, as Segment (csum) or SegmentHeaders make them: the
// work of a wrapper (package impair, pcaptap) that handles packets one by
// one, on a frame. scratch should hold MaxMTU bytes.
func SplitFrame(frame, scratch []byte, csum bool, emit func(pkt []byte) error) error {
	h, err := ParseVnetHdr(frame)
	if err != nil {
		return err
	}
	pkt := frame[VnetHdrLen:]
	if err := h.Check(pkt); err != nil {
		return err
	}
	return segment(h, pkt, scratch, csum, emit)
}

// WrappedOffloads is the Offloads of a wrapper over dev that passes frames
// on (through SplitFrame, FrameFilter): what dev offers.
func WrappedOffloads(dev Device) Offloads {
	o, ok := dev.(Offloader)
	if !ok {
		return Offloads{Err: fmt.Errorf("tun: %s has no frames: %w", dev.Name(), ErrNoOffload)}
	}
	return o.Offloads()
}

// EachFrame calls f with each frame of buf[:n], frames back to back as a
// ReadFrame returns them (NextFrame).
func EachFrame(buf []byte, n int, f func(frame []byte)) {
	for in := buf[:n]; len(in) > 0; {
		var fr []byte
		fr, in = NextFrame(in)
		f(fr)
	}
}

// NextFrame splits the first frame off b, the frames a ReadFrame returned
// back to back: its packet is as long as its IP header says. When b does
// not say (too short, not IP, a length past b's end), all of b is one frame
// (which Check will refuse if it is not one).
func NextFrame(b []byte) (frame, rest []byte) {
	if len(b) <= VnetHdrLen {
		return b, nil
	}
	size := ipPacketSize(b[VnetHdrLen:])
	if size <= 0 || size > len(b)-VnetHdrLen {
		return b, nil
	}
	return b[:VnetHdrLen+size], b[VnetHdrLen+size:]
}

// FrameFilter takes the frames a wrapper read apart, packet by packet as
// the kernel would segment them, and keeps the packets it is told to: a
// wrapper's GRO (package impair drops packets of the kernel's large
// segments one by one). Not safe for concurrent use.
type FrameFilter struct {
	in, seg []byte
	keep    []bool
}

// Filter rewrites the frames in buf[:n] (back to back, NextFrame) into
// buf, keeping the packets keep accepts, and returns the new length. A
// frame whose packets are all kept stays as it is; of one that lost some,
// each run of consecutive packets kept becomes a frame of its own (its IP
// total length, ID and checksum, TCP sequence number, flags and partial
// checksum those of the run, as the kernel's segmentation would make them);
// a frame without GSO is kept or dropped whole. keep sees each packet with
// its headers right but its TCP checksum as the frame had it
// (SegmentHeaders). A frame that fails Check is kept as it is, for the
// reader to count. Runs that would not fit in buf (impossible with a
// gso_size larger than the headers) are dropped and counted in the second
// result.
func (f *FrameFilter) Filter(buf []byte, n int, keep func(pkt []byte) bool) (int, int) {
	if f.in == nil {
		f.in, f.seg = make([]byte, MaxFrame), make([]byte, MaxMTU)
	}
	in := f.in[:copy(f.in, buf[:n])]
	out, lost := 0, 0
	for len(in) > 0 {
		var fr []byte
		fr, in = NextFrame(in)
		h, err := ParseVnetHdr(fr)
		if err != nil || h.Check(fr[VnetHdrLen:]) != nil {
			out += copy(buf[out:], fr)
			continue
		}
		pkt := fr[VnetHdrLen:]
		if !h.IsGSO() {
			if keep(pkt) {
				out += copy(buf[out:], fr)
			}
			continue
		}
		f.keep = f.keep[:0]
		all := true
		_ = segment(h, pkt, f.seg, false, func(p []byte) error {
			k := keep(p)
			f.keep = append(f.keep, k)
			all = all && k
			return nil
		})
		if all {
			out += copy(buf[out:], fr)
			continue
		}
		for i := 0; i < len(f.keep); {
			if !f.keep[i] {
				i++
				continue
			}
			j := i + 1
			for j < len(f.keep) && f.keep[j] {
				j++
			}
			w, ok := run(buf[out:], h, pkt, i, j, len(f.keep))
			if ok {
				out += w
			} else {
				lost += j - i
			}
			i = j
		}
	}
	return out, lost
}

// run writes, into b, the frame of the packets i to j-1 (of segs) of the
// GSO frame (h, pkt), and returns its length; false if it does not fit.
func run(b []byte, h VnetHdr, pkt []byte, i, j, segs int) (int, bool) {
	ihl, thl, v6, _ := tcpHeaders(pkt)
	hl := ihl + thl
	mss := int(h.GSOSize)
	payload := pkt[hl:]
	from, to := i*mss, min(j*mss, len(payload))
	size := VnetHdrLen + hl + to - from
	if size > len(b) {
		return 0, false
	}
	// hdr_len was the frame's, which may count more than the headers (the
	// kernel's hint: the linear part of its buffer) and more than this run's
	// bytes, which Check refuses: the run's is its headers.
	h.HdrLen = uint16(hl)
	h.Put(b)
	p := b[VnetHdrLen:size]
	copy(p, pkt[:hl])
	copy(p[hl:], payload[from:to])
	fixHeaders(p, pkt, ihl, v6, i, j == segs, from)
	binary.BigEndian.PutUint16(p[ihl+16:], pseudoSum(p, v6, len(p)-ihl))
	return size, true
}
