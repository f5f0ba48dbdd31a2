package stack

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
	"golang.org/x/net/nettest"
)

var (
	addrA = netip.MustParseAddr("198.18.0.1")
	addrB = netip.MustParseAddr("198.18.0.2")
)

// pair returns two stacks joined by an in-memory link.
func pair(t testing.TB, cfg Config) (a, b *Stack) {
	t.Helper()
	return pairWith(t, cfg, netip.Addr{}, netip.Addr{})
}

// pairWith is pair with the IPv6 addresses a6 and b6 (or none).
func pairWith(t testing.TB, cfg Config, a6, b6 netip.Addr) (a, b *Stack) {
	t.Helper()
	da, db := tuntest.Pipe(1500)
	ca, cb := cfg, cfg
	ca.Device, ca.Addr, ca.Addr6 = da, addrA, a6
	cb.Device, cb.Addr, cb.Addr6 = db, addrB, b6
	var err error
	if a, err = New(ca); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = New(cb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

func dialPair(t testing.TB, a, b *Stack) (client, server net.Conn) {
	t.Helper()
	return dialPairTo(t, a, b, "tcp", "198.18.0.2:7")
}

// dialPairTo is dialPair dialling address over network, to b's dual-stack
// listener on port 7.
func dialPairTo(t testing.TB, a, b *Stack, network, address string) (client, server net.Conn) {
	t.Helper()
	ln, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := ln.Accept(); ch <- res{c, err} }()
	client, err = a.DialContext(ctx, network, address)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	return client, r.c
}

func TestTransferOverPipe(t *testing.T) {
	a, b := pair(t, Config{})
	c, s := dialPair(t, a, b)
	data := make([]byte, 4<<20)
	rand.Read(data)
	go func() {
		c.Write(data)
		c.(*Conn).CloseWrite()
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes, want %d intact", len(got), len(data))
	}
	// The other direction, then the close handshake.
	go func() { s.Write(data[:100000]); s.Close() }()
	got, err = io.ReadAll(c)
	if err != nil || !bytes.Equal(got, data[:100000]) {
		t.Fatalf("reverse: %d bytes, err %v", len(got), err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v, want net.ErrClosed", err)
	}
	st := a.Stats()
	if st.SegmentsOut == 0 || st.TCP.BytesSent < uint64(len(data)) {
		t.Fatalf("stats: %+v", st)
	}
}

func TestDialClosedPortIsRefused(t *testing.T) {
	a, _ := pair(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := a.DialContext(ctx, "tcp", "198.18.0.2:9999")
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, tcp.ErrConnectionRefused) {
		t.Fatalf("dial to a closed port: %v, want ECONNREFUSED", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("error %T %v is not a dial *net.OpError", err, err)
	}
}

func TestDeadlines(t *testing.T) {
	a, b := pair(t, Config{})
	c, s := dialPair(t, a, b)
	defer s.Close()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 10))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("deadline error is not a timeout net.Error: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	s.Write([]byte("hi"))
	buf := make([]byte, 10)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read after clearing the deadline: %q, %v", buf[:n], err)
	}
}

func TestBadInput(t *testing.T) {
	a, _ := pair(t, Config{})
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("New without device: %v", err)
	}
	if _, err := a.Listen("udp", ":1"); err == nil {
		t.Fatal("Listen udp succeeded")
	}
	if _, err := a.Listen("tcp", "10.0.0.1:1"); err == nil {
		t.Fatal("Listen on a foreign address succeeded")
	}
	if _, err := a.Listen("tcp", ":99999"); err == nil {
		t.Fatal("Listen on port 99999 succeeded")
	}
	ln, err := a.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Listen("tcp", ":80"); err == nil {
		t.Fatal("second Listen on the same port succeeded")
	}
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	if _, err := a.DialContext(context.Background(), "tcp", "nonsense"); err == nil {
		t.Fatal("dial to nonsense succeeded")
	}
	// Malformed packets are counted, not fatal.
	for _, pkt := range [][]byte{{}, {0x45}, make([]byte, 20), bytes.Repeat([]byte{0x45}, 60)} {
		a.do(func() { a.handlePacket(pkt) })
	}
	st := a.Stats()
	if st.Drops.BadIPHeader+st.Drops.BadIPChecksum == 0 {
		t.Fatalf("malformed packets not counted: %+v", st.Drops)
	}
}

func TestNetConnConformance(t *testing.T) {
	for _, tc := range []struct {
		name, network, addr string
		a6, b6              netip.Addr
	}{
		{"IPv4", "tcp", "198.18.0.2:7", netip.Addr{}, netip.Addr{}},
		{"IPv6", "tcp6", "[2001:db8::2]:7", addr6A, addr6B},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				a, b := pairWith(t, Config{}, tc.a6, tc.b6)
				c1, c2 = dialPairTo(t, a, b, tc.network, tc.addr)
				if want := netip.MustParseAddrPort(tc.addr).Addr(); c2.LocalAddr().(*net.TCPAddr).AddrPort().Addr() != want {
					t.Fatalf("server's address %v, want %v", c2.LocalAddr(), want)
				}
				stop = func() { c1.Close(); c2.Close(); a.Close(); b.Close() }
				return c1, c2, stop, nil
			})
		})
	}
}

func TestKeepAliveSetters(t *testing.T) {
	a, b := pair(t, Config{})
	c, s := dialPair(t, a, b)
	defer s.Close()
	conn := c.(*Conn)
	if conn.Info().KeepAlive {
		t.Fatal("keepalive on by default")
	}
	if err := conn.SetKeepAlivePeriod(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	if i := conn.Info(); i.KeepAlive || i.KeepIdle != 3*time.Second || i.KeepInterval != 3*time.Second {
		t.Fatalf("after SetKeepAlivePeriod: on %v idle %v interval %v", i.KeepAlive, i.KeepIdle, i.KeepInterval)
	}
	if err := conn.SetKeepAlive(true); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Count: 4}); err != nil {
		t.Fatal(err)
	}
	if i := conn.Info(); !i.KeepAlive || i.KeepIdle != 3*time.Second || i.KeepCount != 4 {
		t.Fatalf("after SetKeepAlive: on %v idle %v count %d", i.KeepAlive, i.KeepIdle, i.KeepCount)
	}
	c.Close()
	if err := conn.SetKeepAlive(false); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("SetKeepAlive after Close: %v", err)
	}
}

func TestInputPath(t *testing.T) {
	a, _ := pair(t, Config{})
	if got := a.Stats().InputPath; got != "reader" {
		t.Errorf("over an in-memory pipe: InputPath %q, want reader", got)
	}
	p := newManualPair(t)
	if got := p.a.Stats().InputPath; got != "manual" {
		t.Errorf("NewManual: InputPath %q, want manual", got)
	}
	if got := p.a.Stats().Wheel.Wakeups; got != 0 {
		t.Errorf("NewManual: %d wakeups, want 0", got)
	}
}

func TestNewManualNeedsManualClock(t *testing.T) {
	da, _ := tuntest.Pipe(1500)
	if _, err := NewManual(Config{Device: da, Addr: addrA}); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewManual without a manual clock: %v, want ErrConfig", err)
	}
}

func TestAcceptTCP(t *testing.T) {
	a, b := pair(t, Config{})
	l, err := b.ListenTCP("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener = l
	ch := make(chan *Conn, 1)
	go func() {
		c, err := l.AcceptTCP()
		if err != nil {
			t.Error(err)
		}
		ch <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.DialTCP(ctx, "tcp", "198.18.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-ch
	if s == nil {
		t.Fatal("AcceptTCP returned no connection")
	}
	if got := c.Info().State; got != tcp.StateEstablished {
		t.Errorf("dialed connection in %v, want ESTABLISHED", got)
	}
	// The interface forms fail with nil interfaces, never a nil pointer inside.
	if nc, err := a.DialContext(ctx, "tcp", "198.18.0.2:9"); nc != nil || err == nil {
		t.Errorf("DialContext to a closed port: %v (nil interface: %v), %v", nc, nc == nil, err)
	}
	if nl, err := b.Listen("tcp", ":7"); nl != nil || err == nil {
		t.Errorf("Listen on a port in use: %v (nil interface: %v), %v", nl, nl == nil, err)
	}
	defer s.Close()
	if got := s.Info().State; got != tcp.StateEstablished {
		t.Errorf("accepted connection in %v, want ESTABLISHED", got)
	}
	ln.Close()
	if c, err := l.AcceptTCP(); c != nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("AcceptTCP after Close: %v, %v", c, err)
	}
	if c, err := ln.Accept(); c != nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v (nil interface: %v), %v", c, c == nil, err)
	}
}
