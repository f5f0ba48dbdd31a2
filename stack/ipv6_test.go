package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

var (
	addr6A = netip.MustParseAddr("2001:db8::1")
	addr6B = netip.MustParseAddr("2001:db8::2")
)

// ipv6Packet wraps payload (after the extension headers ext, whose first
// Next Header is first) in an IPv6 header from src to dst, built by
// gVisor's encoder: the stack's own is checked against it.
func ipv6Packet(src, dst netip.Addr, first uint8, ext, payload []byte) []byte {
	pkt := make([]byte, ipv6HeaderLen+len(ext)+len(payload))
	copy(pkt[ipv6HeaderLen:], ext)
	copy(pkt[ipv6HeaderLen+len(ext):], payload)
	header.IPv6(pkt).Encode(&header.IPv6Fields{
		PayloadLength:     uint16(len(ext) + len(payload)),
		TransportProtocol: tcpip.TransportProtocolNumber(first),
		HopLimit:          64,
		SrcAddr:           tcpip.AddrFrom16(src.As16()),
		DstAddr:           tcpip.AddrFrom16(dst.As16()),
	})
	return pkt
}

// icmp6 is an ICMPv6 message from src to dst of type typ with body body
// (after the 4-byte type, code, checksum), its checksum computed by gVisor.
func icmp6(src, dst netip.Addr, typ header.ICMPv6Type, body []byte) []byte {
	b := make([]byte, 4+len(body))
	b[0] = byte(typ)
	copy(b[4:], body)
	m := header.ICMPv6(b)
	m.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: m, Src: tcpip.AddrFrom16(src.As16()), Dst: tcpip.AddrFrom16(dst.As16())}))
	return b
}

// echo6 is an echo request from src to dst, identifier 7, sequence 1.
func echo6(src, dst netip.Addr, ext []byte, first uint8) []byte {
	m := icmp6(src, dst, header.ICMPv6EchoRequest, []byte{0, 7, 0, 1, 'p', 'i', 'n', 'g'})
	if ext == nil {
		first = protoICMPv6
	}
	return ipv6Packet(src, dst, first, ext, m)
}

// udp6Packet is a UDP datagram over IPv6 with a correct checksum.
func udp6Packet(src, dst netip.AddrPort, payload []byte) []byte {
	b := make([]byte, udpHeaderLen+len(payload))
	u := header.UDP(b)
	u.Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(len(b))})
	copy(u.Payload(), payload)
	xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, tcpip.AddrFrom16(src.Addr().As16()), tcpip.AddrFrom16(dst.Addr().As16()), uint16(len(b)))
	sum := ^checksum.Checksum(b, xsum)
	if sum == 0 {
		sum = 0xffff
	}
	u.SetChecksum(sum)
	return ipv6Packet(src.Addr(), dst.Addr(), protoUDP, nil, b)
}

// manual6 is a manual stack on addrB and addr6B, MTU 1500, and its link.
func manual6(t *testing.T) (*Manual, link) {
	t.Helper()
	return manualOn(t, Config{Addr: addrB, Addr6: addr6B})
}

// manualOn is a manual stack of cfg on a pipe of MTU 1500, its clock at 0,
// and its link.
func manualOn(t testing.TB, cfg Config) (*Manual, link) {
	t.Helper()
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	cfg.Device, cfg.Clock = dev, timer.NewManualClock(0)
	m, err := NewManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, link{dev, peer}
}

// TestIPv6EchoExact: a ping gets its reply, byte for byte: the IPv6 header
// as gVisor encodes it (hop limit 64, no flow label), the request's
// identifier, sequence and data, the checksum over the pseudo-header.
func TestIPv6EchoExact(t *testing.T) {
	m, l := manual6(t)
	if err := m.Inject(echo6(addr6A, addr6B, nil, 0)); err != nil {
		t.Fatal(err)
	}
	got := l.read(t)
	want := ipv6Packet(addr6B, addr6A, protoICMPv6, nil, icmp6(addr6B, addr6A, header.ICMPv6EchoReply, []byte{0, 7, 0, 1, 'p', 'i', 'n', 'g'}))
	if !bytes.Equal(got, want) {
		t.Fatalf("reply\n got %x\nwant %x", got, want)
	}
	if st := m.Stats(); st.EchoReplies != 1 || st.PacketsOut != 1 {
		t.Fatalf("EchoReplies %d, PacketsOut %d; want 1, 1", st.EchoReplies, st.PacketsOut)
	}
	// A bad checksum: no reply, counted.
	bad := echo6(addr6A, addr6B, nil, 0)
	bad[len(bad)-1] ^= 1
	m.Inject(bad)
	if st := m.Stats(); st.Drops.BadICMP != 1 || l.sent() != 1 {
		t.Fatalf("bad checksum: BadICMP %d, sent %d; want 1, 1", st.Drops.BadICMP, l.sent())
	}
}

// TestPutIPv6Header: the header the stack builds, against the bytes of RFC
// 8200 3 written out.
func TestPutIPv6Header(t *testing.T) {
	pkt := make([]byte, ipv6HeaderLen+3)
	putIPv6Header(pkt, addr6B, addr6A, protoTCP, 64)
	want := []byte{0x60, 0, 0, 0, 0, 3, 6, 64,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	if !bytes.Equal(pkt[:ipv6HeaderLen], want) {
		t.Fatalf("header\n got %x\nwant %x", pkt[:ipv6HeaderLen], want)
	}
}

// opts is a Hop-by-Hop or Destination Options header: next header nh, the
// options padded with PadN (or Pad1) to a multiple of 8.
func opts(nh uint8, options ...byte) []byte {
	b := append([]byte{nh, 0}, options...)
	switch pad := (8 - len(b)%8) % 8; pad {
	case 0:
	case 1:
		b = append(b, 0)
	default:
		b = append(b, 1, byte(pad-2))
		b = append(b, make([]byte, pad-2)...)
	}
	b[1] = byte(len(b)/8 - 1)
	return b
}

// TestIPv6ExtensionHeaders walks chains good and hostile (RFC 8200 4): the
// good ones reach ICMPv6 (a ping is answered), the bad ones are counted,
// and those RFC 8200 says to answer get a parameter problem with the
// right code and pointer.
func TestIPv6ExtensionHeaders(t *testing.T) {
	long := []byte{}
	for range maxExtHeaders + 1 { // one more than the bound, all Destination Options
		long = append(long, opts(nhDestOpts)...)
	}
	long[len(long)-8] = protoICMPv6
	routing := func(nh, left uint8) []byte { return []byte{nh, 0, 0, left, 0, 0, 0, 0} }
	frag := func(nh uint8, offM uint16) []byte {
		b := []byte{nh, 0, 0, 0, 0, 0, 0, 9}
		binary.BigEndian.PutUint16(b[2:], offM)
		return b
	}
	for _, tc := range []struct {
		name  string
		first uint8
		ext   []byte
		drop  func(*Drops) uint64 // nil: answered
		code  int                 // parameter problem's code, -1 for none
		ptr   uint32
	}{
		{"hop-by-hop with padding", nhHopByHop, opts(protoICMPv6), nil, -1, 0},
		{"router alert skipped", nhHopByHop, opts(protoICMPv6, 5, 2, 0, 0), nil, -1, 0},
		{"unknown option 00: skipped", nhDestOpts, opts(protoICMPv6, 0x1e, 1, 0), nil, -1, 0},
		{"unknown option 01: dropped", nhDestOpts, opts(protoICMPv6, 0x5e, 1, 0), func(d *Drops) uint64 { return d.IPv6UnknownOption }, -1, 0},
		{"unknown option 10: parameter problem", nhDestOpts, opts(protoICMPv6, 0x9e, 1, 0), func(d *Drops) uint64 { return d.IPv6UnknownOption }, 2, 42},
		{"unknown option 11: parameter problem", nhDestOpts, opts(protoICMPv6, 0, 0xde, 0), func(d *Drops) uint64 { return d.IPv6UnknownOption }, 2, 43},
		{"option past its header", nhDestOpts, []byte{protoICMPv6, 0, 0x1e, 9, 0, 0, 0, 0}, func(d *Drops) uint64 { return d.IPv6BadExtHeader }, -1, 0},
		{"8 bytes of padding", nhDestOpts, append(opts(protoICMPv6, 1, 6, 0, 0, 0, 0, 0, 0), 0, 0, 0, 0, 0, 0, 0, 0)[:16], func(d *Drops) uint64 { return d.IPv6BadExtHeader }, -1, 0},
		{"hop-by-hop not first", nhDestOpts, append(opts(nhHopByHop), opts(protoICMPv6)...), func(d *Drops) uint64 { return d.IPv6UnknownHeader }, 1, 40},
		{"routing, segments left", nhRouting, routing(protoICMPv6, 1), func(d *Drops) uint64 { return d.IPv6UnknownHeader }, 0, 42},
		{"routing, no segments left", nhRouting, routing(protoICMPv6, 0), nil, -1, 0},
		{"atomic fragment", nhFragment, frag(protoICMPv6, 0), nil, -1, 0},
		{"first fragment not a multiple of 8", nhFragment, frag(protoICMPv6, 1), func(d *Drops) uint64 { return d.FragBad }, 0, 4},
		{"fragment past 65535 bytes", nhFragment, frag(protoICMPv6, 65528), func(d *Drops) uint64 { return d.FragBad }, 0, 42},
		{"unknown next header", 253, []byte{protoICMPv6, 0, 0, 0, 0, 0, 0, 0}, func(d *Drops) uint64 { return d.UnknownProtocol }, 1, 6},
		{"unknown header after options", nhDestOpts, opts(253), func(d *Drops) uint64 { return d.UnknownProtocol }, 1, 40},
		{"no next header", nhDestOpts, opts(nhNoNext), func(d *Drops) uint64 { return d.IPv6NoNextHeader }, -1, 0},
		{"too many headers", nhDestOpts, long, func(d *Drops) uint64 { return d.IPv6ExtChain }, -1, 0},
		{"truncated header", nhDestOpts, []byte{protoICMPv6, 1, 1, 4, 0, 0, 0, 0}, func(d *Drops) uint64 { return d.IPv6BadExtHeader }, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, l := manual6(t)
			pkt := echo6(addr6A, addr6B, tc.ext, tc.first)
			if tc.name == "truncated header" {
				pkt = pkt[:ipv6HeaderLen+8] // its length says 16 bytes
				binary.BigEndian.PutUint16(pkt[4:], 8)
			}
			if err := m.Inject(pkt); err != nil {
				t.Fatal(err)
			}
			st := m.Stats()
			if tc.drop == nil {
				if got := l.read(t); got[6] != protoICMPv6 || got[ipv6HeaderLen] != byte(header.ICMPv6EchoReply) {
					t.Fatalf("sent %x, want an echo reply", got)
				}
				return
			}
			if tc.drop(&st.Drops) != 1 || st.EchoReplies != 0 {
				t.Fatalf("drop counter %d, EchoReplies %d; want 1, 0 (%+v)", tc.drop(&st.Drops), st.EchoReplies, st.Drops)
			}
			if tc.code < 0 {
				if l.sent() != 0 {
					t.Fatalf("sent %x, want nothing", l.read(t))
				}
				return
			}
			got := l.read(t)
			body := make([]byte, 4, 4+len(pkt))
			binary.BigEndian.PutUint32(body, tc.ptr)
			want := icmp6(addr6B, addr6A, header.ICMPv6ParamProblem, append(body, pkt...))
			want[1] = byte(tc.code)
			want[2], want[3] = 0, 0
			header.ICMPv6(want).SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: want, Src: tcpip.AddrFrom16(addr6B.As16()), Dst: tcpip.AddrFrom16(addr6A.As16())}))
			if w := ipv6Packet(addr6B, addr6A, protoICMPv6, nil, want); !bytes.Equal(got, w) {
				t.Fatalf("parameter problem\n got %x\nwant %x", got, w)
			}
			if st.ParamProblems != 1 {
				t.Fatalf("ParamProblems %d, want 1", st.ParamProblems)
			}
		})
	}
}

// TestIPv6BadInput: short, lying and misaddressed IPv6 packets, martian
// sources and neighbour discovery: each dropped, counted, nothing sent.
func TestIPv6BadInput(t *testing.T) {
	mcast := netip.MustParseAddr("ff02::1")
	ns := icmp6(netip.IPv6Unspecified(), netip.MustParseAddr("ff02::1:ff00:2"), header.ICMPv6NeighborSolicit, make([]byte, 20))
	rs := icmp6(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::2"), header.ICMPv6RouterSolicit, make([]byte, 4))
	mld := icmp6(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::16"), header.ICMPv6MulticastListenerV2Report, make([]byte, 4))
	short := echo6(addr6A, addr6B, nil, 0)
	binary.BigEndian.PutUint16(short[4:], uint16(len(short)))
	for _, tc := range []struct {
		name string
		pkt  []byte
		drop func(*Drops) uint64
	}{
		{"shorter than its header", echo6(addr6A, addr6B, nil, 0)[:39], func(d *Drops) uint64 { return d.BadIPHeader }},
		{"payload length past the end", short, func(d *Drops) uint64 { return d.BadIPHeader }},
		{"not for us", echo6(addr6A, netip.MustParseAddr("2001:db8::9"), nil, 0), func(d *Drops) uint64 { return d.NotForUs }},
		{"to a multicast group", echo6(addr6A, mcast, nil, 0), func(d *Drops) uint64 { return d.NotForUs }},
		{"from multicast", echo6(mcast, addr6B, nil, 0), func(d *Drops) uint64 { return d.MartianMulticast }},
		{"from ::", echo6(netip.IPv6Unspecified(), addr6B, nil, 0), func(d *Drops) uint64 { return d.MartianZeroNet }},
		{"from ::1", echo6(netip.IPv6Loopback(), addr6B, nil, 0), func(d *Drops) uint64 { return d.MartianLoopback }},
		{"from ourselves", echo6(addr6B, addr6B, nil, 0), func(d *Drops) uint64 { return d.MartianLand }},
		{"from IPv4-mapped", echo6(netip.MustParseAddr("::ffff:198.18.0.1"), addr6B, nil, 0), func(d *Drops) uint64 { return d.MartianV4Mapped }},
		{"DAD neighbour solicitation", ipv6Packet(netip.IPv6Unspecified(), netip.MustParseAddr("ff02::1:ff00:2"), protoICMPv6, nil, ns), func(d *Drops) uint64 { return d.NeighborDiscovery }},
		{"router solicitation", ipv6Packet(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::2"), protoICMPv6, nil, rs), func(d *Drops) uint64 { return d.NeighborDiscovery }},
		{"MLD report with router alert", ipv6Packet(netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::16"), nhHopByHop, opts(protoICMPv6, 5, 2, 0, 0), mld), func(d *Drops) uint64 { return d.NeighborDiscovery }},
		{"UDP with a zero checksum", func() []byte {
			p := udp6Packet(netip.AddrPortFrom(addr6A, 5000), netip.AddrPortFrom(addr6B, 9), []byte("x"))
			p[ipv6HeaderLen+6], p[ipv6HeaderLen+7] = 0, 0
			return p
		}(), func(d *Drops) uint64 { return d.BadUDPChecksum }},
		{"echo reply (unsolicited)", ipv6Packet(addr6A, addr6B, protoICMPv6, nil, icmp6(addr6A, addr6B, header.ICMPv6EchoReply, make([]byte, 4))), func(d *Drops) uint64 { return d.ICMPIgnored }},
		{"packet too big (an error we take no action on)", ipv6Packet(addr6A, addr6B, protoICMPv6, nil, icmp6(addr6A, addr6B, header.ICMPv6PacketTooBig, make([]byte, 4+48))), func(d *Drops) uint64 { return d.ICMPIgnored }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, l := manual6(t)
			if err := m.Inject(tc.pkt); err != nil {
				t.Fatal(err)
			}
			st := m.Stats()
			if n := tc.drop(&st.Drops); n != 1 {
				t.Fatalf("counter %d, want 1 (%+v)", n, st.Drops)
			}
			if l.sent() != 0 {
				t.Fatalf("sent %x, want nothing", l.read(t))
			}
		})
	}
	// A stack without an IPv6 address takes no IPv6.
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	m, err := NewManual(Config{Device: dev, Addr: addrB, Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Inject(echo6(addr6A, addr6B, nil, 0))
	if st := m.Stats(); st.Drops.NotIPv4 != 1 {
		t.Fatalf("IPv6 to an IPv4-only stack: NotIPv4 %d, want 1", st.Drops.NotIPv4)
	}
	if _, err := m.DialUDP("udp", "[2001:db8::1]:7"); !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("dial IPv6 from an IPv4-only stack: %v, want ENETUNREACH", err)
	}
	if _, err := m.Listen("tcp6", ":80"); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Fatalf(`Listen("tcp6") on an IPv4-only stack: %v, want EAFNOSUPPORT`, err)
	}
	if _, err := m.ListenUDP("udp6", ":80"); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Fatalf(`ListenUDP("udp6") on an IPv4-only stack: %v, want EAFNOSUPPORT`, err)
	}
}

// TestIPv6ConfigChecks: Addr6 must be unicast IPv6 on a device of IPv6's
// minimum MTU.
func TestIPv6ConfigChecks(t *testing.T) {
	for _, tc := range []struct {
		addr string
		mtu  int
	}{{"198.18.0.3", 1500}, {"::ffff:198.18.0.3", 1500}, {"ff02::1", 1500}, {"::1", 1500}, {"::", 1500}, {"2001:db8::2", 1279}} {
		dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: tc.mtu})
		if _, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: netip.MustParseAddr(tc.addr), Clock: timer.NewManualClock(0)}); !errors.Is(err, ErrConfig) {
			t.Errorf("Addr6 %s, MTU %d: %v, want ErrConfig", tc.addr, tc.mtu, err)
		}
	}
}

// TestUDPv6PortUnreachableExact: a datagram to a closed port gets an ICMPv6
// port unreachable quoting the whole packet (RFC 4443 3.1), byte for byte,
// rate-limited as over IPv4; a connected socket's read fails with
// ECONNREFUSED on one that quotes its flow.
func TestUDPv6PortUnreachableExact(t *testing.T) {
	m, l := manual6(t)
	dgram := udp6Packet(netip.AddrPortFrom(addr6A, 5000), netip.AddrPortFrom(addr6B, 9), []byte("anyone there?"))
	if err := m.Inject(dgram); err != nil {
		t.Fatal(err)
	}
	got := l.read(t)
	body := append([]byte{0, 0, 0, 0}, dgram...)
	m6 := icmp6(addr6B, addr6A, header.ICMPv6DstUnreachable, body)
	m6[1] = 4
	m6[2], m6[3] = 0, 0
	header.ICMPv6(m6).SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: m6, Src: tcpip.AddrFrom16(addr6B.As16()), Dst: tcpip.AddrFrom16(addr6A.As16())}))
	if want := ipv6Packet(addr6B, addr6A, protoICMPv6, nil, m6); !bytes.Equal(got, want) {
		t.Fatalf("port unreachable\n got %x\nwant %x", got, want)
	}
	// The burst of 6 per destination (one already spent), then the limit.
	for range 10 {
		m.Inject(dgram)
	}
	if st := m.Stats(); st.PortUnreachables != 6 || st.Drops.ICMPRateLimited != 5 || st.Drops.UDPNoPort != 11 {
		t.Fatalf("PortUnreachables %d, ICMPRateLimited %d, UDPNoPort %d; want 6, 5, 11", st.PortUnreachables, st.Drops.ICMPRateLimited, st.Drops.UDPNoPort)
	}
	for l.peer.Stats().Received < l.sent() {
		l.read(t)
	}

	// A connected socket: the kernel's port unreachable for its datagram.
	c, err := m.DialUDP("udp6", "[2001:db8::1]:53")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	sent := l.read(t)
	if sent[6] != protoUDP || !bytes.Equal(sent[8:24], addr6B.AsSlice()) {
		t.Fatalf("sent %x, want a UDP datagram from %v", sent, addr6B)
	}
	if !udpChecksumOK(addr6B, addr6A, sent[ipv6HeaderLen:]) || binary.BigEndian.Uint16(sent[ipv6HeaderLen+6:]) == 0 {
		t.Fatalf("datagram %x: bad or missing checksum", sent)
	}
	unreach := icmp6(addr6A, addr6B, header.ICMPv6DstUnreachable, append([]byte{0, 0, 0, 0}, sent...))
	unreach[1] = 4
	unreach[2], unreach[3] = 0, 0
	header.ICMPv6(unreach).SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: unreach, Src: tcpip.AddrFrom16(addr6A.As16()), Dst: tcpip.AddrFrom16(addr6B.As16())}))
	m.Inject(ipv6Packet(addr6A, addr6B, protoICMPv6, nil, unreach))
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("read after the port unreachable: %v, want ECONNREFUSED", err)
	}
	if st := m.Stats(); st.UnreachablesIn != 1 {
		t.Fatalf("UnreachablesIn %d, want 1", st.UnreachablesIn)
	}
}

// TestTCPv6SynAck: a SYN over IPv6 gets a SYN-ACK over IPv6 announcing MSS =
// MTU - 60, its checksum over the IPv6 pseudo-header; a "tcp4" listener
// refuses it (RST), and a "tcp6" one refuses IPv4.
func TestTCPv6SynAck(t *testing.T) {
	syn6 := func(port uint16) []byte {
		seg := tcp.Segment{SrcPort: 40000, DstPort: port, Seq: 1000, Flags: tcp.FlagSYN, Window: 65535}
		seg.Options.HasMSS, seg.Options.MSS = true, 1440
		b := make([]byte, seg.EncodedLen())
		seg.Encode(b)
		tcp.SetChecksum(addr6A, addr6B, b)
		return ipv6Packet(addr6A, addr6B, protoTCP, nil, b)
	}
	m, l := manual6(t)
	for _, n := range []string{"tcp", "tcp6"} {
		ln, err := m.Listen(n, ":80")
		if err != nil {
			t.Fatal(err)
		}
		m.Inject(syn6(80))
		got := l.read(t)
		if got[0]>>4 != 6 || got[6] != protoTCP || !bytes.Equal(got[8:24], addr6B.AsSlice()) || !bytes.Equal(got[24:40], addr6A.AsSlice()) {
			t.Fatalf("%s: sent %x, want TCP over IPv6 from %v to %v", n, got, addr6B, addr6A)
		}
		if !tcp.VerifyChecksum(addr6B, addr6A, got[ipv6HeaderLen:]) {
			t.Fatalf("%s: SYN-ACK's checksum is wrong", n)
		}
		seg, err := tcp.ParseSegment(got[ipv6HeaderLen:])
		if err != nil || seg.Flags != tcp.FlagSYN|tcp.FlagACK || seg.Ack != 1001 || seg.Options.MSS != 1500-60 {
			t.Fatalf("%s: sent %v (%v), want a SYN-ACK of 1001 with MSS 1440", n, seg, err)
		}
		if n == "tcp6" {
			if a := ln.Addr().(*net.TCPAddr).AddrPort(); a != netip.AddrPortFrom(addr6B, 80) {
				t.Fatalf("tcp6 listener's address %v", a)
			}
			m.Inject(synPacket(t, addrA, addrB, 80))
			if got := l.read(t); got[0]>>4 != 4 || tcp.Flags(got[ipv4HeaderLen+13])&tcp.FlagRST == 0 {
				t.Fatalf("IPv4 SYN to a tcp6 listener: sent %x, want a RST", got)
			}
		}
		ln.Close()
		for l.peer.Stats().Received < l.sent() {
			l.read(t)
		}
	}
	ln, err := m.Listen("tcp4", ":80")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m.Inject(syn6(80))
	if got := l.read(t); got[0]>>4 != 6 || tcp.Flags(got[ipv6HeaderLen+13])&tcp.FlagRST == 0 {
		t.Fatalf("IPv6 SYN to a tcp4 listener: sent %x, want a RST", got)
	}
	if _, err := m.Listen("tcp4", "[2001:db8::2]:81"); err == nil {
		t.Fatal("tcp4 on an IPv6 address: no error")
	}
	if _, err := m.Listen("tcp", "[2001:db8::2]:82"); err != nil {
		t.Fatalf("tcp on our IPv6 address: %v", err)
	}
}

// TestTCPv6SynCookies: with the listener's table full, a SYN over IPv6 is
// answered with a cookie, and the ACK that returns it completes the
// connection: the cookie's hash covers the IPv6 addresses.
func TestTCPv6SynCookies(t *testing.T) {
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: addr6B, Backlog: 1, Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l := link{dev, peer}
	ln, err := m.ListenTCP("tcp6", ":80")
	if err != nil {
		t.Fatal(err)
	}
	pkt := func(port uint16, seq, ack uint32, flags tcp.Flags) []byte {
		seg := tcp.Segment{SrcPort: port, DstPort: 80, Seq: seqnum.Value(seq), Ack: seqnum.Value(ack), Flags: flags, Window: 65535}
		if flags&tcp.FlagSYN != 0 {
			seg.Options.HasMSS, seg.Options.MSS = true, 1440
		}
		b := make([]byte, seg.EncodedLen())
		seg.Encode(b)
		tcp.SetChecksum(addr6A, addr6B, b)
		return ipv6Packet(addr6A, addr6B, protoTCP, nil, b)
	}
	m.Inject(pkt(40001, 100, 0, tcp.FlagSYN)) // fills the table
	l.read(t)
	m.Inject(pkt(40002, 500, 0, tcp.FlagSYN))
	got := l.read(t)
	sa, err := tcp.ParseSegment(got[ipv6HeaderLen:])
	if err != nil || sa.Flags != tcp.FlagSYN|tcp.FlagACK {
		t.Fatalf("second SYN: %v, %v; want a SYN-ACK", sa, err)
	}
	if st := ln.tl.Stats(); st.SynCookiesSent != 1 {
		t.Fatalf("SynCookiesSent %d, want 1", st.SynCookiesSent)
	}
	m.Inject(pkt(40002, 501, uint32(sa.Seq)+1, tcp.FlagACK))
	c, ok := ln.TryAccept()
	if !ok {
		t.Fatalf("the cookie's ACK made no connection (%+v)", ln.tl.Stats())
	}
	if r := c.RemoteAddr().(*net.TCPAddr).AddrPort(); r != netip.AddrPortFrom(addr6A, 40002) {
		t.Fatalf("connection from %v", r)
	}
	if info := c.Info(); info.SndMSS != 1440 {
		t.Fatalf("SndMSS %d, want 1440", info.SndMSS)
	}
}

// pair6 is pair with IPv6 addresses too.
func pair6(t *testing.T, cfg Config) (a, b *Stack) {
	t.Helper()
	return pairWith(t, cfg, addr6A, addr6B)
}

// TestTransferOverIPv6: a megabyte each way over IPv6 between two stacks,
// intact, in segments of MTU - 60.
func TestTransferOverIPv6(t *testing.T) {
	a, b := pair6(t, Config{})
	c, s := dialPairTo(t, a, b, "tcp6", "[2001:db8::2]:7")
	defer c.Close()
	defer s.Close()
	msg := make([]byte, 1<<20)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	go func() { c.Write(msg); c.(*Conn).CloseWrite() }()
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("got %d bytes, %v; want the megabyte", len(got), err)
	}
	if info := c.(*Conn).Info(); info.SndMSS != 1500-60-12 {
		t.Fatalf("SndMSS %d, want 1428 (MTU - 60, less the timestamps)", info.SndMSS)
	}
}

// TestUDPv6Echo: UDP over IPv6 between two stacks, to a dual-stack socket,
// and a "udp4" socket that takes no IPv6.
func TestUDPv6Echo(t *testing.T) {
	a, b := pair6(t, Config{})
	srv, served := udpEcho(t, b)
	defer func() { srv.Close(); <-served }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.DialContext(ctx, "udp", "[2001:db8::2]:7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if la := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr(); la != addr6A {
		t.Fatalf("local address %v, want %v", la, addr6A)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 8192)
	for _, size := range []int{0, 1, 1000, 1500 - 48, 8000} { // 8000: in fragments both ways
		msg := bytes.Repeat([]byte{'x'}, size)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo of %d bytes: %d, %v", size, n, err)
		}
	}
	if _, err := c.Write(make([]byte, 65528)); !errors.Is(err, syscall.EMSGSIZE) {
		t.Fatalf("a datagram past 65,535 bytes: %v, want EMSGSIZE", err)
	}
	u4, err := b.ListenUDP("udp4", ":9")
	if err != nil {
		t.Fatal(err)
	}
	defer u4.Close()
	c9, _ := a.DialUDP("udp6", "[2001:db8::2]:9")
	defer c9.Close()
	c9.Write([]byte("v6 to udp4"))
	c9.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c9.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("IPv6 to a udp4 socket: %v, want ECONNREFUSED (a port unreachable)", err)
	}
	if _, err := u4.WriteTo([]byte("x"), &net.UDPAddr{IP: net.ParseIP("2001:db8::1"), Port: 5}); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Fatalf("udp4 socket writing to IPv6: %v, want EAFNOSUPPORT", err)
	}
}

// TestFlightRecordingReplaysIPv6: TCP and UDP over IPv6 recorded, with and
// without payloads, replay exactly; the header names both addresses.
func TestFlightRecordingReplaysIPv6(t *testing.T) {
	for _, payload := range []bool{false, true} {
		t.Run(fmt.Sprint("payload=", payload), func(t *testing.T) {
			a, b, ra, rb := recordedPairWith(t, 0, Config{RecordPayload: payload}, true)
			ln, err := b.Listen("tcp6", ":7")
			if err != nil {
				t.Fatal(err)
			}
			srv, served := udpEcho(t, b)
			u6, err := b.ListenUDP("udp6", ":8")
			if err != nil {
				t.Fatal(err)
			}
			served6 := make(chan struct{})
			go func() { serveEcho(ln); close(served6) }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 3 {
				c, err := a.DialContext(ctx, "tcp", "[2001:db8::2]:7")
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				msg := bytes.Repeat([]byte{byte('a' + i)}, 64<<10)
				go func() { c.Write(msg); c.(*Conn).CloseWrite() }()
				if got, err := io.ReadAll(c); err != nil || !bytes.Equal(got, msg) {
					t.Fatalf("echo %d: %d bytes, %v", i, len(got), err)
				}
				c.Close()
			}
			uc, err := a.DialContext(ctx, "udp", "[2001:db8::2]:7")
			if err != nil {
				t.Fatal(err)
			}
			uc.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 2048)
			for i := range 5 {
				msg := bytes.Repeat([]byte{'u'}, 1+i*300)
				uc.Write(msg)
				if n, err := uc.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
					t.Fatalf("UDP echo %d: %d, %v", i, n, err)
				}
			}
			uc.Close()
			pc, _ := a.ListenPacket("udp", ":4000")
			pc.WriteTo([]byte("closed"), &net.UDPAddr{IP: net.ParseIP("2001:db8::2"), Port: 9}) // a port unreachable
			pc.WriteTo([]byte("v6 only"), &net.UDPAddr{IP: net.ParseIP("2001:db8::2"), Port: 8})
			u6.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, _, err := u6.ReadFrom(buf); err != nil || string(buf[:n]) != "v6 only" {
				t.Fatalf("udp6 socket: %q, %v", buf[:n], err)
			}
			time.Sleep(50 * time.Millisecond) // the last ACKs and the ICMP
			pc.Close()
			u6.Close()
			srv.Close()
			<-served
			ln.Close()
			<-served6
			a.Close()
			b.Close()
			if t.Failed() {
				if dir := os.Getenv("TCPWHEEL_KEEP_FAILED"); dir != "" {
					os.WriteFile(dir+"/dialer6.pcapng", ra.Bytes(), 0o644)
					os.WriteFile(dir+"/listener6.pcapng", rb.Bytes(), 0o644)
				}
			}
			for _, rec := range []*bytes.Buffer{ra, rb} {
				r, err := record.Parse(bytes.NewReader(rec.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if r.Header.Addr6 != addr6A && r.Header.Addr6 != addr6B || r.Header.TCP.MSS6 != 1440 {
					t.Fatalf("header: addr6 %v, mss6 %d", r.Header.Addr6, r.Header.TCP.MSS6)
				}
				v6, icmp := 0, 0
				for _, e := range r.Events {
					if e.Kind == record.Out && e.Data[0]>>4 == 6 {
						v6++
						if e.Data[6] == protoICMPv6 {
							icmp++
						}
					}
				}
				if v6 < 50 || rec == rb && icmp != 1 {
					t.Fatalf("recording: %d IPv6 packets sent, %d ICMPv6", v6, icmp)
				}
			}
			checkReplay(t, "dialer", ra.Bytes())
			checkReplay(t, "listener", rb.Bytes())
			if payload {
				checkRerecord(t, rb.Bytes())
			}
		})
	}
}
