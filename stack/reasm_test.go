package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/internal/tcpip/header"
)

// bigEcho is an ICMP echo request from src to dst with n bytes of data,
// identifier 7, sequence 1: over IPv4, or ICMPv6 over IPv6.
func bigEcho(src, dst netip.Addr, n int) []byte {
	b := make([]byte, 8+n)
	binary.BigEndian.PutUint32(b[4:], 7<<16|1)
	for i := range n {
		b[8+i] = byte(i*7 + i>>8)
	}
	if src.Is4() {
		b[0] = byte(header.ICMPv4Echo)
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
		return ipv4Packet(src, dst, protoICMP, b)
	}
	b[0] = byte(header.ICMPv6EchoRequest)
	binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, pseudoHeader(protoICMPv6, src, dst, len(b))))
	return ipv6Packet(src, dst, protoICMPv6, nil, b)
}

// frag4 is the fragment [off, off+n) of the payload of pkt, an IPv4
// datagram with a 20-byte header, with identification id.
func frag4(pkt []byte, id uint16, off, n int, more bool) []byte {
	f := make([]byte, ipv4HeaderLen+n)
	copy(f, pkt[:ipv4HeaderLen])
	copy(f[ipv4HeaderLen:], pkt[ipv4HeaderLen+off:])
	binary.BigEndian.PutUint16(f[2:], uint16(len(f)))
	binary.BigEndian.PutUint16(f[4:], id)
	fo := uint16(off / 8)
	if more {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(f[6:], fo)
	f[10], f[11] = 0, 0
	binary.BigEndian.PutUint16(f[10:], ^checksum.Checksum(f[:ipv4HeaderLen], 0))
	return f
}

// frag6 is the fragment [off, off+n) of the payload of pkt, an IPv6
// packet without extension headers, with identification id.
func frag6(pkt []byte, id uint32, off, n int, more bool) []byte {
	f := make([]byte, ipv6HeaderLen+8+n)
	copy(f, pkt[:ipv6HeaderLen])
	binary.BigEndian.PutUint16(f[4:], uint16(8+n))
	f[6] = nhFragment
	h := f[ipv6HeaderLen:]
	h[0] = pkt[6]
	offM := uint16(off)
	if more {
		offM |= 1
	}
	binary.BigEndian.PutUint16(h[2:], offM)
	binary.BigEndian.PutUint32(h[4:], id)
	copy(h[8:], pkt[ipv6HeaderLen+off:])
	return f
}

// inject hands the manual stack packets at the clock's reading.
func inject(t *testing.T, m *Manual, pkts ...[]byte) {
	t.Helper()
	for _, p := range pkts {
		if err := m.Inject(p); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads every packet the stack sent and has not been read.
func (l link) readAll(t testing.TB) [][]byte {
	var out [][]byte
	for l.peer.Stats().Received < l.sent() {
		out = append(out, l.read(t))
	}
	return out
}

// join4 puts the IPv4 fragments fs (in order) back together, checking
// each: DF clear, MF on all but the last, offsets in order, one ID.
func join4(t *testing.T, fs [][]byte) []byte {
	t.Helper()
	var data []byte
	for i, f := range fs {
		ip := header.IPv4(f)
		if !ip.IsChecksumValid() || ip.Flags()&header.IPv4FlagDontFragment != 0 || ip.More() != (i < len(fs)-1) ||
			int(ip.FragmentOffset()) != len(data) || ip.ID() != header.IPv4(fs[0]).ID() || len(f) > 1500 {
			t.Fatalf("fragment %d of %d: %x", i, len(fs), f[:ipv4HeaderLen])
		}
		data = append(data, f[ipv4HeaderLen:]...)
	}
	return data
}

// TestReassembly4 hands the stack a 4000-byte ping in three fragments out
// of order, one of them twice: the reply, larger than the MTU, comes back
// in fragments that hold the request's data; the duplicate is counted,
// and the reassembly timer is stopped.
func TestReassembly4(t *testing.T) {
	m, l := manualUDP(t)
	req := bigEcho(addrA, addrB, 4000)
	f1, f2, f3 := frag4(req, 9, 0, 1480, true), frag4(req, 9, 1480, 1480, true), frag4(req, 9, 2960, 4008-2960, false)
	inject(t, m, f3, f1)
	if l.sent() != 0 {
		t.Fatal("sent something before the datagram was whole")
	}
	if p := m.Stats().Wheel.Pending; p != 1 {
		t.Fatalf("%d timers pending, want the reassembly timer", p)
	}
	inject(t, m, f1, f2)
	st := m.Stats()
	if st.Reassembled != 1 || st.Drops.FragDuplicate != 1 || st.EchoReplies != 1 || st.FragmentsOut != 3 {
		t.Fatalf("Reassembled %d, FragDuplicate %d, EchoReplies %d, FragmentsOut %d; want 1, 1, 1, 3",
			st.Reassembled, st.Drops.FragDuplicate, st.EchoReplies, st.FragmentsOut)
	}
	if p := m.Stats().Wheel.Pending; p != 0 {
		t.Fatalf("%d timers left after reassembly", p)
	}
	reply := join4(t, l.readAll(t))
	want := append([]byte(nil), req[ipv4HeaderLen:]...)
	want[0], want[2], want[3] = byte(header.ICMPv4EchoReply), 0, 0
	binary.BigEndian.PutUint16(want[2:], ^checksum.Checksum(want, 0))
	if !bytes.Equal(reply, want) {
		t.Fatalf("reply of %d bytes differs from the request's", len(reply))
	}
	if m.reasm.mem != 0 || len(m.reasm.queues) != 0 || len(m.reasm.perSrc) != 0 {
		t.Fatalf("memory %d, %d queues, %d sources left", m.reasm.mem, len(m.reasm.queues), len(m.reasm.perSrc))
	}
}

// TestReassembly6 is TestReassembly4 over IPv6: fragments out of order, the
// reply in fragments with fragment headers.
func TestReassembly6(t *testing.T) {
	m, l := manual6(t)
	req := bigEcho(addr6A, addr6B, 4000)
	pl := len(req) - ipv6HeaderLen
	inject(t, m, frag6(req, 77, 2896, pl-2896, false), frag6(req, 77, 1448, 1448, true), frag6(req, 77, 0, 1448, true))
	st := m.Stats()
	if st.Reassembled != 1 || st.EchoReplies != 1 {
		t.Fatalf("Reassembled %d, EchoReplies %d; want 1, 1", st.Reassembled, st.EchoReplies)
	}
	var data []byte
	fs := l.readAll(t)
	for i, f := range fs {
		h := f[ipv6HeaderLen:]
		offM := binary.BigEndian.Uint16(h[2:])
		if f[6] != nhFragment || h[0] != protoICMPv6 || int(offM&^7) != len(data) || offM&1 == 1 != (i < len(fs)-1) || len(f) > 1500 {
			t.Fatalf("fragment %d of %d: %x", i, len(fs), f[:ipv6HeaderLen+8])
		}
		data = append(data, h[8:]...)
	}
	if len(fs) != 3 || len(data) != pl || data[0] != byte(header.ICMPv6EchoReply) || !bytes.Equal(data[4:], req[ipv6HeaderLen+4:]) {
		t.Fatalf("%d fragments, %d bytes: not the reply", len(fs), len(data))
	}
	if checksum.Checksum(data, pseudoHeader(protoICMPv6, addr6B, addr6A, len(data))) != 0xffff {
		t.Fatal("bad reply checksum")
	}
}

// TestReassemblyTimeout: the datagram's first fragment alone; nothing
// happens until the timeout, 30 s over IPv4 and 60 s over IPv6 from the
// fragment, exactly; then the fragment is dropped and an ICMP time
// exceeded (reassembly) quotes it. Without its first fragment, the
// datagram times out quietly.
func TestReassemblyTimeout(t *testing.T) {
	const timeout4, timeout6 = 30 * time.Second, 60 * time.Second // the documented choices, not the constants
	t.Run("IPv4", func(t *testing.T) {
		m, l := manualUDP(t)
		req := bigEcho(addrA, addrB, 2000)
		m.AdvanceTo(5 * time.Millisecond)
		first := frag4(req, 3, 0, 1480, true)
		inject(t, m, first)
		m.AdvanceTo(5*time.Millisecond + timeout4 - time.Millisecond)
		if l.sent() != 0 || m.Stats().Drops.FragTimeout != 0 {
			t.Fatal("timed out early")
		}
		m.AdvanceTo(5*time.Millisecond + timeout4)
		st := m.Stats()
		if st.Drops.FragTimeout != 1 || st.TimeExceededSent != 1 {
			t.Fatalf("FragTimeout %d, TimeExceededSent %d; want 1, 1", st.Drops.FragTimeout, st.TimeExceededSent)
		}
		quote := append(append([]byte(nil), first[:ipv4HeaderLen]...), first[ipv4HeaderLen:ipv4HeaderLen+8]...)
		msg := append([]byte{byte(header.ICMPv4TimeExceeded), byte(header.ICMPv4ReassemblyTimeout), 0, 0, 0, 0, 0, 0}, quote...)
		binary.BigEndian.PutUint16(msg[2:], ^checksum.Checksum(msg, 0))
		got := l.read(t)
		if !bytes.Equal(got[ipv4HeaderLen:], msg) || header.IPv4(got).Protocol() != protoICMP {
			t.Fatalf("sent %x\nwant ICMP %x", got, msg)
		}
		// The last fragment alone: dropped at the timeout, no ICMP.
		inject(t, m, frag4(req, 4, 1480, 2008-1480, false))
		m.AdvanceTo(10*time.Millisecond + 2*timeout4)
		if st := m.Stats(); st.Drops.FragTimeout != 2 || st.TimeExceededSent != 1 || m.reasm.mem != 0 {
			t.Fatalf("FragTimeout %d, TimeExceededSent %d, memory %d; want 2, 1, 0", st.Drops.FragTimeout, st.TimeExceededSent, m.reasm.mem)
		}
	})
	t.Run("IPv6", func(t *testing.T) {
		m, l := manual6(t)
		req := bigEcho(addr6A, addr6B, 2000)
		first := frag6(req, 3, 0, 1448, true)
		inject(t, m, first)
		m.AdvanceTo(timeout6 - time.Millisecond)
		if l.sent() != 0 {
			t.Fatal("timed out early")
		}
		m.AdvanceTo(timeout6)
		want := icmp6(addr6B, addr6A, header.ICMPv6TimeExceeded, append(make([]byte, 4), first[:ipv6MinMTU-48]...))
		want[1] = byte(header.ICMPv6ReassemblyTimeout)
		want[2], want[3] = 0, 0
		binary.BigEndian.PutUint16(want[2:], ^checksum.Checksum(want, pseudoHeader(protoICMPv6, addr6B, addr6A, len(want))))
		if got := l.read(t); !bytes.Equal(got[ipv6HeaderLen:], want) {
			t.Fatalf("sent %x\nwant ICMPv6 %x", got[:80], want[:40])
		}
		if st := m.Stats(); st.Drops.FragTimeout != 1 || st.TimeExceededSent != 1 {
			t.Fatalf("FragTimeout %d, TimeExceededSent %d", st.Drops.FragTimeout, st.TimeExceededSent)
		}
	})
}

// TestReassemblyOverlap: a fragment that overlaps one held drops the
// datagram and those of its fragments still to come, without an ICMP
// (RFC 5722); once the timer has gone, the same identification starts
// afresh.
func TestReassemblyOverlap(t *testing.T) {
	m, l := manualUDP(t)
	req := bigEcho(addrA, addrB, 2000)
	inject(t, m, frag4(req, 5, 0, 1480, true), frag4(req, 5, 1472, 2008-1472, false))
	inject(t, m, frag4(req, 5, 1480, 2008-1480, false))
	st := m.Stats()
	if st.Drops.FragOverlap != 3 || st.Reassembled != 0 || m.reasm.mem != reasmOverhead {
		t.Fatalf("FragOverlap %d, Reassembled %d, memory %d; want 3, 0, %d", st.Drops.FragOverlap, st.Reassembled, m.reasm.mem, reasmOverhead)
	}
	m.AdvanceTo(reasmTimeout4)
	if l.sent() != 0 || m.Stats().Drops.FragTimeout != 0 {
		t.Fatal("a dropped datagram timed out with an ICMP or a count")
	}
	inject(t, m, frag4(req, 5, 0, 1480, true), frag4(req, 5, 1480, 2008-1480, false))
	if m.Stats().EchoReplies != 1 {
		t.Fatal("no reply after the dropped datagram's timer")
	}
}

// TestReassemblyBadInput: tiny first fragments, lengths that are not
// multiples of 8, a second last fragment, too many fragments: counted,
// nothing delivered; over IPv6 with the parameter problem RFC 8200 asks.
func TestReassemblyBadInput(t *testing.T) {
	syn := synPacket(t, addrA, addrB, 80)
	long := bigEcho(addrA, addrB, 600)
	for _, tc := range []struct {
		name  string
		frags [][]byte
		drop  func(*Drops) uint64
		n     uint64
	}{
		{"TCP at offset 8 (RFC 1858)", [][]byte{frag4(syn, 1, 8, 12, false)}, func(d *Drops) uint64 { return d.FragTiny }, 1},
		{"TCP first fragment of 16 bytes", [][]byte{frag4(syn, 1, 0, 16, true)}, func(d *Drops) uint64 { return d.FragTiny }, 1},
		{"not a multiple of 8", [][]byte{frag4(long, 1, 0, 100, true)}, func(d *Drops) uint64 { return d.FragBad }, 1},
		{"two ends", [][]byte{frag4(long, 1, 0, 16, true), frag4(long, 1, 24, 16, false), frag4(long, 1, 40, 16, false)}, func(d *Drops) uint64 { return d.FragBad }, 3},
		{"past the end", [][]byte{frag4(long, 1, 16, 24, false), frag4(long, 1, 40, 16, true)}, func(d *Drops) uint64 { return d.FragBad }, 2},
		{"past 65535 bytes", [][]byte{frag4(long, 1, 0, 8, false)}, func(d *Drops) uint64 { return d.FragBad }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, l := manualUDP(t)
			if tc.name == "past 65535 bytes" {
				f := tc.frags[0]
				binary.BigEndian.PutUint16(f[6:], 65520/8)
				f[10], f[11] = 0, 0
				binary.BigEndian.PutUint16(f[10:], ^checksum.Checksum(f[:ipv4HeaderLen], 0))
			}
			inject(t, m, tc.frags...)
			st := m.Stats()
			if got := tc.drop(&st.Drops); got != tc.n || st.Reassembled != 0 || l.sent() != 0 {
				t.Fatalf("drops %d, Reassembled %d, sent %d; want %d, 0, 0 (%+v)", got, st.Reassembled, l.sent(), tc.n, st.Drops)
			}
		})
	}
	t.Run("too many fragments", func(t *testing.T) {
		m, _ := manualUDP(t)
		req := bigEcho(addrA, addrB, 8*reasmMaxFrags+100)
		for i := range reasmMaxFrags + 1 {
			inject(t, m, frag4(req, 2, 8*i, 8, true))
		}
		if st := m.Stats(); st.Drops.FragTooMany != reasmMaxFrags+1 || m.reasm.mem != reasmOverhead {
			t.Fatalf("FragTooMany %d, memory %d; want %d, %d", st.Drops.FragTooMany, m.reasm.mem, reasmMaxFrags+1, reasmOverhead)
		}
	})
	t.Run("IPv6 first fragment without its TCP header", func(t *testing.T) {
		m, l := manual6(t)
		seg := make([]byte, 40)
		pkt := ipv6Packet(addr6A, addr6B, protoTCP, nil, seg)
		f := frag6(pkt, 1, 0, 16, true)
		inject(t, m, f)
		if st := m.Stats(); st.Drops.FragTiny != 1 || st.ParamProblems != 1 {
			t.Fatalf("FragTiny %d, ParamProblems %d; want 1, 1", st.Drops.FragTiny, st.ParamProblems)
		}
		got := l.read(t)
		if got[ipv6HeaderLen] != byte(header.ICMPv6ParamProblem) || got[ipv6HeaderLen+1] != 3 || binary.BigEndian.Uint32(got[ipv6HeaderLen+4:]) != 0 {
			t.Fatalf("sent %x, want a parameter problem code 3, pointer 0", got[ipv6HeaderLen:ipv6HeaderLen+8])
		}
	})
}

// TestReassemblyMemory: one source's fragments stop at its share
// (reasmMemPerSource), another source's still go through; sources
// together stop at reasmMemTotal. Every byte is given back at the
// timeout.
func TestReassemblyMemory(t *testing.T) {
	m, _ := manualUDP(t)
	req := bigEcho(addrA, addrB, 2000)
	per := 1480 + 2*reasmOverhead + 2*ipv4HeaderLen // data, the fragment and the queue, the header and the quote's
	fit := reasmMemPerSource / per
	for i := range fit + 3 {
		inject(t, m, frag4(req, uint16(i), 0, 1480, true))
	}
	if st := m.Stats(); st.Drops.FragMemory != 3 || m.reasm.perSrc[addrA] != fit*per {
		t.Fatalf("FragMemory %d, held %d; want 3, %d", st.Drops.FragMemory, m.reasm.perSrc[addrA], fit*per)
	}
	other := netip.MustParseAddr("198.18.0.9")
	r2 := bigEcho(other, addrB, 2000)
	inject(t, m, frag4(r2, 1, 0, 1480, true), frag4(r2, 1, 1480, 2008-1480, false))
	if m.Stats().EchoReplies != 1 {
		t.Fatal("another source's datagram was not reassembled")
	}
	// Enough sources to fill the total: the last ones are refused.
	srcs := reasmMemTotal/(fit*per) + 2
	for s := range srcs {
		src := netip.AddrFrom4([4]byte{198, 18, 1, byte(s)})
		r := bigEcho(src, addrB, 2000)
		for i := range fit {
			inject(t, m, frag4(r, uint16(i), 0, 1480, true))
		}
	}
	if m.reasm.mem > reasmMemTotal || m.Stats().Drops.FragMemory <= 3 {
		t.Fatalf("memory %d over %d, FragMemory %d", m.reasm.mem, reasmMemTotal, m.Stats().Drops.FragMemory)
	}
	m.AdvanceTo(reasmTimeout4)
	if m.reasm.mem != 0 || len(m.reasm.queues) != 0 || len(m.reasm.perSrc) != 0 {
		t.Fatalf("memory %d, %d queues, %d sources left after the timeout", m.reasm.mem, len(m.reasm.queues), len(m.reasm.perSrc))
	}
}

// FuzzReassembly hands the stack fragments of one datagram (over IPv4 and
// IPv6) cut as the input says: whatever the cuts, nothing panics, a whole
// datagram is answered at most once, and after the timeout no memory is
// held.
func FuzzReassembly(f *testing.F) {
	f.Add([]byte{0, 185, 1, 185, 185, 185, 1})
	f.Add([]byte{2, 10, 0, 0, 10, 1, 1, 5, 0})
	f.Add([]byte{0, 0, 1, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, cuts []byte) {
		for _, v6 := range []bool{false, true} {
			m, l := manual6(t)
			var req []byte
			if v6 {
				req = bigEcho(addr6A, addr6B, 1200)
			} else {
				req = bigEcho(addrA, addrB, 1200)
			}
			hl := ipHeaderLen(addrA)
			if v6 {
				hl = ipv6HeaderLen
			}
			pl := len(req) - hl
			firsts, lasts := 0, 0 // fragments injected at offset 0, and without more
			for i := 0; i+2 < len(cuts) && i < 300; i += 3 {
				off := int(cuts[i]) * 8 % (pl + 8)
				n := min(int(cuts[i+1])*8, pl-off)
				more := cuts[i+2]&1 == 1
				if cuts[i+2]&2 != 0 {
					n = int(cuts[i+1]) // not a multiple of 8
				}
				if n < 0 || off+n > pl || off == 0 && !more { // the last: not a fragment (IPv6: an atomic one)
					continue
				}
				var p []byte
				if v6 {
					p = frag6(req, uint32(cuts[i+2]>>2&1), off, n, more)
				} else {
					p = frag4(req, uint16(cuts[i+2]>>2&1), off, n, more)
				}
				if off == 0 {
					firsts++
				}
				if !more {
					lasts++
				}
				inject(t, m, p)
			}
			// Each datagram reassembled took a first fragment and a last
			// one of its own (fragments that repeat an ID after its
			// datagram was reassembled make a new one, as on Linux).
			if st := m.Stats(); st.Reassembled > uint64(min(firsts, lasts)) || st.EchoReplies > st.Reassembled {
				t.Fatalf("EchoReplies %d, Reassembled %d, of %d first and %d last fragments", st.EchoReplies, st.Reassembled, firsts, lasts)
			}
			l.readAll(t)
			m.AdvanceTo(reasmTimeout6)
			if m.reasm.mem != 0 || len(m.reasm.queues) != 0 || len(m.reasm.perSrc) != 0 {
				t.Fatalf("memory %d, %d queues left", m.reasm.mem, len(m.reasm.queues))
			}
			m.Close()
		}
	})
}

// TestFlightRecordingReplaysFragments: a recording of UDP datagrams of
// 8000 bytes each way over IPv4 and IPv6 (fragmented, reassembled) replays
// exactly: the fragments the stack sent, byte for byte, at their instants.
func TestFlightRecordingReplaysFragments(t *testing.T) {
	for _, payload := range []bool{false, true} {
		t.Run(fmt.Sprint("payload=", payload), func(t *testing.T) {
			a, b, ra, rb := recordedPairWith(t, 0, Config{RecordPayload: payload}, true)
			srv, served := udpEcho(t, b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, to := range []string{"198.18.0.2:7", "[2001:db8::2]:7"} {
				c, err := a.DialContext(ctx, "udp", to)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 9000)
				for i := range 3 {
					msg := bytes.Repeat([]byte{byte('a' + i)}, 8000)
					c.Write(msg)
					if n, err := c.Read(buf); err != nil || !bytes.Equal(buf[:n], msg) {
						t.Fatalf("echo %d to %s: %d bytes, %v", i, to, n, err)
					}
				}
				c.Close()
			}
			srv.Close()
			<-served
			if st := b.Stats(); st.Reassembled != 6 || st.FragmentsOut < 6*6 {
				t.Fatalf("Reassembled %d, FragmentsOut %d", st.Reassembled, st.FragmentsOut)
			}
			a.Close()
			b.Close()
			checkReplay(t, "client", ra.Bytes())
			checkReplay(t, "server", rb.Bytes())
		})
	}
}

// BenchmarkReassembly: a ping of 8000 bytes in 6 fragments, reassembled,
// answered in 6 fragments (the link's reader drops them).
func BenchmarkReassembly(b *testing.B) {
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	m, err := NewManual(Config{Device: dev, Addr: addrB, Clock: timer.NewManualClock(0)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, err := peer.ReadPacket(buf); err != nil {
				return
			}
		}
	}()
	req := bigEcho(addrA, addrB, 8000)
	pl := len(req) - ipv4HeaderLen
	var frags [][]byte
	for off := 0; off < pl; off += 1480 {
		frags = append(frags, frag4(req, 1, off, min(1480, pl-off), off+1480 < pl))
	}
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Wake(0, frags...); err != nil {
			b.Fatal(err)
		}
	}
	if st := m.Stats(); st.EchoReplies == 0 || st.Drops.FragDuplicate != 0 {
		b.Fatalf("EchoReplies %d, drops %+v", st.EchoReplies, st.Drops)
	}
}

// TestFragmentIDs6: the fragments of one reply share one identification;
// the next reply to the same address has another; a reply to another
// address does not follow on from the first's (RFC 7739: unpredictable per
// destination), and a second stack starts elsewhere for the same address.
func TestFragmentIDs6(t *testing.T) {
	other := netip.MustParseAddr("2001:db8::77")
	ids := func(m *Manual, l link, src netip.Addr) uint32 {
		t.Helper()
		inject(t, m, bigEcho(src, addr6B, 3000))
		fs := l.readAll(t)
		if len(fs) < 2 {
			t.Fatalf("%d packets, want fragments", len(fs))
		}
		var id uint32
		for i, f := range fs {
			if f[6] != nhFragment || netip.AddrFrom16([16]byte(f[24:40])) != src {
				t.Fatalf("packet %d: not a fragment to %v: %x", i, src, f[:ipv6HeaderLen+8])
			}
			got := binary.BigEndian.Uint32(f[ipv6HeaderLen+4:])
			if i > 0 && got != id {
				t.Fatalf("fragment %d has ID %#x, the first %#x", i, got, id)
			}
			id = got
		}
		return id
	}
	m, l := manual6(t)
	a1, a2, b := ids(m, l, addr6A), ids(m, l, addr6A), ids(m, l, other)
	if a2 == a1 {
		t.Errorf("two datagrams to %v share ID %#x", addr6A, a1)
	}
	if d := b - a2; d == 1 || d == 0 || d == ^uint32(0) {
		t.Errorf("the ID to %v (%#x) follows on from the ones to %v (%#x, %#x)", other, b, addr6A, a1, a2)
	}
	m2, l2 := manual6(t)
	if c := ids(m2, l2, addr6A); c == a1 {
		t.Errorf("a second stack's first ID to %v is the first's (%#x)", addr6A, c)
	}
}
