package stack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// Forwarded destinations: documentation addresses, never on any wire here.
var (
	farAddr  = netip.MustParseAddr("203.0.113.5")
	farAddr6 = netip.MustParseAddr("2001:db8:ff::5")
)

// fwdBed is a manual forwarding stack on addrB (and addr6B), its link, and
// the flows its handlers were given.
type fwdBed struct {
	m     *Manual
	l     link
	reqs  chan *TCPRequest
	flows chan *UDPFlow
}

func newFwdBed(t *testing.T, fc ForwardConfig) *fwdBed {
	t.Helper()
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 4096})
	m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: addr6B, Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b := &fwdBed{m: m, l: link{dev, peer}, reqs: make(chan *TCPRequest, 64), flows: make(chan *UDPFlow, 64)}
	if fc.TCP == nil {
		fc.TCP = func(r *TCPRequest) { b.reqs <- r }
	}
	if fc.UDP == nil {
		fc.UDP = func(f *UDPFlow) { b.flows <- f }
	}
	if err := m.Forward(fc); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *fwdBed) request(t *testing.T) *TCPRequest {
	t.Helper()
	select {
	case r := <-b.reqs:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no TCP request handed to the handler")
		return nil
	}
}

func (b *fwdBed) flow(t *testing.T) *UDPFlow {
	t.Helper()
	select {
	case f := <-b.flows:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no UDP flow handed to the handler")
		return nil
	}
}

// inject hands the stack pkt at the clock's reading.
func (b *fwdBed) inject(t *testing.T, pkt []byte) {
	t.Helper()
	if err := b.m.Inject(pkt); err != nil {
		t.Fatal(err)
	}
}

// quiet checks that the stack has sent nothing more.
func (b *fwdBed) quiet(t *testing.T, when string) {
	t.Helper()
	if n := b.l.sent() - b.l.peer.Stats().Received; n != 0 {
		t.Fatalf("%s: the stack sent %d packets, want none", when, n)
	}
}

// synTo is a SYN from src to dst, with an MSS option, as its TCP segment.
func synTo(t *testing.T, src, dst netip.AddrPort, seq uint32) []byte {
	t.Helper()
	seg := tcp.Segment{SrcPort: src.Port(), DstPort: dst.Port(), Seq: seqnum.Value(seq), Flags: tcp.FlagSYN, Window: 65535}
	seg.Options.HasMSS, seg.Options.MSS = true, 1460
	b := make([]byte, seg.EncodedLen())
	if _, err := seg.Encode(b); err != nil {
		t.Fatal(err)
	}
	tcp.SetChecksum(src.Addr(), dst.Addr(), b)
	return b
}

// ipPacket wraps a transport segment in IPv4 or IPv6.
func ipPacket(src, dst netip.Addr, proto uint8, payload []byte) []byte {
	if src.Is4() {
		return ipv4Packet(src, dst, proto, payload)
	}
	return ipv6Packet(src, dst, proto, nil, payload)
}

// sentTCP returns the TCP segment of an IPv4 or IPv6 packet the stack
// sent, and its addresses.
func sentTCP(t *testing.T, pkt []byte) (src, dst netip.AddrPort, seg tcp.Segment) {
	t.Helper()
	s, d, proto, off, end, ok := transportOf(pkt)
	if !ok || proto != protoTCP {
		t.Fatalf("not a TCP packet: % x", pkt)
	}
	seg, err := tcp.ParseSegment(pkt[off:end])
	if err != nil {
		t.Fatal(err)
	}
	if !tcp.VerifyChecksum(s, d, pkt[off:end]) {
		t.Fatal("bad TCP checksum")
	}
	return netip.AddrPortFrom(s, seg.SrcPort), netip.AddrPortFrom(d, seg.DstPort), seg
}

// TestForwardTCPAcceptAfterDecision: a SYN to an address that is not the
// stack's is handed to the handler with its 4-tuple, and nothing answers it
// until Accept, which sends the SYN-ACK from the original destination; the
// client's ACK establishes a Conn whose LocalAddr is that destination, and
// data flows both ways. The stack's own address keeps its listener and
// its RST for a closed port; the same port at the far address goes to the
// handler.
func TestForwardTCPAcceptAfterDecision(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name, client, far, local := "IPv4", addrA, farAddr, addrB
		if v6 {
			name, client, far, local = "IPv6", addr6A, farAddr6, addr6B
		}
		t.Run(name, func(t *testing.T) {
			b := newFwdBed(t, ForwardConfig{})
			ln, err := b.m.ListenTCP("tcp", ":80")
			if err != nil {
				t.Fatal(err)
			}
			src, dst := netip.AddrPortFrom(client, 40000), netip.AddrPortFrom(far, 80)
			syn := synTo(t, src, dst, 1000)
			b.inject(t, ipPacket(client, far, protoTCP, syn))
			r := b.request(t)
			if r.Source() != src || r.Destination() != dst {
				t.Fatalf("request %v -> %v, want %v -> %v", r.Source(), r.Destination(), src, dst)
			}
			b.quiet(t, "before the decision")
			if st := b.m.Stats().Forward; st.TCPRequests != 1 || st.Pending != 1 {
				t.Fatalf("stats %+v", st)
			}
			done := make(chan reqResult, 1)
			go func() { c, err := r.Accept(); done <- reqResult{c, err} }()
			waitSent(t, b.l, 1)
			from, to, sa := sentTCP(t, b.l.read(t))
			if from != dst || to != src || sa.Flags != tcp.FlagSYN|tcp.FlagACK || sa.Ack != seqnum.Value(1001) {
				t.Fatalf("SYN-ACK %v -> %v flags %v ack %v", from, to, sa.Flags, sa.Ack)
			}
			ack := tcp.Segment{SrcPort: 40000, DstPort: 80, Seq: seqnum.Value(1001), Ack: sa.Seq + 1, Flags: tcp.FlagACK | tcp.FlagPSH, Window: 65535, Payload: []byte("hello")}
			b.inject(t, ipPacket(client, far, protoTCP, encodeSeg(t, client, far, &ack)))
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			c := res.c
			if c.LocalAddr().String() != dst.String() || c.RemoteAddr().String() != src.String() {
				t.Fatalf("Conn %v -> %v", c.RemoteAddr(), c.LocalAddr())
			}
			buf := make([]byte, 16)
			if n, err := c.TryRead(buf); err != nil || string(buf[:n]) != "hello" {
				t.Fatalf("read %q, %v", buf[:n], err)
			}
			if _, err := c.TryWrite([]byte("world")); err != nil {
				t.Fatal(err)
			}
			var data tcp.Segment
			for b.l.peer.Stats().Received < b.l.sent() {
				if _, _, seg := sentTCP(t, b.l.read(t)); len(seg.Payload) > 0 {
					data = seg
				}
			}
			if string(data.Payload) != "world" {
				t.Fatalf("sent %q, want world", data.Payload)
			}
			st := b.m.Stats()
			if st.Forward.TCPAccepted != 1 || st.Forward.Pending != 0 || st.Connections != 1 {
				t.Fatalf("stats: forward %+v, connections %d", st.Forward, st.Connections)
			}
			// The forwarded flow's port is not the stack's: port 80 was and
			// stays the listener's alone, and the local address keeps it.
			b.inject(t, ipPacket(client, local, protoTCP, synTo(t, netip.AddrPortFrom(client, 40001), netip.AddrPortFrom(local, 80), 5000)))
			if _, _, seg := sentTCP(t, b.l.read(t)); seg.Flags != tcp.FlagSYN|tcp.FlagACK {
				t.Fatalf("SYN to the local listener: answered %v", seg.Flags)
			}
			b.inject(t, ipPacket(client, local, protoTCP, synTo(t, netip.AddrPortFrom(client, 40002), netip.AddrPortFrom(local, 81), 6000)))
			if _, _, seg := sentTCP(t, b.l.read(t)); seg.Flags != tcp.FlagRST|tcp.FlagACK {
				t.Fatalf("SYN to a closed local port: answered %v", seg.Flags)
			}
			if st := b.m.Stats().Forward; st.TCPRequests != 1 {
				t.Fatalf("local SYNs reached the forwarder: %+v", st)
			}
			ln.Close()
		})
	}
}

// waitSent waits (bounded) until the stack has sent n packets more than
// the peer read: for a decision made on another goroutine.
func waitSent(t *testing.T, l link, n uint64) {
	t.Helper()
	for i := 0; l.sent()-l.peer.Stats().Received < n; i++ {
		if i > 5000 {
			t.Fatalf("the stack did not send %d packets", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func encodeSeg(t *testing.T, src, dst netip.Addr, seg *tcp.Segment) []byte {
	t.Helper()
	b := make([]byte, seg.EncodedLen())
	if _, err := seg.Encode(b); err != nil {
		t.Fatal(err)
	}
	tcp.SetChecksum(src, dst, b)
	return b
}

// TestForwardReject: each way of refusing a flow before the handshake, on
// the wire: a RST from the original destination (RFC 9293 3.10.7.1's for
// a SYN), an ICMP host unreachable (ICMPv6 address unreachable) quoting
// the SYN's header and first 8 bytes, or nothing. A second decision fails.
func TestForwardReject(t *testing.T) {
	for _, tc := range []struct {
		name string
		v6   bool
		how  Reject
	}{
		{"reset", false, RejectReset}, {"icmp", false, RejectUnreachable}, {"drop", false, RejectDrop},
		{"reset6", true, RejectReset}, {"icmp6", true, RejectUnreachable}, {"drop6", true, RejectDrop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, far := addrA, farAddr
			if tc.v6 {
				client, far = addr6A, farAddr6
			}
			b := newFwdBed(t, ForwardConfig{})
			src, dst := netip.AddrPortFrom(client, 40000), netip.AddrPortFrom(far, 443)
			syn := synTo(t, src, dst, 7)
			b.inject(t, ipPacket(client, far, protoTCP, syn))
			r := b.request(t)
			if err := r.Reject(tc.how); err != nil {
				t.Fatal(err)
			}
			st := b.m.Stats().Forward
			switch tc.how {
			case RejectReset:
				from, to, rst := sentTCP(t, b.l.read(t))
				if from != dst || to != src || rst.Flags != tcp.FlagRST|tcp.FlagACK || rst.Seq != 0 || rst.Ack != seqnum.Value(8) {
					t.Fatalf("RST %v -> %v flags %v seq %v ack %v", from, to, rst.Flags, rst.Seq, rst.Ack)
				}
				if st.TCPRejectedReset != 1 {
					t.Errorf("stats %+v", st)
				}
			case RejectUnreachable:
				checkUnreachable(t, b.l.read(t), src, dst, syn)
				if st.TCPRejectedICMP != 1 {
					t.Errorf("stats %+v", st)
				}
			case RejectDrop:
				if st.TCPRejectedDrop != 1 {
					t.Errorf("stats %+v", st)
				}
			}
			b.quiet(t, "after the reject")
			if st.Pending != 0 {
				t.Errorf("still pending: %+v", st)
			}
			if _, err := r.Accept(); err == nil {
				t.Error("Accept after Reject succeeded")
			}
			if err := r.Reject(RejectReset); err == nil {
				t.Error("a second Reject succeeded")
			}
		})
	}
}

// checkUnreachable checks an ICMP (or ICMPv6) destination unreachable,
// host (address) unreachable, from dst to src, quoting the SYN syn.
func checkUnreachable(t *testing.T, pkt []byte, src, dst netip.AddrPort, syn []byte) {
	t.Helper()
	from, to, proto, off, end, ok := transportOf(pkt)
	if !ok || from != dst.Addr() || to != src.Addr() {
		t.Fatalf("ICMP %v -> %v, want %v -> %v", from, to, dst.Addr(), src.Addr())
	}
	m := pkt[off:end]
	var inner []byte
	if src.Addr().Is4() {
		if proto != protoICMP || m[0] != byte(header.ICMPv4DstUnreachable) || m[1] != byte(header.ICMPv4HostUnreachable) || checksum.Checksum(m, 0) != 0xffff {
			t.Fatalf("ICMP % x", m)
		}
		inner = m[header.ICMPv4MinimumSize:]
		ip := header.IPv4(inner)
		if !ip.IsChecksumValid() || ip.Protocol() != protoTCP || ip.SourceAddress().As4() != src.Addr().As4() || ip.DestinationAddress().As4() != dst.Addr().As4() ||
			int(ip.TotalLength()) != ipv4HeaderLen+len(syn) || !bytes.Equal(inner[ipv4HeaderLen:], syn[:8]) {
			t.Fatalf("quote % x", inner)
		}
		return
	}
	if proto != protoICMPv6 || m[0] != byte(header.ICMPv6DstUnreachable) || m[1] != byte(header.ICMPv6AddressUnreachable) ||
		checksum.Checksum(m, pseudoHeader(protoICMPv6, dst.Addr(), src.Addr(), len(m))) != 0xffff {
		t.Fatalf("ICMPv6 % x", m)
	}
	inner = m[icmp6HeaderLen:]
	if inner[6] != protoTCP || netip.AddrFrom16([16]byte(inner[8:24])) != src.Addr() || netip.AddrFrom16([16]byte(inner[24:40])) != dst.Addr() ||
		int(binary.BigEndian.Uint16(inner[4:])) != len(syn) || !bytes.Equal(inner[ipv6HeaderLen:], syn) {
		t.Fatalf("quote % x", inner)
	}
}

// TestForwardPendingTimeout: a flow nobody decides is rejected at exactly
// PendingTimeout after its SYN (as TimeoutReject says), and an accepted
// flow whose client never ACKs the SYN-ACK is reset at exactly
// PendingTimeout after its SYN, its SYN-ACK resent on the way (RFC 6298's
// 1 s initial RTO); either request then fails with os.ErrDeadlineExceeded.
// Duplicate SYNs of an undecided flow are absorbed.
func TestForwardPendingTimeout(t *testing.T) {
	const timeout = 5 * time.Second
	b := newFwdBed(t, ForwardConfig{PendingTimeout: timeout, TimeoutReject: RejectReset})
	src, dst := netip.AddrPortFrom(addrA, 40000), netip.AddrPortFrom(farAddr, 80)
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src, dst, 100)))
	r := b.request(t)
	b.m.AdvanceTo(time.Second)
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src, dst, 100))) // the client's retransmission
	b.m.AdvanceTo(timeout - timer.DefaultTick)
	b.quiet(t, "before the timeout")
	b.m.AdvanceTo(timeout)
	if _, _, rst := sentTCP(t, b.l.read(t)); rst.Flags&tcp.FlagRST == 0 {
		t.Fatalf("at the timeout: %v, want a RST", rst.Flags)
	}
	if _, err := r.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Accept after the timeout: %v", err)
	}
	if st := b.m.Stats().Forward; st.TCPTimeouts != 1 || st.DuplicateSYNs != 1 || st.Pending != 0 || st.TCPRejectedReset != 1 {
		t.Fatalf("stats %+v", st)
	}

	// Accepted at 6 s, never ACKed: SYN-ACK at 6 s, again at 7 and 9 s,
	// then reset at 10 s, the SYN's 5 s + 5 s.
	const syn2 = 5 * time.Second
	src2 := netip.AddrPortFrom(addrA, 40001)
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src2, dst, 300)))
	r2 := b.request(t)
	b.m.AdvanceTo(6 * time.Second)
	done := make(chan error, 1)
	go func() { _, err := r2.Accept(); done <- err }()
	waitSent(t, b.l, 1)
	if _, _, sa := sentTCP(t, b.l.read(t)); sa.Flags != tcp.FlagSYN|tcp.FlagACK {
		t.Fatalf("at Accept: %v", sa.Flags)
	}
	for _, at := range []time.Duration{7 * time.Second, 9 * time.Second} { // RTO 1 s, then backed off to 2 s
		b.m.AdvanceTo(at - timer.DefaultTick)
		b.quiet(t, "before the SYN-ACK's RTO")
		b.m.AdvanceTo(at)
		if _, _, sa := sentTCP(t, b.l.read(t)); sa.Flags != tcp.FlagSYN|tcp.FlagACK {
			t.Fatalf("at the RTO %v: %v", at, sa.Flags)
		}
	}
	b.m.AdvanceTo(syn2 + timeout - timer.DefaultTick)
	b.quiet(t, "before the half-open timeout")
	b.m.AdvanceTo(syn2 + timeout)
	if _, _, rst := sentTCP(t, b.l.read(t)); rst.Flags&tcp.FlagRST == 0 {
		t.Fatalf("at the half-open timeout: %v", rst.Flags)
	}
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Accept: %v", err)
	}
	if st := b.m.Stats().Forward; st.TCPTimeouts != 2 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestForwardLimits: pending flows are bounded per source and in total;
// SYNs beyond are dropped unanswered and counted, and a decision frees a
// slot at once. A client's RST ends its undecided flow.
func TestForwardLimits(t *testing.T) {
	b := newFwdBed(t, ForwardConfig{MaxPending: 3, MaxPendingPerSource: 2})
	other := netip.MustParseAddr("198.18.0.9")
	dst := netip.AddrPortFrom(farAddr, 80)
	syn := func(src netip.Addr, port uint16) {
		b.inject(t, ipPacket(src, farAddr, protoTCP, synTo(t, netip.AddrPortFrom(src, port), dst, 1)))
	}
	syn(addrA, 1)
	syn(addrA, 2)
	syn(addrA, 3) // the third of addrA: over its 2
	syn(other, 1)
	syn(other, 2) // the fourth in all: over 3
	reqs := map[uint16]*TCPRequest{}
	for range 3 {
		r := b.request(t)
		reqs[r.Source().Port()+uint16(r.Source().Addr().As4()[3])*100] = r
	}
	st := b.m.Stats().Forward
	if st.TCPRequests != 3 || st.Pending != 3 || st.DropsPerSource != 1 || st.DropsPending != 1 {
		t.Fatalf("stats %+v", st)
	}
	b.quiet(t, "the dropped SYNs")
	if err := reqs[101].Reject(RejectDrop); err != nil { // addrA's port 1
		t.Fatal(err)
	}
	syn(addrA, 3)
	r := b.request(t)
	if r.Source().Port() != 3 {
		t.Fatalf("after a decision: request from %v", r.Source())
	}
	// The client gives up on port 3: its RST ends the flow.
	rst := tcp.Segment{SrcPort: 3, DstPort: 80, Seq: seqnum.Value(2), Flags: tcp.FlagRST}
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, encodeSeg(t, addrA, farAddr, &rst)))
	if _, err := r.Accept(); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Accept after the client's RST: %v", err)
	}
	if st := b.m.Stats().Forward; st.Pending != 2 || st.TCPClientResets != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestForwardHandshakeFirst: the SYN-ACK goes at once, before the handler
// decides; Accept then returns the established connection, and Reject
// resets a flow, half-open or established.
func TestForwardHandshakeFirst(t *testing.T) {
	b := newFwdBed(t, ForwardConfig{HandshakeFirst: true})
	src, dst := netip.AddrPortFrom(addrA, 40000), netip.AddrPortFrom(farAddr, 22)
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src, dst, 50)))
	from, _, sa := sentTCP(t, b.l.read(t))
	if from != dst || sa.Flags != tcp.FlagSYN|tcp.FlagACK {
		t.Fatalf("SYN-ACK from %v: %v", from, sa.Flags)
	}
	ack := tcp.Segment{SrcPort: 40000, DstPort: 22, Seq: seqnum.Value(51), Ack: sa.Seq + 1, Flags: tcp.FlagACK, Window: 65535}
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, encodeSeg(t, addrA, farAddr, &ack)))
	r := b.request(t)
	c, err := r.Accept()
	if err != nil || c.LocalAddr().String() != dst.String() {
		t.Fatalf("Accept: %v, %v", c, err)
	}
	src2 := netip.AddrPortFrom(addrA, 40001)
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src2, dst, 70)))
	b.l.read(t) // its SYN-ACK
	r2 := b.request(t)
	if err := r2.Reject(RejectUnreachable); err != nil {
		t.Fatal(err)
	}
	if _, to, rst := sentTCP(t, b.l.read(t)); to != src2 || rst.Flags&tcp.FlagRST == 0 {
		t.Fatalf("Reject of a half-open flow: %v to %v", rst.Flags, to)
	}
	// Established before the handler decides, then rejected: reset.
	src3 := netip.AddrPortFrom(addrA, 40002)
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src3, dst, 90)))
	_, _, sa3 := sentTCP(t, b.l.read(t))
	ack3 := tcp.Segment{SrcPort: 40002, DstPort: 22, Seq: seqnum.Value(91), Ack: sa3.Seq + 1, Flags: tcp.FlagACK, Window: 65535}
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, encodeSeg(t, addrA, farAddr, &ack3)))
	r3 := b.request(t)
	if err := r3.Reject(RejectDrop); err != nil {
		t.Fatal(err)
	}
	if _, to, rst := sentTCP(t, b.l.read(t)); to != src3 || rst.Flags&tcp.FlagRST == 0 {
		t.Fatalf("Reject of an established flow: %v to %v", rst.Flags, to)
	}
	if _, err := r3.Accept(); err == nil {
		t.Fatal("Accept after Reject succeeded")
	}
	if st := b.m.Stats(); st.Forward.TCPAccepted != 2 || st.Forward.TCPRejectedReset != 2 || st.Forward.Pending != 0 || st.Connections != 1 {
		t.Fatalf("stats %+v, connections %d", st.Forward, st.Connections)
	}
}

// TestForwardUDP: a datagram to an address that is not the stack's starts
// a flow whose LocalAddr is that address; the flow's writes go out from it
// (checksummed); later datagrams of the 5-tuple join it; it expires exactly
// UDPIdleTimeout after the last datagram either way (on the wheel), and
// Read then returns io.EOF. Flows are bounded; the stack's own UDP sockets
// keep their datagrams.
func TestForwardUDP(t *testing.T) {
	const idle = 30 * time.Second
	b := newFwdBed(t, ForwardConfig{UDPIdleTimeout: idle, MaxUDPFlows: 2})
	local, err := b.m.ListenUDP("udp", ":53")
	if err != nil {
		t.Fatal(err)
	}
	src, dst := netip.AddrPortFrom(addrA, 5353), netip.AddrPortFrom(farAddr, 53)
	b.inject(t, udpPacket(src, dst, []byte("query")))
	f := b.flow(t)
	if f.LocalAddr().String() != dst.String() || f.RemoteAddr().String() != src.String() {
		t.Fatalf("flow %v -> %v", f.RemoteAddr(), f.LocalAddr())
	}
	buf := make([]byte, 64)
	if n, err := f.Read(buf); err != nil || string(buf[:n]) != "query" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	b.m.AdvanceTo(10 * time.Second)
	if _, err := f.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if got, want := b.l.read(t), udpPacket(dst, src, []byte("answer")); !bytes.Equal(got[ipv4HeaderLen:], want[ipv4HeaderLen:]) || !bytes.Equal(got[12:20], want[12:20]) {
		t.Fatalf("reply\n% x\nwant\n% x", got, want)
	}
	b.m.AdvanceTo(20 * time.Second)
	b.inject(t, udpPacket(src, dst, []byte("again"))) // the same flow: idle from 20 s
	if n, err := f.Read(buf); err != nil || string(buf[:n]) != "again" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	// The stack's own address keeps its socket.
	b.inject(t, udpPacket(src, netip.AddrPortFrom(addrB, 53), []byte("mine")))
	local.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _, err := local.ReadFrom(buf); err != nil || string(buf[:n]) != "mine" {
		t.Fatalf("local socket read %q, %v", buf[:n], err)
	}
	// Bounded: a second flow, then a third's datagram is dropped.
	b.inject(t, udpPacket(netip.AddrPortFrom(addrA, 1), dst, []byte("2")))
	b.flow(t)
	b.inject(t, udpPacket(netip.AddrPortFrom(addrA, 2), dst, []byte("3")))
	if st := b.m.Stats().Forward; st.UDPFlows != 2 || st.DropsUDPFlows != 1 || st.UDPIn != 3 || st.UDPOut != 1 || st.UDPActive != 2 {
		t.Fatalf("stats %+v", st)
	}
	b.m.AdvanceTo(20*time.Second + idle - timer.DefaultTick)
	if st := b.m.Stats().Forward; st.UDPExpired != 0 { // both flows carried a datagram at 20 s
		t.Fatalf("expired early: %+v", st)
	}
	f.SetReadDeadline(time.Now().Add(time.Millisecond))
	if _, err := f.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("before its idle timeout: read %v, want the deadline", err)
	}
	f.SetReadDeadline(time.Time{})
	b.m.AdvanceTo(20*time.Second + idle)
	if _, err := f.Read(buf); err != io.EOF {
		t.Fatalf("after its idle timeout: read %v, want io.EOF", err)
	}
	if _, err := f.Write([]byte("late")); err == nil {
		t.Fatal("write after the idle timeout succeeded")
	}
	if st := b.m.Stats().Forward; st.UDPExpired != 2 || st.UDPActive != 0 {
		t.Fatalf("stats %+v", st)
	}
	// After its end, the 5-tuple is a new flow.
	b.inject(t, udpPacket(src, dst, []byte("new")))
	if f2 := b.flow(t); f2 == f {
		t.Fatal("the old flow came back")
	}
}

// TestForwardRefused: Forward fails on a recording stack and twice.
func TestForwardRefused(t *testing.T) {
	b := newFwdBed(t, ForwardConfig{})
	if err := b.m.Forward(ForwardConfig{}); !errors.Is(err, ErrForwarding) {
		t.Errorf("second Forward: %v", err)
	}
	if err := b.m.Forward(ForwardConfig{MaxPending: -1}); !errors.Is(err, ErrForwarding) {
		t.Errorf("negative bound: %v", err)
	}
	dev, _ := tuntest.Pipe(1500)
	m, err := NewManual(Config{Device: dev, Addr: addrB, Clock: timer.NewManualClock(0), Record: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Forward(ForwardConfig{}); !errors.Is(err, ErrForwarding) {
		t.Errorf("Forward on a recording stack: %v", err)
	}
}

// FuzzForward hands a forwarding stack arbitrary bytes as the payload of
// good IPv4 and IPv6 headers to an address that is not the stack's, while
// its handlers decide (Reject in turn by the kind the first byte picks, or
// Accept; UDP flows echo): no panic, nothing sent larger than the MTU, each
// UDP datagram to the far address accounted for once (to a flow, or
// dropped with a reason), and every handler returns once the stack closes.
func FuzzForward(f *testing.F) {
	t0 := &testing.T{}
	f.Add(uint8(protoTCP), synTo(t0, netip.AddrPortFrom(addrA, 1), netip.AddrPortFrom(farAddr, 80), 1))
	f.Add(uint8(protoTCP), synTo(t0, netip.AddrPortFrom(addr6A, 1), netip.AddrPortFrom(farAddr6, 80), 1))
	f.Add(uint8(protoUDP), udpPacket(netip.AddrPortFrom(addrA, 1), netip.AddrPortFrom(farAddr, 53), []byte("q"))[ipv4HeaderLen:])
	f.Add(uint8(protoICMP), echoPacket(addrA, farAddr)[ipv4HeaderLen:])
	f.Fuzz(fuzzForwardBody)
}

func fuzzForwardBody(t *testing.T, proto uint8, b []byte) {
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 64})
	m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: addr6B, Clock: timer.NewManualClock(0)})
	if err != nil {
		t.Fatal(err)
	}
	how := Reject(1)
	if len(b) > 0 {
		how = Reject(b[0] % 4) // 0: Accept
	}
	// The handlers end before the body does (a goroutine left running
	// would make the fuzzer's coverage flaky): finished counts them.
	var finished atomic.Uint64
	err = m.Forward(ForwardConfig{
		PendingTimeout: time.Second,
		TCP: func(r *TCPRequest) {
			defer finished.Add(1)
			if how == 0 {
				r.Accept() // the timeout or the stack's Close ends it
				return
			}
			r.Reject(how)
		},
		UDP: func(fl *UDPFlow) {
			defer finished.Add(1)
			buf := make([]byte, 2048)
			for {
				n, err := fl.Read(buf)
				if err != nil {
					return
				}
				fl.Write(buf[:n])
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1500-ipv6HeaderLen {
		b = b[:1500-ipv6HeaderLen]
	}
	outcomes := func(s Stats) uint64 {
		d := s.Drops
		return s.Forward.UDPIn + s.Forward.DropsUDPFlows + s.Forward.DropsUDPQueue + d.BadUDPHeader + d.BadUDPLength + d.BadUDPChecksum
	}
	for _, pkt := range [][]byte{ipv4Packet(addrA, farAddr, proto, b), ipv6Packet(addr6A, farAddr6, proto, nil, b)} {
		before := m.Stats()
		m.Inject(pkt)
		if st := m.Stats(); proto == protoUDP {
			if n := outcomes(st) - outcomes(before); n != 1 {
				t.Fatalf("a datagram had %d outcomes: %+v", n, st)
			}
		}
	}
	// The handlers' decisions and echoes, before time moves: the same
	// input takes the same paths (the fuzzer's coverage must not be flaky).
	for i := 0; ; i++ {
		f := m.Stats().Forward
		if f.TCPRequests == f.TCPRejectedReset+f.TCPRejectedICMP+f.TCPRejectedDrop+f.Listen.SYNsIn && f.UDPOut == f.UDPIn {
			break
		}
		if i == 5000 {
			t.Fatalf("handlers undecided after 5 s: %+v", f)
		}
		time.Sleep(100 * time.Microsecond)
	}
	m.AdvanceTo(2 * time.Second)
	buf := make([]byte, 2000)
	for peer.Stats().Received < dev.Stats().Sent {
		n, err := peer.ReadPacket(buf)
		if err != nil || n > 1500 {
			t.Fatalf("sent %d bytes, %v", n, err)
		}
	}
	st := m.Stats().Forward
	m.Close()
	for i := 0; finished.Load() < st.TCPRequests+st.UDPFlows; i++ {
		if i == 5000 {
			t.Fatalf("handlers still running 5 s after Close: %d of %d ended", finished.Load(), st.TCPRequests+st.UDPFlows)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestForwardTimeWaitReuse: a forwarded connection that we closed first
// waits in TIME-WAIT; a SYN on its 4-tuple whose sequence number is above
// the old RCV.NXT is a new flow (RFC 6191, RFC 9293 3.6.1: the old
// connection closes), one below it is the old connection's (answered with
// its ACK).
func TestForwardTimeWaitReuse(t *testing.T) {
	b := newFwdBed(t, ForwardConfig{HandshakeFirst: true})
	src, dst := netip.AddrPortFrom(addrA, 40000), netip.AddrPortFrom(farAddr, 80)
	seg := func(seq, ack uint32, flags tcp.Flags) []byte {
		s := tcp.Segment{SrcPort: 40000, DstPort: 80, Seq: seqnum.Value(seq), Ack: seqnum.Value(ack), Flags: flags, Window: 65535}
		return ipPacket(addrA, farAddr, protoTCP, encodeSeg(t, addrA, farAddr, &s))
	}
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src, dst, 1000)))
	_, _, sa := sentTCP(t, b.l.read(t))
	iss := uint32(sa.Seq)
	b.inject(t, seg(1001, iss+1, tcp.FlagACK))
	c, err := b.request(t).Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close() // our FIN first
	if _, _, fin := sentTCP(t, b.l.read(t)); fin.Flags&tcp.FlagFIN == 0 {
		t.Fatalf("want our FIN, got %v", fin.Flags)
	}
	b.inject(t, seg(1001, iss+2, tcp.FlagACK|tcp.FlagFIN)) // ACK of our FIN, and the client's
	b.l.read(t)                                            // our ACK of it: TIME-WAIT
	if st := b.m.Stats(); st.Connections != 1 {
		t.Fatalf("connections %d, want the one in TIME-WAIT", st.Connections)
	}
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src, dst, 500))) // below RCV.NXT: the old connection's
	if _, _, ack := sentTCP(t, b.l.read(t)); ack.Flags != tcp.FlagACK || ack.Ack != seqnum.Value(1002) {
		t.Fatalf("old SYN answered %v ack %v, want TIME-WAIT's ACK of 1002", ack.Flags, ack.Ack)
	}
	b.inject(t, ipPacket(addrA, farAddr, protoTCP, synTo(t, src, dst, 90000)))
	if _, _, sa2 := sentTCP(t, b.l.read(t)); sa2.Flags != tcp.FlagSYN|tcp.FlagACK || sa2.Ack != seqnum.Value(90001) {
		t.Fatalf("new SYN answered %v ack %v, want a SYN-ACK of 90001", sa2.Flags, sa2.Ack)
	}
	if r := b.request(t); r.Source() != src {
		t.Fatalf("new request from %v", r.Source())
	}
	if st := b.m.Stats(); st.Forward.TimeWaitReused != 1 || st.Forward.TCPRequests != 2 || st.Connections != 0 {
		t.Fatalf("stats %+v, connections %d", st.Forward, st.Connections)
	}
}

// TestForwardUDPUnreachable: a flow's Unreachable sends the client an ICMP
// port unreachable from the original destination, quoting the client's
// last datagram (its IP header and UDP header: what the client's kernel
// matches its socket by), over IPv4 and IPv6.
func TestForwardUDPUnreachable(t *testing.T) {
	b := newFwdBed(t, ForwardConfig{})
	for _, v := range []struct{ src, dst netip.AddrPort }{
		{netip.AddrPortFrom(addrA, 5353), netip.AddrPortFrom(farAddr, 53)},
		{netip.AddrPortFrom(addr6A, 5353), netip.AddrPortFrom(farAddr6, 53)},
	} {
		var pkt []byte
		if v.src.Addr().Is4() {
			pkt = udpPacket(v.src, v.dst, []byte("query to a closed port"))
		} else {
			pkt = udp6Packet(v.src, v.dst, []byte("query to a closed port"))
		}
		b.inject(t, pkt)
		f := b.flow(t)
		if err := f.Unreachable(); err != nil {
			t.Fatal(err)
		}
		got := b.l.read(t)
		hl, proto, typ, code := ipv4HeaderLen, protoICMP, byte(3), byte(3) // destination unreachable, port
		if v.src.Addr().Is6() {
			hl, proto, typ, code = ipv6HeaderLen, protoICMPv6, 1, 4
		}
		s, d, p, off, _, ok := transportOf(got)
		if !ok || p != proto || s != v.dst.Addr() || d != v.src.Addr() || got[off] != typ || got[off+1] != code {
			t.Fatalf("%v: sent % x, want a port unreachable from %v to %v", v.dst, got, v.dst.Addr(), v.src.Addr())
		}
		quote := got[off+8:]
		if want := pkt[:hl+udpHeaderLen]; len(quote) < len(want) || !bytes.Equal(quote[:len(want)], want) {
			t.Fatalf("%v: quote % x, want the datagram's headers % x", v.dst, quote, want)
		}
		f.Close()
	}
}

// TestForwardUDPDirectWrite: on a stack whose UDP sends take the direct
// path (a live stack: forced on here), a flow's Write goes to the device
// from the caller, is counted, and keeps the flow from idling out: the idle
// timer re-arms from the last datagram either way.
func TestForwardUDPDirectWrite(t *testing.T) {
	const idle = 30 * time.Second
	b := newFwdBed(t, ForwardConfig{UDPIdleTimeout: idle})
	b.m.udpDirect, b.m.mtu = true, 1500
	src, dst := netip.AddrPortFrom(addrA, 5353), netip.AddrPortFrom(farAddr, 53)
	b.inject(t, udpPacket(src, dst, []byte("query")))
	f := b.flow(t)
	b.m.AdvanceTo(20 * time.Second)
	if _, err := f.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if got, want := b.l.read(t), udpPacket(dst, src, []byte("answer")); !bytes.Equal(got[ipv4HeaderLen:], want[ipv4HeaderLen:]) || !bytes.Equal(got[12:20], want[12:20]) {
		t.Fatalf("reply\n% x\nwant\n% x", got, want)
	}
	b.m.AdvanceTo(idle) // idle since the query, not since the answer
	if st := b.m.Stats().Forward; st.UDPExpired != 0 || st.UDPOut != 1 || st.UDPActive != 1 {
		t.Fatalf("at %v: %+v; want the flow alive, 1 datagram out", idle, st)
	}
	b.m.AdvanceTo(20*time.Second + idle - time.Millisecond)
	if st := b.m.Stats().Forward; st.UDPExpired != 0 {
		t.Fatalf("expired before the answer's idle time ran out")
	}
	b.m.AdvanceTo(20*time.Second + idle)
	if st := b.m.Stats().Forward; st.UDPExpired != 1 || st.UDPActive != 0 {
		t.Fatalf("at %v: %+v; want the flow expired", 20*time.Second+idle, st)
	}
	if _, err := f.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after the flow ended: %v, want net.ErrClosed", err)
	}
}
