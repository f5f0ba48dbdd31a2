package stack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

var (
	addrC  = netip.MustParseAddr("198.18.0.3")
	addr6C = netip.MustParseAddr("2001:db8::3")
)

// manualMore is a manual stack on addrB and addr6B with addrC and addr6C as
// Config.MoreAddrs, and its link.
func manualMore(t *testing.T) (*Manual, link) {
	t.Helper()
	return manualOn(t, Config{Addr: addrB, Addr6: addr6B, MoreAddrs: []netip.Addr{addrC, addr6C}, Prefix: netip.MustParsePrefix("198.18.0.0/24")})
}

// TestMoreAddrsTCP: a listener on ":port" answers SYNs to every address of
// the stack from the address each came to; one bound to an address answers
// only there (a SYN to another gets a RST from that other address).
func TestMoreAddrsTCP(t *testing.T) {
	m, l := manualMore(t)
	if _, err := m.Listen("tcp", ":80"); err != nil {
		t.Fatal(err)
	}
	ln81, err := m.Listen("tcp", "198.18.0.3:81")
	if err != nil {
		t.Fatal(err)
	}
	if a := ln81.Addr().(*net.TCPAddr).AddrPort(); a != netip.AddrPortFrom(addrC, 81) {
		t.Fatalf("bound listener's address %v, want %v", a, netip.AddrPortFrom(addrC, 81))
	}
	for i, tc := range []struct {
		src, dst netip.AddrPort
		flags    tcp.Flags
	}{
		{netip.AddrPortFrom(addrA, 40000), netip.AddrPortFrom(addrB, 80), tcp.FlagSYN | tcp.FlagACK},
		{netip.AddrPortFrom(addrA, 40001), netip.AddrPortFrom(addrC, 80), tcp.FlagSYN | tcp.FlagACK},
		{netip.AddrPortFrom(addr6A, 40002), netip.AddrPortFrom(addr6C, 80), tcp.FlagSYN | tcp.FlagACK},
		{netip.AddrPortFrom(addr6A, 40003), netip.AddrPortFrom(addr6B, 80), tcp.FlagSYN | tcp.FlagACK},
		{netip.AddrPortFrom(addrA, 40004), netip.AddrPortFrom(addrC, 81), tcp.FlagSYN | tcp.FlagACK},
		{netip.AddrPortFrom(addrA, 40005), netip.AddrPortFrom(addrB, 81), tcp.FlagRST | tcp.FlagACK},
	} {
		if err := m.Inject(ipPacket(tc.src.Addr(), tc.dst.Addr(), protoTCP, synTo(t, tc.src, tc.dst, 1000))); err != nil {
			t.Fatal(err)
		}
		src, dst, seg := sentTCP(t, l.read(t))
		if src != tc.dst || dst != tc.src || seg.Flags&(tcp.FlagSYN|tcp.FlagACK|tcp.FlagRST) != tc.flags || seg.Ack != 1001 {
			t.Errorf("#%d: SYN %v -> %v answered by %v -> %v %v ack %d; want %v from %v", i, tc.src, tc.dst, src, dst, seg.Flags, seg.Ack, tc.flags, tc.dst)
		}
	}
	// An address that is not the stack's: no answer.
	other := netip.MustParseAddr("198.18.0.4")
	n := l.sent()
	m.Inject(ipPacket(addrA, other, protoTCP, synTo(t, netip.AddrPortFrom(addrA, 40006), netip.AddrPortFrom(other, 80), 1000)))
	if l.sent() != n || m.Stats().Drops.NotForUs != 1 {
		t.Fatalf("SYN to %v: sent %d, NotForUs %d; want nothing sent, 1", other, l.sent()-n, m.Stats().Drops.NotForUs)
	}
	// Our other addresses are our own as a source too: land.
	m.Inject(ipPacket(addrC, addrB, protoTCP, synTo(t, netip.AddrPortFrom(addrC, 40007), netip.AddrPortFrom(addrB, 80), 1000)))
	if l.sent() != n || m.Stats().Drops.MartianLand != 1 {
		t.Fatalf("SYN from %v: sent %d, MartianLand %d; want nothing sent, 1", addrC, l.sent()-n, m.Stats().Drops.MartianLand)
	}
	if _, err := m.Listen("tcp", "198.18.0.4:82"); err == nil {
		t.Fatal("listen on an address not the stack's: no error")
	}
}

// TestMoreAddrsUDPAndEcho: pings to every address are answered from it; a
// socket on ":7" takes datagrams to every address and, unbound, answers
// from the stack's address of the peer's IP version (as a Linux socket on
// INADDR_ANY: the route's source); one bound to an address takes only
// what comes to it, and sends from it.
func TestMoreAddrsUDPAndEcho(t *testing.T) {
	m, l := manualMore(t)
	for _, dst := range []netip.Addr{addrB, addrC} {
		m.Inject(echoPacket(addrA, dst))
		if got := l.read(t); netip.AddrFrom4([4]byte(got[12:16])) != dst || got[ipv4HeaderLen] != 0 {
			t.Fatalf("ping to %v: reply % x, want an echo reply from it", dst, got[:ipv4HeaderLen+1])
		}
	}
	m.Inject(echo6(addr6A, addr6C, nil, 0))
	if got := l.read(t); netip.AddrFrom16([16]byte(got[8:24])) != addr6C {
		t.Fatalf("ping to %v: reply from %v", addr6C, netip.AddrFrom16([16]byte(got[8:24])))
	}

	any7, err := m.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	bound, err := m.ListenUDP("udp", "198.18.0.3:9")
	if err != nil {
		t.Fatal(err)
	}
	if a := bound.LocalAddr().(*net.UDPAddr).AddrPort(); a != netip.AddrPortFrom(addrC, 9) {
		t.Fatalf("bound socket's address %v", a)
	}
	peer := netip.AddrPortFrom(addrA, 5000)
	m.Inject(udpPacket(peer, netip.AddrPortFrom(addrC, 7), []byte("to C on 7")))
	m.Inject(udpPacket(peer, netip.AddrPortFrom(addrC, 9), []byte("to C on 9")))
	n := l.sent()
	m.Inject(udpPacket(peer, netip.AddrPortFrom(addrB, 9), []byte("to B on 9")))
	if l.sent() != n+1 || m.Stats().Drops.UDPNoPort != 1 {
		t.Fatalf("datagram to %v:9: sent %d, UDPNoPort %d; want a port unreachable, 1", addrB, l.sent()-n, m.Stats().Drops.UDPNoPort)
	}
	if got := l.read(t); got[9] != protoICMP || netip.AddrFrom4([4]byte(got[12:16])) != addrB {
		t.Fatalf("port unreachable: % x, want ICMP from %v", got[:ipv4HeaderLen], addrB)
	}
	m.Inject(udpPacket(peer, netip.AddrPortFrom(addrC, 10), []byte("to C on 10")))
	if got := l.read(t); got[9] != protoICMP || got[ipv4HeaderLen] != 3 || netip.AddrFrom4([4]byte(got[12:16])) != addrC {
		t.Fatalf("datagram to %v:10, a closed port: sent % x, want a port unreachable from it", addrC, got[:ipv4HeaderLen+1])
	}
	buf := make([]byte, 64)
	for _, tc := range []struct {
		u    *UDPConn
		want string
		from netip.Addr // the reply's source
	}{{any7, "to C on 7", addrB}, {bound, "to C on 9", addrC}} {
		k, from, err := tc.u.ReadFromUDPAddrPort(buf)
		if err != nil || string(buf[:k]) != tc.want || from != peer {
			t.Fatalf("read %q from %v (%v), want %q from %v", buf[:k], from, err, tc.want, peer)
		}
		if _, err := tc.u.WriteToUDPAddrPort([]byte("reply"), peer); err != nil {
			t.Fatal(err)
		}
		got := l.read(t)
		if src := netip.AddrFrom4([4]byte(got[12:16])); got[9] != protoUDP || src != tc.from {
			t.Fatalf("reply of the socket on %v: from %v, want %v", tc.u.LocalAddr(), src, tc.from)
		}
	}
	if _, err := bound.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(addr6A, 5000)); err == nil {
		t.Fatal("an IPv4-bound socket sent to an IPv6 address")
	}
}

// TestMoreAddrsConfig: MoreAddrs must be unicast addresses of the stack's
// IP versions, each once.
func TestMoreAddrsConfig(t *testing.T) {
	for _, tc := range []struct {
		addr6 netip.Addr
		more  []string
	}{
		{addr6B, []string{"0.0.0.0"}},
		{addr6B, []string{"224.0.0.1"}},
		{addr6B, []string{"127.0.0.2"}},
		{addr6B, []string{"255.255.255.255"}},
		{addr6B, []string{"198.18.0.255"}}, // the prefix's broadcast
		{addr6B, []string{"198.18.0.2"}},   // Addr again
		{addr6B, []string{"198.18.0.3", "198.18.0.3"}},
		{addr6B, []string{"2001:db8::2"}}, // Addr6 again
		{addr6B, []string{"ff02::1"}},
		{netip.Addr{}, []string{"2001:db8::3"}}, // no Addr6
	} {
		var more []netip.Addr
		for _, a := range tc.more {
			more = append(more, netip.MustParseAddr(a))
		}
		dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
		m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: tc.addr6, MoreAddrs: more,
			Prefix: netip.MustParsePrefix("198.18.0.0/24"), Clock: timer.NewManualClock(0)})
		if err == nil {
			m.Close()
			t.Errorf("MoreAddrs %v (Addr6 %v): no error", tc.more, tc.addr6)
		} else if !errors.Is(err, ErrConfig) {
			t.Errorf("MoreAddrs %v: %v, not an ErrConfig", tc.more, err)
		}
	}
}

// TestFlightRecordingReplaysMoreAddrs: a recording of a stack with
// MoreAddrs, a listener and a UDP socket bound to one of them and wildcard
// ones, replays exactly: the header carries the addresses, the Listen and
// UDPBind events the bindings.
func TestFlightRecordingReplaysMoreAddrs(t *testing.T) {
	da, db := tuntest.Pipe(1500)
	rb := new(bytes.Buffer)
	a, err := New(Config{Device: da, Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Device: db, Addr: addrB, MoreAddrs: []netip.Addr{addrC}, Record: rb, RecordPayload: true})
	if err != nil {
		t.Fatal(err)
	}
	lnAny, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	lnC, err := b.Listen("tcp", "198.18.0.3:8")
	if err != nil {
		t.Fatal(err)
	}
	uC, err := b.ListenUDP("udp", "198.18.0.3:7")
	if err != nil {
		t.Fatal(err)
	}
	go serveEcho(lnAny)
	go serveEcho(lnC)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := uC.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			uC.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, addr := range []string{"198.18.0.2:7", "198.18.0.3:7", "198.18.0.3:8"} {
		c, err := a.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		msg := []byte("hello " + addr)
		c.Write(msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo from %s: %q, %v", addr, got, err)
		}
		c.Close()
	}
	if _, err := a.DialContext(ctx, "tcp", "198.18.0.2:8"); err == nil {
		t.Fatal("dial 198.18.0.2:8, a port bound to 198.18.0.3 only: no error")
	}
	u, err := a.DialContext(ctx, "udp", "198.18.0.3:7")
	if err != nil {
		t.Fatal(err)
	}
	u.SetDeadline(time.Now().Add(10 * time.Second))
	u.Write([]byte("udp to C"))
	buf := make([]byte, 64)
	if n, err := u.Read(buf); err != nil || string(buf[:n]) != "udp to C" {
		t.Fatalf("UDP echo from 198.18.0.3:7: %q, %v (the reply must come from the address dialled)", buf[:n], err)
	}
	u.Close()
	time.Sleep(50 * time.Millisecond) // the last ACKs and FINs
	a.Close()
	b.Close()
	rec, err := record.Parse(bytes.NewReader(rb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	binds := 0
	for _, e := range rec.Events {
		if e.Kind == record.UDPBind {
			binds++
		}
	}
	if len(rec.Header.MoreAddrs) != 1 || rec.Header.MoreAddrs[0] != addrC || binds != 1 {
		t.Fatalf("recording: MoreAddrs %v, %d UDPBind events; want [%v], 1", rec.Header.MoreAddrs, binds, addrC)
	}
	checkReplay(t, "server", rb.Bytes())
}
