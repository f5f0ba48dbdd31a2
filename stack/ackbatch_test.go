package stack

import (
	"fmt"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// ackBatchSetup connects a (client) to b (server) on manual stacks, has the
// server write n full-sized segments, and returns them (not delivered) with
// the client's connection.
func ackBatchSetup(t *testing.T, n int) (p *manualPair, c *Conn, segs [][]byte, mss int) {
	t.Helper()
	return ackBatchSetupWith(t, n, tcp.Config{QuickAcks: -1})
}

// ackBatchSetupWith is ackBatchSetup with both stacks' TCP configured by tc.
func ackBatchSetupWith(t *testing.T, n int, tc tcp.Config) (p *manualPair, c *Conn, segs [][]byte, mss int) {
	t.Helper()
	p = newManualPairWith(t, tc)
	c, s := p.connect()
	mss = s.Info().SndMSS
	if _, err := s.TryWrite(make([]byte, n*mss)); err != nil {
		t.Fatal(err)
	}
	for range n {
		segs = append(segs, p.take(p.b))
	}
	for i, pkt := range segs {
		if _, seg, ok := parseTCP(pkt); !ok || len(seg.Payload) != mss {
			t.Fatalf("segment %d: %d bytes, want a full-sized %d", i, len(seg.Payload), mss)
		}
	}
	if p.bDev.Stats().Sent != p.bCarried {
		t.Fatalf("the server sent %d packets, want the %d data segments", p.bDev.Stats().Sent-p.bCarried+uint64(n), n)
	}
	return p, c, segs, mss
}

// acksOut returns what a's stack sent since the last call: each segment's
// ACK number and SACK blocks, as "ack=A" or "ack=A sack=S-E", relative to
// base. Every one must be a pure ACK.
func acksOut(t *testing.T, p *manualPair, base seqnum.Value) []string {
	t.Helper()
	var got []string
	for p.aCarried < p.aDev.Stats().Sent {
		_, seg, ok := parseTCP(p.take(p.a))
		if !ok || len(seg.Payload) != 0 || seg.Flags != tcp.FlagACK {
			t.Fatalf("the client sent %v with %d bytes, want pure ACKs only", seg.Flags, len(seg.Payload))
		}
		a := fmt.Sprintf("ack=%d", seg.Ack-base)
		for _, b := range seg.Options.SACK[:seg.Options.NSACK] {
			a += fmt.Sprintf(" sack=%d-%d", b.Start-base, b.End-base)
		}
		got = append(got, a)
	}
	return got
}

// firstSeq is the sequence number of a data segment.
func firstSeq(t *testing.T, pkt []byte) seqnum.Value {
	t.Helper()
	_, seg, ok := parseTCP(pkt)
	if !ok {
		t.Fatal("not a TCP segment")
	}
	return seg.Seq
}

func equalStrings(a, b []string) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// A batch of N in-order full-sized segments gets one ACK, at the end of the
// batch, for all of them; one at a time, they get one for every second
// (RFC 5681 4.2), and a lone one waits for the delayed-ACK timer.
func TestAckPerBatch(t *testing.T) {
	for _, n := range []int{1, 2, 3, 10} {
		t.Run(fmt.Sprintf("batch of %d", n), func(t *testing.T) {
			p, _, segs, mss := ackBatchSetup(t, n)
			base := firstSeq(t, segs[0])
			if err := p.a.Wake(time.Millisecond, segs...); err != nil {
				t.Fatal(err)
			}
			got := acksOut(t, p, base)
			var want []string
			if n >= 2 {
				want = []string{fmt.Sprintf("ack=%d", n*mss)}
			}
			if !equalStrings(got, want) {
				t.Fatalf("ACKs at the batch's end: %q, want %q", got, want)
			}
			// Nothing more until the delayed-ACK timer, which ACKs a lone
			// segment.
			if err := p.a.AdvanceTo(time.Millisecond + tcp.DefaultDelayedACK); err != nil {
				t.Fatal(err)
			}
			got = acksOut(t, p, base)
			want = nil
			if n == 1 {
				want = []string{fmt.Sprintf("ack=%d", mss)}
			}
			if !equalStrings(got, want) {
				t.Fatalf("ACKs by the delayed-ACK timer: %q, want %q", got, want)
			}
		})
	}
	// One at a time, or in one batch with coalescing off: one ACK for every
	// second segment.
	for _, tc := range []struct {
		name    string
		batched bool
	}{{"one at a time", false}, {"coalescing off", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 10
			p, _, segs, mss := ackBatchSetupWith(t, n, tcp.Config{DisableAckCoalescing: tc.batched, QuickAcks: -1})
			base := firstSeq(t, segs[0])
			batches := [][][]byte{segs}
			if !tc.batched {
				batches = nil
				for _, seg := range segs {
					batches = append(batches, [][]byte{seg})
				}
			}
			for _, b := range batches {
				if err := p.a.Wake(time.Millisecond, b...); err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			for i := 2; i <= n; i += 2 {
				want = append(want, fmt.Sprintf("ack=%d", i*mss))
			}
			if got := acksOut(t, p, base); !equalStrings(got, want) {
				t.Fatalf("ACKs of %d segments: %q, want %q", n, got, want)
			}
		})
	}
}

// Out-of-order data: the first segment of a run, which opens a SACK block, is
// ACKed at once (carrying the ACK held for in-order data before the hole); the
// segments that follow it wait for the batch's end, one ACK with the SACK
// blocks of all of them (tcp.Config.OutOfOrderAcksAtOnce unset); with
// OutOfOrderAcksAtOnce each out-of-order segment is ACKed at once (RFC 5681
// 4.2), the held ACK going with the first. Without SACK they go at once
// whatever the setting: the peer's fast retransmit counts them. A hole's
// fill and a duplicate are ACKed at once either way.
func TestAckOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    tcp.Config
		noSACK bool
	}{
		{"held to the batch's end", tcp.Config{QuickAcks: -1}, false},
		{"at once", tcp.Config{QuickAcks: -1, OutOfOrderAcksAtOnce: true}, false},
		{"without SACK", tcp.Config{QuickAcks: -1, DisableSACK: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testAckOutOfOrder(t, tc.cfg, tc.cfg.OutOfOrderAcksAtOnce || tc.noSACK, tc.noSACK) })
	}
}

func testAckOutOfOrder(t *testing.T, cfg tcp.Config, atOnce, noSACK bool) {
	p, c, segs, mss := ackBatchSetupWith(t, 6, cfg)
	base := firstSeq(t, segs[0])
	// 0 and 1 in order (the ACK held), then 3, 4 (a hole at 2), then 5.
	if err := p.a.Wake(time.Millisecond, segs[0], segs[1], segs[3], segs[4], segs[5]); err != nil {
		t.Fatal(err)
	}
	// Held: the first out-of-order segment opens a SACK block and is ACKed
	// at once, with the in-order ACK; the two that follow it wait for the end.
	want := []string{
		fmt.Sprintf("ack=%d sack=%d-%d", 2*mss, 3*mss, 4*mss),
		fmt.Sprintf("ack=%d sack=%d-%d", 2*mss, 3*mss, 6*mss),
	}
	if atOnce {
		want = []string{
			fmt.Sprintf("ack=%d sack=%d-%d", 2*mss, 3*mss, 4*mss),
			fmt.Sprintf("ack=%d sack=%d-%d", 2*mss, 3*mss, 5*mss),
			fmt.Sprintf("ack=%d sack=%d-%d", 2*mss, 3*mss, 6*mss),
		}
	}
	if noSACK {
		want = []string{fmt.Sprintf("ack=%d", 2*mss), fmt.Sprintf("ack=%d", 2*mss), fmt.Sprintf("ack=%d", 2*mss)}
	}
	if got := acksOut(t, p, base); !equalStrings(got, want) {
		t.Fatalf("ACKs: %q, want %q", got, want)
	}
	// The retransmission that fills the hole is ACKed at once too.
	if err := p.a.Wake(2*time.Millisecond, segs[2]); err != nil {
		t.Fatal(err)
	}
	if got, want := acksOut(t, p, base), []string{fmt.Sprintf("ack=%d", 6*mss)}; !equalStrings(got, want) {
		t.Fatalf("ACK of the hole's fill: %q, want %q", got, want)
	}
	// A duplicate is ACKed at once, even after in-order data in the batch.
	more := make([]byte, 2*mss)
	s := p.b.conns[tcp.ID{Local: c.id.Remote, Remote: c.id.Local}]
	if s == nil {
		t.Fatal("no server connection")
	}
	if _, err := s.TryWrite(more); err != nil {
		t.Fatal(err)
	}
	s6, s7 := p.take(p.b), p.take(p.b)
	if err := p.a.Wake(3*time.Millisecond, s6, s7, segs[5]); err != nil {
		t.Fatal(err)
	}
	want = []string{fmt.Sprintf("ack=%d", 8*mss)}
	if got := acksOut(t, p, base); !equalStrings(got, want) {
		t.Fatalf("ACKs of two new segments and a duplicate: %q, want %q (the duplicate's ACK carried the held one)", got, want)
	}
}

// TestAckOutOfOrderRuns: two runs of out-of-order segments in one batch: the
// first segment of each, which opens a SACK block, is ACKed at once, its block
// first (RFC 2018 4), carrying what was held; the rest of each run waits, the
// second run's to the batch's end, both blocks in its ACK. Nothing else.
func TestAckOutOfOrderRuns(t *testing.T) {
	p, _, segs, mss := ackBatchSetup(t, 8)
	base := firstSeq(t, segs[0])
	// 0 in order (one segment: its ACK delayed), 2-3 (a hole at 1), 5-6 (a hole at 4).
	if err := p.a.Wake(time.Millisecond, segs[0], segs[2], segs[3], segs[5], segs[6]); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("ack=%d sack=%d-%d", mss, 2*mss, 3*mss),
		fmt.Sprintf("ack=%d sack=%d-%d sack=%d-%d", mss, 5*mss, 6*mss, 2*mss, 4*mss),
		fmt.Sprintf("ack=%d sack=%d-%d sack=%d-%d", mss, 5*mss, 7*mss, 2*mss, 4*mss),
	}
	if got := acksOut(t, p, base); !equalStrings(got, want) {
		t.Fatalf("ACKs: %q, want %q", got, want)
	}
	// A run of one at the batch's end: its ACK goes at once and the end
	// sends nothing more (no second ACK of the same blocks).
	p, _, segs, mss = ackBatchSetup(t, 8)
	base = firstSeq(t, segs[0])
	if err := p.a.Wake(time.Millisecond, segs[0], segs[2], segs[3], segs[5]); err != nil {
		t.Fatal(err)
	}
	want = []string{
		fmt.Sprintf("ack=%d sack=%d-%d", mss, 2*mss, 3*mss),
		fmt.Sprintf("ack=%d sack=%d-%d sack=%d-%d", mss, 5*mss, 6*mss, 2*mss, 4*mss),
	}
	if got := acksOut(t, p, base); !equalStrings(got, want) {
		t.Fatalf("ACKs, the second run a segment at the batch's end: %q, want %q", got, want)
	}
}
