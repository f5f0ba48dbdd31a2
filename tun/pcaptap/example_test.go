package pcaptap_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/google/gopacket/pcapgo"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"

	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
	"github.com/tcpwheel/tcpwheel/tun/pcaptap"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// Two taps around an impairment: the stack-side tap shows what the stack
// sent and received, the wire-side tap what crossed the link.
func Example_placement() {
	stackEnd, peer := tuntest.Pipe(0) // stackEnd stands in for the TUN device
	var stackView, wireView bytes.Buffer

	// Build from the device up: the wire-side tap wraps the device, the
	// impairment wraps that, the stack-side tap wraps the impairment, and
	// the stack uses the outermost Device.
	wireTap, err := pcaptap.Wrap(stackEnd, &wireView, pcaptap.Config{})
	if err != nil {
		panic(err)
	}
	lossy, err := impair.Wrap(wireTap, impair.Config{})
	if err != nil {
		panic(err)
	}
	var dev tun.Device
	dev, err = pcaptap.Wrap(lossy, &stackView, pcaptap.Config{})
	if err != nil {
		panic(err)
	}

	lossy.DropNext(impair.Egress, impair.MatchFIN, 1)  // the stack's first FIN is lost
	lossy.DropNext(impair.Ingress, impair.MatchAny, 1) // and so is the peer's first packet

	// The stack sends an ACK, a FIN (dropped) and the FIN again.
	dev.WritePacket(tcpPacket(stackAddr, peerAddr, header.TCPFlagAck, 1, 0))
	dev.WritePacket(tcpPacket(stackAddr, peerAddr, header.TCPFlagFin|header.TCPFlagAck, 1, 0))
	dev.WritePacket(tcpPacket(stackAddr, peerAddr, header.TCPFlagFin|header.TCPFlagAck, 1, 0))
	// The peer sends two ACKs; the stack reads one: the first was dropped.
	peer.WritePacket(tcpPacket(peerAddr, stackAddr, header.TCPFlagAck, 9, 0))
	peer.WritePacket(tcpPacket(peerAddr, stackAddr, header.TCPFlagAck, 9, 0))
	dev.ReadPacket(make([]byte, dev.MTU()))

	dev.Close() // closes the whole chain, flushing both captures

	for _, c := range []struct {
		name string
		r    io.Reader
	}{{"stack side", &stackView}, {"wire side", &wireView}} {
		out, in := countByDirection(c.r)
		fmt.Printf("%s: %d out, %d in\n", c.name, out, in)
	}
	// Output:
	// stack side: 3 out, 1 in
	// wire side: 2 out, 2 in
}

// countByDirection reads a capture and tells egress from ingress by source
// address: LINKTYPE_RAW records carry no direction.
func countByDirection(r io.Reader) (out, in int) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		panic(err)
	}
	for {
		data, _, err := pr.ReadPacketData()
		if err != nil {
			return out, in
		}
		if header.IPv4(data).SourceAddress() == stackAddr {
			out++
		} else {
			in++
		}
	}
}
