package tcp

import (
	"testing"
	"time"
)

// congOut is the harness's capture with a local queue that drops while on.
type congOut struct {
	*capture
	on bool
}

func (c *congOut) Congested(ID) bool { return c.on }

// congEstablished is an established connection over a congOut, with an RTT
// of 100 ms and 24 bytes sent and acknowledged: SRTT 100 ms, RTTVAR 37.5 ms,
// RTO 250 ms.
func congEstablished(t *testing.T, cfg Config) (*harness, *congOut) {
	t.Helper()
	h := newHarness(t)
	out := &congOut{capture: h.out}
	ep, err := Dial(OnWheel(h.w), out, testID, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ep = ep
	h.expect(flagsAre(FlagSYN))
	h.advance(100 * ms)
	h.pack = testISS + 1
	h.send(h.peerSynAck())
	h.expect(flagsAre(FlagACK))
	h.ep.Write(data(24))
	h.expect(lenIs(24))
	h.advance(100 * ms)
	h.ackUpTo(testISS + 25)
	if got := h.ep.Info().RTO; got != 250*ms {
		t.Fatalf("RTO: got %v, want 250ms", got)
	}
	return h, out
}

// TestLocalCongestionUserTimeout: packetdrill's user-timeout-probe. Data
// written while the local queue drops is held, not sent; the resource probe
// tries again after the RTO and then every 500 ms, counting each failed
// attempt, without backoff; the user timeout, counted from the first
// attempt, ends the connection without a RST.
func TestLocalCongestionUserTimeout(t *testing.T) {
	cfg := noTLPConfig()
	cfg.UserTimeout = 3 * time.Second
	h, out := congEstablished(t, cfg)
	out.on = true
	t0 := h.now()
	if n, err := h.ep.Write(data(24)); n != 24 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	h.expectNone()
	at := t0 + 250*ms
	for k := 1; k <= 6; k++ {
		h.advanceTo(at - testTick)
		if got := h.ep.Info().Probes; got != k-1 {
			t.Fatalf("at %v: probes %d, want %d", h.now(), got, k-1)
		}
		h.advanceTo(at)
		if i := h.ep.Info(); i.Probes != k || i.Backoff != 0 || i.State != StateEstablished {
			t.Fatalf("at %v: probes %d backoff %d state %v, want %d 0 ESTABLISHED", h.now(), i.Probes, i.Backoff, i.State, k)
		}
		h.expectNone()
		at += ResourceProbeInterval
	}
	// 3 s after the first attempt (t0+250ms): aborted, nothing sent.
	h.advanceTo(t0 + 3250*ms - testTick)
	h.wantState(StateEstablished)
	h.advanceTo(t0 + 3250*ms)
	h.wantState(StateClosed)
	h.wantErr(ErrTimeout)
	h.expectNone()
	if got := h.ep.Info().Probes; got != 6 {
		t.Fatalf("probes after the abort: got %d, want 6", got)
	}
}

// TestLocalCongestionClears: once the queue takes segments again, the next
// attempt sends the held data and the probes end.
func TestLocalCongestionClears(t *testing.T) {
	h, out := congEstablished(t, noTLPConfig())
	out.on = true
	t0 := h.now()
	h.ep.Write(data(3000))
	h.expectNone()
	h.advanceTo(t0 + 250*ms + ResourceProbeInterval)
	if got := h.ep.Info().Probes; got != 2 {
		t.Fatalf("probes: got %d, want 2", got)
	}
	out.on = false
	h.expectNothingUntil(t0 + 250*ms + 2*ResourceProbeInterval)
	h.expect(seqIs(testISS+25), lenIs(h.ep.Info().SndMSS))
	h.expect(lenIs(h.ep.Info().SndMSS))
	h.expect(lenIs(3000 - 2*h.ep.Info().SndMSS))
	h.expectNone()
	if got := h.ep.Info().Probes; got != 0 {
		t.Fatalf("probes after the data went: got %d, want 0", got)
	}
	// And with no congestion, a write goes at once.
	h.ackUpTo(testISS + 25 + 3000)
	h.ep.Write(data(10))
	h.expect(lenIs(10))
}
