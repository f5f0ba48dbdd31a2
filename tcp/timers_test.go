package tcp

import (
	"errors"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"testing"
	"time"
)

// Exact instants of every timer, on the manual clock.

func TestRetransmission(t *testing.T) {
	t.Run("nothing at RTO-1 tick, retransmit at RTO, then doubling", func(t *testing.T) {
		h := established(t, noTLPConfig())
		h.ep.Write(data(100))
		h.expect(seqIs(testISS+1), lenIs(100))
		at := time.Duration(0)
		for _, rto := range []time.Duration{200, 400, 800, 1600, 3200} {
			at += rto * time.Millisecond
			h.expectAt(at, seqIs(testISS+1), lenIs(100), payloadIs(data(100)))
			if i := h.ep.Info(); i.RTO != 2*rto*time.Millisecond {
				t.Fatalf("RTO after the retransmission: got %v, want %v", i.RTO, 2*rto*time.Millisecond)
			}
		}
		i := h.ep.Info()
		if i.Retransmits != 5 || i.Backoff != 5 || i.RTOEvents != 5 || i.Cwnd != i.SndMSS {
			t.Fatalf("Info: got retransmits %d backoff %d rto events %d cwnd %d, want 5 5 5 %d", i.Retransmits, i.Backoff, i.RTOEvents, i.Cwnd, i.SndMSS)
		}
	})
	t.Run("the RTO runs from the clock at the send, not the wheel's last Advance", func(t *testing.T) {
		// The stack handles a packet some µs after it advanced the wheel: a
		// timer measured from the wheel would fire that much early on the wire.
		h := established(t, noTLPConfig())
		h.clk.Advance(5 * time.Millisecond) // the wheel stays at 0
		h.ep.Write(data(100))
		h.expect(seqIs(testISS+1), lenIs(100))
		h.expectAt(205*time.Millisecond, seqIs(testISS+1), lenIs(100))
		if got, want := h.ep.Info().LastRTO, (TimerExpiry{Timer: TimerRTO, Armed: 5 * time.Millisecond, Due: 205 * time.Millisecond, Fired: 205 * time.Millisecond}); got != want {
			t.Fatalf("LastRTO after the first expiry: got %+v, want %+v", got, want)
		}
		h.expectAt(605*time.Millisecond, seqIs(testISS+1), lenIs(100)) // the backoff too
		if got, want := h.ep.Info().LastRTO, (TimerExpiry{Timer: TimerRTO, Armed: 205 * time.Millisecond, Due: 605 * time.Millisecond, Fired: 605 * time.Millisecond}); got != want {
			t.Fatalf("LastRTO after the second expiry: got %+v, want %+v", got, want)
		}
	})
	t.Run("LastRTO tells a late loop from a wrong duration", func(t *testing.T) {
		h := established(t, noTLPConfig())
		if got := h.ep.Info().LastRTO; got != (TimerExpiry{}) {
			t.Fatalf("LastRTO before any expiry: got %+v, want zero", got)
		}
		h.ep.Write(data(100))
		h.expect(seqIs(testISS+1), lenIs(100))
		h.advance(230 * time.Millisecond) // the loop wakes 30 ms after the deadline
		h.expect(seqIs(testISS+1), lenIs(100))
		if got, want := h.ep.Info().LastRTO, (TimerExpiry{Timer: TimerRTO, Armed: 0, Due: 200 * time.Millisecond, Fired: 230 * time.Millisecond}); got != want {
			t.Fatalf("LastRTO: got %+v, want %+v", got, want)
		}
	})
	t.Run("each segment has its own timer; ACK stops them", func(t *testing.T) {
		h := established(t, noTLPConfig())
		h.ep.Write(data(1448))
		h.expect(lenIs(1448))
		h.advance(50 * time.Millisecond)
		h.ep.Write(data(1448))
		h.expect(lenIs(1448))
		if h.w.Len() != 2 {
			t.Fatalf("pending timers: got %d, want 2", h.w.Len())
		}
		h.ackUpTo(testISS + 1 + 1448)
		if h.w.Len() != 1 {
			t.Fatalf("pending timers after the first ACK: got %d, want 1", h.w.Len())
		}
		// The second segment's timer runs from its own send time (RFC 7765).
		h.expectAt(250*time.Millisecond, seqIs(testISS+1+1448))
		h.ackUpTo(testISS + 1 + 2*1448)
		if h.w.Len() != 0 {
			t.Fatalf("pending timers: got %d, want 0", h.w.Len())
		}
	})
	t.Run("RTO resends go-back-N as cwnd allows", func(t *testing.T) {
		h := established(t, noTLPConfig())
		h.ep.Write(data(3 * 1448))
		for range 3 {
			h.expect(lenIs(1448))
		}
		h.expectAt(200*time.Millisecond, seqIs(testISS+1))
		h.expectNone() // cwnd = 1 SMSS
		if h.w.Len() != 1 {
			t.Fatalf("pending timers after the RTO: got %d, want 1 (the others stopped)", h.w.Len())
		}
		h.ackUpTo(testISS + 1 + 1448)
		h.expect(seqIs(testISS + 1 + 1448)) // cwnd 2: both remaining go
		h.expect(seqIs(testISS + 1 + 2*1448))
		h.expectNone()
	})
	t.Run("Karn: no sample from a retransmitted segment", func(t *testing.T) {
		h := established(t, noTLPConfig(), noTS)
		h.ep.Write(data(10))
		h.expect(lenIs(10))
		h.expectAt(200*time.Millisecond, lenIs(10))
		before := h.ep.Info()
		h.advance(30 * time.Millisecond)
		h.ackUpTo(testISS + 11)
		after := h.ep.Info()
		if after.RTTSamples != before.RTTSamples || after.SRTT != before.SRTT {
			t.Fatalf("samples %d -> %d, srtt %v -> %v: want no new sample", before.RTTSamples, after.RTTSamples, before.SRTT, after.SRTT)
		}
		if after.Backoff != 1 || after.RTO != 400*time.Millisecond {
			t.Fatalf("backoff %d RTO %v: want 1 and 400ms (kept until a fresh sample)", after.Backoff, after.RTO)
		}
		// A fresh sample from new data undoes the backoff.
		h.ep.Write(data(10))
		h.expect(lenIs(10))
		h.advance(30 * time.Millisecond)
		h.ackUpTo(testISS + 21)
		if i := h.ep.Info(); i.Backoff != 0 || i.RTO != 200*time.Millisecond || i.RTTSamples != after.RTTSamples+1 {
			t.Fatalf("after a fresh sample: backoff %d RTO %v samples %d, want 0 200ms %d", i.Backoff, i.RTO, i.RTTSamples, after.RTTSamples+1)
		}
	})
	t.Run("timestamps disambiguate a retransmission", func(t *testing.T) {
		h := established(t, noTLPConfig())
		h.ep.Write(data(10))
		h.expect(lenIs(10))
		rtx := h.expectAt(200*time.Millisecond, lenIs(10))
		h.advance(30 * time.Millisecond)
		h.lastTS = rtx.Options.TSVal
		h.ackUpTo(testISS + 11)
		if i := h.ep.Info(); i.Backoff != 0 || i.RTTSamples != 2 {
			t.Fatalf("backoff %d samples %d, want 0 2", i.Backoff, i.RTTSamples)
		}
	})
	t.Run("Retries2 limit aborts with RST", func(t *testing.T) {
		cfg := noTLPConfig()
		cfg.Retries2 = 3
		h := established(t, cfg)
		h.ep.Write(data(10))
		h.expect(lenIs(10))
		at := time.Duration(0)
		for _, rto := range []time.Duration{200, 400, 800} {
			at += rto * time.Millisecond
			h.expectAt(at, lenIs(10))
		}
		h.expectAt(at+1600*time.Millisecond, flagsAre(FlagRST), seqIs(testISS+11))
		h.wantErr(ErrTimeout)
		h.wantState(StateClosed)
		if h.w.Len() != 0 {
			t.Fatalf("timers: got %d, want 0", h.w.Len())
		}
	})
	t.Run("MaxRTO caps the backoff", func(t *testing.T) {
		cfg := noTLPConfig()
		cfg.MaxRTO = time.Second
		h := established(t, cfg)
		h.ep.Write(data(10))
		h.expect(lenIs(10))
		at := time.Duration(0)
		for _, rto := range []time.Duration{200, 400, 800, 1000, 1000} {
			at += rto * time.Millisecond
			h.expectAt(at, lenIs(10))
		}
	})
	t.Run("user timeout aborts (RFC 5482)", func(t *testing.T) {
		cfg := noTLPConfig()
		cfg.UserTimeout = 1500 * time.Millisecond
		h := established(t, cfg)
		h.ep.Write(data(10))
		h.expect(lenIs(10))
		h.expectAt(200*time.Millisecond, lenIs(10))
		h.expectAt(600*time.Millisecond, lenIs(10))
		h.expectAt(1400*time.Millisecond, lenIs(10))
		h.expectAt(1500*time.Millisecond, flagsAre(FlagRST))
		if !errors.Is(h.ep.Err(), ErrTimeout) {
			t.Fatalf("Err: got %v, want ErrTimeout", h.ep.Err())
		}
	})
	t.Run("user timeout restarts on progress", func(t *testing.T) {
		cfg := noTLPConfig()
		cfg.UserTimeout = 150 * time.Millisecond
		h := established(t, cfg)
		h.ep.Write(data(2896))
		h.expect(lenIs(1448))
		h.expect(lenIs(1448))
		h.advanceTo(100 * time.Millisecond)
		h.ackUpTo(testISS + 1449)
		h.expectNothingUntil(200 * time.Millisecond) // the RTO of the second segment
		h.expect(lenIs(1448))
		h.expectAt(250*time.Millisecond, flagsAre(FlagRST))
	})
}

func TestDelayedACK(t *testing.T) {
	t.Run("one segment: ACK after 40ms", func(t *testing.T) {
		h := established(t, testConfig())
		h.sendData(data(100))
		h.expectAt(40*time.Millisecond, flagsAre(FlagACK), ackIs(peerISS+101))
		h.expectNone()
	})
	t.Run("configured delay", func(t *testing.T) {
		cfg := testConfig()
		cfg.DelayedACK = 200 * time.Millisecond
		h := established(t, cfg)
		h.sendData(data(100))
		h.expectAt(200*time.Millisecond, ackIs(peerISS+101))
	})
	t.Run("every second full-sized segment is ACKed at once", func(t *testing.T) {
		h := established(t, testConfig())
		h.sendData(data(1448))
		h.expectNone()
		h.sendData(data(1448))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+2*1448))
		h.advance(time.Second)
		h.expectNone()
	})
	t.Run("data piggybacks the ACK", func(t *testing.T) {
		h := established(t, noTLPConfig()) // no probe of the reply within the 100 ms
		h.sendData(data(100))
		h.ep.Write([]byte("reply"))
		h.expect(ackIs(peerISS+101), lenIs(5))
		h.advance(100 * time.Millisecond)
		h.expectNone()
	})
	t.Run("Config.DelayedACK above 200ms is refused", func(t *testing.T) {
		cfg := testConfig()
		cfg.DelayedACK = 300 * time.Millisecond
		if _, err := Dial(OnWheel(newHarness(t).w), &capture{}, testID, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("got %v, want ErrInvalidConfig", err)
		}
	})
}

func TestKeepalive(t *testing.T) {
	kcfg := func() Config {
		cfg := testConfig()
		cfg.KeepAlive = true
		cfg.KeepIdle = 10 * time.Second
		cfg.KeepInterval = 2 * time.Second
		cfg.KeepCount = 3
		return cfg
	}
	t.Run("probes at idle, idle+interval..., abort after count", func(t *testing.T) {
		h := established(t, kcfg())
		for _, at := range []time.Duration{10, 12, 14} {
			h.expectAt(at*time.Second, flagsAre(FlagACK), seqIs(testISS), lenIs(0))
		}
		h.expectAt(16*time.Second, flagsAre(FlagRST|FlagACK), seqIs(testISS+1), ackIs(peerISS+1)) // as Linux's tcp_send_active_reset
		h.wantErr(ErrTimeout)
	})
	t.Run("TraceTimers logs each expiry: start, deadline, and how late it ran", func(t *testing.T) {
		cfg := kcfg()
		cfg.TraceTimers = true
		h := established(t, cfg)
		const ms = time.Millisecond
		for _, at := range []time.Duration{10300, 12000, 14500} { // two late wakes
			h.advanceTo(at * ms)
			h.expect(flagsAre(FlagACK), seqIs(testISS), lenIs(0))
		}
		h.advanceTo(16 * time.Second)
		h.expect(flagsAre(FlagRST | FlagACK))
		// Each probe's timer is started inside the expiry before it, from the
		// wheel's Now there (the deadline's tick), so a late wake delays the
		// probe it runs and no later one.
		want := []TimerExpiry{
			{TimerKeepalive, 0, 10 * time.Second, 10300 * ms},
			{TimerKeepalive, 10 * time.Second, 12 * time.Second, 12 * time.Second},
			{TimerKeepalive, 12 * time.Second, 14 * time.Second, 14500 * ms},
			{TimerKeepalive, 14 * time.Second, 16 * time.Second, 16 * time.Second},
		}
		got := h.ep.Info().TimerLog
		if len(got) != len(want) {
			t.Fatalf("timer log: got %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("timer log entry %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		if got := (established(t, kcfg())).ep.Info().TimerLog; got != nil {
			t.Fatalf("timer log without TraceTimers: %+v, want nil", got)
		}
	})
	t.Run("an answer restarts the idle time", func(t *testing.T) {
		h := established(t, kcfg())
		h.expectAt(10*time.Second, seqIs(testISS))
		h.expectAt(12*time.Second, seqIs(testISS))
		h.advanceTo(13 * time.Second)
		h.ackUpTo(testISS + 1)
		h.expectAt(23*time.Second, seqIs(testISS))
		if i := h.ep.Info(); i.KeepaliveProbes != 3 {
			t.Fatalf("probes: got %d, want 3", i.KeepaliveProbes)
		}
	})
	t.Run("turned on and off on a live connection", func(t *testing.T) {
		h := established(t, testConfig())
		h.advanceTo(5 * time.Second)
		h.ep.SetKeepAlive(true, 3*time.Second, time.Second, 2)
		h.expectAt(8*time.Second, flagsAre(FlagACK), seqIs(testISS), lenIs(0))
		h.expectAt(9*time.Second, seqIs(testISS))
		h.ackUpTo(testISS + 1)
		h.ep.SetKeepAlive(false, 0, 0, 0)
		h.advance(time.Hour)
		h.expectNone()
		if h.w.Len() != 0 {
			t.Fatalf("timers after turning keepalive off: got %d, want 0", h.w.Len())
		}
	})
	t.Run("off by default", func(t *testing.T) {
		h := established(t, testConfig())
		h.advance(3 * time.Hour)
		h.expectNone()
		if h.w.Len() != 0 {
			t.Fatalf("timers: got %d, want 0", h.w.Len())
		}
	})
}

func TestPersist(t *testing.T) {
	t.Run("zero-window probes back off; answered, the connection stays", func(t *testing.T) {
		h := established(t, testConfig())
		h.pwnd = 0
		h.ackUpTo(testISS + 1)
		h.ep.Write(data(100))
		h.expectNone()
		at := time.Duration(0)
		for _, d := range []time.Duration{200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 102400, 120000, 120000, 120000, 120000, 120000, 120000, 120000} {
			at += d * time.Millisecond
			h.expectAt(at, flagsAre(FlagACK), seqIs(testISS), lenIs(0))
			h.ackUpTo(testISS + 1) // still zero
		}
		h.wantState(StateEstablished)
		h.pwnd = 1000
		h.ackUpTo(testISS + 1) // the window opens
		h.expect(lenIs(100), seqIs(testISS+1))
	})
	t.Run("unanswered probes abort after Retries2", func(t *testing.T) {
		cfg := testConfig()
		cfg.Retries2 = 2
		h := established(t, cfg)
		h.pwnd = 0
		h.ackUpTo(testISS + 1)
		h.ep.Write(data(100))
		h.expectAt(200*time.Millisecond, seqIs(testISS))
		h.expectAt(600*time.Millisecond, seqIs(testISS))
		h.expectAt(1400*time.Millisecond, flagsAre(FlagRST))
		h.wantErr(ErrTimeout)
	})
}

func TestFastRetransmit(t *testing.T) {
	send := func(h *harness, n int) {
		h.ackUpTo(testISS + 1) // the scaled window, so that the duplicates do not change it
		h.ep.Write(data(n * 1448))
		for range n {
			h.expect(lenIs(1448))
		}
	}
	dup := func(h *harness, blocks ...SACKBlock) {
		s := h.seg(FlagACK, nil)
		copy(s.Options.SACK[:], blocks)
		s.Options.NSACK = len(blocks)
		h.send(s)
	}
	seg := func(i int) SACKBlock {
		return SACKBlock{testISS + 1 + seqnum.Value(i*1448), testISS + 1 + seqnum.Value((i+1)*1448)}
	}
	t.Run("three duplicate ACKs: NewReno", func(t *testing.T) {
		h := established(t, noTLPConfig(), noSACK)
		send(h, 6)
		h.advance(10 * time.Millisecond)
		dup(h)
		dup(h)
		h.expectNone()
		dup(h)
		h.expect(seqIs(testISS+1), lenIs(1448)) // RFC 5681 3.2 (3)
		i := h.ep.Info()
		if !i.InRecovery || i.Ssthresh != 3*1448 || i.Cwnd != 6*1448 {
			t.Fatalf("recovery %v ssthresh %d cwnd %d, want true %d %d", i.InRecovery, i.Ssthresh, i.Cwnd, 3*1448, 6*1448)
		}
		// Partial ACK: the next hole goes at once (RFC 6582 3.2 (3)).
		h.ackUpTo(seg(2).Start)
		h.expect(seqIs(seg(2).Start), lenIs(1448))
		if !h.ep.Info().InRecovery {
			t.Fatal("left recovery on a partial ACK")
		}
		h.ackUpTo(seg(6).Start) // full ACK
		i = h.ep.Info()
		// RFC 6582 3.2 (3) option 1: min(ssthresh, max(FlightSize, SMSS) + SMSS), FlightSize 0.
		if i.InRecovery || i.Cwnd != 2*1448 {
			t.Fatalf("after the full ACK: recovery %v cwnd %d, want false %d", i.InRecovery, i.Cwnd, 2*1448)
		}
	})
	t.Run("SACK: holes resent, SACKed segments not", func(t *testing.T) {
		h := established(t, noTLPConfig())
		send(h, 6)
		// segments 0 and 2 lost
		dup(h, seg(1))
		dup(h, seg(3), seg(1))
		dup(h, SACKBlock{seg(3).Start, seg(4).End}, seg(1))
		h.expect(seqIs(seg(0).Start))
		dup(h, SACKBlock{seg(3).Start, seg(5).End}, seg(1))
		h.expect(seqIs(seg(2).Start)) // the next hole, not segment 1
		if i := h.ep.Info(); i.Sacked != 4*1448 {
			t.Fatalf("Sacked: got %d, want %d", i.Sacked, 4*1448)
		}
		if h.w.Len() != 2 {
			t.Fatalf("pending timers: got %d, want 2 (SACKed segments stopped)", h.w.Len())
		}
	})
	t.Run("RTO skips SACKed segments", func(t *testing.T) {
		h := established(t, noTLPConfig())
		send(h, 3)
		dup(h, seg(1))
		h.expectAt(200*time.Millisecond, seqIs(seg(0).Start))
		h.ackUpTo(seg(0).End)
		h.expect(seqIs(seg(2).Start))
		h.expectNone()
	})
}
