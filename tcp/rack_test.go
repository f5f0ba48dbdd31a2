package tcp

import (
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// RACK-TLP (RFC 8985) at exact instants, on the manual clock.

const tlpRTT = 8 * time.Millisecond // the handshake's RTT: SRTT 8 ms, RTTVAR 4 ms, RTO 200 ms (MinRTO)

// establishedRTT is established with the SYN-ACK arriving rtt after the SYN,
// so that SRTT = min RTT = rtt (RFC 6298 (2.2)).
func establishedRTT(t *testing.T, cfg Config, rtt time.Duration, synOpts ...func(*Segment)) *harness {
	t.Helper()
	h := newHarness(t)
	h.dial(cfg)
	h.advance(rtt)
	h.pack = testISS + 1
	sa := h.peerSynAck()
	for _, f := range synOpts {
		f(&sa)
	}
	h.pts = sa.Options.TS
	h.send(sa)
	h.expect(flagsAre(FlagACK), seqIs(testISS+1), ackIs(peerISS+1))
	h.takeEvents()
	if i := h.ep.Info(); i.SRTT != rtt || i.MinRTT != rtt {
		t.Fatalf("SRTT %v min RTT %v, want %v", i.SRTT, i.MinRTT, rtt)
	}
	return h
}

// segSeq is the first sequence number of the i-th full-sized data segment.
func segSeq(i int) seqnum.Value { return testISS + 1 + seqnum.Value(i*1448) }

func segBlock(i int) SACKBlock { return SACKBlock{segSeq(i), segSeq(i + 1)} }

// sackAck sends an ACK of h.pack carrying the SACK blocks.
func (h *harness) sackAck(blocks ...SACKBlock) {
	h.t.Helper()
	s := h.seg(FlagACK, nil)
	copy(s.Options.SACK[:], blocks)
	s.Options.NSACK = len(blocks)
	h.send(s)
}

func (h *harness) writeSegs(n int) {
	h.t.Helper()
	h.ep.Write(data(n * 1448))
	for i := range n {
		h.expect(seqIs(segSeq(i)), lenIs(1448))
	}
}

func TestTLP(t *testing.T) {
	t0 := tlpRTT                      // when the tests send
	pto := 2*tlpRTT + DefaultTLPSlack // RFC 8985 7.2, plus Linux's TCP_TIMEOUT_MIN
	t.Run("PTO at 2*SRTT retransmits the last segment; unanswered, the RTO follows", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.writeSegs(3)
		h.expectAt(t0+pto, seqIs(segSeq(2)), lenIs(1448), payloadIs(data(3 * 1448)[2*1448:])) // RFC 8985 7.3
		if i := h.ep.Info(); i.TLPProbes != 1 || !i.TLPOutstanding || i.RTOEvents != 0 {
			t.Fatalf("probes %d outstanding %v RTO events %d, want 1 true 0", i.TLPProbes, i.TLPOutstanding, i.RTOEvents)
		}
		// One probe per episode; the RTO is re-armed from the probe (RFC 8985
		// 7.3: "MUST re-arm the RTO timer"), as Linux does.
		h.expectAt(t0+pto+200*time.Millisecond, seqIs(segSeq(0)), lenIs(1448))
		if i := h.ep.Info(); i.TLPProbes != 1 || i.RTOEvents != 1 || i.TLPOutstanding {
			t.Fatalf("probes %d RTO events %d outstanding %v, want 1 1 false", i.TLPProbes, i.RTOEvents, i.TLPOutstanding)
		}
	})
	t.Run("a probe of one segment goes again at the RTO from the probe", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLPMaxAckDelay = 40 * time.Millisecond
		h := establishedRTT(t, cfg, tlpRTT)
		h.ep.Write(data(1448))
		h.expect(lenIs(1448))
		at := t0 + 2*tlpRTT + 40*time.Millisecond // RFC 8985 7.2: one segment in flight
		h.expectAt(at, seqIs(segSeq(0)), lenIs(1448))
		h.expectAt(at+200*time.Millisecond, seqIs(segSeq(0)), lenIs(1448)) // RFC 8985 7.3: the RTO is armed, not the PTO
		h.expectAt(at+600*time.Millisecond, seqIs(segSeq(0)))              // and backs off as before
	})
	t.Run("the probe is new data when the peer's window takes it", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.ep.Write(data(12 * 1448))
		for i := range DefaultInitialCwnd {
			h.expect(seqIs(segSeq(i)))
		}
		h.expectNone()                                     // cwnd
		h.expectAt(t0+pto, seqIs(segSeq(10)), lenIs(1448)) // RFC 8985 7.3: cwnd is not consulted
		if i := h.ep.Info(); i.TLPProbes != 1 || i.SegsRetransmitted != 0 {
			t.Fatalf("probes %d retransmitted %d, want 1 0", i.TLPProbes, i.SegsRetransmitted)
		}
		h.expectAt(t0+pto+200*time.Millisecond, seqIs(segSeq(0))) // only one probe; then the RTO, from the probe
	})
	t.Run("one segment: PTO adds TLP.max_ack_delay", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLPMaxAckDelay = 25 * time.Millisecond
		h := establishedRTT(t, cfg, tlpRTT)
		h.ep.Write(data(100))
		h.expect(lenIs(100))
		h.expectAt(t0+2*tlpRTT+25*time.Millisecond, lenIs(100), seqIs(segSeq(0)))
	})
	t.Run("one segment with our FIN: PTO adds TLP.max_ack_delay too", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLPMaxAckDelay = 25 * time.Millisecond
		h := establishedRTT(t, cfg, tlpRTT)
		h.ep.Write(data(100))
		h.ep.CloseWrite()
		h.expect(lenIs(100))
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		h.advance(tlpRTT)
		h.ackUpTo(segSeq(0) + 100) // the data arrived; the FIN alone is in flight
		h.advanceTo(t0 + tlpRTT + pto)
		h.expectNone() // 2*SRTT + 2 ms: the ACK of a FIN may be delayed as well
		// RFC 8985 7.2 (Linux tcp_schedule_loss_probe: packets_out == 1): PTO = 2*SRTT + TLP.max_ack_delay
		h.expectAt(t0+tlpRTT+2*tlpRTT+25*time.Millisecond, flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		if i := h.ep.Info(); i.TLPProbes != 1 || i.RTOEvents != 0 {
			t.Fatalf("probes %d RTO events %d, want 1 0", i.TLPProbes, i.RTOEvents)
		}
	})
	// With FINJoinsData (a stack whose frames carry data+FIN as one packet):
	// a Close at the instant of the last data is one packet in flight, whose
	// ACK the peer may hold; a Close later is a packet of its own. Without
	// GSOMax, also under -tcp.gsomax: the FIN is probed alone, as in a
	// recording made before probeWithFIN (the subtests after these have it).
	for _, tc := range []struct {
		name  string
		gap   time.Duration // from the data to the Close
		probe time.Duration // when the FIN is probed
	}{
		{"data and our FIN at one instant: one packet, PTO adds TLP.max_ack_delay", 0, t0 + 2*tlpRTT + 25*time.Millisecond},
		{"data, then our FIN at a later instant: two packets, PTO at 2*SRTT", time.Millisecond, t0 + time.Millisecond + pto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TLPMaxAckDelay = 25 * time.Millisecond
			cfg.FINJoinsData, cfg.GSOMax = true, 0
			h := establishedRTT(t, cfg, tlpRTT)
			h.ep.Write(data(100))
			h.expect(lenIs(100))
			h.advance(tc.gap)
			h.ep.Close()
			h.expect(flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
			h.expectAt(tc.probe, flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
			if i := h.ep.Info(); i.TLPProbes != 1 || i.RTOEvents != 0 {
				t.Fatalf("probes %d RTO events %d, want 1 0", i.TLPProbes, i.RTOEvents)
			}
		})
	}
	t.Run("data and our FIN as one packet, with GSOMax: the probe resends the packet whole", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLPMaxAckDelay = 25 * time.Millisecond
		cfg.FINJoinsData, cfg.GSOMax = true, 64<<10
		h := establishedRTT(t, cfg, tlpRTT)
		h.ep.Write(data(100))
		h.expect(lenIs(100))
		h.ep.Close()
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		probe := t0 + 2*tlpRTT + 25*time.Millisecond
		h.expectAt(probe, seqIs(segSeq(0)), lenIs(100), payloadIs(data(100)))
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100)) // at the same instant: one packet
		h.expectNone()
		if i := h.ep.Info(); i.TLPProbes != 1 || i.SegsRetransmitted != 2 || i.RTOEvents != 0 {
			t.Fatalf("probes %d retransmitted %d RTO events %d, want 1 2 0", i.TLPProbes, i.SegsRetransmitted, i.RTOEvents)
		}
		// The probe's ACK of both ends the episode: nothing more is sent.
		h.advance(tlpRTT)
		h.ackUpTo(segSeq(0) + 101)
		h.expectNothingUntil(h.now() + time.Second)
	})
	t.Run("data, then our FIN later, with GSOMax: two packets, the FIN probed alone", func(t *testing.T) {
		cfg := testConfig()
		cfg.FINJoinsData, cfg.GSOMax = true, 64<<10
		h := establishedRTT(t, cfg, tlpRTT)
		h.ep.Write(data(100))
		h.expect(lenIs(100))
		h.advance(time.Millisecond)
		h.ep.Close()
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		h.expectAt(t0+time.Millisecond+pto, flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		h.expectNone()
	})
	t.Run("one segment with our FIN, default TLP.max_ack_delay: the probe capped at the RTO", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.ep.Write(data(100))
		h.ep.CloseWrite()
		h.expect(lenIs(100))
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		h.advance(tlpRTT)
		h.ackUpTo(segSeq(0) + 100) // the FIN alone is in flight: 2*SRTT + 200 ms is past its RTO
		// As Linux (tcp_schedule_loss_probe): the PTO is capped at the FIN's
		// RTO, from its send at t0; the probe goes one tick before it and
		// re-arms the RTO from then, not backed off.
		probe := t0 + 200*time.Millisecond - testTick
		h.expectAt(probe, flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		if i := h.ep.Info(); i.TLPProbes != 1 || i.RTOEvents != 0 {
			t.Fatalf("probes %d RTO events %d, want 1 0", i.TLPProbes, i.RTOEvents)
		}
		rto := h.ep.Info().RTO
		h.expectAt(probe+rto, flagsAre(FlagACK|FlagFIN), seqIs(segSeq(0)+100))
		if i := h.ep.Info(); i.TLPProbes != 1 || i.RTOEvents != 1 {
			t.Fatalf("probes %d RTO events %d, want 1 1", i.TLPProbes, i.RTOEvents)
		}
	})
	t.Run("an ACK of new data restarts the PTO", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.writeSegs(3)
		h.advanceTo(t0 + tlpRTT) // the PTO would expire at t0+pto
		h.ackUpTo(segSeq(1))
		h.expectAt(t0+tlpRTT+pto, seqIs(segSeq(2))) // RFC 8985 7.2
	})
	t.Run("one segment, default TLP.max_ack_delay: the probe capped at the RTO", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.ep.Write(data(100))
		h.expect(lenIs(100))
		h.expectAt(t0+200*time.Millisecond-testTick, lenIs(100)) // as Linux: the PTO capped at the RTO
		if i := h.ep.Info(); i.TLPProbes != 1 || i.RTOEvents != 0 {
			t.Fatalf("probes %d RTO events %d, want 1 0", i.TLPProbes, i.RTOEvents)
		}
	})
	t.Run("Config.TLPSlack < 0: exactly 2*SRTT", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLPSlack = -1
		h := establishedRTT(t, cfg, tlpRTT)
		h.writeSegs(2)
		h.expectAt(t0+2*tlpRTT, seqIs(segSeq(1)))
	})
	t.Run("no PTO for the SYN", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		h.expectAt(time.Second, flagsAre(FlagSYN)) // RFC 6298 (2.1): the initial RTO
	})
	t.Run("the probe repairs the tail; the next ACK beyond it ends the episode", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.writeSegs(3)
		h.expectAt(t0+pto, seqIs(segSeq(2)))
		h.advanceTo(t0 + pto + tlpRTT)
		h.ackUpTo(segSeq(3))
		if h.w.Len() != 0 {
			t.Fatalf("timers: got %d, want 0", h.w.Len())
		}
		if i := h.ep.Info(); !i.TLPOutstanding || i.TLPRecoveries != 0 {
			t.Fatalf("outstanding %v recoveries %d, want true 0 (RFC 8985 7.4.2: wait for a D-SACK)", i.TLPOutstanding, i.TLPRecoveries)
		}
		cwnd := h.ep.Info().Cwnd
		h.ep.Write(data(100))
		h.expect(lenIs(100))
		h.advance(tlpRTT)
		h.ackUpTo(segSeq(3) + 100)
		if i := h.ep.Info(); i.TLPOutstanding || i.TLPRecoveries != 1 || i.Cwnd >= cwnd {
			t.Fatalf("outstanding %v recoveries %d cwnd %d, want false 1 below %d", i.TLPOutstanding, i.TLPRecoveries, i.Cwnd, cwnd)
		}
	})
	t.Run("a D-SACK of the probe: nothing was lost", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.writeSegs(2)
		h.expectAt(t0+pto, seqIs(segSeq(1)))
		h.ackUpTo(segSeq(2))
		h.sackAck(segBlock(1)) // RFC 2883: the probe was a duplicate
		if i := h.ep.Info(); i.TLPOutstanding || i.TLPRecoveries != 0 {
			t.Fatalf("outstanding %v recoveries %d, want false 0", i.TLPOutstanding, i.TLPRecoveries)
		}
	})
	t.Run("Config.DisableRACKTLP: the RTO alone", func(t *testing.T) {
		h := establishedRTT(t, noTLPConfig(), tlpRTT)
		h.writeSegs(3)
		h.expectAt(t0+200*time.Millisecond, seqIs(segSeq(0)))
		if i := h.ep.Info(); i.TLPProbes != 0 || i.RACKTLP {
			t.Fatalf("probes %d RACKTLP %v, want 0 false", i.TLPProbes, i.RACKTLP)
		}
	})
}

// rackLostHead writes n segments at tlpRTT, SACKs the second an RTT later,
// and expects RACK to resend the first at the reordering timer's expiry,
// which it returns.
func rackLostHead(t *testing.T, n int) (*harness, time.Duration) {
	t.Helper()
	t0 := tlpRTT
	h := establishedRTT(t, testConfig(), tlpRTT)
	h.writeSegs(n)
	h.advanceTo(t0 + tlpRTT)
	h.sackAck(segBlock(1))
	rtxAt := t0 + tlpRTT + tlpRTT/4 // RFC 8985 6.2 step 4: reo_wnd min RTT / 4
	h.expectAt(rtxAt, seqIs(segSeq(0)), lenIs(1448))
	return h, rtxAt
}

func TestRACK(t *testing.T) {
	t0 := tlpRTT
	reo := tlpRTT / 4 // RFC 8985 6.2 step 4: min RTT / 4
	t.Run("a SACK arms the reordering timer; at its expiry the hole is resent", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.writeSegs(3)
		h.advanceTo(t0 + tlpRTT)
		h.sackAck(segBlock(1)) // segment 0 lost, or late
		h.expectNone()
		if !h.ep.timers[timerReorder].Pending() || h.ep.timers[timerPTO].Pending() {
			t.Fatalf("reordering timer %v PTO %v, want true false", h.ep.timers[timerReorder].Pending(), h.ep.timers[timerPTO].Pending())
		}
		// RFC 8985 6.2 step 5: lost when sent RACK.rtt + reo_wnd before now.
		h.expectAt(t0+tlpRTT+reo, seqIs(segSeq(0)), lenIs(1448))
		i := h.ep.Info()
		if i.RACKRetransmits != 1 || i.RACKReorderTimeouts != 1 || !i.InRecovery || i.DupAcksIn != 1 || i.ReoWnd != 0 {
			t.Fatalf("RACK retransmits %d reorder timeouts %d recovery %v dup ACKs %d reo_wnd %v, want 1 1 true 1 0",
				i.RACKRetransmits, i.RACKReorderTimeouts, i.InRecovery, i.DupAcksIn, i.ReoWnd)
		}
		// No ACK for a PTO after the retransmission: the recovery probe, the
		// highest segment not SACKed (there is nothing new to send).
		rtxAt := t0 + tlpRTT + reo
		h.expectAt(rtxAt+2*tlpRTT+DefaultTLPSlack, seqIs(segSeq(2)), lenIs(1448))
		if i := h.ep.Info(); i.RecoveryProbes != 1 || i.TLPProbes != 0 || i.RTOEvents != 0 {
			t.Fatalf("recovery probes %d TLP probes %d RTO events %d, want 1 0 0", i.RecoveryProbes, i.TLPProbes, i.RTOEvents)
		}
		h.advance(50 * time.Millisecond) // one probe per quiet period
		h.expectNone()
		h.ackUpTo(segSeq(3))
		if i := h.ep.Info(); i.InRecovery || h.w.Len() != 0 {
			t.Fatalf("recovery %v timers %d, want false 0", i.InRecovery, h.w.Len())
		}
	})
	t.Run("Config.DisableRecoveryProbe: no probe in recovery (RFC 8985 7.2)", func(t *testing.T) {
		cfg := testConfig()
		cfg.DisableRecoveryProbe = true
		h := establishedRTT(t, cfg, tlpRTT)
		h.writeSegs(3)
		h.advanceTo(t0 + tlpRTT)
		h.sackAck(segBlock(1))
		h.expectAt(t0+tlpRTT+reo, seqIs(segSeq(0)))
		h.advance(100 * time.Millisecond)
		h.expectNone()
		if i := h.ep.Info(); i.RecoveryProbes != 0 {
			t.Fatalf("recovery probes %d, want 0", i.RecoveryProbes)
		}
	})
	t.Run("a lost retransmission in recovery: the probe's SACK reveals it, no RTO", func(t *testing.T) {
		h, rtxAt := rackLostHead(t, 4) // lost again, and the ACKs of 2 and 3 too
		probeAt := rtxAt + 2*tlpRTT + DefaultTLPSlack
		h.expectAt(probeAt, seqIs(segSeq(3)), lenIs(1448))
		h.advance(tlpRTT)
		h.sackAck(SACKBlock{segSeq(1), segSeq(4)}) // the probe, sent after the retransmission, arrived
		h.expect(seqIs(segSeq(0)), lenIs(1448))    // RFC 8985 6.2 step 5: the retransmission is lost
		if i := h.ep.Info(); i.RACKRetransmits != 2 || i.RecoveryProbes != 1 || i.RTOEvents != 0 {
			t.Fatalf("RACK retransmits %d recovery probes %d RTO events %d, want 2 1 0", i.RACKRetransmits, i.RecoveryProbes, i.RTOEvents)
		}
		h.advance(tlpRTT)
		h.ackUpTo(segSeq(4))
		if i := h.ep.Info(); i.InRecovery || h.w.Len() != 0 {
			t.Fatalf("recovery %v timers %d, want false 0", i.InRecovery, h.w.Len())
		}
	})
	t.Run("a hole after a retransmitted segment: found lost past the retransmission", func(t *testing.T) {
		// rackDetectLoss stops at the first segment sent once after RACK's
		// segment, not at one resent after it: the hole at 2, sent before
		// the SACKed 3-5, lies beyond 0's retransmission.
		h, _ := rackLostHead(t, 6)
		h.advance(tlpRTT) // before the recovery probe
		h.sackAck(segBlock(1), SACKBlock{segSeq(3), segSeq(6)})
		h.expect(seqIs(segSeq(2)), lenIs(1448)) // sent before 3-5, in recovery (reo_wnd 0): lost at once
		if i := h.ep.Info(); i.RACKRetransmits != 2 || i.RTOEvents != 0 || i.RecoveryProbes != 0 {
			t.Fatalf("RACK retransmits %d RTO events %d recovery probes %d, want 2 0 0", i.RACKRetransmits, i.RTOEvents, i.RecoveryProbes)
		}
	})
	// RFC 8985 6.2 step 5: lost when Segment.xmit_ts + RACK.rtt + reo_wnd <=
	// now, that is, sent reo_wnd or more before the SACKed segment.
	for _, tc := range []struct {
		name string
		gap  time.Duration // between the two sends
		wait time.Duration // from the SACK to the retransmission
	}{
		{"sent reo_wnd before the SACKed segment: resent at once", reo, 0},
		{"sent reo_wnd - 1 tick before: resent a tick later", reo - testTick, testTick},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := establishedRTT(t, testConfig(), tlpRTT)
			h.ep.Write(data(1448))
			h.expect(seqIs(segSeq(0)))
			h.advance(tc.gap)
			h.ep.Write(data(1448))
			h.expect(seqIs(segSeq(1)))
			h.advance(tlpRTT)
			h.sackAck(segBlock(1))
			if tc.wait > 0 {
				h.expectNone()
				h.advance(tc.wait)
			}
			h.expect(seqIs(segSeq(0)))
			if h.ep.timers[timerReorder].Pending() {
				t.Fatal("reordering timer armed with nothing left to wait for")
			}
		})
	}
	t.Run("late data below RACK.fack: reordering seen, the window stays", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.writeSegs(3)
		h.advanceTo(t0 + tlpRTT)
		h.sackAck(segBlock(1))
		h.advance(reo / 2)
		h.ackUpTo(segSeq(2)) // segment 0 was only late
		h.expectNone()
		if i := h.ep.Info(); !i.ReorderingSeen || i.ReoWnd != reo || i.InRecovery {
			t.Fatalf("reordering seen %v reo_wnd %v recovery %v, want true %v false", i.ReorderingSeen, i.ReoWnd, i.InRecovery, reo)
		}
	})
	t.Run("tail loss of the last segment and the FIN: probe, SACK, RACK resends", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT)
		h.writeSegs(3)
		h.ep.CloseWrite()
		fin := segSeq(3)
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(fin))
		h.advanceTo(t0 + tlpRTT)
		h.ackUpTo(segSeq(2))                                                                  // segment 2 and the FIN are lost
		h.expectAt(t0+tlpRTT+2*tlpRTT+DefaultTLPSlack, flagsAre(FlagACK|FlagFIN), seqIs(fin)) // RFC 8985 7.3: the highest segment
		h.advance(tlpRTT)
		h.sackAck(SACKBlock{fin, fin + 1})      // the probe arrives out of order
		h.expect(seqIs(segSeq(2)), lenIs(1448)) // RFC 8985 6.2 step 5: segment 2, sent long before, is lost
		i := h.ep.Info()
		if i.RACKRetransmits != 1 || i.TLPProbes != 1 || i.RTOEvents != 0 {
			t.Fatalf("RACK retransmits %d probes %d RTO events %d, want 1 1 0", i.RACKRetransmits, i.TLPProbes, i.RTOEvents)
		}
		h.advance(tlpRTT)
		h.ackUpTo(fin + 1)
		h.wantState(StateFinWait2)
		if h.w.Len() != 0 {
			t.Fatalf("timers: got %d, want 0", h.w.Len())
		}
	})
	t.Run("three duplicate ACKs still start fast retransmit without SACK", func(t *testing.T) {
		h := establishedRTT(t, testConfig(), tlpRTT, noSACK)
		h.ackUpTo(testISS + 1)
		h.writeSegs(6)
		h.advance(time.Millisecond)
		for range 2 {
			h.ackUpTo(segSeq(0))
		}
		h.expectNone()
		h.ackUpTo(segSeq(0))
		h.expect(seqIs(segSeq(0))) // RFC 5681 3.2 (3)
	})
}
