package integration

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// kernelUDP opens a kernel UDP socket in the namespace: connected to raddr
// (DialUDP) when it is not empty, else listening on the kernel's port. With
// noCheck the kernel sends its datagrams without a checksum (SO_NO_CHECK).
// It is closed at cleanup.
func (e *env) kernelUDP(t *testing.T, raddr string, port int, noCheck bool) *net.UDPConn {
	t.Helper()
	var c net.Conn
	var pc net.PacketConn
	control := func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			if noCheck {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
			}
		}); err != nil {
			return err
		}
		return serr
	}
	err := e.Do(func() (err error) {
		if raddr != "" {
			d := net.Dialer{Control: control}
			c, err = d.Dial("udp4", raddr)
			return err
		}
		lc := net.ListenConfig{Control: control}
		pc, err = lc.ListenPacket(context.Background(), "udp4", e.kernelAddr(port))
		return err
	})
	if err != nil {
		t.Fatalf("kernel UDP socket: %v", err)
	}
	u, _ := c.(*net.UDPConn)
	if pc != nil {
		u = pc.(*net.UDPConn)
	}
	t.Cleanup(func() { u.Close() })
	u.SetDeadline(time.Now().Add(20 * time.Second))
	return u
}

// TestUDPWithKernel: the kernel, from inside the namespace, is the stack's
// UDP peer both ways: its datagrams (with and without a checksum) are
// echoed by the stack; a datagram to the stack's closed port comes back as
// an ICMP port unreachable (the kernel's connected socket reads
// ECONNREFUSED); the stack's connected socket gets the kernel's echo, and
// ECONNREFUSED from the kernel's ICMP for a port nobody listens on.
func TestUDPWithKernel(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 41})
	e.udpEcho(t, 7)
	buf := make([]byte, 2048)
	for _, noCheck := range []bool{false, true} {
		k := e.kernelUDP(t, e.stackAddr(7), 0, noCheck)
		for _, size := range []int{0, 1, 100, 1472} {
			msg := bytes.Repeat([]byte{byte(size)}, size)
			if _, err := k.Write(msg); err != nil {
				t.Fatal(err)
			}
			n, err := k.Read(buf)
			if err != nil || !bytes.Equal(buf[:n], msg) {
				t.Fatalf("kernel -> stack echo of %d bytes (no checksum: %v): got %d, %v", size, noCheck, n, err)
			}
		}
	}
	closed := e.kernelUDP(t, e.stackAddr(9), 0, false)
	closed.Write([]byte("anyone?"))
	if _, err := closed.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("kernel -> the stack's closed port: %v, want ECONNREFUSED", err)
	}

	// The other way: the stack's connected socket and a kernel echo server.
	ks := e.kernelUDP(t, "", 5353, false)
	go func() {
		for {
			n, from, err := ks.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			ks.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := e.Stack.DialContext(ctx, "udp", e.kernelAddr(5353))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	sbuf := make([]byte, 2048)
	if _, err := c.Write([]byte("stack to kernel")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(sbuf); err != nil || string(sbuf[:n]) != "stack to kernel" {
		t.Fatalf("stack -> kernel echo: %q, %v", sbuf[:n], err)
	}
	r, err := e.Stack.DialUDP("udp", e.kernelAddr(5354))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.SetDeadline(time.Now().Add(10 * time.Second))
	r.Write([]byte("nobody"))
	if _, err := r.Read(sbuf); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("stack -> the kernel's closed port: %v, want ECONNREFUSED", err)
	}
	st := e.Stack.Stats()
	if st.DatagramsIn != 9 || st.DatagramsOut != 10 || st.PortUnreachables != 1 || st.UnreachablesIn != 1 || st.Drops.BadUDPChecksum != 0 {
		t.Fatalf("DatagramsIn %d, DatagramsOut %d, PortUnreachables %d, UnreachablesIn %d, BadUDPChecksum %d; want 9, 10, 1, 1, 0",
			st.DatagramsIn, st.DatagramsOut, st.PortUnreachables, st.UnreachablesIn, st.Drops.BadUDPChecksum)
	}
}

// udpEcho serves a UDP echo on the stack's dual-stack socket on port, until
// the test ends.
func (e *env) udpEcho(t *testing.T, port int) {
	t.Helper()
	e.udpEchoAt(t, ":"+strconv.Itoa(port))
}

// udpEchoAt is udpEcho on a local address of the stack ("addr:port").
func (e *env) udpEchoAt(t *testing.T, address string) {
	t.Helper()
	srv, err := e.Stack.ListenUDP("udp", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}
