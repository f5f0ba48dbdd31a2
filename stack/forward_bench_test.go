package stack

import (
	"net"
	"testing"
)

// BenchmarkForwardUDPEchoWindow: as BenchmarkUDPEchoWindow, through a
// forwarded flow: a's socket sends to an address that is not b's, b's
// forwarder hands the flow to a handler that echoes each datagram back with
// UDPFlow.Write (what a relay's return path does).
func BenchmarkForwardUDPEchoWindow(b *testing.B) {
	a, s := pair(b, Config{})
	if err := s.Forward(ForwardConfig{UDP: func(f *UDPFlow) {
		defer f.Close()
		buf := make([]byte, 2048)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			if _, err := f.Write(buf[:n]); err != nil {
				return
			}
		}
	}}); err != nil {
		b.Fatal(err)
	}
	c, err := a.DialUDP("udp", net.JoinHostPort(farAddr.String(), "7"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	benchEchoWindow(b, c)
}
