package stack

import (
	"net/netip"
	"testing"

	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// FuzzInput hands a stack with a TCP listener and UDP sockets (unconnected
// and connected) arbitrary bytes: as a packet, and as the payload of a good
// IPv4 header with the given protocol (a zero UDP checksum is none, so the
// fuzzer reaches the UDP demultiplexer easily), and of a good IPv6 header
// with it as the next header (extension headers among them). No panic,
// nothing sent larger than the MTU, and every UDP datagram is accounted
// for exactly once: delivered or dropped with a reason.
func FuzzInput(f *testing.F) {
	f.Add(uint8(protoUDP), udpPacket(peerA, udp7, []byte("hello"))[ipv4HeaderLen:])
	f.Add(uint8(protoUDP), udpPacket(peerA, netip.AddrPortFrom(addrB, 9), nil)[ipv4HeaderLen:])
	f.Add(uint8(protoUDP), []byte{0, 1, 0, 7, 0, 4, 0, 0})
	f.Add(uint8(protoUDP), []byte{0, 1})
	f.Add(uint8(protoICMP), []byte{3, 3, 0, 0, 0, 0, 0, 0, 0x45})
	f.Add(uint8(protoICMP), echoPacket(addrA, addrB)[ipv4HeaderLen:])
	f.Add(uint8(protoTCP), []byte{0x9c, 0x40, 0, 80})
	f.Add(uint8(protoICMPv6), echo6(addr6A, addr6B, nil, 0)[ipv6HeaderLen:])
	f.Add(uint8(nhHopByHop), opts(protoICMPv6, 5, 2, 0, 0))
	f.Add(uint8(nhDestOpts), append(opts(nhRouting, 0x9e, 1, 0), 58, 0, 0, 1, 0, 0, 0, 0))
	f.Add(uint8(nhFragment), []byte{protoUDP, 0, 0, 1, 0, 0, 0, 1})
	f.Add(uint8(protoUDP), udp6Packet(netip.AddrPortFrom(addr6A, 5000), netip.AddrPortFrom(addr6B, 7), []byte("hi"))[ipv6HeaderLen:])
	f.Add(uint8(nhHopByHop), echo6(addr6A, addr6B, nil, 0))
	f.Fuzz(func(t *testing.T, proto uint8, b []byte) {
		dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 64})
		m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: addr6B, Prefix: netip.MustParsePrefix("198.18.0.0/24"), Clock: timer.NewManualClock(0)})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.Listen("tcp", ":80"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.ListenUDP("udp", ":7"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.DialUDP("udp", "198.18.0.1:5000"); err != nil {
			t.Fatal(err)
		}
		if len(b) > 1500-ipv6HeaderLen {
			b = b[:1500-ipv6HeaderLen]
		}
		m.Inject(b)
		outcomes := func(s Stats) uint64 {
			d := s.Drops
			return s.DatagramsIn + d.BadUDPHeader + d.BadUDPLength + d.BadUDPChecksum + d.UDPNoPort + d.UDPQueueFull
		}
		for _, pkt := range [][]byte{ipv4Packet(addrA, addrB, proto, b), ipv6Packet(addr6A, addr6B, proto, nil, b)} {
			before := m.Stats()
			m.Inject(pkt)
			if st := m.Stats(); proto == protoUDP {
				if n := outcomes(st) - outcomes(before); n != 1 {
					t.Fatalf("a datagram had %d outcomes: %+v", n, st)
				}
			}
		}
		buf := make([]byte, 2000)
		for peer.Stats().Received < dev.Stats().Sent {
			n, err := peer.ReadPacket(buf)
			if err != nil || n > 1500 {
				t.Fatalf("sent %d bytes, %v", n, err)
			}
		}
	})
}

// FuzzTransportOf hands the flight recorder's and the Playback's packet
// parsers (transportOf, checksumAt, parseTCP, capLen) arbitrary bytes: no
// panic, and what transportOf finds lies inside the packet.
func FuzzTransportOf(f *testing.F) {
	f.Add(echo6(addr6A, addr6B, nil, 0))
	f.Add(echo6(addr6A, addr6B, opts(protoICMPv6, 5, 2, 0, 0), nhHopByHop))
	f.Add(udp6Packet(netip.AddrPortFrom(addr6A, 5000), netip.AddrPortFrom(addr6B, 7), []byte("hi")))
	f.Add(udpPacket(peerA, udp7, []byte("hello")))
	f.Add(echoPacket(addrA, addrB))
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: addr6B, Clock: timer.NewManualClock(0)})
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if _, _, _, off, end, ok := transportOf(pkt); ok && (off < 0 || off > end || end > len(pkt)) {
			t.Fatalf("transport at %d to %d in a packet of %d bytes", off, end, len(pkt))
		}
		if n := checksumAt(pkt); n < 0 {
			t.Fatalf("checksum at %d", n)
		}
		parseTCP(pkt)
		for _, in := range []bool{false, true} {
			if n := m.capLen(pkt, in); n < 0 || n > len(pkt) {
				t.Fatalf("capLen %d of a packet of %d bytes", n, len(pkt))
			}
		}
	})
}
