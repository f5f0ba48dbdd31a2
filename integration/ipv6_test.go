//go:build linux

package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
)

// The kernel is the stack's peer over IPv6 (RFC 8200): its address is
// 2001:db8:0:N::1 on the TUN link of a namespace of the test's own, the
// stack's 2001:db8:0:N::2 (envOptions.IPv6).

// ipv6Data is a test pattern: not all one byte, so that a misplaced
// segment shows.
func ipv6Data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>10)
	}
	return b
}

// TestIPv6KernelConnects: the kernel connects over IPv6 to the stack's
// dual-stack listener, sends 4 MB and reads its echo back intact; the
// connection is IPv6 on the stack's side, with the MSS of an IPv6 path
// (MTU - 60) both ways; the IPv4 address still works on the same listener.
func TestIPv6KernelConnects(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 60, IPv6: true})
	ln := e.listen(t, 7)
	accepted := make(chan *stack.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sc := c.(*stack.Conn)
			accepted <- sc
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(60 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	var kc net.Conn
	if err := e.Do(func() (err error) {
		kc, err = net.DialTimeout("tcp6", net.JoinHostPort(e.StackAddr6.String(), "7"), 20*time.Second)
		return err
	}); err != nil {
		t.Fatalf("kernel dial over IPv6: %v", err)
	}
	defer kc.Close()
	kc.SetDeadline(time.Now().Add(60 * time.Second))
	msg := ipv6Data(4 << 20)
	go func() { kc.Write(msg); kc.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(kc)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo over IPv6: got %d bytes (%v), want the %d sent back intact", len(got), err, len(msg))
	}
	sc := <-accepted
	if la := sc.LocalAddr().(*net.TCPAddr).AddrPort(); la != netip.AddrPortFrom(e.StackAddr6, 7) {
		t.Errorf("stack's side %v, want [%v]:7", la, e.StackAddr6)
	}
	if info := sc.Info(); info.SndMSS > 1500-60 || info.RcvMSS > 1500-60 {
		t.Errorf("SndMSS %d, RcvMSS %d: more than an IPv6 path's MSS (1440)", info.SndMSS, info.RcvMSS)
	}
	c4, err := e.kernelDial(7, 20*time.Second)
	if err != nil {
		t.Fatalf("kernel dial over IPv4 to the same listener: %v", err)
	}
	c4.Write([]byte("v4"))
	buf := make([]byte, 2)
	c4.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c4, buf); err != nil || string(buf) != "v4" {
		t.Fatalf("echo over IPv4: %q, %v", buf, err)
	}
	st := e.Stack.Stats()
	t.Logf("drops: neighbour discovery %d, not for us %d", st.Drops.NeighborDiscovery, st.Drops.NotForUs)
	if st.Drops.BadTCPChecksum != 0 || st.Drops.BadIPHeader != 0 {
		t.Errorf("BadTCPChecksum %d, BadIPHeader %d; want 0", st.Drops.BadTCPChecksum, st.Drops.BadIPHeader)
	}
}

// TestIPv6StackDials: the stack dials the kernel's IPv6 listener, from its
// IPv6 address, and 4 MB go each way intact; "tcp4" to an IPv6 address is
// refused at once.
func TestIPv6StackDials(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 61, IPv6: true})
	kln, err := e.Bed.KernelListen6(context.Background(), 5006, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kln.Close() })
	remote := make(chan netip.AddrPort, 1)
	go func() {
		c, err := kln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		remote <- c.RemoteAddr().(*net.TCPAddr).AddrPort()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		io.Copy(c, c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := net.JoinHostPort(e.KernelAddr6.String(), "5006")
	if _, err := e.Stack.DialContext(ctx, "tcp4", addr); err == nil {
		t.Fatal(`"tcp4" to an IPv6 address: no error`)
	}
	c, err := e.Stack.DialContext(ctx, "tcp6", addr)
	if err != nil {
		t.Fatalf("stack dial over IPv6: %v", err)
	}
	defer c.Close()
	if r := <-remote; r.Addr() != e.StackAddr6 {
		t.Errorf("the kernel saw the connection from %v, want %v", r, e.StackAddr6)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	msg := ipv6Data(4 << 20)
	go func() { c.Write(msg); c.(*stack.Conn).CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo over IPv6: got %d bytes (%v), want the %d sent back intact", len(got), err, len(msg))
	}
}

// TestIPv6Ping: `ping -6` from the namespace gets the stack's echo replies.
func TestIPv6Ping(t *testing.T) {
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping is not installed (iputils-ping)")
	}
	e := newEnv(t, envOptions{Subnet: 62, IPv6: true})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out, err := e.command(ctx, "ping", "-6", "-c", "3", "-W", "5", "-i", "0.2", "-s", "1000", e.StackAddr6.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ping -6: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if n := e.Stack.Stats().EchoReplies; n != 3 {
		t.Errorf("stack sent %d echo replies, want 3", n)
	}
}

// TestIPv6UDPWithKernel: the kernel's UDP over IPv6 is echoed by the
// stack's dual-stack socket, a datagram to a closed port comes back as an
// ICMPv6 port unreachable (the kernel's socket reads ECONNREFUSED), and the
// stack's connected socket gets the kernel's echo and its ICMPv6 port
// unreachable.
func TestIPv6UDPWithKernel(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 63, IPv6: true})
	e.udpEcho(t, 7)
	stack6 := func(port int) string { return net.JoinHostPort(e.StackAddr6.String(), strconv.Itoa(port)) }
	kernel6 := func(port int) string { return net.JoinHostPort(e.KernelAddr6.String(), strconv.Itoa(port)) }
	dial := func(network, addr string) (c net.Conn) {
		if err := e.Do(func() (err error) { c, err = net.Dial(network, addr); return err }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	buf := make([]byte, 2048)
	k := dial("udp6", stack6(7))
	for _, size := range []int{0, 1, 100, 1500 - 48} {
		msg := bytes.Repeat([]byte{byte(size)}, size)
		if _, err := k.Write(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := k.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("kernel -> stack echo of %d bytes over IPv6: got %d, %v", size, n, err)
		}
	}
	closed := dial("udp6", stack6(9))
	closed.Write([]byte("anyone?"))
	if _, err := closed.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("kernel -> the stack's closed port over IPv6: %v, want ECONNREFUSED", err)
	}

	var ks net.PacketConn
	if err := e.Do(func() (err error) { ks, err = net.ListenPacket("udp6", kernel6(5353)); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	go func() {
		for {
			n, from, err := ks.ReadFrom(buf)
			if err != nil {
				return
			}
			ks.WriteTo(buf[:n], from)
		}
	}()
	c, err := e.Stack.DialUDP("udp6", kernel6(5353))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	sbuf := make([]byte, 2048)
	c.Write([]byte("stack to kernel"))
	if n, err := c.Read(sbuf); err != nil || string(sbuf[:n]) != "stack to kernel" {
		t.Fatalf("stack -> kernel echo over IPv6: %q, %v", sbuf[:n], err)
	}
	r, err := e.Stack.DialUDP("udp", kernel6(5354))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.SetDeadline(time.Now().Add(20 * time.Second))
	r.Write([]byte("nobody"))
	if _, err := r.Read(sbuf); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("stack -> the kernel's closed port over IPv6: %v, want ECONNREFUSED", err)
	}
	st := e.Stack.Stats()
	if st.PortUnreachables != 1 || st.UnreachablesIn != 1 || st.Drops.BadUDPChecksum != 0 || st.DatagramsIn != 5 {
		t.Fatalf("PortUnreachables %d, UnreachablesIn %d, BadUDPChecksum %d, DatagramsIn %d; want 1, 1, 0, 5",
			st.PortUnreachables, st.UnreachablesIn, st.Drops.BadUDPChecksum, st.DatagramsIn)
	}
}

// TestIPv6Loss: 2 MB each way between the kernel and the stack over IPv6
// through 3% loss in each direction (seeded, in impair): the stack's
// retransmission timers and loss recovery work over IPv6 as over IPv4, and
// the data arrives intact.
func TestIPv6Loss(t *testing.T) {
	e := newEnv(t, envOptions{Subnet: 64, IPv6: true, Seed: 6, EgressLoss: 0.03, IngressLoss: 0.03})
	ln := e.listen(t, 7)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(120 * time.Second))
		io.Copy(c, c)
	}()
	var kc net.Conn
	if err := e.Do(func() (err error) {
		kc, err = net.DialTimeout("tcp6", net.JoinHostPort(e.StackAddr6.String(), "7"), 30*time.Second)
		return err
	}); err != nil {
		t.Fatalf("kernel dial over IPv6: %v", err)
	}
	defer kc.Close()
	kc.SetDeadline(time.Now().Add(120 * time.Second))
	msg := ipv6Data(2 << 20)
	go func() { kc.Write(msg); kc.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(kc)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo over IPv6 with loss: got %d bytes (%v), want the %d sent back intact", len(got), err, len(msg))
	}
	st := e.Stack.Stats()
	if is := e.Imp.Stats(); st.TCP.SegsRetransmitted == 0 || is.EgressLost == 0 || is.IngressLost == 0 {
		t.Errorf("retransmitted %d segments, impair lost %d out and %d in: the loss did not bite", st.TCP.SegsRetransmitted, is.EgressLost, is.IngressLost)
	}
	t.Logf("stack retransmitted %d segments (RTOs %d, fast %d, RACK %d, TLP %d)", st.TCP.SegsRetransmitted, st.TCP.RTOEvents, st.TCP.FastRetransmits, st.TCP.RACKRetransmits, st.TCP.TLPProbes)
}

// TestIPv6FirstConnection: on fresh beds, the kernel's first connection
// over IPv6 completes without a SYN-ACK retransmission. (The kernel adds
// its IPv6 address's local route after the link comes up, from a work
// queue: until netns.Attach waited for it, the SYN went out and the
// SYN-ACK was dropped, in about one bed in ten, and the connection waited
// a second for the retransmission.)
func TestIPv6FirstConnection(t *testing.T) {
	for i := range 10 {
		e := newEnv(t, envOptions{Subnet: 65, IPv6: true, Over6: true})
		ln := e.listen(t, 7)
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := e.kernelDial(7, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if n := e.Stack.Stats().TCP.SYNRetransmits; n != 0 {
			t.Fatalf("bed %d: the stack retransmitted its SYN-ACK %d times: the kernel dropped the first", i+1, n)
		}
		e.Stack.Close()
		if err := e.Bed.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
