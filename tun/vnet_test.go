package tun

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

// sum16 is the Internet checksum's one's complement sum of b, computed
// independently of the checksum package the code under test uses.
func sum16(b []byte, initial uint32) uint32 {
	s := initial
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return s
}

// tcpChecksumOK verifies the TCP checksum of an IPv4 or IPv6 packet by
// recomputation.
func tcpChecksumOK(pkt []byte) bool {
	if pkt[0]>>4 == 6 {
		t := pkt[40:]
		var ph [40]byte
		copy(ph[0:32], pkt[8:40])
		binary.BigEndian.PutUint32(ph[32:], uint32(len(t)))
		ph[39] = 6
		return sum16(t, sum16(ph[:], 0)) == 0xffff
	}
	ihl := int(pkt[0]&0xf) * 4
	t := pkt[ihl:]
	var ph [12]byte
	copy(ph[0:8], pkt[12:20])
	ph[9] = 6
	binary.BigEndian.PutUint16(ph[10:], uint16(len(t)))
	return sum16(t, sum16(ph[:], 0)) == 0xffff
}

// ipChecksumOK verifies an IPv4 header's checksum; IPv6 has none.
func ipChecksumOK(pkt []byte) bool {
	return pkt[0]>>4 == 6 || sum16(pkt[:int(pkt[0]&0xf)*4], 0) == 0xffff
}

// tcp6Packet is tcp4Packet over IPv6: 2001:db8::2 -> 2001:db8::1, hop limit
// 64, no extension headers.
func tcp6Packet(seq uint32, flags byte, payload []byte, partial bool) []byte {
	v4 := tcp4Packet(seq, flags, payload, false)
	t := v4[20:]
	p := make([]byte, 40+len(t))
	p[0] = 6 << 4
	binary.BigEndian.PutUint16(p[4:], uint16(len(t)))
	p[6], p[7] = 6, 64
	src := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
	dst := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	copy(p[8:], src[:])
	copy(p[24:], dst[:])
	copy(p[40:], t)
	tt := p[40:]
	ps := PseudoSum6(src, dst, len(tt))
	tt[16], tt[17] = 0, 0
	if partial {
		binary.BigEndian.PutUint16(tt[16:], ps)
	} else {
		binary.BigEndian.PutUint16(tt[16:], ^uint16(sum16(tt, uint32(ps))))
	}
	return p
}

// TestSegmentIPv6: a TCPv6 GSO frame splits into packets whose payload
// lengths, sequence numbers, flags and checksums are those the packets
// built independently have.
func TestSegmentIPv6(t *testing.T) {
	payload := make([]byte, 2500)
	for i := range payload {
		payload[i] = byte(i * 5)
	}
	frame := tcp6Packet(77, 0x18|0x01, payload, true)
	h := VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv6, HdrLen: 72, GSOSize: 1200, CsumStart: 40, CsumOffset: 16}
	if err := h.Check(frame); err != nil {
		t.Fatal(err)
	}
	if v4 := (VnetHdr{Flags: 1, GSOType: GSOTCPv4, GSOSize: 1200, CsumStart: 40, CsumOffset: 16}); v4.Check(frame) == nil {
		t.Fatal("Check took an IPv6 packet as GSOTCPv4")
	}
	sizes, flags := []int{1200, 1200, 100}, []byte{0x10, 0x10, 0x19}
	i, off := 0, 0
	if err := Segment(h, frame, make([]byte, MaxMTU), func(p []byte) error {
		want := tcp6Packet(77+uint32(off), flags[i], payload[off:off+sizes[i]], false)
		if !bytes.Equal(p, want) || !tcpChecksumOK(p) {
			t.Errorf("packet %d:\n% x\nwant\n% x", i, p[:80], want[:80])
		}
		off += sizes[i]
		i++
		return nil
	}); err != nil || i != 3 {
		t.Fatalf("%d packets, %v", i, err)
	}
}

// tcp4Packet builds a TCP/IPv4 packet: 198.18.0.2:80 -> 198.18.0.1:40000,
// seq, the given flags, a 12-byte timestamp option (NOP, NOP, TS), and
// payload; its TCP checksum full when partial is false, else the
// pseudo-header sum (as a frame with NeedsCsum carries it).
func tcp4Packet(seq uint32, flags byte, payload []byte, partial bool) []byte {
	const ihl, thl = 20, 32
	p := make([]byte, ihl+thl+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	binary.BigEndian.PutUint16(p[4:], 0x1234)
	p[6] = 0x40 // DF
	p[8], p[9] = 64, 6
	copy(p[12:], []byte{198, 18, 0, 2, 198, 18, 0, 1})
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum16(p[:ihl], 0)))
	t := p[ihl:]
	binary.BigEndian.PutUint16(t[0:], 80)
	binary.BigEndian.PutUint16(t[2:], 40000)
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint32(t[8:], 777)
	t[12] = thl / 4 << 4
	t[13] = flags
	binary.BigEndian.PutUint16(t[14:], 512)
	copy(t[20:], []byte{1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 9})
	copy(t[thl:], payload)
	ps := PseudoSum4([4]byte{198, 18, 0, 2}, [4]byte{198, 18, 0, 1}, len(t))
	if partial {
		binary.BigEndian.PutUint16(t[16:], ps)
	} else {
		binary.BigEndian.PutUint16(t[16:], ^uint16(sum16(t, uint32(ps))))
	}
	return p
}

func TestVnetHdrRoundTrip(t *testing.T) {
	h := VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 52, GSOSize: 1448, CsumStart: 20, CsumOffset: 16}
	var b [VnetHdrLen]byte
	h.Put(b[:])
	want := []byte{1, 1, 52, 0, 0xa8, 0x05, 20, 0, 16, 0} // little-endian 16-bit fields
	if !bytes.Equal(b[:], want) {
		t.Fatalf("Put: % x, want % x", b, want)
	}
	got, err := ParseVnetHdr(b[:])
	if err != nil || got != h {
		t.Fatalf("ParseVnetHdr = %+v, %v; want %+v", got, err, h)
	}
	if _, err := ParseVnetHdr(b[:9]); !errors.Is(err, ErrBadVnetHdr) {
		t.Fatalf("9 bytes: %v, want ErrBadVnetHdr", err)
	}
}

func TestVnetHdrCheck(t *testing.T) {
	pkt := tcp4Packet(1000, 0x18, bytes.Repeat([]byte{'x'}, 3000), true)
	good := VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 52, GSOSize: 1448, CsumStart: 20, CsumOffset: 16}
	if err := good.Check(pkt); err != nil {
		t.Fatalf("good header: %v", err)
	}
	ecn := good
	ecn.GSOType |= GSOECN
	if err := ecn.Check(pkt); err != nil {
		t.Fatalf("ECN bit: %v", err)
	}
	short := append([]byte(nil), pkt...)
	binary.BigEndian.PutUint16(short[2:], uint16(len(pkt)-1)) // IP says one byte less than the frame
	for _, c := range []struct {
		name string
		h    VnetHdr
		pkt  []byte
		want error
	}{
		{"unknown flag", VnetHdr{Flags: 4}, pkt, ErrBadVnetHdr},
		{"gso_size 0", VnetHdr{Flags: 1, GSOType: GSOTCPv4, CsumStart: 20, CsumOffset: 16}, pkt, ErrVnetGSO},
		{"UDP GSO", VnetHdr{Flags: 1, GSOType: GSOUDPL4, GSOSize: 1000, CsumStart: 20, CsumOffset: 6}, pkt, ErrVnetGSO},
		{"TCPv6 GSO on IPv4", VnetHdr{Flags: 1, GSOType: GSOTCPv6, GSOSize: 1000, CsumStart: 20, CsumOffset: 16}, pkt, ErrVnetGSO},
		{"unknown type", VnetHdr{GSOType: 9}, pkt, ErrVnetGSO},
		{"larger than announced", good, short, ErrVnetGSO},
		{"hdr_len past the end", VnetHdr{Flags: 1, GSOType: GSOTCPv4, HdrLen: 60000, GSOSize: 1448, CsumStart: 20, CsumOffset: 16}, pkt, ErrVnetGSO},
		{"GSO without NEEDS_CSUM", VnetHdr{GSOType: GSOTCPv4, GSOSize: 1448}, pkt, ErrVnetCsum},
		{"GSO csum not TCP's", VnetHdr{Flags: 1, GSOType: GSOTCPv4, GSOSize: 1448, CsumStart: 20, CsumOffset: 6}, pkt, ErrVnetCsum},
		{"csum past the end", VnetHdr{Flags: 1, CsumStart: uint16(len(pkt) - 1), CsumOffset: 0}, pkt, ErrVnetCsum},
		{"odd csum_offset", VnetHdr{Flags: 1, CsumStart: 20, CsumOffset: 15}, pkt, ErrVnetCsum},
		{"GSO of a short packet", good, pkt[:30], ErrBadVnetHdr},
	} {
		if err := c.h.Check(c.pkt); !errors.Is(err, c.want) {
			t.Errorf("%s: Check = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCompleteChecksum(t *testing.T) {
	full := tcp4Packet(5, 0x18, []byte("hello, world!"), false)
	part := tcp4Packet(5, 0x18, []byte("hello, world!"), true)
	h := VnetHdr{Flags: VnetFlagNeedsCsum, CsumStart: 20, CsumOffset: 16}
	if err := h.Check(part); err != nil {
		t.Fatal(err)
	}
	CompleteChecksum(h, part)
	if !bytes.Equal(part, full) || !tcpChecksumOK(part) {
		t.Fatalf("completed:\n% x\nwant\n% x", part, full)
	}
}

// TestCompleteChecksumZero: a UDP datagram over IPv6 whose checksum the
// kernel left partial and whose completed checksum comes to zero gets
// 0xffff, as Linux's skb_checksum_help writes it (a zero UDP checksum over
// IPv6 is invalid, RFC 8200 8.1: the stack dropped such a datagram, one in
// 65,536, as BadUDPChecksum; TestForward lost its echo to it), and verifies.
func TestCompleteChecksumZero(t *testing.T) {
	src := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	dst := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 15: 0x0b}
	payload := []byte("....a datagram of the test")
	udpLen := 8 + len(payload)
	pkt := make([]byte, 40+udpLen)
	pkt[0] = 0x60
	binary.BigEndian.PutUint16(pkt[4:], uint16(udpLen))
	pkt[6], pkt[7] = 17, 64
	copy(pkt[8:], src[:])
	copy(pkt[24:], dst[:])
	u := pkt[40:]
	binary.BigEndian.PutUint16(u[0:], 49596)
	binary.BigEndian.PutUint16(u[2:], 9001)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	copy(u[8:], payload)
	pseudo := checksum.Checksum(src[:], 0)
	pseudo = checksum.Checksum(dst[:], pseudo)
	pseudo = checksum.Combine(pseudo, checksum.Combine(uint16(udpLen), 17))
	h := VnetHdr{Flags: VnetFlagNeedsCsum, CsumStart: 40, CsumOffset: 6}
	found := false
	for w := range 1 << 16 { // the payload word that makes the checksum zero
		binary.BigEndian.PutUint16(u[8:], uint16(w))
		binary.BigEndian.PutUint16(u[6:], pseudo) // partial: the pseudo-header's sum
		if ^checksum.Checksum(u, 0) == 0 {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("no payload gives a zero checksum")
	}
	if err := h.Check(pkt); err != nil {
		t.Fatal(err)
	}
	CompleteChecksum(h, pkt)
	if c := binary.BigEndian.Uint16(u[6:]); c != 0xffff {
		t.Fatalf("completed checksum %#04x, want 0xffff", c)
	}
	if v := checksum.Checksum(u, pseudo); v != 0xffff {
		t.Fatalf("the completed datagram does not verify: sum %#04x", v)
	}
}

func TestSegment(t *testing.T) {
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	const seq = 0xfffff000                                  // wraps within the frame
	frame := tcp4Packet(seq, 0x80|0x18|0x01, payload, true) // CWR, ACK, PSH, FIN
	h := VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 52, GSOSize: 1448, CsumStart: 20, CsumOffset: 16}
	if n := SegmentCount(h, frame); n != 3 {
		t.Fatalf("SegmentCount = %d, want 3", n)
	}
	var got [][]byte
	scratch := make([]byte, MaxMTU)
	if err := Segment(h, frame, scratch, func(p []byte) error {
		got = append(got, append([]byte(nil), p...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sizes := []int{1448, 1448, 104}
	flags := []byte{0x80 | 0x10, 0x10, 0x18 | 0x01}
	if len(got) != 3 {
		t.Fatalf("%d segments, want 3", len(got))
	}
	off := 0
	for i, p := range got {
		// The packet TSO would send, built independently.
		want := tcp4Packet(seq+uint32(off), flags[i], payload[off:off+sizes[i]], false)
		binary.BigEndian.PutUint16(want[4:], 0x1234+uint16(i))
		want[10], want[11] = 0, 0
		binary.BigEndian.PutUint16(want[10:], ^uint16(sum16(want[:20], 0)))
		if !bytes.Equal(p, want) {
			t.Errorf("segment %d:\n% x\nwant\n% x", i, p[:60], want[:60])
		}
		if !ipChecksumOK(p) || !tcpChecksumOK(p) {
			t.Errorf("segment %d: checksums do not verify", i)
		}
		off += sizes[i]
	}

	// SegmentHeaders: the same headers, the checksum left alone.
	i := 0
	if err := SegmentHeaders(h, frame, scratch, func(p []byte) error {
		if !bytes.Equal(p[:36], got[i][:36]) || !bytes.Equal(p[38:], got[i][38:]) || !bytes.Equal(p[36:38], frame[36:38]) {
			t.Errorf("SegmentHeaders %d differs from Segment's but for the TCP checksum", i)
		}
		i++
		return nil
	}); err != nil || i != 3 {
		t.Fatalf("SegmentHeaders: %d segments, %v", i, err)
	}

	// A frame that is not GSO: one packet, its checksum completed, the
	// frame itself untouched.
	one := tcp4Packet(9, 0x18, payload[:100], true)
	orig := append([]byte(nil), one...)
	n := 0
	fr := make([]byte, VnetHdrLen, VnetHdrLen+len(one))
	VnetHdr{Flags: VnetFlagNeedsCsum, CsumStart: 20, CsumOffset: 16}.Put(fr)
	fr = append(fr, one...)
	if err := SplitFrame(fr, scratch, true, func(p []byte) error {
		n++
		if !tcpChecksumOK(p) {
			t.Error("SplitFrame: checksum not completed")
		}
		return nil
	}); err != nil || n != 1 || !bytes.Equal(fr[VnetHdrLen:], orig) {
		t.Fatalf("SplitFrame: %d packets, %v, frame changed %v", n, err, !bytes.Equal(fr[VnetHdrLen:], orig))
	}

	// An error from emit stops Segment.
	stop := errors.New("stop")
	n = 0
	if err := Segment(h, frame, scratch, func([]byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Segment after an error: %d calls, %v", n, err)
	}
}

// TestFrameFilter: of a GSO frame of four packets, the second dropped, two
// frames are left back to back (packets 1, and 3-4), whose packets are
// byte for byte those of the original frame; a frame kept whole stays as it
// was, and one dropped whole leaves nothing.
func TestFrameFilter(t *testing.T) {
	payload := testPattern(4000, 3)
	h := VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv4, HdrLen: 52, GSOSize: 1100, CsumStart: 20, CsumOffset: 16}
	frame := withVnetHdr(h, tcp4Packet(100, 0x80|0x18|0x01, payload, true))
	var want [][]byte
	scratch := make([]byte, MaxMTU)
	if err := SplitFrame(frame, scratch, true, func(p []byte) error {
		want = append(want, append([]byte(nil), p...))
		return nil
	}); err != nil || len(want) != 4 {
		t.Fatalf("%d packets, %v", len(want), err)
	}
	seq := func(p []byte) uint32 { return binary.BigEndian.Uint32(p[24:]) }

	var f FrameFilter
	buf := make([]byte, MaxFrame)
	n := copy(buf, frame)
	seen := 0
	m, lost := f.Filter(buf, n, func(p []byte) bool {
		seen++
		return seq(p) != seq(want[1])
	})
	if seen != 4 || lost != 0 {
		t.Fatalf("keep saw %d packets, %d lost", seen, lost)
	}
	frames, got := splitFrames(t, buf[:m], scratch)
	if frames != 2 || len(got) != 3 {
		t.Fatalf("%d frames of %d packets, want 2 of 3", frames, len(got))
	}
	for i, w := range [][]byte{want[0], want[2], want[3]} {
		if !bytes.Equal(got[i], w) {
			t.Errorf("packet %d:\n% x\nwant\n% x", i, got[i][:60], w[:60])
		}
	}

	// Kept whole: unchanged; dropped whole: nothing.
	n = copy(buf, frame)
	if m, _ := f.Filter(buf, n, func([]byte) bool { return true }); m != n || !bytes.Equal(buf[:m], frame) {
		t.Fatal("a frame kept whole changed")
	}
	if m, _ := f.Filter(buf, n, func([]byte) bool { return false }); m != 0 {
		t.Fatalf("a frame dropped whole left %d bytes", m)
	}
}

// TestSplitFrameIPv6: what the wrappers do with a TCPv6 GSO frame (the
// stack's, on a TUN with TSO6). SplitFrame gives, byte for byte, the
// packets built separately (with their checksums, or, for a look, the
// frame's partial one), and FrameFilter, dropping the second of four,
// leaves two frames whose packets are again those.
func TestSplitFrameIPv6(t *testing.T) {
	payload := testPattern(4000, 11)
	h := VnetHdr{Flags: VnetFlagNeedsCsum, GSOType: GSOTCPv6, HdrLen: 72, GSOSize: 1100, CsumStart: 40, CsumOffset: 16}
	pkt := tcp6Packet(0xfffffc00, 0x80|0x18|0x01, payload, true) // CWR, ACK, PSH, FIN; seq wraps
	frame := withVnetHdr(h, pkt)
	sizes := []int{1100, 1100, 1100, 700}
	flags := []byte{0x80 | 0x10, 0x10, 0x10, 0x18 | 0x01}
	var want [][]byte
	off := 0
	for i, n := range sizes {
		want = append(want, tcp6Packet(0xfffffc00+uint32(off), flags[i], payload[off:off+n], false))
		off += n
	}
	scratch := make([]byte, MaxMTU)
	for _, csum := range []bool{true, false} {
		i := 0
		if err := SplitFrame(frame, scratch, csum, func(p []byte) error {
			w := append([]byte(nil), want[i]...)
			if !csum {
				copy(w[56:58], pkt[56:58]) // the frame's partial checksum
			}
			if !bytes.Equal(p, w) || (csum && !tcpChecksumOK(p)) {
				t.Errorf("csum %v, packet %d:\n% x\nwant\n% x", csum, i, p[:80], w[:80])
			}
			i++
			return nil
		}); err != nil || i != len(want) {
			t.Fatalf("csum %v: %d packets, %v", csum, i, err)
		}
	}

	var f FrameFilter
	buf := make([]byte, MaxFrame)
	n := copy(buf, frame)
	m, lost := f.Filter(buf, n, func(p []byte) bool { return !bytes.Equal(p[44:48], want[1][44:48]) })
	if lost != 0 {
		t.Fatalf("%d lost", lost)
	}
	EachFrame(buf, m, func(fr []byte) {
		if h, _ := ParseVnetHdr(fr); h.GSOType != GSOTCPv6 && len(fr) > VnetHdrLen+72+1100 {
			t.Errorf("a frame of several packets of type %#x", h.GSOType)
		}
	})
	frames, got := splitFrames(t, buf[:m], scratch)
	if frames != 2 || len(got) != 3 {
		t.Fatalf("%d frames of %d packets, want 2 of 3", frames, len(got))
	}
	for i, w := range [][]byte{want[0], want[2], want[3]} {
		if !bytes.Equal(got[i], w) {
			t.Errorf("filtered packet %d:\n% x\nwant\n% x", i, got[i][:80], w[:80])
		}
	}
}

// splitFrames splits the frames back to back in b (EachFrame) into their
// packets (SplitFrame, checksums completed), and returns how many frames
// there were and the packets.
func splitFrames(t *testing.T, b, scratch []byte) (int, [][]byte) {
	t.Helper()
	var got [][]byte
	frames := 0
	EachFrame(b, len(b), func(fr []byte) {
		frames++
		if err := SplitFrame(fr, scratch, true, func(p []byte) error {
			got = append(got, append([]byte(nil), p...))
			return nil
		}); err != nil {
			t.Fatalf("frame %d: %v", frames, err)
		}
	})
	return frames, got
}

// testPattern is n bytes of i*k+1: not all one byte, so that a misplaced
// byte shows.
func testPattern(n, k int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*k + 1)
	}
	return b
}

// withVnetHdr is the frame of h and a copy of pkt.
func withVnetHdr(h VnetHdr, pkt []byte) []byte {
	f := make([]byte, VnetHdrLen, VnetHdrLen+len(pkt))
	h.Put(f)
	return append(f, pkt...)
}
