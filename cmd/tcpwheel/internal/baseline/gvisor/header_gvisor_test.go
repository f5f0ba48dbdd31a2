package gvisor

// The library's own tcp/seqnum and internal/tcpip/{header,checksum} took the
// place of gVisor's packages under the same identifiers (the library does not
// import gVisor). These tests hold them to gVisor's on random input: they live
// here, in the tool's module, because only it may import gVisor.

import (
	"bytes"
	"math/rand/v2"
	"testing"

	gtcpip "gvisor.dev/gvisor/pkg/tcpip"
	gchecksum "gvisor.dev/gvisor/pkg/tcpip/checksum"
	gheader "gvisor.dev/gvisor/pkg/tcpip/header"
	gseqnum "gvisor.dev/gvisor/pkg/tcpip/seqnum"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

func FuzzChecksumLikeGvisor(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff}, uint16(0xffff))
	f.Add(make([]byte, 1500), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, init uint16) {
		if got, want := checksum.Checksum(b, init), gchecksum.Checksum(b, init); got != want {
			t.Fatalf("Checksum(%x, %#x) = %#04x, gVisor %#04x", b, init, got, want)
		}
		if len(b) >= 2 {
			a, c := checksum.Checksum(b[:2], 0), checksum.Checksum(b[2:], 0)
			if got, want := checksum.Combine(a, c), gchecksum.Combine(a, c); got != want {
				t.Fatalf("Combine(%#x, %#x) = %#x, gVisor %#x", a, c, got, want)
			}
		}
	})
}

func addrs(r *rand.Rand, v6 bool) (tcpip.Address, tcpip.Address, gtcpip.Address, gtcpip.Address) {
	n := 4
	if v6 {
		n = 16
	}
	s, d := make([]byte, n), make([]byte, n)
	for i := range s {
		s[i], d[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	return tcpip.AddrFromSlice(s), tcpip.AddrFromSlice(d), gtcpip.AddrFromSlice(s), gtcpip.AddrFromSlice(d)
}

// TestEncodeLikeGvisor writes the same random IPv4, IPv6, TCP and UDP headers
// and ICMPv6 checksums with both packages and compares the bytes, then reads
// them back with both.
func TestEncodeLikeGvisor(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	u16 := func() uint16 { return uint16(r.Uint32()) }
	for i := 0; i < 2000; i++ {
		v6 := i%2 == 1
		src, dst, gsrc, gdst := addrs(r, v6)
		payload := make([]byte, r.IntN(64))
		for j := range payload {
			payload[j] = byte(r.Uint32())
		}
		ours, theirs := make([]byte, 40+24+len(payload)), make([]byte, 40+24+len(payload))
		ihl := header.IPv4MinimumSize
		if v6 {
			ihl = header.IPv6MinimumSize
			f := header.IPv6Fields{TrafficClass: uint8(r.Uint32()), FlowLabel: r.Uint32() & 0xfffff, PayloadLength: uint16(24 + len(payload)), TransportProtocol: header.TCPProtocolNumber, HopLimit: uint8(r.Uint32()), SrcAddr: src, DstAddr: dst}
			header.IPv6(ours).Encode(&f)
			gheader.IPv6(theirs).Encode(&gheader.IPv6Fields{TrafficClass: f.TrafficClass, FlowLabel: f.FlowLabel, PayloadLength: f.PayloadLength, TransportProtocol: gtcpip.TransportProtocolNumber(f.TransportProtocol), HopLimit: f.HopLimit, SrcAddr: gsrc, DstAddr: gdst})
		} else {
			ours, theirs = ours[20:], theirs[20:]
			f := header.IPv4Fields{TOS: uint8(r.Uint32()), TotalLength: uint16(len(ours)), ID: u16(), Flags: uint8(r.IntN(4)), FragmentOffset: u16() &^ 7, TTL: uint8(r.Uint32()), Protocol: uint8(header.TCPProtocolNumber), SrcAddr: src, DstAddr: dst}
			header.IPv4(ours).Encode(&f)
			header.IPv4(ours).SetChecksum(^header.IPv4(ours).CalculateChecksum())
			gheader.IPv4(theirs).Encode(&gheader.IPv4Fields{TOS: f.TOS, TotalLength: f.TotalLength, ID: f.ID, Flags: f.Flags, FragmentOffset: f.FragmentOffset, TTL: f.TTL, Protocol: f.Protocol, SrcAddr: gsrc, DstAddr: gdst})
			gheader.IPv4(theirs).SetChecksum(^gheader.IPv4(theirs).CalculateChecksum())
		}
		tf := header.TCPFields{SrcPort: u16(), DstPort: u16(), SeqNum: r.Uint32(), AckNum: r.Uint32(), DataOffset: 24, Flags: header.TCPFlags(r.Uint32()), WindowSize: u16(), UrgentPointer: u16()}
		header.TCP(ours[ihl:]).Encode(&tf)
		gheader.TCP(theirs[ihl:]).Encode(&gheader.TCPFields{SrcPort: tf.SrcPort, DstPort: tf.DstPort, SeqNum: tf.SeqNum, AckNum: tf.AckNum, DataOffset: tf.DataOffset, Flags: gheader.TCPFlags(tf.Flags), WindowSize: tf.WindowSize, UrgentPointer: tf.UrgentPointer})
		copy(ours[ihl+24:], payload)
		copy(theirs[ihl+24:], payload)
		x := header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(24+len(payload)))
		gx := gheader.PseudoHeaderChecksum(gheader.TCPProtocolNumber, gsrc, gdst, uint16(24+len(payload)))
		if x != gx {
			t.Fatalf("pseudo-header sum %#x, gVisor %#x", x, gx)
		}
		header.TCP(ours[ihl:]).SetChecksum(^header.TCP(ours[ihl:]).CalculateChecksum(checksum.Checksum(payload, x)))
		gheader.TCP(theirs[ihl:]).SetChecksum(^gheader.TCP(theirs[ihl:]).CalculateChecksum(gchecksum.Checksum(payload, gx)))
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("packet %d:\n ours %x\ngVisor %x", i, ours, theirs)
		}
		ot, gt := header.TCP(ours[ihl:]), gheader.TCP(theirs[ihl:])
		if ot.Flags().String() != gt.Flags().String() || ot.DataOffset() != gt.DataOffset() || ot.SequenceNumber() != gt.SequenceNumber() ||
			ot.IsChecksumValid(src, dst, checksum.Checksum(payload, 0), uint16(len(payload))) != gt.IsChecksumValid(gsrc, gdst, gchecksum.Checksum(payload, 0), uint16(len(payload))) {
			t.Fatalf("TCP reads differ on %x", ours)
		}
		if v6 {
			ic, gic := header.ICMPv6(ours[ihl:]), gheader.ICMPv6(theirs[ihl:])
			a := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: ic[:8], Src: src, Dst: dst, PayloadCsum: checksum.Checksum(ic[8:], 0), PayloadLen: len(ic) - 8})
			b := gheader.ICMPv6Checksum(gheader.ICMPv6ChecksumParams{Header: gic[:8], Src: gsrc, Dst: gdst, PayloadCsum: gchecksum.Checksum(gic[8:], 0), PayloadLen: len(gic) - 8})
			if a != b {
				t.Fatalf("ICMPv6Checksum %#x, gVisor %#x", a, b)
			}
		} else {
			oi, gi := header.IPv4(ours), gheader.IPv4(theirs)
			if oi.Flags() != gi.Flags() || oi.FragmentOffset() != gi.FragmentOffset() || oi.More() != gi.More() || oi.PayloadLength() != gi.PayloadLength() {
				t.Fatalf("IPv4 reads differ on %x", ours[:20])
			}
		}
		uf := header.UDPFields{SrcPort: u16(), DstPort: u16(), Length: u16(), Checksum: u16()}
		header.UDP(ours[ihl:]).Encode(&uf)
		gheader.UDP(theirs[ihl:]).Encode(&gheader.UDPFields{SrcPort: uf.SrcPort, DstPort: uf.DstPort, Length: uf.Length, Checksum: uf.Checksum})
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("UDP header %d:\n ours %x\ngVisor %x", i, ours, theirs)
		}
	}
}

// FuzzIsValidLikeGvisor: both packages accept the same IPv4 and IPv6 packets.
func FuzzIsValidLikeGvisor(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := header.IPv4(b).IsValid(len(b)), gheader.IPv4(b).IsValid(len(b)); got != want {
			t.Fatalf("IPv4 IsValid(%x) = %v, gVisor %v", b, got, want)
		}
		if got, want := header.IPv6(b).IsValid(len(b)), gheader.IPv6(b).IsValid(len(b)); got != want {
			t.Fatalf("IPv6 IsValid(%x) = %v, gVisor %v", b, got, want)
		}
	})
}

func FuzzSeqnumLikeGvisor(f *testing.F) {
	f.Add(uint32(0), uint32(1), uint32(2))
	f.Add(uint32(0xffffffff), uint32(0x80000000), uint32(5))
	f.Fuzz(func(t *testing.T, a, b, c uint32) {
		v, w, x := seqnum.Value(a), seqnum.Value(b), seqnum.Value(c)
		gv, gw, gx := gseqnum.Value(a), gseqnum.Value(b), gseqnum.Value(c)
		if v.LessThan(w) != gv.LessThan(gw) || v.LessThanEq(w) != gv.LessThanEq(gw) || v.InRange(w, x) != gv.InRange(gw, gx) ||
			v.InWindow(w, seqnum.Size(c)) != gv.InWindow(gw, gseqnum.Size(c)) || uint32(v.Add(seqnum.Size(c))) != uint32(gv.Add(gseqnum.Size(c))) ||
			uint32(v.Size(w)) != uint32(gv.Size(gw)) {
			t.Fatalf("seqnum differs from gVisor's for %#x %#x %#x", a, b, c)
		}
	})
}
