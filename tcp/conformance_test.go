package tcp

import (
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// Behaviour that packetdrill's scripts (make conformance) found, each checked
// here on the manual clock.

// TestPSHOnEveryDataSegment: every data segment carries PSH (the last of
// the buffer, as RFC 1122 4.2.2.2 requires, and the others, as it allows; see
// sendData for why not Linux's marking), a tail-loss probe too.
func TestPSHOnEveryDataSegment(t *testing.T) {
	h := establishedRTT(t, testConfig(), tlpRTT)
	mss := h.ep.Info().SndMSS
	h.ep.Write(data(3*mss + 100))
	for range 3 {
		h.expect(flagsAre(FlagACK|FlagPSH), lenIs(mss))
	}
	h.expect(flagsAre(FlagACK|FlagPSH), lenIs(100))
	h.expectNone()
	h.ackUpTo(testISS + 1 + seqnum.Value(3*mss+100))
	h.ep.Write(data(11 * mss))
	for range 10 {
		h.expect(flagsAre(FlagACK|FlagPSH), lenIs(mss))
	}
	h.expectNone()
	h.advance(2*tlpRTT + DefaultTLPSlack) // the PTO (RFC 8985 7.2), before the RTO
	h.expect(flagsAre(FlagACK|FlagPSH), lenIs(mss))
	if i := h.ep.Info(); i.TLPProbes != 1 {
		t.Fatalf("TLP probes: got %d, want 1", i.TLPProbes)
	}
}

// TestReadAck: a Read sends the delayed ACK at once, as Linux's
// tcp_cleanup_rbuf, when it takes all the data and that ended with a push
// (PSH or a short segment), or when more than one full segment waits for
// it; not in an interactive exchange (our reply carries it).
func TestReadAck(t *testing.T) {
	h := established(t, testConfig())
	full := data(1448)
	h.sendData(full) // no PSH: the delayed ACK waits for its timer
	h.ep.Read(make([]byte, 4096))
	h.expectNone()
	h.expectAt(DefaultDelayedACK, ackIs(peerISS+1+1448))
	h.send(h.seg(FlagACK|FlagPSH, full))
	h.ep.Read(make([]byte, 1000))
	h.expectNone() // data left unread
	h.ep.Read(make([]byte, 1000))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+1+2*1448)) // the Read emptied it
	h.sendData(data(100))                                // short: a push too
	h.ep.Read(make([]byte, 4096))
	h.expect(flagsAre(FlagACK), ackIs(peerISS+1+2*1448+100))

	// Interactive: we answered the last request within the delayed-ACK
	// time; the next request's Read leaves the ACK to the reply.
	h.ep.Write(data(10))
	h.expect(lenIs(10))
	h.sendData(data(100))
	h.ep.Read(make([]byte, 4096))
	h.expectNone()
	h.ep.Write(data(10))
	h.expect(lenIs(10), ackIs(peerISS+1+2*1448+200))
}

// TestSetSendBuffer: SO_SNDBUF on an open connection bounds Write from then
// on.
func TestSetSendBuffer(t *testing.T) {
	h := established(t, testConfig())
	if err := h.ep.SetSendBuffer(0); err == nil {
		t.Fatal("SetSendBuffer(0): no error")
	}
	if err := h.ep.SetSendBuffer(5000); err != nil {
		t.Fatal(err)
	}
	if n, _ := h.ep.Write(data(8000)); n != 5000 || h.ep.Writable() != 0 {
		t.Fatalf("Write: got %d (writable %d), want 5000 (0)", n, h.ep.Writable())
	}
}

// TestSetUserTimeout: TCP_USER_TIMEOUT set while data waits for its ACK
// aborts the connection that long after it was set, not before.
func TestSetUserTimeout(t *testing.T) {
	h := established(t, noTLPConfig())
	h.ep.Write(data(100))
	h.expect(lenIs(100))
	h.advance(50 * time.Millisecond)
	if err := h.ep.SetUserTimeout(-1); err == nil {
		t.Fatal("SetUserTimeout(-1): no error")
	}
	if err := h.ep.SetUserTimeout(time.Second); err != nil {
		t.Fatal(err)
	}
	set := h.now()
	h.advanceTo(set + time.Second - testTick)
	h.wantState(StateEstablished)
	h.advanceTo(set + time.Second)
	h.wantState(StateClosed)
	h.wantErr(ErrTimeout)
}

// TestSlowStartByBytesAcked: slow start as Linux's tcp_slow_start: an ACK
// opens cwnd by every byte it newly acknowledges (an ACK of two segments by
// two, a stretch ACK of four by four), up to ssthresh, the rest counting
// toward congestion avoidance; after an RTO too.
func TestSlowStartByBytesAcked(t *testing.T) {
	h := established(t, noTLPConfig())
	mss := h.ep.Info().SndMSS
	h.ep.Write(data(40 * mss))
	for range 10 {
		h.expect(lenIs(mss))
	}
	h.expectNone()
	una := seqnum.Value(testISS + 1)
	iw := h.ep.Info().Cwnd
	h.ackUpTo(una.Add(seqnum.Size(2 * mss)))
	if got := h.ep.Info().Cwnd; got != iw+2*mss {
		t.Fatalf("cwnd after an ACK of 2: got %d, want %d", got, iw+2*mss)
	}
	for range 4 { // 2 segments freed, 2 more of cwnd
		h.expect(lenIs(mss))
	}
	h.expectNone()
	h.ackUpTo(una.Add(seqnum.Size(6 * mss)))
	if got := h.ep.Info().Cwnd; got != iw+6*mss {
		t.Fatalf("cwnd after a stretch ACK of 4: got %d, want %d", got, iw+6*mss)
	}
	for range 8 {
		h.expect(lenIs(mss))
	}
	h.expectNone()
	// 22 segments sent, 16 outstanding: the RTO sets ssthresh to 8 segments
	// and cwnd to one.
	h.advanceTo(h.now() + h.ep.Info().RTO)
	h.expect(seqIs(una.Add(seqnum.Size(6 * mss))))
	if info := h.ep.Info(); info.Cwnd != mss || info.Ssthresh != 8*mss {
		t.Fatalf("after the RTO: cwnd %d ssthresh %d, want %d %d", info.Cwnd, info.Ssthresh, mss, 8*mss)
	}
	// An ACK of 10 segments (the receiver had the rest): cwnd 1+10 capped at
	// ssthresh 8; the 3 left over go to congestion avoidance.
	h.ackUpTo(una.Add(seqnum.Size(16 * mss)))
	if got := h.ep.Info().Cwnd; got != 8*mss {
		t.Fatalf("cwnd after the RTO and an ACK of 10: got %d, want %d (ssthresh)", got, 8*mss)
	}
	// 5 more segments of congestion avoidance's count make one cwnd: +1 SMSS.
	h.ackUpTo(una.Add(seqnum.Size(21 * mss)))
	if got := h.ep.Info().Cwnd; got != 9*mss {
		t.Fatalf("cwnd after 8 segments in congestion avoidance: got %d, want %d", got, 9*mss)
	}
}

// TestQuickAck: the first data segments of a connection are ACKed at once
// (Linux's quickack mode), Config.QuickAcks of them; then delayed ACKs; and
// again at once after more than an RTO without data.
func TestQuickAck(t *testing.T) {
	cfg := testConfig()
	cfg.QuickAcks = 3
	h := established(t, cfg)
	ack := peerISS + 1
	for range 3 {
		h.sendData(data(100))
		ack += 100
		h.expect(flagsAre(FlagACK), ackIs(ack)) // at once
	}
	h.sendData(data(100))
	ack += 100
	h.expectNothingUntil(h.now() + DefaultDelayedACK - testTick)
	h.expectAt(h.now()+testTick, ackIs(ack))  // delayed
	h.advance(time.Second + time.Millisecond) // idle for more than the RTO (200 ms at least)
	h.sendData(data(100))
	ack += 100
	h.expect(ackIs(ack)) // at once again
}

// TestListenerSetEndpointConfig: TCP_MAXSEG set on a listening socket is the
// MSS of the SYN-ACKs from then on.
func TestListenerSetEndpointConfig(t *testing.T) {
	h := listen(t, ListenerConfig{})
	cfg := testConfig()
	cfg.MSS = 1100
	if err := h.ln.SetEndpointConfig(Config{MSS: 10}); err == nil {
		t.Fatal("SetEndpointConfig(MSS 10): no error")
	}
	if err := h.ln.SetEndpointConfig(cfg); err != nil {
		t.Fatal(err)
	}
	h.send(h.peerSyn())
	h.expect(flagsAre(FlagSYN|FlagACK), mssIs(1100))
}

// TestLossCounts: segments resent and not yet acknowledged count as lost and
// retransmitted (Linux's lost_out and retrans_out in TCP_INFO).
func TestLossCounts(t *testing.T) {
	h := established(t, noTLPConfig())
	mss := h.ep.Info().SndMSS
	h.ep.Write(data(3 * mss))
	for range 3 {
		h.expect(lenIs(mss))
	}
	if lost, rtx := h.ep.LossCounts(); lost != 0 || rtx != 0 {
		t.Fatalf("before the RTO: lost %d retrans %d, want 0 0", lost, rtx)
	}
	h.advanceTo(h.ep.Info().RTO)
	h.expect(seqIs(testISS + 1)) // the RTO resends the first
	if lost, rtx := h.ep.LossCounts(); lost != 1 || rtx != 1 {
		t.Fatalf("after the RTO: lost %d retrans %d, want 1 1", lost, rtx)
	}
}

// TestNagle: with Config.Nagle (Minshall's variant, as Linux), a short segment
// waits while an earlier short one is unacknowledged, and goes with its ACK
// or with SetNoDelay; full segments never wait; without Nagle nothing waits.
func TestNagle(t *testing.T) {
	cfg := testConfig()
	cfg.Nagle = true
	h := established(t, cfg)
	h.ep.Write(data(10))
	h.expect(lenIs(10)) // nothing short is outstanding: it goes
	h.ep.Write(data(10))
	h.expectNone() // held: the first short segment is unacknowledged
	h.ackUpTo(testISS + 11)
	h.expect(lenIs(10)) // its ACK lets it go
	h.ep.Write(data(5))
	h.expectNone()
	h.ep.SetNoDelay(true)
	h.expect(lenIs(5))
	h.ep.Write(data(5))
	h.expect(lenIs(5)) // TCP_NODELAY: nothing waits

	h = established(t, testConfig()) // the default: no Nagle
	h.ep.Write(data(10))
	h.ep.Write(data(10))
	h.expect(lenIs(10))
	h.expect(lenIs(10))
}

// TestCwndValidation: an application-limited sender's ACKs do not grow cwnd
// (RFC 7661; Linux: in slow start, cwnd grows while below twice the largest
// flight of the window).
func TestCwndValidation(t *testing.T) {
	h := established(t, noTLPConfig())
	mss := h.ep.Info().SndMSS
	iw := h.ep.Info().Cwnd
	h.ep.Write(data(5 * mss)) // half the initial window
	for range 5 {
		h.expect(lenIs(mss))
	}
	una := seqnum.Value(testISS + 1)
	h.ackUpTo(una.Add(seqnum.Size(2 * mss)))
	h.ackUpTo(una.Add(seqnum.Size(5 * mss)))
	if got := h.ep.Info().Cwnd; got != iw {
		t.Fatalf("cwnd after ACKs of an app-limited flight of 5: got %d, want %d", got, iw)
	}
	h.ep.Write(data(9 * mss)) // 9 of 10: slow start grows cwnd, up to twice the flight
	for range 9 {
		h.expect(lenIs(mss))
	}
	for i := 1; i <= 9; i++ {
		h.ackUpTo(una.Add(seqnum.Size((5 + i) * mss)))
	}
	if got, want := h.ep.Info().Cwnd, 18*mss; got != want {
		t.Fatalf("cwnd after ACKs of a flight of 9: got %d, want %d (2 x 9 segments)", got, want)
	}
}

// TestLimitedTransmit: RFC 3042: the first and second duplicate ACKs each send
// one new segment beyond cwnd; the third starts fast retransmit.
func TestLimitedTransmit(t *testing.T) {
	h := established(t, noTLPConfig())
	mss := h.ep.Info().SndMSS
	h.ep.Write(data(20 * mss))
	for range 10 {
		h.expect(lenIs(mss))
	}
	h.expectNone()
	una := seqnum.Value(testISS + 1)
	sack := func(k int) {
		h.sackAck(SACKBlock{Start: una.Add(seqnum.Size(mss)), End: una.Add(seqnum.Size((1 + k) * mss))})
	}
	sack(1)
	h.expect(seqIs(una.Add(seqnum.Size(10*mss))), lenIs(mss)) // new data
	sack(2)
	h.expect(seqIs(una.Add(seqnum.Size(11*mss))), lenIs(mss))
	if got := h.ep.Info().InRecovery; got {
		t.Fatal("in recovery after two duplicate ACKs")
	}
}

// TestDataAfterCloseReset: data for a closed socket resets the connection
// (RFC 2525 2.17) with the reset a segment to no connection gets, SEQ =
// SEG.ACK (RFC 9293 3.10.7.1; Linux's tcp_v4_send_reset), here below our
// unacknowledged FIN.
func TestDataAfterCloseReset(t *testing.T) {
	h := established(t, noTLPConfig())
	h.ep.Close()
	h.expect(flagsAre(FlagACK|FlagFIN), seqIs(testISS+1))
	h.sendData(data(1)) // acknowledges nothing of ours: SEG.ACK = ISS+1
	h.expect(flagsAre(FlagRST), seqIs(testISS+1))
	h.wantState(StateClosed)
}

// TestPSHOnRetransmissions: a segment resent carries PSH only where Linux
// marks it, the last of a write or of a burst (packetdrill's fr-4pkt: the
// fast retransmission of a write's first segment goes without); limited
// transmit's segment goes without too; a tail segment resent keeps it.
func TestPSHOnRetransmissions(t *testing.T) {
	h := established(t, noTLPConfig())
	mss := h.ep.Info().SndMSS
	h.ep.Write(data(10 * mss))
	for range 10 {
		h.expect(flagsAre(FlagACK|FlagPSH), lenIs(mss)) // new data: PSH on every segment
	}
	h.ep.Write(data(2 * mss))
	una := seqnum.Value(testISS + 1)
	for k := 1; k <= 3; k++ { // duplicate ACKs: limited transmit twice, then fast retransmit
		h.sackAck(SACKBlock{Start: una.Add(seqnum.Size(mss)), End: una.Add(seqnum.Size((1 + k) * mss))})
	}
	h.expect(flagsAre(FlagACK), seqIs(testISS+1+seqnum.Value(10*mss)), lenIs(mss)) // limited transmit
	h.expect(flagsAre(FlagACK|FlagPSH), seqIs(testISS+1+seqnum.Value(11*mss)))     // limited transmit, the buffer's last
	h.expect(flagsAre(FlagACK), seqIs(testISS+1), lenIs(mss))                      // fast retransmit: not a write's last
	h.ackUpTo(testISS + 1 + seqnum.Value(12*mss))

	h.ep.Write(data(mss))
	h.expect(flagsAre(FlagACK|FlagPSH), lenIs(mss))
	h.advanceTo(h.now() + h.ep.Info().RTO)
	h.expect(flagsAre(FlagACK|FlagPSH), lenIs(mss)) // the RTO resends a write's last: PSH kept
}

// TestSlowStartByDelivered: an ACK grows cwnd in slow start by what it newly
// delivered (Linux's acked_sacked): bytes that SACK blocks had reported
// before grew nothing then and grow nothing now (packetdrill's
// limited-transmit-sack; limited-transmit-no-sack checks the count without
// SACK, each duplicate ACK standing for a segment).
func TestSlowStartByDelivered(t *testing.T) {
	h := established(t, noTLPConfig())
	mss := h.ep.Info().SndMSS
	h.ep.Write(data(20 * mss))
	for range 10 {
		h.expect(lenIs(mss))
	}
	una := seqnum.Value(testISS + 1)
	iw := h.ep.Info().Cwnd
	for k := 1; k <= 2; k++ { // two duplicate ACKs: segments 2 and 3 arrived
		h.sackAck(SACKBlock{Start: una.Add(seqnum.Size(mss)), End: una.Add(seqnum.Size((1 + k) * mss))})
	}
	h.ackUpTo(una.Add(seqnum.Size(3 * mss))) // one segment newly delivered
	if got := h.ep.Info().Cwnd; got != iw+mss {
		t.Fatalf("cwnd after the ACK of 3 segments, 2 SACKed before: got %d, want %d", got, iw+mss)
	}
}

// TestSlowStartAfterIdle: with Config.SlowStartAfterIdle, a write after more
// than an RTO without sending restarts slow start as Linux's
// tcp_cwnd_restart (RFC 5681 4.1): cwnd halved for each RTO of the idle time
// but the last, to the initial window at least (ssthresh kept at 3/4 of the
// old cwnd at least); an idle time within the RTO changes nothing, nor does the
// default.
func TestSlowStartAfterIdle(t *testing.T) {
	for _, on := range []bool{true, false} {
		h, mss := idleTestStart(t, on)
		h.ackUpTo(testISS + 1 + seqnum.Value(10*mss))
		if got := h.ep.Info().Cwnd; got != 20*mss {
			t.Fatalf("cwnd: got %d, want %d", got, 20*mss)
		}
		rto := h.ep.Info().RTO
		h.advance(rto) // not more than an RTO: nothing changes
		h.ep.Write(data(mss))
		h.expect(lenIs(mss))
		h.ackUpTo(testISS + 1 + seqnum.Value(11*mss))
		want, wantThresh := 20*mss, h.ep.Info().Ssthresh
		if on {
			want = 10 * mss // 2.5 RTOs: halved (20 -> 10), to the initial window; ssthresh stays above 3/4 of 20
		}
		h.advance(rto*5/2 + time.Millisecond)
		h.ep.Write(data(mss))
		if i := h.ep.Info(); i.Cwnd != want || i.Ssthresh != wantThresh {
			t.Fatalf("SlowStartAfterIdle %v: after 2.5 RTOs idle cwnd %d ssthresh %d, want %d %d", on, i.Cwnd, i.Ssthresh, want, wantThresh)
		}
	}
}

// idleTestStart is an established connection (Config.SlowStartAfterIdle as
// on says) with 10 segments sent and not yet acknowledged.
func idleTestStart(t *testing.T, on bool) (*harness, int) {
	t.Helper()
	cfg := noTLPConfig()
	cfg.SlowStartAfterIdle = on
	h := established(t, cfg)
	mss := h.ep.Info().SndMSS
	h.ep.Write(data(10 * mss))
	for range 10 {
		h.expect(lenIs(mss))
	}
	return h, mss
}
