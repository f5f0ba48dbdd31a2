package tcpipclock

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// newStack makes a gVisor stack on clock with one NIC, a channel endpoint, at
// addr/24.
func newStack(t *testing.T, clock tcpip.Clock, addr tcpip.Address) (*stack.Stack, *channel.Endpoint) {
	t.Helper()
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol},
		Clock:              clock,
	})
	ep := channel.New(512, 1500, "")
	if err := s.CreateNIC(1, ep); err != nil {
		t.Fatalf("CreateNIC: %v", err)
	}
	pa := tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: addr, PrefixLen: 24},
	}
	if err := s.AddProtocolAddress(1, pa, stack.AddressProperties{}); err != nil {
		t.Fatalf("AddProtocolAddress: %v", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: 1}})
	t.Cleanup(func() {
		s.Close()
		s.Wait()
	})
	return s, ep
}

// pump moves the packets from's stack sends into to's stack until ctx is done.
func pump(ctx context.Context, from, to *channel.Endpoint) {
	for {
		pkt := from.ReadContext(ctx)
		if pkt == nil {
			return
		}
		in := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: pkt.ToBuffer()})
		pkt.DecRef()
		to.InjectInbound(header.IPv4ProtocolNumber, in)
		in.DecRef()
	}
}

// TestGVisorTCPOnWheel runs a real gVisor TCP connection between two stacks, both
// on one wheel Clock: connect, send 1 MB, read it back, close.
func TestGVisorTCPOnWheel(t *testing.T) {
	c, err := New(timer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // after the stacks' cleanups

	addrA := tcpip.AddrFrom4([4]byte{10, 0, 0, 1})
	addrB := tcpip.AddrFrom4([4]byte{10, 0, 0, 2})
	sa, epA := newStack(t, c, addrA)
	sb, epB := newStack(t, c, addrB)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go pump(ctx, epA, epB)
	go pump(ctx, epB, epA)

	l, err := gonet.ListenTCP(sb, tcpip.FullAddress{NIC: 1, Addr: addrB, Port: 8080}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The server echoes everything back.
	go func() {
		conn, err := l.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		if _, err := io.Copy(conn, conn); err != nil {
			t.Error(err)
		}
	}()

	conn, err := gonet.DialContextTCP(ctx, sa, tcpip.FullAddress{NIC: 1, Addr: addrB, Port: 8080}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	conn.SetDeadline(deadline)

	data := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	writeErr := make(chan error, 1)
	go func() {
		_, err := conn.Write(data)
		if err == nil {
			err = conn.CloseWrite()
		}
		writeErr <- err
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read %d bytes, then: %v", len(got), err)
	}
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes that differ from the %d sent", len(got), len(data))
	}
	if st := c.Stats(); st.Fired == 0 {
		t.Errorf("wheel stats %+v: want gVisor's timers on the wheel", st)
	}
}
