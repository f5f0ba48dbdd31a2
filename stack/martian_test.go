package stack

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// ipv4Packet wraps payload in an IPv4 header from src to dst.
func ipv4Packet(src, dst netip.Addr, proto uint8, payload []byte) []byte {
	pkt := make([]byte, ipv4HeaderLen+len(payload))
	copy(pkt[ipv4HeaderLen:], payload)
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(pkt)), TTL: 64, Protocol: proto,
		SrcAddr: tcpip.AddrFrom4(src.As4()), DstAddr: tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	return pkt
}

// synPacket is a SYN from src:40000 to dst:port.
func synPacket(t *testing.T, src, dst netip.Addr, port uint16) []byte {
	t.Helper()
	seg := tcp.Segment{SrcPort: 40000, DstPort: port, Seq: 1000, Flags: tcp.FlagSYN, Window: 65535}
	b := make([]byte, seg.EncodedLen())
	if _, err := seg.Encode(b); err != nil {
		t.Fatal(err)
	}
	tcp.SetChecksum(src, dst, b)
	return ipv4Packet(src, dst, protoTCP, b)
}

// echoPacket is an ICMP echo request from src to dst.
func echoPacket(src, dst netip.Addr) []byte {
	b := make([]byte, header.ICMPv4MinimumSize+4)
	b[0] = byte(header.ICMPv4Echo)
	copy(b[header.ICMPv4MinimumSize:], "ping")
	binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
	return ipv4Packet(src, dst, protoICMP, b)
}

// TestMartianSources: a SYN or a ping from a source no packet may carry (RFC
// 1122 3.2.1.3, 4.2.3.10) gets no answer and is counted by reason; the same
// from a good source is answered.
func TestMartianSources(t *testing.T) {
	local := netip.MustParseAddr("198.18.0.2")
	for _, tc := range []struct {
		src     string
		counter func(*Drops) uint64
	}{
		{"255.255.255.255", func(d *Drops) uint64 { return d.MartianBroadcast }},
		{"198.18.0.255", func(d *Drops) uint64 { return d.MartianBroadcast }}, // the /24's broadcast
		{"224.0.0.1", func(d *Drops) uint64 { return d.MartianMulticast }},
		{"239.255.255.250", func(d *Drops) uint64 { return d.MartianMulticast }},
		{"240.0.0.1", func(d *Drops) uint64 { return d.MartianReserved }},
		{"0.0.0.0", func(d *Drops) uint64 { return d.MartianZeroNet }},
		{"0.1.2.3", func(d *Drops) uint64 { return d.MartianZeroNet }},
		{"127.0.0.1", func(d *Drops) uint64 { return d.MartianLoopback }},
		{"198.18.0.2", func(d *Drops) uint64 { return d.MartianLand }}, // our own address
		{"198.18.0.1", nil},   // the kernel side: good
		{"198.18.1.255", nil}, // outside the prefix: not its broadcast
		{"10.0.0.255", nil},
	} {
		t.Run(tc.src, func(t *testing.T) {
			dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
			s, err := NewManual(Config{Device: dev, Addr: local, Prefix: netip.MustParsePrefix("198.18.0.0/24"), Clock: timer.NewManualClock(0)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Listen("tcp", ":80"); err != nil {
				t.Fatal(err)
			}
			src := netip.MustParseAddr(tc.src)
			for _, pkt := range [][]byte{synPacket(t, src, local, 80), echoPacket(src, local)} {
				if err := s.Inject(pkt); err != nil {
					t.Fatal(err)
				}
			}
			st := s.Stats()
			sent := dev.Stats().Sent
			if tc.counter == nil {
				if sent != 2 || st.Listen.SYNsIn != 1 || st.EchoReplies != 1 {
					t.Fatalf("good source: %d packets sent, %d SYNs in, %d echo replies; want a SYN-ACK and a reply",
						sent, st.Listen.SYNsIn, st.EchoReplies)
				}
				return
			}
			if got := tc.counter(&st.Drops); got != 2 {
				t.Errorf("drops counted %d, want 2 (the SYN and the ping)", got)
			}
			if sent != 0 || st.Listen.SYNsIn != 0 {
				t.Errorf("martian source: %d packets sent, %d SYNs reached the listener; want none", sent, st.Listen.SYNsIn)
			}
		})
	}
}

func TestDirectedBroadcast(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"198.18.0.0/24", "198.18.0.255"},
		{"198.18.0.1/24", "198.18.0.255"},
		{"198.18.0.0/15", "198.19.255.255"},
		{"198.18.0.4/30", "198.18.0.7"},
		{"198.18.0.4/31", "invalid IP"},
		{"198.18.0.4/32", "invalid IP"},
	} {
		if got := directedBroadcast(netip.MustParsePrefix(tc.prefix)).String(); got != tc.want {
			t.Errorf("directedBroadcast(%s) = %s, want %s", tc.prefix, got, tc.want)
		}
	}
	if got := directedBroadcast(netip.Prefix{}); got.IsValid() {
		t.Errorf("directedBroadcast of no prefix = %v, want none", got)
	}
}

func TestConfigPrefix(t *testing.T) {
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	for _, p := range []string{"198.19.0.0/24", "2001:db8::/64"} {
		_, err := NewManual(Config{Device: dev, Addr: addrB, Prefix: netip.MustParsePrefix(p), Clock: timer.NewManualClock(0)})
		if err == nil {
			t.Errorf("prefix %s with address %v: no error", p, addrB)
		}
	}
}

// failingWrites is a device whose writes fail.
type failingWrites struct{ *tuntest.Endpoint }

func (failingWrites) WritePacket([]byte) error { return errors.New("write refused") }

// TestDeviceWriteDropCounted: a packet the device refuses is a drop with a
// reason, not only a device error.
func TestDeviceWriteDropCounted(t *testing.T) {
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	s, err := NewManual(Config{Device: failingWrites{dev}, Addr: addrB, Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Inject(echoPacket(addrA, addrB)); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Drops.DeviceWrite != 1 || st.DeviceErrors != 1 || st.PacketsOut != 0 {
		t.Fatalf("DeviceWrite %d, DeviceErrors %d, PacketsOut %d; want 1, 1, 0", st.Drops.DeviceWrite, st.DeviceErrors, st.PacketsOut)
	}
}
