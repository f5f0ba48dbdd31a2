package tun_test

import (
	"fmt"

	"github.com/tcpwheel/tcpwheel/internal/tcpip"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// A Device moves whole IPv4 packets: what one end of tuntest's in-memory pipe
// writes, the other end reads, as a stack and the kernel would through a TUN.
// Code written against tun.Device runs on either.
//
// On a real machine the device is a TUN instead: tun.Open("tcpw0", 1500)
// creates one (root or CAP_NET_ADMIN, and /dev/net/tun), and package
// tun/netns (netns.Attach) creates it with its kernel side in a network
// namespace of its own, so that the host's interfaces and routes are never
// touched. That is what `tcpwheel run` does.
func ExampleDevice() {
	var stackSide, kernelSide tun.Device
	stackSide, kernelSide = tuntest.Pipe(1500) // on a machine: tun.Open or netns.Attach
	defer stackSide.Close()                    // closes both ends of the pipe

	// The stack at 198.18.0.2 sends an ICMP echo request to 198.18.0.1.
	pkt := echoRequest(tcpip.AddrFrom4([4]byte{198, 18, 0, 2}), tcpip.AddrFrom4([4]byte{198, 18, 0, 1}), []byte("ping"))
	if err := stackSide.WritePacket(pkt); err != nil {
		panic(err)
	}

	// The other side reads it: one whole packet per ReadPacket, into a
	// buffer of at least MTU bytes.
	buf := make([]byte, kernelSide.MTU())
	n, err := kernelSide.ReadPacket(buf)
	if err != nil {
		panic(err)
	}
	ip := header.IPv4(buf[:n])
	icmp := header.ICMPv4(ip.Payload())
	fmt.Printf("%s read %d bytes: %v -> %v, ICMP type %d, payload %q\n",
		kernelSide.Name(), n, ip.SourceAddress(), ip.DestinationAddress(), icmp.Type(), icmp.Payload())

	// A packet larger than the MTU is refused, as a real link would.
	err = stackSide.WritePacket(make([]byte, 1501))
	fmt.Println("1501 bytes:", err)

	// Output:
	// pipe-b read 32 bytes: 198.18.0.2 -> 198.18.0.1, ICMP type 8, payload "ping"
	// 1501 bytes: tuntest pipe-a: write: 1501 bytes, MTU 1500: tun: packet size out of range
}

// echoRequest builds an IPv4 packet holding an ICMP echo request.
func echoRequest(src, dst tcpip.Address, payload []byte) []byte {
	pkt := make([]byte, header.IPv4MinimumSize+header.ICMPv4MinimumSize+len(payload))
	ip := header.IPv4(pkt)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(pkt)),
		TTL:         64,
		Protocol:    uint8(header.ICMPv4ProtocolNumber),
		SrcAddr:     src,
		DstAddr:     dst,
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	icmp := header.ICMPv4(ip.Payload())
	icmp.SetType(header.ICMPv4Echo)
	copy(icmp.Payload(), payload)
	icmp.SetChecksum(^checksum.Checksum(icmp, 0))
	return pkt
}
