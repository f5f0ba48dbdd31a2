package stack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
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

// icmpBed is a manual stack dialling the peer's port 80 from port 40000
// over IPv4 or IPv6 (ISN 1000, no timestamps), its link, and the packets
// it sent, each with the instant it went.
type icmpBed struct {
	t           *testing.T
	m           *Manual
	l           link
	clock       *timer.ManualClock
	local, peer netip.Addr
	c           *Conn
	sent        []sentPkt
}

type sentPkt struct {
	at  time.Duration
	pkt []byte
}

func newICMPBed(t *testing.T, v6 bool, cfg tcp.Config) *icmpBed {
	t.Helper()
	dev, other := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	b := &icmpBed{t: t, l: link{dev, other}, clock: timer.NewManualClock(0), local: addrB, peer: addrA}
	if v6 {
		b.local, b.peer = addr6B, addr6A
	}
	cfg.DisableTimestamps = true
	cfg.ISN = func(tcp.ID, time.Duration) seqnum.Value { return 1000 }
	m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: addr6B, Clock: b.clock, TCP: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b.m = m
	if b.c, err = m.StartDial("tcp", 40000, netip.AddrPortFrom(b.peer, 80).String()); err != nil {
		t.Fatal(err)
	}
	b.drain()
	return b
}

// drain collects what the stack sent.
func (b *icmpBed) drain() {
	for b.l.peer.Stats().Received < b.l.sent() {
		b.sent = append(b.sent, sentPkt{b.clock.Now(), b.l.read(b.t)})
	}
}

// segs parses the TCP segments sent from index i on.
func (b *icmpBed) segs(i int) []tcp.Segment {
	var out []tcp.Segment
	for _, p := range b.sent[i:] {
		seg, err := tcp.ParseSegment(p.pkt[ipHeaderLen(b.local):])
		if err != nil {
			b.t.Fatal(err)
		}
		out = append(out, seg)
	}
	return out
}

// ip wraps a payload from the peer in an IP header.
func (b *icmpBed) ip(proto uint8, payload []byte) []byte {
	if b.local.Is4() {
		return ipv4Packet(b.peer, b.local, proto, payload)
	}
	return ipv6Packet(b.peer, b.local, proto, nil, payload)
}

// segment injects a segment from the peer's port 80.
func (b *icmpBed) segment(seq, ack uint32, flags tcp.Flags, mss uint16) {
	seg := tcp.Segment{SrcPort: 80, DstPort: 40000, Seq: seqnum.Value(seq), Ack: seqnum.Value(ack), Flags: flags, Window: 65535}
	if mss != 0 {
		seg.Options.HasMSS, seg.Options.MSS = true, mss
	}
	p := make([]byte, seg.EncodedLen())
	seg.Encode(p)
	tcp.SetChecksum(b.peer, b.local, p)
	inject(b.t, b.m, b.ip(protoTCP, p))
	b.drain()
}

// icmp injects an ICMP error of type typ and code code (ICMPv6 over
// IPv6) with the 4 bytes rest, quoting the packet the stack sent as the
// n-th (its IP header and first 8 bytes over IPv4, all of it over IPv6)
// with its sequence number moved by dseq.
func (b *icmpBed) icmp(typ, code uint8, rest uint32, n int, dseq int) {
	q := append([]byte(nil), b.sent[n].pkt...)
	hl := ipHeaderLen(b.local)
	binary.BigEndian.PutUint32(q[hl+4:], binary.BigEndian.Uint32(q[hl+4:])+uint32(dseq))
	if b.local.Is4() {
		q = q[:hl+8]
	}
	m := append(make([]byte, 8), q...)
	m[0], m[1] = typ, code
	binary.BigEndian.PutUint32(m[4:], rest)
	if b.local.Is4() {
		binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, 0))
		inject(b.t, b.m, ipv4Packet(b.peer, b.local, protoICMP, m))
	} else {
		binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, pseudoHeader(protoICMPv6, b.peer, b.local, len(m))))
		inject(b.t, b.m, ipv6Packet(b.peer, b.local, protoICMPv6, nil, m))
	}
	b.drain()
}

var (
	unreach4 = uint8(header.ICMPv4DstUnreachable)
	unreach6 = uint8(header.ICMPv6DstUnreachable)
)

// TestICMPHardErrorInSynSent: a port unreachable (or, over IPv6, an
// administratively prohibited) quoting our SYN ends the connection
// attempt at once, with ECONNREFUSED (EACCES); one quoting a sequence
// number we did not send, or a connection we do not have, is counted and
// changes nothing.
func TestICMPHardErrorInSynSent(t *testing.T) {
	for _, tc := range []struct {
		name       string
		v6         bool
		typ, code  uint8
		errno      syscall.Errno
		isRefusal  bool
		otherTuple bool
	}{
		{"IPv4 port unreachable", false, unreach4, 3, syscall.ECONNREFUSED, true, false},
		{"IPv4 administratively prohibited", false, unreach4, 13, syscall.EHOSTUNREACH, false, false},
		{"IPv4 protocol unreachable", false, unreach4, 2, syscall.ENOPROTOOPT, false, false},
		{"IPv6 port unreachable", true, unreach6, 4, syscall.ECONNREFUSED, true, false},
		{"IPv6 administratively prohibited", true, unreach6, 1, syscall.EACCES, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newICMPBed(t, tc.v6, tcp.Config{})
			b.m.AdvanceTo(300 * time.Millisecond)
			b.icmp(tc.typ, tc.code, 0, 0, 1) // ISS + 1: not sent
			b.icmp(tc.typ, tc.code, 0, 0, -1)
			st := b.m.Stats()
			if st.Drops.ICMPBadSeq != 2 || b.c.ep.State() != tcp.StateSynSent {
				t.Fatalf("ICMPBadSeq %d, state %v; want 2, SYN-SENT", st.Drops.ICMPBadSeq, b.c.ep.State())
			}
			// Another port's: no connection.
			q := b.sent[0].pkt
			hl := ipHeaderLen(b.local)
			q[hl], q[hl+1] = 0x99, 0x99
			b.icmp(tc.typ, tc.code, 0, 0, 0)
			if st := b.m.Stats(); st.Drops.ICMPNoConnection != 1 || b.c.ep.State() != tcp.StateSynSent {
				t.Fatalf("ICMPNoConnection %d, state %v", st.Drops.ICMPNoConnection, b.c.ep.State())
			}
			binary.BigEndian.PutUint16(q[hl:], 40000)
			b.icmp(tc.typ, tc.code, 0, 0, 0)
			err := b.c.ep.Err()
			if b.c.ep.State() != tcp.StateClosed || !errors.Is(mapErr(err), tc.errno) || errors.Is(err, tcp.ErrConnectionRefused) != tc.isRefusal {
				t.Fatalf("state %v, error %v; want CLOSED, %v", b.c.ep.State(), err, tc.errno)
			}
			if len(b.sent) != 1 {
				t.Fatalf("sent %d packets, want the SYN alone (no RST)", len(b.sent))
			}
			if st := b.m.Stats(); st.TCPICMPErrors != 1 || st.Connections != 0 {
				t.Fatalf("TCPICMPErrors %d, Connections %d; want 1, 0", st.TCPICMPErrors, st.Connections)
			}
		})
	}
}

// TestICMPSoftError: a host unreachable (or time exceeded) quoting our SYN
// changes nothing at once: the SYN is resent at 1 s and 3 s as ever, and
// when the retries run out, exactly at 7 s, the connection fails with
// the timeout and the soft error both.
func TestICMPSoftError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v6        bool
		typ, code uint8
		errno     syscall.Errno
	}{
		{"IPv4 host unreachable", false, unreach4, 1, syscall.EHOSTUNREACH},
		{"IPv4 time exceeded", false, uint8(header.ICMPv4TimeExceeded), 0, syscall.EHOSTUNREACH},
		{"IPv4 port unreachable once established is soft", false, unreach4, 3, syscall.ECONNREFUSED},
		{"IPv6 no route", true, unreach6, 0, syscall.ENETUNREACH},
		{"IPv6 time exceeded", true, uint8(header.ICMPv6TimeExceeded), 0, syscall.EHOSTUNREACH},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newICMPBed(t, tc.v6, tcp.Config{SYNRetries: 2, Retries2: 2})
			quoted := 0
			if tc.code == 3 {
				b.segment(5000, 1001, tcp.FlagSYN|tcp.FlagACK, 1400)
				b.c.TryWrite([]byte("hello"))
				b.drain()
				quoted = len(b.sent) - 1
			}
			start := b.clock.Now()
			b.icmp(tc.typ, tc.code, 0, quoted, 0)
			if b.c.ep.State() == tcp.StateClosed || b.m.Stats().TCPICMPErrors != 1 {
				t.Fatalf("state %v, TCPICMPErrors %d: a soft error acted on at once", b.c.ep.State(), b.m.Stats().TCPICMPErrors)
			}
			end := start + 7*time.Second // the SYN's retries: 1 + 2 + 4 s
			if tc.code == 3 {
				// The data's retries: the RTO of the last, from the connection's own record.
				for i := 0; i < 100 && b.c.ep.State() != tcp.StateClosed; i++ {
					d, _ := b.m.NextDeadline()
					b.m.AdvanceTo(d)
				}
				end = b.c.ep.Info().LastRTO.Due
				if b.clock.Now() != end {
					t.Fatalf("closed at %v, the last RTO was due at %v", b.clock.Now(), end)
				}
			}
			if tc.code != 3 {
				b.m.AdvanceTo(end - time.Millisecond)
				if b.c.ep.State() == tcp.StateClosed {
					t.Fatalf("closed before %v", end)
				}
			}
			b.m.AdvanceTo(end)
			err := mapErr(b.c.ep.Err())
			if !errors.Is(err, syscall.ETIMEDOUT) || !errors.Is(err, tc.errno) {
				t.Fatalf("error %v at %v, want ETIMEDOUT and %v", err, end, tc.errno)
			}
		})
	}
}

// TestPMTU: "fragmentation needed" (next-hop MTU 1280) or "packet too big"
// quoting the first of four full segments in flight: at that instant the
// flight is resent from SND.UNA in segments of the new MSS (1240, and
// 1220 over IPv6), all of it, and new data goes at the new size. An MTU
// below the floor (552 over IPv4) gives the floor's MSS; one quoting a
// sequence number not in flight is counted and changes nothing.
func TestPMTU(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v6        bool
		typ, code uint8
		mtu       uint32
		mss       int
	}{
		{"IPv4 fragmentation needed", false, unreach4, 4, 1280, 1240},
		{"IPv4 below the floor", false, unreach4, 4, 300, 512},
		{"IPv6 packet too big", true, uint8(header.ICMPv6PacketTooBig), 0, 1280, 1220},
		{"IPv6 below the minimum", true, uint8(header.ICMPv6PacketTooBig), 0, 600, 1220},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newICMPBed(t, tc.v6, tcp.Config{})
			b.m.AdvanceTo(10 * time.Millisecond)
			b.segment(5000, 1001, tcp.FlagSYN|tcp.FlagACK, 1440)
			data := bytes.Repeat([]byte("0123456789"), 576) // 5760 bytes: 4 segments of 1440
			b.c.TryWrite(data)
			b.drain()
			first := len(b.sent) - 4
			if segs := b.segs(first); len(segs[0].Payload) != 1440 || len(segs) != 4 {
				t.Fatalf("%d segments, the first of %d bytes; want 4 of 1440", len(segs), len(segs[0].Payload))
			}
			b.m.AdvanceTo(15 * time.Millisecond)
			rest := tc.mtu                             // RFC 1191: IPv4's next-hop MTU in the low 16 bits; RFC 4443 3.2: IPv6's all 32
			b.icmp(tc.typ, tc.code, rest, first, 5760) // SND.MAX: not in flight
			if st := b.m.Stats(); st.Drops.ICMPBadSeq != 1 || len(b.sent) != first+4 {
				t.Fatalf("ICMPBadSeq %d, %d packets sent", st.Drops.ICMPBadSeq, len(b.sent)-first-4)
			}
			b.icmp(tc.typ, tc.code, rest, first, 0)
			re := b.segs(first + 4)
			seq, want := seqnum.Value(1001), 5760
			for i, s := range re {
				if s.Seq != seq || len(s.Payload) != min(tc.mss, want) || b.sent[first+4+i].at != 15*time.Millisecond {
					t.Fatalf("resent segment %d: seq %d, %d bytes at %v; want %d, %d at 15ms", i, s.Seq, len(s.Payload), b.sent[first+4+i].at, seq, min(tc.mss, want))
				}
				seq, want = seq.Add(seqnum.Size(len(s.Payload))), want-len(s.Payload)
			}
			if want != 0 {
				t.Fatalf("%d bytes not resent (%d segments)", want, len(re))
			}
			if info := b.c.ep.Info(); info.SndMSS != tc.mss || info.PMTUResends != 1 {
				t.Fatalf("SndMSS %d, PMTUResends %d; want %d, 1", info.SndMSS, info.PMTUResends, tc.mss)
			}
			// The peer takes it all; new data goes at the new size.
			n := len(b.sent)
			b.segment(5001, 1001+5760, tcp.FlagACK, 0)
			b.c.TryWrite(data[:2000])
			b.drain()
			for _, s := range b.segs(n) {
				if len(s.Payload) > tc.mss {
					t.Fatalf("new segment of %d bytes after the MSS fell to %d", len(s.Payload), tc.mss)
				}
			}
			if st := b.m.Stats(); st.TCPICMPErrors != 1 {
				t.Fatalf("TCPICMPErrors %d, want 1", st.TCPICMPErrors)
			}
		})
	}
}

// TestICMPBadQuote: ICMP errors whose quote is short, or not of a packet
// from our address, are counted.
func TestICMPBadQuote(t *testing.T) {
	b := newICMPBed(t, false, tcp.Config{})
	syn := append([]byte(nil), b.sent[0].pkt...)
	short := syn[:ipv4HeaderLen+4]
	foreign := append([]byte(nil), syn[:ipv4HeaderLen+8]...)
	copy(foreign[12:16], []byte{198, 18, 0, 77})
	for _, q := range [][]byte{short, foreign} {
		m := append([]byte{unreach4, 3, 0, 0, 0, 0, 0, 0}, q...)
		binary.BigEndian.PutUint16(m[2:], ^checksum.Checksum(m, 0))
		inject(t, b.m, ipv4Packet(addrA, addrB, protoICMP, m))
	}
	if st := b.m.Stats(); st.Drops.ICMPBadQuote != 2 || b.c.ep.State() != tcp.StateSynSent {
		t.Fatalf("ICMPBadQuote %d, state %v; want 2, SYN-SENT", st.Drops.ICMPBadQuote, b.c.ep.State())
	}
}

// TestPMTUInSynSent: a "fragmentation needed" quoting our SYN is kept
// until the SYN-ACK: the MSS then taken is the path's (1240), not the
// peer's (1460).
func TestPMTUInSynSent(t *testing.T) {
	b := newICMPBed(t, false, tcp.Config{})
	b.icmp(unreach4, 4, 1280, 0, 0)
	if b.c.ep.State() != tcp.StateSynSent || b.m.Stats().TCPICMPErrors != 1 || len(b.sent) != 1 {
		t.Fatalf("state %v, TCPICMPErrors %d, %d sent", b.c.ep.State(), b.m.Stats().TCPICMPErrors, len(b.sent))
	}
	b.segment(5000, 1001, tcp.FlagSYN|tcp.FlagACK, 1460)
	if mss := b.c.ep.Info().SndMSS; mss != 1240 {
		t.Fatalf("SndMSS %d, want 1240", mss)
	}
}

// TestICMPHalfOpen: a port unreachable quoting a listener's SYN-ACK drops
// the half-open connection (as Linux's tcp_req_err); one with another
// sequence number is counted and changes nothing.
func TestICMPHalfOpen(t *testing.T) {
	m, l := manualUDP(t)
	if _, err := m.Listen("tcp", ":80"); err != nil {
		t.Fatal(err)
	}
	inject(t, m, synPacket(t, addrA, addrB, 80))
	synack := l.read(t)
	half := func() int { return m.listeners[80].tl.HalfOpen() }
	if half() != 1 {
		t.Fatalf("%d half-open, want 1", half())
	}
	for _, dseq := range []uint32{1, 0} {
		q := append([]byte(nil), synack[:ipv4HeaderLen+8]...)
		binary.BigEndian.PutUint32(q[ipv4HeaderLen+4:], binary.BigEndian.Uint32(q[ipv4HeaderLen+4:])+dseq)
		msg := append([]byte{unreach4, 3, 0, 0, 0, 0, 0, 0}, q...)
		binary.BigEndian.PutUint16(msg[2:], ^checksum.Checksum(msg, 0))
		inject(t, m, ipv4Packet(addrA, addrB, protoICMP, msg))
	}
	if st := m.Stats(); st.Drops.ICMPBadSeq != 1 || st.TCPICMPErrors != 1 || half() != 0 || l.sent() != 1 {
		t.Fatalf("ICMPBadSeq %d, TCPICMPErrors %d, half-open %d, sent %d; want 1, 1, 0, 1", st.Drops.ICMPBadSeq, st.TCPICMPErrors, half(), l.sent())
	}
}

// TestPMTUHalfOpen: a "fragmentation needed" quoting a listener's SYN-ACK
// lowers the half-open connection's MSS and leaves its SYN-ACK timer
// running: the SYN-ACK is resent at 1 s, exactly.
func TestPMTUHalfOpen(t *testing.T) {
	m, l := manualUDP(t)
	if _, err := m.Listen("tcp", ":80"); err != nil {
		t.Fatal(err)
	}
	syn := tcp.Segment{SrcPort: 40000, DstPort: 80, Seq: 1000, Flags: tcp.FlagSYN, Window: 65535}
	syn.Options.HasMSS, syn.Options.MSS = true, 1460
	b := make([]byte, syn.EncodedLen())
	syn.Encode(b)
	tcp.SetChecksum(addrA, addrB, b)
	inject(t, m, ipv4Packet(addrA, addrB, protoTCP, b))
	synack := l.read(t)
	msg := append([]byte{unreach4, 4, 0, 0, 0, 0, 1280 >> 8, 1280 & 0xff}, synack[:ipv4HeaderLen+8]...)
	binary.BigEndian.PutUint16(msg[2:], ^checksum.Checksum(msg, 0))
	inject(t, m, ipv4Packet(addrA, addrB, protoICMP, msg))
	id := tcp.ID{Local: netip.AddrPortFrom(addrB, 80), Remote: netip.AddrPortFrom(addrA, 40000)}
	ep := m.listeners[80].tl.HalfOpenConn(id)
	if ep == nil || ep.Info().SndMSS != 1240 || m.Stats().TCPICMPErrors != 1 {
		t.Fatalf("half-open %v, TCPICMPErrors %d", ep != nil, m.Stats().TCPICMPErrors)
	}
	m.AdvanceTo(time.Second - time.Millisecond)
	if l.sent() != 1 {
		t.Fatal("resent early")
	}
	m.AdvanceTo(time.Second)
	if again := l.read(t); !bytes.Equal(again[ipv4HeaderLen:ipv4HeaderLen+14], synack[ipv4HeaderLen:ipv4HeaderLen+14]) {
		t.Fatalf("sent %x at 1 s, want the SYN-ACK again", again)
	}
}

// TestPMTUCache: a path MTU one connection learned from a "fragmentation
// needed" (or "packet too big") that quotes its segment, the next
// connection to the same address starts with: its MSS is the path's at
// the SYN-ACK, without an ICMP error of its own. One quoting a sequence
// number not in flight teaches nothing; another address, or the same one
// 10 minutes after the error, starts with the peer's MSS.
func TestPMTUCache(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "IPv4", true: "IPv6"}[v6], func(t *testing.T) {
			typ, code, want := unreach4, uint8(4), 1240
			other := netip.MustParseAddr("198.18.0.99")
			if v6 {
				typ, code, want = uint8(header.ICMPv6PacketTooBig), 0, 1220
				other = netip.MustParseAddr("2001:db8::99")
			}
			b := newICMPBed(t, v6, tcp.Config{})
			b.icmp(typ, code, 1280, 0, 1) // not our SYN's sequence number
			if st := b.m.Stats(); st.PMTULearned != 0 || st.Drops.ICMPBadSeq != 1 {
				t.Fatalf("PMTULearned %d, ICMPBadSeq %d after a bad quote; want 0, 1", st.PMTULearned, st.Drops.ICMPBadSeq)
			}
			b.icmp(typ, code, 1280, 0, 0)
			b.segment(5000, 1001, tcp.FlagSYN|tcp.FlagACK, 1440)
			if mss := b.c.ep.Info().SndMSS; mss != want {
				t.Fatalf("the first connection's SndMSS %d, want %d", mss, want)
			}
			port := uint16(40001)
			dial := func(to netip.Addr) int {
				t.Helper()
				c, err := b.m.StartDial("tcp", port, netip.AddrPortFrom(to, 80).String())
				if err != nil {
					t.Fatal(err)
				}
				b.drain()
				seg := tcp.Segment{SrcPort: 80, DstPort: port, Seq: 9000, Ack: 1001, Flags: tcp.FlagSYN | tcp.FlagACK, Window: 65535}
				seg.Options.HasMSS, seg.Options.MSS = true, 1440
				p := make([]byte, seg.EncodedLen())
				seg.Encode(p)
				tcp.SetChecksum(to, b.local, p)
				if v6 {
					inject(t, b.m, ipv6Packet(to, b.local, protoTCP, nil, p))
				} else {
					inject(t, b.m, ipv4Packet(to, b.local, protoTCP, p))
				}
				b.drain()
				port++
				if c.ep.State() != tcp.StateEstablished {
					t.Fatalf("connection to %v: %v", to, c.ep.State())
				}
				return c.ep.Info().SndMSS
			}
			if mss := dial(b.peer); mss != want {
				t.Errorf("the next connection to %v: SndMSS %d, want the path's %d", b.peer, mss, want)
			}
			if mss := dial(other); mss != 1440 {
				t.Errorf("a connection to %v: SndMSS %d, want the peer's 1440", other, mss)
			}
			b.m.AdvanceTo(pmtuLifetime - time.Millisecond)
			if mss := dial(b.peer); mss != want {
				t.Errorf("just before the entry's lifetime: SndMSS %d, want %d", mss, want)
			}
			b.m.AdvanceTo(pmtuLifetime)
			if mss := dial(b.peer); mss != 1440 {
				t.Errorf("10 minutes after the error: SndMSS %d, want the peer's 1440", mss)
			}
			if st := b.m.Stats(); st.PMTULearned != 1 || st.PMTUReused != 2 || len(b.m.pmtu) != 0 {
				t.Errorf("PMTULearned %d, PMTUReused %d, %d kept; want 1, 2, 0", st.PMTULearned, st.PMTUReused, len(b.m.pmtu))
			}
		})
	}
}

// TestPMTUCacheBound: the cache keeps at most pmtuMax destinations; a full
// one drops its expired entries first.
func TestPMTUCacheBound(t *testing.T) {
	m, _ := manual6(t)
	s := m.Stack
	for i := range pmtuMax {
		s.learnPMTU(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 1280)
	}
	m.AdvanceTo(pmtuLifetime / 2)
	fresh := netip.MustParseAddr("2001:db8::1:1")
	s.learnPMTU(fresh, 1300)
	if len(s.pmtu) != pmtuMax || s.pmtu[fresh].mtu != 1300 {
		t.Fatalf("%d kept, the new one %+v; want %d and it", len(s.pmtu), s.pmtu[fresh], pmtuMax)
	}
	m.AdvanceTo(pmtuLifetime)
	s.learnPMTU(netip.MustParseAddr("2001:db8::1:2"), 1300)
	if len(s.pmtu) != 2 {
		t.Fatalf("%d kept after the old ones expired; want 2", len(s.pmtu))
	}
}
