package tcp

import (
	"testing"
	"time"
)

// FuzzHandleSegment feeds arbitrary bytes through ParseSegment into endpoints in
// several states and a listener, with time moving between segments. Nothing
// may panic, and the endpoint's invariants must hold.
func FuzzHandleSegment(f *testing.F) {
	seed := func(s Segment) []byte {
		b := make([]byte, s.EncodedLen())
		s.Encode(b)
		return b
	}
	f.Add(seed(Segment{Seq: peerISS + 1, Ack: testISS + 1, Flags: FlagACK, Window: 100, Payload: []byte("abc")}), uint8(0), uint16(10))
	f.Add(seed(Segment{Seq: peerISS + 1, Ack: testISS + 1, Flags: FlagACK | FlagFIN, Window: 0}), uint8(1), uint16(300))
	f.Add(seed(Segment{Seq: peerISS, Flags: FlagSYN, Options: Options{HasMSS: true, MSS: 1, HasWS: true, WindowScale: 14, SACKPermitted: true, TS: true}}), uint8(2), uint16(0))
	f.Add(seed(Segment{Seq: peerISS + 1, Ack: testISS + 1, Flags: FlagACK, Options: Options{NSACK: 2, SACK: [4]SACKBlock{{testISS, testISS + 100}, {5, 1}}}}), uint8(3), uint16(1000))
	f.Add(seed(Segment{Seq: peerISS + 1, Flags: FlagRST}), uint8(0), uint16(0))
	f.Add([]byte{0, 1, 2}, uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, mode uint8, gapMs uint16) {
		var h *harness
		switch mode % 4 {
		case 0:
			h = established(t, testConfig())
		case 1:
			h = established(t, testConfig())
			h.ep.Write(data(5000))
			h.ep.CloseWrite()
		case 2:
			h = listen(t, ListenerConfig{})
		case 3:
			h = newHarness(t)
			h.dial(testConfig())
		}
		// Split b into up to 4 segments.
		for i := 0; i < 4 && len(b) > 0; i++ {
			n := min(len(b), 20+int(b[0])%120)
			seg, err := ParseSegment(b[:n])
			b = b[n:]
			if err == nil {
				seg.SrcPort, seg.DstPort = remoteAP.Port(), localAP.Port()
				h.send(seg)
			}
			h.advance(time.Duration(gapMs) * time.Millisecond)
			if h.ep != nil {
				h.ep.Read(make([]byte, 100))
				h.ep.Write([]byte("x"))
				checkInvariants(t, h.ep)
			}
		}
		h.advance(10 * time.Minute)
		if h.ep != nil {
			checkInvariants(t, h.ep)
		}
	})
}

func checkInvariants(t *testing.T, e *Endpoint) {
	t.Helper()
	if e.snd.max.LessThan(e.snd.una) || e.snd.max.LessThan(e.snd.nxt) || e.snd.nxt.LessThan(e.snd.una) {
		t.Fatalf("send sequence: una %d nxt %d max %d", e.snd.una, e.snd.nxt, e.snd.max)
	}
	for i, s := range e.snd.rtxq {
		if i > 0 && s.seq != e.snd.rtxq[i-1].end() {
			t.Fatalf("retransmission queue not contiguous at %d", i)
		}
	}
	if len(e.snd.rtxq) > 0 && (e.snd.rtxq[0].seq != e.snd.una || e.snd.rtxq[len(e.snd.rtxq)-1].end() != e.snd.max) {
		t.Fatalf("queue [%d, %d) does not cover [%d, %d)", e.snd.rtxq[0].seq, e.snd.rtxq[len(e.snd.rtxq)-1].end(), e.snd.una, e.snd.max)
	}
	if e.snd.buf.len() > e.cfg.SendBuffer || e.rcv.buf.len() > e.cfg.RecvBuffer {
		t.Fatalf("buffers over their bounds: %d %d", e.snd.buf.len(), e.rcv.buf.len())
	}
	if e.state == StateClosed && (e.timers[timerDelayedACK].Pending() || e.timers[timerKeepalive].Pending() || e.timers[timerPersist].Pending() || e.timers[timerClose].Pending() || e.timers[timerUser].Pending() || e.timers[timerPTO].Pending() || e.timers[timerReorder].Pending()) {
		t.Fatal("CLOSED with a timer pending")
	}
}
