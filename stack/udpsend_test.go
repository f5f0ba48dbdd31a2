package stack

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// loopStack is a stack on a real loop over a pipe to peer, which the test
// reads.
func loopStack(t *testing.T, cfg Config) (*Stack, *tuntest.Endpoint) {
	t.Helper()
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 1024})
	if cfg.Device == nil {
		cfg.Device = dev
	}
	cfg.Addr = addrB
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, peer
}

// readPeer returns the next packet the stack sent to peer.
func readPeer(t *testing.T, peer *tuntest.Endpoint) []byte {
	t.Helper()
	b := make([]byte, 1500)
	n, err := peer.ReadPacket(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// TestUDPDirectSend: a stack on a real loop sends datagrams from the
// caller's goroutine, without waking the loop: well-formed IPv4 (DF, TTL,
// the socket's consecutive IDs, checksums) and IPv6, counted in Stats.
func TestUDPDirectSend(t *testing.T) {
	s, peer := loopStack(t, Config{Addr6: addr6B, TTL: 33})
	if !s.udpDirect {
		t.Fatal("a stack on a real loop, not recording: no direct path")
	}
	// Only what fits one packet goes direct: a larger datagram (refused
	// today, EMSGSIZE) would need the loop's fragmentation.
	if !s.onePacket(addrA, 1472) || s.onePacket(addrA, 1473) || !s.onePacket(addr6A, 1452) || s.onePacket(addr6A, 1453) {
		t.Error("onePacket: the largest datagram of one 1500-byte packet is 1472 bytes over IPv4, 1452 over IPv6")
	}
	u, err := s.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	l := s.run.(interface{ Wakeups() uint64 })
	before := l.Wakeups()
	const n = 200
	var lastID uint16
	for i := range n {
		msg := bytes.Repeat([]byte{byte(i)}, 1+i)
		if k, err := u.WriteToUDPAddrPort(msg, peerA); err != nil || k != len(msg) {
			t.Fatalf("send %d: %d, %v", i, k, err)
		}
		pkt := readPeer(t, peer)
		ip := header.IPv4(pkt)
		if !ip.IsValid(len(pkt)) || !ip.IsChecksumValid() || ip.Flags() != header.IPv4FlagDontFragment || ip.TTL() != 33 ||
			ip.Protocol() != protoUDP || ip.SourceAddress().As4() != addrB.As4() || ip.DestinationAddress().As4() != addrA.As4() {
			t.Fatalf("send %d: a bad IPv4 header % x", i, pkt[:ipv4HeaderLen])
		}
		if i > 0 && ip.ID() != lastID+1 {
			t.Fatalf("send %d: IP ID %d after %d, want the socket's next", i, ip.ID(), lastID)
		}
		lastID = ip.ID()
		d := pkt[ipv4HeaderLen:]
		if uh := header.UDP(d); uh.SourcePort() != 7 || uh.DestinationPort() != peerA.Port() || !udpChecksumOK(addrB, addrA, d) || !bytes.Equal(uh.Payload(), msg) {
			t.Fatalf("send %d: a bad datagram % x", i, d)
		}
	}
	if w := l.Wakeups() - before; w > n/10 {
		t.Errorf("%d sends woke the loop %d times, want next to none", n, w)
	}
	to6 := netip.AddrPortFrom(addr6A, 53)
	if _, err := u.WriteToUDPAddrPort([]byte("six"), to6); err != nil {
		t.Fatal(err)
	}
	pkt := readPeer(t, peer)
	ip6 := header.IPv6(pkt)
	if !ip6.IsValid(len(pkt)) || ip6.HopLimit() != 33 || ip6.NextHeader() != protoUDP || ip6.DestinationAddress().As16() != addr6A.As16() {
		t.Fatalf("a bad IPv6 header % x", pkt[:ipv6HeaderLen])
	}
	if d := pkt[ipv6HeaderLen:]; !udpChecksumOK(addr6B, addr6A, d) || string(header.UDP(d).Payload()) != "six" {
		t.Fatalf("a bad IPv6 datagram % x", d)
	}
	if st := s.Stats(); st.DatagramsOut != n+1 || st.PacketsOut != n+1 || st.DeviceErrors != 0 {
		t.Errorf("DatagramsOut %d, PacketsOut %d, DeviceErrors %d; want %d, %d, 0", st.DatagramsOut, st.PacketsOut, st.DeviceErrors, n+1, n+1)
	}
}

// TestUDPDirectDeviceError: a datagram the device refuses is sent as far as
// the application knows (as on the loop), and counted: a device error and
// a drop, not a packet out. After the stack's Close a send fails.
func TestUDPDirectDeviceError(t *testing.T) {
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	s, _ := loopStack(t, Config{Device: failingWrites{dev}})
	u, err := s.ListenUDP("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := u.WriteToUDPAddrPort([]byte("lost"), peerA); err != nil || k != 4 {
		t.Fatalf("send: %d, %v; want 4, nil", k, err)
	}
	if st := s.Stats(); st.DatagramsOut != 1 || st.PacketsOut != 0 || st.DeviceErrors != 1 || st.Drops.DeviceWrite != 1 {
		t.Errorf("DatagramsOut %d, PacketsOut %d, DeviceErrors %d, DeviceWrite %d; want 1, 0, 1, 1",
			st.DatagramsOut, st.PacketsOut, st.DeviceErrors, st.Drops.DeviceWrite)
	}
	s.Close()
	if _, err := u.WriteToUDPAddrPort([]byte("x"), peerA); !errors.Is(err, net.ErrClosed) {
		t.Errorf("send after the stack's Close: %v, want net.ErrClosed", err)
	}
}

// oneWriter is a device that notes writes that overlap: a tun.Device need
// only take a write concurrent with a read.
type oneWriter struct {
	tun.Device
	in      atomic.Int32
	overlap atomic.Bool
}

func (d *oneWriter) WritePacket(pkt []byte) error {
	if d.in.Add(1) > 1 {
		d.overlap.Store(true)
	}
	runtime.Gosched() // a window for another writer
	defer d.in.Add(-1)
	return d.Device.WritePacket(pkt)
}

// TestUDPDirectOneWriterAtATime: datagrams sent from several goroutines at
// once, while the loop sends a TCP transfer's segments, reach the device
// one write at a time, and all arrive.
func TestUDPDirectOneWriterAtATime(t *testing.T) {
	da, db := tuntest.Pipe(1500)
	dev := &oneWriter{Device: da}
	a, err := New(Config{Device: dev, Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := New(Config{Device: db, Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv, err := b.ListenUDP("udp", ":9")
	if err != nil {
		t.Fatal(err)
	}
	client, server := dialPair(t, a, b)
	defer client.Close()
	defer server.Close()
	go func() { client.Write(make([]byte, 1<<20)); client.Close() }()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := server.Read(buf); err != nil {
				return
			}
		}
	}()
	const senders, each = 4, 50
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := a.DialUDP("udp", "198.18.0.2:9")
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for i := range each {
				if _, err := c.Write([]byte{byte(g), byte(i)}); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 9 {
					time.Sleep(time.Millisecond) // within the socket's queue
				}
			}
		}()
	}
	wg.Wait()
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 8)
	seen := map[[2]byte]bool{}
	for len(seen) < senders*each {
		n, _, err := srv.ReadFrom(buf)
		if err != nil {
			t.Fatalf("%d of %d datagrams: %v", len(seen), senders*each, err)
		}
		seen[[2]byte(buf[:n])] = true
	}
	if dev.overlap.Load() {
		t.Error("the device's writes overlapped")
	}
}

// TestUDPQueueRing: the receive queue keeps the order across its growth
// and wrap, holds udpQueueLen datagrams at most, and gives its buffers
// back; a datagram larger than the MTU gets a buffer of its own.
func TestUDPQueueRing(t *testing.T) {
	m, _ := manualUDP(t)
	s := m.Stack
	var q dgramQueue
	next, want := 0, 0
	push := func() bool {
		d := s.newDatagram(peerA, []byte{byte(next), byte(next >> 8)})
		if !q.push(d) {
			s.free(d)
			return false
		}
		next++
		return true
	}
	pop := func() {
		d := q.pop()
		if got := int((*d.b)[0]) | int((*d.b)[1])<<8; got != want || d.n != 2 || d.from != peerA {
			t.Fatalf("popped %d (%d bytes), want %d", got, d.n, want)
		}
		s.free(d)
		want++
	}
	for range 3 {
		push()
	}
	pop()
	pop()
	for push() {
	}
	if q.n != udpQueueLen || len(q.slots) != udpQueueLen || next != udpQueueLen+2 {
		t.Fatalf("full at %d datagrams, %d slots, after %d pushes; want %d, %d, %d", q.n, len(q.slots), next, udpQueueLen, udpQueueLen, udpQueueLen+2)
	}
	for range 100 {
		pop()
	}
	for range 100 {
		push()
	}
	for q.n > 0 {
		pop()
	}
	if want != next {
		t.Fatalf("popped %d of %d", want, next)
	}
	if d := s.newDatagram(peerA, make([]byte, dgramBufSize)); !d.pooled {
		t.Errorf("a datagram of %d bytes not in a pooled buffer", dgramBufSize)
	}
	big := bytes.Repeat([]byte{7}, dgramBufSize+1)
	d := s.newDatagram(peerA, big)
	if d.pooled || d.n != len(big) || !bytes.Equal((*d.b)[:d.n], big) {
		t.Fatalf("a datagram of %d bytes: pooled %v, %d bytes", len(big), d.pooled, d.n)
	}
	q.push(d)
	q.push(s.newDatagram(peerA, []byte("x")))
	s.drain(&q)
	if q.n != 0 || q.slots != nil {
		t.Fatalf("drained: %d left, %d slots", q.n, len(q.slots))
	}
}

// TestUDPRecordingSendsOnLoop: a recording stack keeps the sends on the
// loop, where the recorder sees them (TestFlightRecordingReplaysUDP checks
// what it records).
func TestUDPRecordingSendsOnLoop(t *testing.T) {
	var rec bytes.Buffer
	s, _ := loopStack(t, Config{Record: &rec})
	if s.udpDirect {
		t.Fatal("a recording stack sends UDP off the loop")
	}
}
