package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// udpPacket is a UDP datagram from src to dst with a correct checksum.
func udpPacket(src, dst netip.AddrPort, payload []byte) []byte {
	b := make([]byte, udpHeaderLen+len(payload))
	u := header.UDP(b)
	u.Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(len(b))})
	copy(u.Payload(), payload)
	sum := ^checksum.Checksum(b, pseudoHeader(protoUDP, src.Addr(), dst.Addr(), len(b)))
	if sum == 0 {
		sum = 0xffff
	}
	u.SetChecksum(sum)
	return ipv4Packet(src.Addr(), dst.Addr(), protoUDP, b)
}

var (
	peerA = netip.AddrPortFrom(addrA, 5000)
	udp7  = netip.AddrPortFrom(addrB, 7)
)

// link is a manual stack's device and its other end, which reads what the
// stack sends.
type link struct{ dev, peer *tuntest.Endpoint }

// sent is how many packets the stack has sent.
func (l link) sent() uint64 { return l.dev.Stats().Sent }

// read returns the next packet the stack sent.
func (l link) read(t testing.TB) []byte {
	t.Helper()
	if l.peer.Stats().Received >= l.sent() {
		t.Fatal("the stack sent no (more) packets")
	}
	b := make([]byte, 1500)
	n, err := l.peer.ReadPacket(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// manualUDP is a manual stack on addrB (prefix 198.18.0.0/24) and its link.
func manualUDP(t *testing.T) (*Manual, link) {
	t.Helper()
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	m, err := NewManual(Config{Device: dev, Addr: addrB, Prefix: netip.MustParsePrefix("198.18.0.0/24"), Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, link{dev, peer}
}

// udpEcho serves UDP echo on s's port 7 until the socket or s closes; the
// channel is closed when the server is done.
func udpEcho(t *testing.T, s *Stack) (*UDPConn, <-chan struct{}) {
	t.Helper()
	srv, err := s.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			srv.WriteTo(buf[:n], from)
		}
	}()
	return srv, done
}

func TestUDPEchoOverPipe(t *testing.T) {
	a, b := pair(t, Config{})
	udpEcho(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.DialContext(ctx, "udp", "198.18.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if got := c.RemoteAddr().String(); got != "198.18.0.2:7" {
		t.Errorf("RemoteAddr %s", got)
	}
	buf := make([]byte, 2048, 8192)
	for i, msg := range [][]byte{[]byte("hello"), {}, bytes.Repeat([]byte{'x'}, 1472)} {
		if n, err := c.Write(msg); err != nil || n != len(msg) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		n, err := c.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo %d: got %d bytes, %v; want %d", i, n, err, len(msg))
		}
	}
	// 8000 bytes go in fragments both ways (frag.go, reasm.go); 65,508
	// are more than an IPv4 datagram holds.
	big := bytes.Repeat([]byte("0123456789abcdef"), 500)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf[:cap(buf)]); err != nil || !bytes.Equal(buf[:n], big) {
		t.Fatalf("echo of 8000 bytes: %d, %v", n, err)
	}
	if _, err := c.Write(make([]byte, 65508)); !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("oversized write: %v, want EMSGSIZE", err)
	}
	st := b.Stats()
	if st.DatagramsIn != 4 || st.DatagramsOut != 4 || st.UDPSockets != 1 {
		t.Errorf("server: DatagramsIn %d, DatagramsOut %d, UDPSockets %d; want 4, 4, 1", st.DatagramsIn, st.DatagramsOut, st.UDPSockets)
	}
	// A read with a buffer smaller than the datagram takes what fits; the
	// rest is gone.
	c.Write([]byte("abcdef"))
	if n, err := c.Read(buf[:3]); err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("short read: %q, %v", buf[:n], err)
	}
	c.Write([]byte("next"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "next" {
		t.Fatalf("read after a short read: %q, %v", buf[:n], err)
	}
}

// TestUDPPortUnreachable: a datagram to a closed port is answered with an
// ICMP port unreachable quoting its IP header and first 8 bytes; and so is
// one to a connected socket's port from another peer.
func TestUDPPortUnreachable(t *testing.T) {
	m, peer := manualUDP(t)
	dgram := udpPacket(peerA, netip.AddrPortFrom(addrB, 9), []byte("anyone there?"))
	if err := m.Inject(dgram); err != nil {
		t.Fatal(err)
	}
	got := peer.read(t)
	ip := header.IPv4(got)
	if ip.Protocol() != protoICMP || ip.SourceAddress().As4() != addrB.As4() || ip.DestinationAddress().As4() != addrA.As4() {
		t.Fatalf("sent %x, want an ICMP from %v to %v", got, addrB, addrA)
	}
	icmp := got[ipv4HeaderLen:]
	want := append([]byte{3, 3, 0, 0, 0, 0, 0, 0}, dgram[:ipv4HeaderLen+8]...)
	binary.BigEndian.PutUint16(want[2:], ^checksum.Checksum(want, 0))
	if !bytes.Equal(icmp, want) {
		t.Fatalf("ICMP\n got %x\nwant %x", icmp, want)
	}
	if st := m.Stats(); st.Drops.UDPNoPort != 1 || st.PortUnreachables != 1 || st.DatagramsIn != 0 {
		t.Fatalf("UDPNoPort %d, PortUnreachables %d, DatagramsIn %d; want 1, 1, 0", st.Drops.UDPNoPort, st.PortUnreachables, st.DatagramsIn)
	}

	c, err := m.DialUDP("udp4", "198.18.0.1:5000")
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	other := netip.AddrPortFrom(addrA, 5001)
	if err := m.Inject(udpPacket(other, netip.AddrPortFrom(addrB, uint16(port)), []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if got := peer.read(t); got[9] != protoICMP || got[ipv4HeaderLen] != 3 || got[ipv4HeaderLen+1] != 3 {
		t.Fatalf("datagram from a stranger to a connected socket: sent %x, want a port unreachable", got)
	}
	if err := m.Inject(udpPacket(peerA, netip.AddrPortFrom(addrB, uint16(port)), []byte("y"))); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("connected read: %q, %v", buf[:n], err)
	}
	if st := m.Stats(); st.Drops.UDPNoPort != 2 || st.PortUnreachables != 2 || st.DatagramsIn != 1 {
		t.Fatalf("UDPNoPort %d, PortUnreachables %d, DatagramsIn %d; want 2, 2, 1", st.Drops.UDPNoPort, st.PortUnreachables, st.DatagramsIn)
	}
}

// TestUDPPortUnreachableRateLimit: ICMP errors are limited as Linux limits
// them, on the wheel's time: per destination, one a second in bursts of up
// to 6 (icmp_ratelimit); over all, a bucket of 50 that gains one a
// millisecond (icmp_msgs_per_sec, icmp_msgs_burst).
func TestUDPPortUnreachableRateLimit(t *testing.T) {
	m, _ := manualUDP(t)
	closed := netip.AddrPortFrom(addrB, 9)
	send := func(at time.Duration, srcs ...netip.Addr) {
		t.Helper()
		if err := m.AdvanceTo(at); err != nil {
			t.Fatal(err)
		}
		for _, src := range srcs {
			if err := m.Inject(udpPacket(netip.AddrPortFrom(src, 5000), closed, nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(what string, sent, limited uint64) {
		t.Helper()
		if st := m.Stats(); st.PortUnreachables != sent || st.Drops.ICMPRateLimited != limited || st.PacketsOut != sent {
			t.Fatalf("%s: %d sent (%d packets), %d limited; want %d, %d", what, st.PortUnreachables, st.PacketsOut, st.Drops.ICMPRateLimited, sent, limited)
		}
	}
	times := func(n int, a netip.Addr) []netip.Addr {
		var as []netip.Addr
		for range n {
			as = append(as, a)
		}
		return as
	}
	// One destination.
	send(0, times(10, addrA)...)
	want("10 at once to one peer", 6, 4)
	send(1500*time.Millisecond, times(3, addrA)...)
	want("3 more 1.5 s later", 7, 6)
	send(7500*time.Millisecond, times(8, addrA)...)
	want("8 more 6 s later", 13, 8)
	// Many: the global bucket.
	many := func(from, n int) []netip.Addr {
		var as []netip.Addr
		for i := range n {
			as = append(as, netip.AddrFrom4([4]byte{198, 19, byte((from + i) >> 8), byte(from + i)}))
		}
		return as
	}
	send(20*time.Second, many(0, 60)...)
	want("60 peers at once", 63, 18)
	send(20*time.Second+5500*time.Microsecond, many(60, 10)...)
	want("10 more peers 5.5 ms later", 68, 23)
	// The table of destinations holds icmpMaxPeers; a full bucket makes room.
	base := 30 * time.Second
	m.AdvanceTo(base)
	m.icmpLimit.peers = map[netip.Addr]peerBucket{}
	for i := range icmpMaxPeers {
		send(base+time.Duration(i)*time.Millisecond, many(1000+i, 1)...)
	}
	want("a table's worth of peers", 68+icmpMaxPeers, 23)
	send(base+icmpMaxPeers*time.Millisecond, many(9000, 1)...)
	want("one peer more than the table holds", 68+icmpMaxPeers, 24)
	send(base+icmpPeerBurst+10*time.Millisecond, many(9000, 1)...)
	want("once 11 buckets are full again", 69+icmpMaxPeers, 24)
	if n := len(m.icmpLimit.peers); n != icmpMaxPeers-11+1 {
		t.Fatalf("%d destinations kept, want %d", n, icmpMaxPeers-11+1)
	}
}

// TestUDPBadInput: malformed datagrams are counted drops, and answered with
// nothing; a datagram to a closed port from a martian source or to a
// broadcast address gets no ICMP.
func TestUDPBadInput(t *testing.T) {
	good := udpPacket(peerA, udp7, []byte("payload"))
	mutate := func(f func(u []byte) []byte) []byte {
		u := append([]byte(nil), good[ipv4HeaderLen:]...)
		return ipv4Packet(addrA, addrB, protoUDP, f(u))
	}
	for _, tc := range []struct {
		name    string
		pkt     []byte
		counter func(*Drops) uint64
	}{
		{"short header", mutate(func(u []byte) []byte { return u[:7] }), func(d *Drops) uint64 { return d.BadUDPHeader }},
		{"empty", mutate(func(u []byte) []byte { return u[:0] }), func(d *Drops) uint64 { return d.BadUDPHeader }},
		{"length below 8", mutate(func(u []byte) []byte { u[4], u[5] = 0, 7; return u }), func(d *Drops) uint64 { return d.BadUDPLength }},
		{"length past the end", mutate(func(u []byte) []byte { u[4], u[5] = 0, 16; return u }), func(d *Drops) uint64 { return d.BadUDPLength }},
		{"bad checksum", mutate(func(u []byte) []byte { u[8] ^= 1; return u }), func(d *Drops) uint64 { return d.BadUDPChecksum }},
		{"closed port, martian source", udpPacket(netip.MustParseAddrPort("127.0.0.1:5000"), netip.AddrPortFrom(addrB, 9), nil), func(d *Drops) uint64 { return d.MartianLoopback }},
		{"closed port, broadcast source", udpPacket(netip.MustParseAddrPort("198.18.0.255:5000"), netip.AddrPortFrom(addrB, 9), nil), func(d *Drops) uint64 { return d.MartianBroadcast }},
		{"closed port, broadcast destination", udpPacket(peerA, netip.MustParseAddrPort("198.18.0.255:9"), nil), func(d *Drops) uint64 { return d.NotForUs }},
		{"closed port, multicast destination", udpPacket(peerA, netip.MustParseAddrPort("224.0.0.251:5353"), nil), func(d *Drops) uint64 { return d.NotForUs }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, peer := manualUDP(t)
			u, err := m.ListenUDP("udp", ":7")
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Inject(tc.pkt); err != nil {
				t.Fatal(err)
			}
			st := m.Stats()
			if got := tc.counter(&st.Drops); got != 1 {
				t.Errorf("drop counted %d times, want 1: %+v", got, st.Drops)
			}
			if st.DatagramsIn != 0 || peer.sent() != 0 || st.PortUnreachables != 0 {
				t.Errorf("DatagramsIn %d, packets sent %d, PortUnreachables %d; want none", st.DatagramsIn, peer.sent(), st.PortUnreachables)
			}
			u.SetReadDeadline(time.Now())
			if _, _, err := u.ReadFrom(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("read: %v, want nothing queued", err)
			}
		})
	}
}

// TestUDPZeroChecksumAndPadding: a zero checksum is none (RFC 768): the
// datagram is taken; bytes past the UDP length are padding.
func TestUDPZeroChecksumAndPadding(t *testing.T) {
	m, _ := manualUDP(t)
	u, err := m.ListenUDP("udp", "198.18.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	pkt := udpPacket(peerA, udp7, []byte("no sum"))
	pkt[ipv4HeaderLen+6], pkt[ipv4HeaderLen+7] = 0, 0
	if err := m.Inject(pkt); err != nil {
		t.Fatal(err)
	}
	// The UDP length says 8+3: the rest of the IP payload is padding.
	padded := udpPacket(peerA, udp7, []byte("abc"))
	u8 := append(padded[ipv4HeaderLen:], "junk"...)
	if err := m.Inject(ipv4Packet(addrA, addrB, protoUDP, u8)); err != nil {
		t.Fatal(err)
	}
	u.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 64)
	for _, want := range []string{"no sum", "abc"} {
		n, from, err := u.ReadFromUDPAddrPort(buf)
		if err != nil || string(buf[:n]) != want || from != peerA {
			t.Fatalf("read %q from %v, %v; want %q from %v", buf[:n], from, err, want, peerA)
		}
	}
}

// TestUDPChecksumSent: every datagram sent carries a checksum, and one whose
// sum is zero carries it as 0xffff (RFC 768).
func TestUDPChecksumSent(t *testing.T) {
	m, peer := manualUDP(t)
	u, err := m.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	// The payload that makes the checksum zero: the one's complement of the
	// sum of everything else.
	hdr := make([]byte, udpHeaderLen+2)
	header.UDP(hdr).Encode(&header.UDPFields{SrcPort: 7, DstPort: peerA.Port(), Length: uint16(len(hdr))})
	rest := checksum.Checksum(hdr, pseudoHeader(protoUDP, addrB, addrA, len(hdr)))
	zeroing := binary.BigEndian.AppendUint16(nil, ^rest)
	for _, tc := range []struct {
		payload []byte
		want    uint16 // 0: any but zero, checked
	}{{[]byte("hello"), 0}, {zeroing, 0xffff}} {
		if _, err := u.WriteToUDPAddrPort(tc.payload, peerA); err != nil {
			t.Fatal(err)
		}
		got := peer.read(t)
		d := got[ipv4HeaderLen:]
		sum := binary.BigEndian.Uint16(d[6:])
		if sum == 0 || checksum.Checksum(d, pseudoHeader(protoUDP, addrB, addrA, len(d))) != 0xffff {
			t.Errorf("payload %x: checksum %#04x does not verify", tc.payload, sum)
		}
		if tc.want != 0 && sum != tc.want {
			t.Errorf("payload %x: checksum %#04x, want %#04x", tc.payload, sum, tc.want)
		}
		if !bytes.Equal(d[udpHeaderLen:], tc.payload) || binary.BigEndian.Uint16(d[4:]) != uint16(len(d)) || got[6]&0x40 == 0 {
			t.Errorf("sent %x for payload %x", got, tc.payload)
		}
	}
}

// TestUDPQueueFull: a socket's queue holds udpQueueLen datagrams; the rest
// are counted drops until the application reads.
func TestUDPQueueFull(t *testing.T) {
	m, _ := manualUDP(t)
	u, err := m.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	for i := range udpQueueLen + 3 {
		if err := m.Inject(udpPacket(peerA, udp7, []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.DatagramsIn != udpQueueLen || st.Drops.UDPQueueFull != 3 || st.PortUnreachables != 0 {
		t.Fatalf("DatagramsIn %d, UDPQueueFull %d, PortUnreachables %d; want %d, 3, 0", st.DatagramsIn, st.Drops.UDPQueueFull, st.PortUnreachables, udpQueueLen)
	}
	buf := make([]byte, 4)
	if n, _, err := u.ReadFrom(buf); err != nil || n != 1 || buf[0] != 0 {
		t.Fatalf("first read: %x, %v; want the first datagram", buf[:n], err)
	}
	m.Inject(udpPacket(peerA, udp7, []byte{0xee}))
	if st := m.Stats(); st.DatagramsIn != udpQueueLen+1 || st.Drops.UDPQueueFull != 3 {
		t.Fatalf("after a read: DatagramsIn %d, UDPQueueFull %d; want %d, 3", st.DatagramsIn, st.Drops.UDPQueueFull, udpQueueLen+1)
	}
}

// TestUDPSocketAPI: errors as package net gives them, deadlines, Close.
func TestUDPSocketAPI(t *testing.T) {
	m, _ := manualUDP(t)
	for name, bad := range map[string]func() (*UDPConn, error){
		"ListenUDP tcp":             func() (*UDPConn, error) { return m.ListenUDP("tcp", ":7") },
		"ListenUDP another address": func() (*UDPConn, error) { return m.ListenUDP("udp", "198.18.0.9:7") },
		"DialUDP port 0":            func() (*UDPConn, error) { return m.DialUDP("udp", "198.18.0.1:0") },
		"DialUDP IPv6":              func() (*UDPConn, error) { return m.DialUDP("udp", "[2001:db8::1]:53") },
	} {
		if u, err := bad(); err == nil || u != nil {
			t.Errorf("%s: %v, %v; want an error", name, u, err)
		}
	}
	if _, err := m.Listen("tcp", ":7"); err != nil {
		t.Fatal(err) // TCP's port 7 is not UDP's
	}
	u, err := m.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ListenPacket("udp", ":7"); err == nil {
		t.Error("a second socket on UDP port 7: no error")
	}
	if got := u.LocalAddr().String(); got != "198.18.0.2:7" {
		t.Errorf("LocalAddr %s", got)
	}
	if u.RemoteAddr() != nil {
		t.Errorf("RemoteAddr of an unconnected socket: %v, want nil", u.RemoteAddr())
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"Write unconnected", func() error { _, err := u.Write([]byte("x")); return err }(), syscall.EDESTADDRREQ},
		{"WriteTo broadcast", func() error { _, err := u.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4bcast, Port: 9}); return err }(), syscall.EACCES},
		{"WriteTo subnet broadcast", func() error {
			_, err := u.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort("198.18.0.255:9"))
			return err
		}(), syscall.EACCES},
		{"WriteTo port 0", func() error { _, err := u.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(addrA, 0)); return err }(), syscall.EINVAL},
		{"WriteTo a TCP address", func() error {
			_, err := u.WriteTo([]byte("x"), &net.TCPAddr{IP: net.IPv4(198, 18, 0, 1), Port: 9})
			return err
		}(), syscall.EINVAL},
	} {
		var op *net.OpError
		if !errors.Is(tc.err, tc.want) || !errors.As(tc.err, &op) {
			t.Errorf("%s: %v, want a *net.OpError with %v", tc.name, tc.err, tc.want)
		}
	}
	c, err := m.DialUDP("udp", "198.18.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(198, 18, 0, 1), Port: 53}); !errors.Is(err, net.ErrWriteToConnected) {
		t.Errorf("WriteTo on a connected socket: %v", err)
	}
	if p := c.LocalAddr().(*net.UDPAddr).Port; p < 32768 || p > 60999 {
		t.Errorf("ephemeral port %d outside [32768, 60999]", p)
	}
	// Deadlines: passed, then in the future, then a Close that unblocks.
	buf := make([]byte, 8)
	u.SetReadDeadline(time.Now().Add(-time.Second))
	if _, _, err := u.ReadFrom(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past its deadline: %v", err)
	}
	start := time.Now()
	u.SetReadDeadline(start.Add(50 * time.Millisecond))
	_, _, err = u.ReadFrom(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) < 50*time.Millisecond {
		t.Errorf("read with a deadline 50 ms ahead: %v after %v", err, time.Since(start))
	}
	u.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := u.WriteToUDPAddrPort([]byte("x"), peerA); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("write past its deadline: %v", err)
	}
	u.SetDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, _, err := u.ReadFrom(buf); done <- err }()
	time.Sleep(20 * time.Millisecond)
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("read unblocked by Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock a read")
	}
	if err := u.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := u.WriteToUDPAddrPort([]byte("x"), peerA); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
	// The port is free again; after the stack's Close, so is nothing.
	if u2, err := m.ListenUDP("udp", ":7"); err != nil {
		t.Errorf("reopen port 7 after Close: %v", err)
	} else {
		go func() { time.Sleep(20 * time.Millisecond); m.Close() }()
		if _, _, err := u2.ReadFrom(buf); !errors.Is(err, net.ErrClosed) {
			t.Errorf("read unblocked by the stack's Close: %v", err)
		}
	}
}

// TestUDPRefused: a connected socket's next read after an ICMP port
// unreachable for its flow fails with ECONNREFUSED, once, as on Linux;
// here the ICMP is the other stack's, for its closed port.
func TestUDPRefused(t *testing.T) {
	a, b := pair(t, Config{})
	c, err := a.DialUDP("udp", "198.18.0.2:9")
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello?")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := c.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("read after the port unreachable: %v, want ECONNREFUSED", err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("second read: %v, want a timeout (the error is reported once)", err)
	}
	if sa, sb := a.Stats(), b.Stats(); sa.UnreachablesIn != 1 || sb.PortUnreachables != 1 || sa.Drops.ICMPIgnored != 0 {
		t.Fatalf("UnreachablesIn %d, PortUnreachables %d, ICMPIgnored %d; want 1, 1, 0", sa.UnreachablesIn, sb.PortUnreachables, sa.Drops.ICMPIgnored)
	}
}

// TestUDPUnreachableForOthers: a port unreachable that does not name a
// connected socket's own flow (another remote, an unconnected socket, a
// quote cut short) changes nothing and is counted as ignored.
func TestUDPUnreachableForOthers(t *testing.T) {
	m, _ := manualUDP(t)
	c, err := m.DialUDP("udp", "198.18.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	lp := uint16(c.LocalAddr().(*net.UDPAddr).Port)
	u, err := m.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := func(quote []byte) []byte {
		b := append([]byte{3, 3, 0, 0, 0, 0, 0, 0}, quote...)
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
		return ipv4Packet(addrA, addrB, protoICMP, b)
	}
	ours := func(from uint16, to netip.AddrPort) []byte {
		return udpPacket(netip.AddrPortFrom(addrB, from), to, []byte("q"))[:ipv4HeaderLen+8]
	}
	for _, q := range [][]byte{
		ours(lp, netip.MustParseAddrPort("198.18.0.1:54")), // another remote port
		ours(lp, netip.MustParseAddrPort("198.18.0.3:53")), // another remote address
		ours(7, netip.MustParseAddrPort("198.18.0.1:53")),  // the unconnected socket
		ours(lp, netip.MustParseAddrPort("198.18.0.1:53"))[:ipv4HeaderLen+7],
	} {
		if err := m.Inject(unreachable(q)); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.UnreachablesIn != 0 || st.Drops.ICMPIgnored != 4 {
		t.Fatalf("UnreachablesIn %d, ICMPIgnored %d; want 0, 4", st.UnreachablesIn, st.Drops.ICMPIgnored)
	}
	for _, s := range []*UDPConn{c, u} {
		s.SetReadDeadline(time.Now())
		if _, err := s.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%v: read: %v, want a timeout", s.LocalAddr(), err)
		}
	}
	if err := m.Inject(unreachable(ours(lp, netip.MustParseAddrPort("198.18.0.1:53")))); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 4)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("its own flow: read %v, want ECONNREFUSED", err)
	}
}

// TestUDPConcurrentReaders: four goroutines reading one socket share its
// datagrams: each is read exactly once, none is left waiting while a reader
// sleeps. (nettest.TestConn does not apply to UDP: its BasicIO copies a
// stream with io.Copy, in writes larger than a datagram can be, and wants
// stream semantics back; the deadline and close behaviour it checks is
// tested here and in TestUDPSocketAPI.)
func TestUDPConcurrentReaders(t *testing.T) {
	a, b := pair(t, Config{})
	srv, err := b.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	got := make(chan int, n)
	for range 4 {
		go func() {
			buf := make([]byte, 8)
			for {
				k, _, err := srv.ReadFrom(buf)
				if err != nil {
					return
				}
				got <- int(binary.BigEndian.Uint16(buf[:k]))
			}
		}()
	}
	c, err := a.DialUDP("udp", "198.18.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(i))); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			time.Sleep(time.Millisecond) // within the queue's bound
		}
	}
	seen := make(map[int]bool)
	timeout := time.After(10 * time.Second)
	for len(seen) < n {
		select {
		case i := <-got:
			if seen[i] {
				t.Fatalf("datagram %d read twice", i)
			}
			seen[i] = true
		case <-timeout:
			st := b.Stats()
			t.Fatalf("read %d of %d datagrams; DatagramsIn %d, UDPQueueFull %d", len(seen), n, st.DatagramsIn, st.Drops.UDPQueueFull)
		}
	}
	srv.Close()
}
