package header

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
)

// The expected packets were written by gVisor's tcpip/header from the same
// fields; cmd/tcpwheel/internal/baseline/gvisor/header_gvisor_test.go compares
// the two packages on random fields as well (only the tool's module may import
// gVisor).
const (
	wantV4TCP  = "450000311234400040069c6bc6120001c61200029c400050deadbeef010203046012ffff89e30000020405b468656c6c6f"
	wantV6UDP  = "610abcde000b114020010db800000000000000000000000120010db800000000000000000000000214e90035000bcae2616263"
	wantV6ICMP = "60000000000c3aff20010db800000000000000000000000120010db8000000000000000000000002800045630007000970696e67"
)

var (
	src4 = tcpip.AddrFrom4([4]byte{198, 18, 0, 1})
	dst4 = tcpip.AddrFrom4([4]byte{198, 18, 0, 2})
	src6 = tcpip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1})
	dst6 = tcpip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2})
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeIPv4TCP(t *testing.T) {
	pkt := make([]byte, 20+24+5)
	ip := IPv4(pkt)
	ip.Encode(&IPv4Fields{TotalLength: uint16(len(pkt)), ID: 0x1234, Flags: IPv4FlagDontFragment, TTL: 64, Protocol: uint8(TCPProtocolNumber), SrcAddr: src4, DstAddr: dst4})
	ip.SetChecksum(^ip.CalculateChecksum())
	tcp := TCP(pkt[20:])
	tcp.Encode(&TCPFields{SrcPort: 40000, DstPort: 80, SeqNum: 0xdeadbeef, AckNum: 0x01020304, DataOffset: 24, Flags: TCPFlagSyn | TCPFlagAck, WindowSize: 65535})
	copy(pkt[40:], []byte{2, 4, 0x05, 0xb4})
	copy(pkt[44:], "hello")
	x := PseudoHeaderChecksum(TCPProtocolNumber, src4, dst4, uint16(len(pkt)-20))
	x = checksum.Checksum(pkt[44:], x)
	tcp.SetChecksum(^tcp.CalculateChecksum(x))
	if got := hex.EncodeToString(pkt); got != wantV4TCP {
		t.Fatalf("packet\n got %s\nwant %s", got, wantV4TCP)
	}
}

func TestParseIPv4TCP(t *testing.T) {
	pkt := mustHex(t, wantV4TCP)
	ip := IPv4(pkt)
	if !ip.IsValid(len(pkt)) || !ip.IsChecksumValid() {
		t.Fatal("valid packet reported invalid")
	}
	if ip.HeaderLength() != 20 || ip.TotalLength() != 49 || ip.ID() != 0x1234 || ip.Flags() != IPv4FlagDontFragment ||
		ip.More() || ip.FragmentOffset() != 0 || ip.TTL() != 64 || ip.TransportProtocol() != TCPProtocolNumber ||
		ip.SourceAddress() != src4 || ip.DestinationAddress() != dst4 || ip.PayloadLength() != 29 ||
		!bytes.Equal(ip.SourceAddressSlice(), src4.AsSlice()) || !bytes.Equal(ip.DestinationAddressSlice(), dst4.AsSlice()) {
		t.Errorf("IPv4 fields wrong: % x", pkt[:20])
	}
	tcp := TCP(ip.Payload())
	if tcp.SourcePort() != 40000 || tcp.DestinationPort() != 80 || tcp.SequenceNumber() != 0xdeadbeef ||
		tcp.AckNumber() != 0x01020304 || tcp.DataOffset() != 24 || tcp.Flags() != TCPFlagSyn|TCPFlagAck ||
		tcp.WindowSize() != 65535 || tcp.UrgentPointer() != 0 || string(tcp.Payload()) != "hello" ||
		!bytes.Equal(tcp.Options(), []byte{2, 4, 0x05, 0xb4}) {
		t.Errorf("TCP fields wrong: % x", tcp)
	}
	if !tcp.IsChecksumValid(src4, dst4, checksum.Checksum(tcp.Payload(), 0), uint16(len(tcp.Payload()))) {
		t.Error("TCP checksum reported invalid")
	}
	if tcp.Flags().String() != " S  A   " || !tcp.Flags().Contains(TCPFlagSyn) || tcp.Flags().Contains(TCPFlagSyn|TCPFlagFin) ||
		!tcp.Flags().Intersects(TCPFlagSyn|TCPFlagFin) {
		t.Errorf("flags %q", tcp.Flags())
	}
	pkt[30] ^= 1 // one bit of the TCP sequence number
	if tcp.IsChecksumValid(src4, dst4, checksum.Checksum(tcp.Payload(), 0), uint16(len(tcp.Payload()))) {
		t.Error("corrupt TCP segment passes its checksum")
	}
	pkt[8]-- // TTL
	if ip.IsChecksumValid() {
		t.Error("corrupt IPv4 header passes its checksum")
	}
}

// TestIPv4Wikipedia is the header checksum example of Wikipedia's "IPv4
// header checksum" article.
func TestIPv4Wikipedia(t *testing.T) {
	ip := IPv4(make([]byte, 20))
	ip.Encode(&IPv4Fields{TotalLength: 0x73, Flags: IPv4FlagDontFragment, TTL: 64, Protocol: uint8(UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{192, 168, 0, 1}), DstAddr: tcpip.AddrFrom4([4]byte{192, 168, 0, 199})})
	ip.SetChecksum(^ip.CalculateChecksum())
	if ip.Checksum() != 0xb861 {
		t.Errorf("checksum %#04x, want 0xb861", ip.Checksum())
	}
}

func TestFragmentFields(t *testing.T) {
	ip := IPv4(make([]byte, 20))
	ip.SetFlagsFragmentOffset(IPv4FlagMoreFragments, 1480)
	if !ip.More() || ip.FragmentOffset() != 1480 || ip.Flags() != IPv4FlagMoreFragments {
		t.Errorf("flags %d offset %d", ip.Flags(), ip.FragmentOffset())
	}
}

func TestEncodeIPv6UDP(t *testing.T) {
	pkt := make([]byte, 40+8+3)
	IPv6(pkt).Encode(&IPv6Fields{TrafficClass: 0x10, FlowLabel: 0xabcde, PayloadLength: 11, TransportProtocol: UDPProtocolNumber, HopLimit: 64, SrcAddr: src6, DstAddr: dst6})
	u := UDP(pkt[40:])
	u.Encode(&UDPFields{SrcPort: 5353, DstPort: 53, Length: 11})
	copy(pkt[48:], "abc")
	x := PseudoHeaderChecksum(UDPProtocolNumber, src6, dst6, 11)
	x = checksum.Checksum(pkt[48:], x)
	u.SetChecksum(^u.CalculateChecksum(x))
	if got := hex.EncodeToString(pkt); got != wantV6UDP {
		t.Fatalf("packet\n got %s\nwant %s", got, wantV6UDP)
	}

	ip := IPv6(pkt)
	tc, fl := ip.TOS()
	if !ip.IsValid(len(pkt)) || tc != 0x10 || fl != 0xabcde || ip.PayloadLength() != 11 || ip.HopLimit() != 64 ||
		ip.TransportProtocol() != UDPProtocolNumber || ip.SourceAddress() != src6 || ip.DestinationAddress() != dst6 ||
		!bytes.Equal(ip.SourceAddressSlice(), src6.AsSlice()) || !bytes.Equal(ip.DestinationAddressSlice(), dst6.AsSlice()) {
		t.Errorf("IPv6 fields wrong: % x", pkt[:40])
	}
	u = UDP(ip.Payload())
	if u.SourcePort() != 5353 || u.DestinationPort() != 53 || u.Length() != 11 || string(u.Payload()) != "abc" ||
		!u.IsChecksumValid(src6, dst6, checksum.Checksum(u.Payload(), 0)) {
		t.Errorf("UDP fields wrong: % x", u)
	}
}

func TestICMPv6Checksum(t *testing.T) {
	pkt := make([]byte, 40+8+4)
	IPv6(pkt).Encode(&IPv6Fields{PayloadLength: 12, TransportProtocol: ICMPv6ProtocolNumber, HopLimit: 255, SrcAddr: src6, DstAddr: dst6})
	ic := ICMPv6(pkt[40:])
	ic.SetType(ICMPv6EchoRequest)
	ic.SetIdent(7)
	ic.SetSequence(9)
	copy(pkt[48:], "ping")
	ic.SetChecksum(ICMPv6Checksum(ICMPv6ChecksumParams{Header: ic[:8], Src: src6, Dst: dst6, PayloadCsum: checksum.Checksum(pkt[48:], 0), PayloadLen: 4}))
	if got := hex.EncodeToString(pkt); got != wantV6ICMP {
		t.Fatalf("packet\n got %s\nwant %s", got, wantV6ICMP)
	}
	// Over the whole message at once, with the checksum in place: the same.
	if got := ICMPv6Checksum(ICMPv6ChecksumParams{Header: ic, Src: src6, Dst: dst6}); got != ic.Checksum() {
		t.Errorf("whole-message checksum %#04x, want %#04x", got, ic.Checksum())
	}
	if ic.Type() != ICMPv6EchoRequest || ic.Code() != 0 || ic.Ident() != 7 || ic.Sequence() != 9 || string(ic.Payload()) != "ping" {
		t.Errorf("ICMPv6 fields wrong: % x", ic)
	}
}

func TestICMPv4(t *testing.T) {
	b := ICMPv4(make([]byte, ICMPv4MinimumSize+2))
	b.SetType(ICMPv4Echo)
	b.SetCode(0)
	b.SetIdent(0x0102)
	b.SetSequence(0x0304)
	copy(b.Payload(), "hi")
	b.SetChecksum(^checksum.Checksum(b, 0))
	if checksum.Checksum(b, 0) != 0xffff || b.Type() != ICMPv4Echo || b.Code() != 0 || b.Ident() != 0x0102 || b.Sequence() != 0x0304 {
		t.Errorf("ICMPv4 % x", b)
	}
	b.SetType(ICMPv4DstUnreachable)
	b.SetCode(ICMPv4FragmentationNeeded)
	b.SetMTU(1400)
	if b.MTU() != 1400 || b.Code() != ICMPv4FragmentationNeeded {
		t.Errorf("MTU %d code %d", b.MTU(), b.Code())
	}
}

func TestIsValid(t *testing.T) {
	v4 := mustHex(t, wantV4TCP)
	v6 := mustHex(t, wantV6UDP)
	for _, c := range []struct {
		name string
		ok   bool
		pkt  func() ([]byte, bool)
	}{
		{"v4 whole", true, func() ([]byte, bool) { return v4, IPv4(v4).IsValid(len(v4)) }},
		{"v4 short", false, func() ([]byte, bool) { return v4, IPv4(v4[:19]).IsValid(19) }},
		{"v4 truncated", false, func() ([]byte, bool) { return v4, IPv4(v4[:40]).IsValid(40) }},
		{"v4 ihl 4", false, func() ([]byte, bool) { p := bytes.Clone(v4); p[0] = 0x44; return p, IPv4(p).IsValid(len(p)) }},
		{"v4 ihl past total", false, func() ([]byte, bool) {
			p := bytes.Clone(v4)
			IPv4(p).SetTotalLength(20)
			p[0] = 0x46
			return p, IPv4(p).IsValid(len(p))
		}},
		{"v4 version 6", false, func() ([]byte, bool) { p := bytes.Clone(v4); p[0] = 0x65; return p, IPv4(p).IsValid(len(p)) }},
		{"v6 whole", true, func() ([]byte, bool) { return v6, IPv6(v6).IsValid(len(v6)) }},
		{"v6 short", false, func() ([]byte, bool) { return v6, IPv6(v6[:39]).IsValid(39) }},
		{"v6 truncated payload", false, func() ([]byte, bool) { return v6, IPv6(v6[:45]).IsValid(45) }},
		{"v6 version 4", false, func() ([]byte, bool) { p := bytes.Clone(v6); p[0] = 0x41; return p, IPv6(p).IsValid(len(p)) }},
	} {
		if _, got := c.pkt(); got != c.ok {
			t.Errorf("%s: IsValid = %v, want %v", c.name, got, c.ok)
		}
	}
	if IPVersion(nil) != -1 || IPVersion(v4) != 4 || IPVersion(v6) != 6 {
		t.Error("IPVersion")
	}
}

// FuzzIPv4 checks that a packet IsValid accepts can be read whole without
// running off its end.
func FuzzIPv4(f *testing.F) {
	f.Add(mustHexF(wantV4TCP))
	f.Fuzz(func(t *testing.T, b []byte) {
		ip := IPv4(b)
		if !ip.IsValid(len(b)) {
			return
		}
		_ = ip.Payload()
		_, _ = ip.SourceAddress(), ip.DestinationAddress()
		_ = ip.CalculateChecksum()
	})
}

func mustHexF(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
