package stack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// timedSegment is a segment the stack sent, at the instant it sent it,
// its checksum zeroed (it covers the addresses).
type timedSegment struct {
	at  time.Duration
	seg []byte
}

// timerScript runs one connection on a manual stack over IPv4 or IPv6: the
// stack dials and its SYN goes unanswered twice, the peer's SYN-ACK comes,
// the stack writes three segments the peer never acknowledges (tail-loss
// probe, RTOs with backoff), the peer acknowledges everything, then the
// stack closes and its FIN goes unanswered until the retry limit. It
// returns every segment the stack sent with its instant: the clock is
// moved deadline by deadline, so each timer fires at its own instant.
func timerScript(t *testing.T, v6 bool) []timedSegment {
	t.Helper()
	local, peer := addrB, addrA
	if v6 {
		local, peer = addr6B, addr6A
	}
	dev, other := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500})
	clock := timer.NewManualClock(0)
	m, err := NewManual(Config{Device: dev, Addr: addrB, Addr6: addr6B, Clock: clock,
		TCP: tcp.Config{MSS: 1400, MSS6: 1400, Retries2: 4, SYNRetries: 3,
			ISN:      func(tcp.ID, time.Duration) seqnum.Value { return 1000 },
			TSOffset: tcp.TSOffsetISS}}) // the same TSvals over both versions
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var out []timedSegment
	buf := make([]byte, 2000)
	drain := func() {
		for other.Stats().Received < dev.Stats().Sent {
			n, err := other.ReadPacket(buf)
			if err != nil {
				t.Fatal(err)
			}
			hl := ipv4HeaderLen
			if v6 {
				hl = ipv6HeaderLen
			}
			seg := append([]byte(nil), buf[hl:n]...)
			if !tcp.VerifyChecksum(local, peer, seg) {
				t.Fatalf("segment %x: bad checksum", seg)
			}
			seg[16], seg[17] = 0, 0
			out = append(out, timedSegment{clock.Now(), seg})
		}
	}
	// run advances deadline by deadline up to until, collecting what is sent.
	run := func(until time.Duration) {
		for {
			d, ok := m.NextDeadline()
			if !ok || d > until {
				break
			}
			m.AdvanceTo(d)
			drain()
		}
		m.AdvanceTo(until)
		drain()
	}
	inject := func(seq, ack uint32, flags tcp.Flags) {
		seg := tcp.Segment{SrcPort: 80, DstPort: 0, Seq: seqnum.Value(seq), Ack: seqnum.Value(ack), Flags: flags, Window: 65535}
		seg.DstPort = binary.BigEndian.Uint16(out[0].seg[0:2])
		if flags&tcp.FlagSYN != 0 {
			seg.Options.HasMSS, seg.Options.MSS = true, 1400
		}
		b := make([]byte, seg.EncodedLen())
		seg.Encode(b)
		tcp.SetChecksum(peer, local, b)
		if v6 {
			m.Inject(ipv6Packet(peer, local, protoTCP, nil, b))
		} else {
			m.Inject(ipv4Packet(peer, local, protoTCP, b))
		}
		drain()
	}
	c, err := m.StartDial("tcp", 40000, netip.AddrPortFrom(peer, 80).String())
	if err != nil {
		t.Fatal(err)
	}
	drain()
	run(3500 * time.Millisecond) // two SYN retransmissions (1 s, 3 s)
	inject(5000, 1001, tcp.FlagSYN|tcp.FlagACK)
	if _, err := c.TryWrite(bytes.Repeat([]byte("x"), 3*1400)); err != nil {
		t.Fatal(err)
	}
	drain()
	run(m.m.Clock().Now() + 5*time.Second)  // RTOs with backoff (a window of one segment after the lost SYNs)
	inject(5001, 1001+1400, tcp.FlagACK)    // the first segment: the rest goes
	run(m.m.Clock().Now() + 10*time.Second) // and is lost: RTOs again
	inject(5001, 1001+3*1400, tcp.FlagACK)
	c.Close()
	drain()
	run(m.m.Clock().Now() + 60*time.Second) // the FIN's retries, to the limit
	return out
}

// TestTimersSameOverIPv6: the same connection, over IPv4 and over IPv6
// (with the same MSS), sends the same segments at the same instants: SYN
// retransmissions, tail-loss probe, RTOs and their backoff, FIN
// retransmissions. The IP version changes nothing TCP does but the
// checksum.
func TestTimersSameOverIPv6(t *testing.T) {
	v4, v6 := timerScript(t, false), timerScript(t, true)
	if len(v4) < 10 {
		t.Fatalf("IPv4: only %d segments sent: the script exercised too few timers", len(v4))
	}
	describe := func(ts []timedSegment) string {
		var b bytes.Buffer
		for _, s := range ts {
			seg, _ := tcp.ParseSegment(s.seg)
			fmt.Fprintf(&b, "  %v %v\n", s.at, &seg)
		}
		return b.String()
	}
	if len(v4) != len(v6) {
		t.Fatalf("IPv4 sent %d segments, IPv6 %d\nIPv4:\n%sIPv6:\n%s", len(v4), len(v6), describe(v4), describe(v6))
	}
	for i := range v4 {
		if v4[i].at != v6[i].at || !bytes.Equal(v4[i].seg, v6[i].seg) {
			t.Fatalf("segment %d: IPv4 %v %x, IPv6 %v %x\nIPv4:\n%sIPv6:\n%s", i+1, v4[i].at, v4[i].seg, v6[i].at, v6[i].seg, describe(v4), describe(v6))
		}
	}
	t.Logf("%d segments, the same over both:\n%s", len(v4), describe(v4))
}
