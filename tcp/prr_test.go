package tcp

import (
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// prrHarness is an established connection without RACK-TLP (losses found by
// duplicate ACKs and RFC 6675's IsLost, at exact instants), with SACK, the
// congestion control of cfg, and n full segments written (the first ten,
// the initial window, sent).
func prrHarness(t *testing.T, cubic bool, n int) *harness {
	cfg := noTLPConfig()
	cfg.CUBIC = cubic
	h := established(t, cfg)
	h.pwnd = 65535 // the peer's window does not limit these tests
	h.ackUpTo(testISS + 1)
	h.ep.Write(data(n * 1448))
	for i := range min(n, 10) {
		h.expect(seqIs(prrSeg(i).Start), lenIs(1448))
	}
	h.expectNone()
	return h
}

// prrSeg is the sequence space of the i-th full segment.
func prrSeg(i int) SACKBlock {
	return SACKBlock{testISS + 1 + seqnum.Value(i*1448), testISS + 1 + seqnum.Value((i+1)*1448)}
}

// prrSACK sends, 1 ms after the last, an ACK of ack with SACK blocks covering
// segments [from, to) (and, if given, [from2, to2)); the most recent first.
func prrSACK(h *harness, ack seqnum.Value, ranges ...[2]int) {
	h.t.Helper()
	h.advance(time.Millisecond)
	h.pack = ack
	s := h.seg(FlagACK, nil)
	for i, r := range ranges {
		s.Options.SACK[i] = SACKBlock{prrSeg(r[0]).Start, prrSeg(r[1] - 1).End}
	}
	s.Options.NSACK = len(ranges)
	h.send(s)
}

func wantCwnd(t *testing.T, h *harness, cwnd, ssthresh int, recovery bool) {
	t.Helper()
	i := h.ep.Info()
	if i.Cwnd != cwnd*1448 || i.Ssthresh != ssthresh*1448 || i.InRecovery != recovery {
		t.Fatalf("at %v: cwnd %d ssthresh %d (segments %.2f %.2f) recovery %v, want %d %d %v",
			h.now(), i.Cwnd, i.Ssthresh, float64(i.Cwnd)/1448, float64(i.Ssthresh)/1448, i.InRecovery, cwnd, ssthresh, recovery)
	}
}

// TestPRRProportional: one segment lost of a flight of 20, NewReno
// (ssthresh 10 of a flight of 20): while pipe is above ssthresh, PRR sends
// CEIL(prr_delivered * ssthresh / RecoverFS) - prr_out, one segment for
// every two delivered (RFC 6937 3, the proportional part), not one per
// segment as RFC 6675 alone would once pipe fell below cwnd. The full ACK
// ends recovery with cwnd = ssthresh.
func TestPRRProportional(t *testing.T) {
	h := prrHarness(t, false, 50)
	// Slow start to a cwnd of 20: an ACK per segment, two new segments each.
	for i := range 10 {
		h.advance(time.Millisecond)
		h.ackUpTo(prrSeg(i).End)
		h.expect(seqIs(prrSeg(10 + 2*i).Start))
		h.expect(seqIs(prrSeg(11 + 2*i).Start))
	}
	h.expectNone()
	if c := h.ep.Info().Cwnd; c != 20*1448 {
		t.Fatalf("cwnd %d, want 20 segments", c)
	}
	una := prrSeg(10).Start
	prrSACK(h, una, [2]int{11, 12})
	h.expect(seqIs(prrSeg(30).Start)) // limited transmit (RFC 3042)
	prrSACK(h, una, [2]int{11, 13})
	h.expect(seqIs(prrSeg(31).Start))
	h.expectNone()
	// Third duplicate: recovery, ssthresh 11, RecoverFS 22 (the flight);
	// pipe 18 (10 lost, 11-13 SACKed); sndcnt = CEIL(1 * 11 / 22) = 1: the
	// fast retransmit.
	prrSACK(h, una, [2]int{11, 14})
	h.expect(seqIs(prrSeg(10).Start))
	h.expectNone()
	wantCwnd(t, h, 19, 11, true) // pipe 18 + 1
	next := 32
	for d := 2; d <= 12; d++ {
		prrSACK(h, una, [2]int{11, 13 + d}) // d segments delivered since recovery began
		if d%2 == 1 {                       // CEIL(d * 11 / 22) - prr_out = 1
			h.expect(seqIs(prrSeg(next).Start), lenIs(1448))
			next++
		}
		h.expectNone()
	}
	// Delivered 12, 6 sent, pipe still above ssthresh (13). The full ACK
	// (recover was segment 32's start): cwnd = ssthresh (RFC 6937 3), with
	// 32-36 (5) out: 6 more go.
	prrSACK(h, prrSeg(32).Start)
	wantCwnd(t, h, 11, 11, false)
	for i := next; i < next+6; i++ {
		h.expect(seqIs(prrSeg(i).Start))
	}
	h.expectNone()
}

// TestPRRSlowStartBound: four segments of ten lost, CUBIC (ssthresh 7 of a
// cwnd of 10), as packetdrill's prr-ss-30pkt-lost-1_4-11_16: pipe stays
// below ssthresh, and PRR-SSRB sends one segment per segment delivered, two
// on the ACK that advances SND.UNA without a new loss (the extra SMSS of
// draft-ietf-tcpm-prr-rfc6937bis, as Linux's tcp_cwnd_reduction), and never
// more than ssthresh - pipe.
func TestPRRSlowStartBound(t *testing.T) {
	h := prrHarness(t, true, 30)
	base := testISS + 1
	// Limited transmit (RFC 3042) on the first two duplicates.
	prrSACK(h, base, [2]int{4, 5})
	h.expect(seqIs(prrSeg(10).Start))
	prrSACK(h, base, [2]int{4, 6})
	h.expect(seqIs(prrSeg(11).Start))
	h.expectNone()
	// Recovery: ssthresh 7; pipe 5 (0-3 lost; 7-11); MIN(7 - 5, MAX(1, 1)) = 1.
	prrSACK(h, base, [2]int{4, 7})
	h.expect(seqIs(prrSeg(0).Start))
	h.expectNone()
	wantCwnd(t, h, 6, 7, true)
	for i := 1; i <= 3; i++ { // the other holes, one per segment delivered
		prrSACK(h, base, [2]int{4, 7 + i})
		h.expect(seqIs(prrSeg(i).Start))
		h.expectNone()
	}
	for i := 12; i <= 13; i++ { // then new data
		prrSACK(h, base, [2]int{4, i - 1})
		h.expect(seqIs(prrSeg(i).Start))
		h.expectNone()
	}
	// SND.UNA advances, nothing newly lost: MAX(7 - 6, 1) + 1 = 2 = ssthresh - pipe.
	prrSACK(h, prrSeg(1).Start, [2]int{4, 12})
	h.expect(seqIs(prrSeg(14).Start))
	h.expect(seqIs(prrSeg(15).Start))
	h.expectNone()
	wantCwnd(t, h, 7, 7, true)
	// The resent 2 and 3 SACKed, not 1: two delivered, two sent
	// (MIN(7 - 5, MAX(9 - 8, 2))), no extra: SND.UNA did not move.
	prrSACK(h, prrSeg(1).Start, [2]int{2, 12})
	h.expect(seqIs(prrSeg(16).Start))
	h.expect(seqIs(prrSeg(17).Start))
	h.expectNone()
	// The full ACK: cwnd = ssthresh, 7, with 16 and 17 out.
	prrSACK(h, prrSeg(16).Start)
	wantCwnd(t, h, 7, 7, false)
	for i := 18; i <= 22; i++ {
		h.expect(seqIs(prrSeg(i).Start))
	}
	h.expectNone()
}

// TestReorderingDegree: a segment sent once and SACKed below the highest
// SACKed data measures reordering as Linux's tcpi_reordering: segments from
// its start to HighSACK. It never falls, and starts at the duplicate-ACK
// threshold.
func TestReorderingDegree(t *testing.T) {
	h := prrHarness(t, false, 10)
	want := func(n int) {
		t.Helper()
		if r := h.ep.Info().Reordering; r != n {
			t.Fatalf("at %v: reordering %d, want %d", h.now(), r, n)
		}
	}
	want(3)
	prrSACK(h, testISS+1, [2]int{7, 8})
	want(3) // nothing below it was SACKed
	prrSACK(h, testISS+1, [2]int{7, 8}, [2]int{3, 4})
	want(5) // segment 3 delivered with 7 SACKed: 8 - 3
	prrSACK(h, testISS+1, [2]int{7, 8}, [2]int{3, 5})
	want(5)                          // segment 4: 4 < 5
	h.expect(seqIs(prrSeg(0).Start)) // the third duplicate: fast retransmit
	prrSACK(h, prrSeg(1).Start, [2]int{7, 8}, [2]int{3, 5})
	want(5)                          // segment 0 was resent: its delivery says nothing of reordering
	h.expect(seqIs(prrSeg(1).Start)) // the partial ACK: the next hole
	prrSACK(h, prrSeg(3).Start, [2]int{7, 8}, [2]int{3, 5})
	want(6) // segment 2, sent once (1 was resent), cumulatively acknowledged: 8 - 2
}
