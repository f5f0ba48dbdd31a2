package tcp

import (
	"testing"
	"time"
)

// TestLinuxRTO: with Config.LinuxRTO the RTO is SRTT + max(4*RTTVAR,
// MinRTO) (Linux's tcp_rtt_estimator and __tcp_set_rto); without it, RFC
// 6298's max(SRTT + 4*RTTVAR, MinRTO). Three samples of 100 ms, as
// packetdrill's slow-start-after-win-update takes: RTTVAR 50, 37.5, 28.125 ms.
func TestLinuxRTO(t *testing.T) {
	for _, tc := range []struct {
		name  string
		linux bool
		rtos  []time.Duration // the RTO after the handshake's sample, the second and the third
	}{
		{"RFC 6298", false, []time.Duration{300 * ms, 250 * ms, 212500 * time.Microsecond}},
		{"Linux", true, []time.Duration{300 * ms, 300 * ms, 300 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := noTLPConfig()
			cfg.LinuxRTO = tc.linux
			h := newHarness(t)
			h.dial(cfg)
			h.advance(100 * ms)
			h.pack = testISS + 1
			h.send(h.peerSynAck())
			h.expect(flagsAre(FlagACK))
			if got := h.ep.Info().RTO; got != tc.rtos[0] {
				t.Fatalf("RTO after the handshake: got %v, want %v", got, tc.rtos[0])
			}
			next := testISS + 1
			for i := 1; i < 3; i++ {
				h.ep.Write(data(100))
				h.expect(seqIs(next), lenIs(100))
				next += 100
				h.advance(100 * ms)
				h.ackUpTo(next)
				if got := h.ep.Info().RTO; got != tc.rtos[i] {
					t.Fatalf("RTO after sample %d: got %v, want %v", i+1, got, tc.rtos[i])
				}
			}
			// The retransmission comes at that RTO after the send, not a tick
			// before.
			sent := h.now()
			h.ep.Write(data(100))
			h.expect(seqIs(next), lenIs(100))
			h.expectAt(sent+tc.rtos[2], seqIs(next), lenIs(100))
			// Backoff doubles the Linux RTO as the RFC's.
			h.expectAt(sent+3*tc.rtos[2], seqIs(next), lenIs(100))
		})
	}
}

// TestLinuxRTOFloor: the floor is MinRTO, and a large RTTVAR wins over it.
func TestLinuxRTOFloor(t *testing.T) {
	r := newRTTEstimator(time.Second, 200*ms, 120*time.Second, 100*time.Microsecond)
	r.varFloor = true
	r.sample(10 * ms)
	if r.rto() != 210*ms {
		t.Fatalf("after 10 ms: got %v, want SRTT + MinRTO = 210ms", r.rto())
	}
	r = newRTTEstimator(time.Second, 200*ms, 120*time.Second, 100*time.Microsecond)
	r.varFloor = true
	r.sample(400 * ms) // RTTVAR 200 ms: 4*RTTVAR = 800 ms
	if r.rto() != 1200*ms {
		t.Fatalf("after 400 ms: got %v, want SRTT + 4*RTTVAR = 1.2s", r.rto())
	}
}
