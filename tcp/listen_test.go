package tcp

import (
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// The listener under load and under attack: TIME-WAIT reuse (RFC 6191), SYN
// cookies (RFC 4987), the half-open limit and odd flags, on the manual clock.

// passiveEstablished returns a harness whose endpoint was accepted by its
// listener; the peer uses timestamps when ts.
func passiveEstablished(t *testing.T, ts bool) *harness {
	t.Helper()
	h := listen(t, ListenerConfig{})
	h.pts = ts
	h.send(h.peerSyn())
	h.expect(flagsAre(FlagSYN|FlagACK), tsIs(ts))
	h.pack = testISS + 1
	h.send(h.seg(FlagACK, nil))
	h.wantState(StateEstablished)
	return h
}

// passiveTimeWait returns a harness whose endpoint, accepted by its listener,
// closed first and is in TIME-WAIT (RCV.NXT peerISS+2, SND.NXT testISS+2); the
// peer uses timestamps when ts.
func passiveTimeWait(t *testing.T, ts bool) *harness {
	t.Helper()
	h := passiveEstablished(t, ts)
	h.ep.Close()
	h.expect(flagsAre(FlagACK|FlagFIN), seqIs(testISS+1))
	h.advance(time.Millisecond)
	h.pack = testISS + 2
	h.send(h.seg(FlagACK|FlagFIN, nil)) // the peer ACKs our FIN and sends its own
	h.expect(flagsAre(FlagACK), seqIs(testISS+2), ackIs(peerISS+2))
	h.wantState(StateTimeWait)
	h.takeEvents()
	return h
}

// reuseISS is the ISS of the connection that replaces passiveTimeWait's: the
// old SND.NXT + 65535 + 2, as Linux.
const reuseISS = testISS + 2 + 65535 + 2

func TestTimeWaitReuse(t *testing.T) {
	// offer hands a SYN at seq to the listener as the stack does, and checks
	// the outcome: a SYN-ACK from a new half-open connection, or, after the
	// TIME-WAIT endpoint handled it, its ACK.
	offer := func(h *harness, seq seqnum.Value, want bool) {
		t.Helper()
		syn := h.peerSyn()
		syn.Seq = seq
		tw := h.ep
		if got := h.ln.ReuseTimeWait(tw, &syn); got != want {
			t.Fatalf("ReuseTimeWait: got %v, want %v", got, want)
		}
		if !want {
			tw.HandleSegment(&syn)
			h.expect(flagsAre(FlagACK), seqIs(testISS+2), ackIs(peerISS+2)) // RFC 9293 3.10.7.4
			h.expectNone()
			h.wantState(StateTimeWait)
			if st := h.ln.Stats(); st.TimeWaitReused != 0 || h.ln.HalfOpen() != 0 {
				t.Fatalf("reused %d half-open %d, want 0 0", st.TimeWaitReused, h.ln.HalfOpen())
			}
			return
		}
		h.wantState(StateClosed)
		if ev := h.takeEvents(); ev&EventClosed == 0 || tw.Err() != nil {
			t.Fatalf("TIME-WAIT endpoint: events %v, err %v; want Closed, nil", ev, tw.Err())
		}
		h.expect(flagsAre(FlagSYN|FlagACK), seqIs(reuseISS), ackIs(seq+1), tsIs(h.pts))
		h.expectNone()
		if st := h.ln.Stats(); st.TimeWaitReused != 1 || h.ln.HalfOpen() != 1 || h.w.Len() != 1 {
			t.Fatalf("reused %d half-open %d timers %d, want 1 1 1 (the SYN-ACK's)", st.TimeWaitReused, h.ln.HalfOpen(), h.w.Len())
		}
		// The handshake completes through the listener, as the stack's
		// demultiplexer would route it once the old endpoint is gone.
		h.ep = nil
		h.pseq, h.pack = seq+1, reuseISS+1
		h.send(h.seg(FlagACK, []byte("again")))
		if h.ep == nil || h.ep == tw {
			t.Fatal("no new connection accepted")
		}
		h.wantState(StateEstablished)
		h.expectNone()
	}
	t.Run("timestamps, newer TSval: a new connection", func(t *testing.T) {
		h := passiveTimeWait(t, true)
		h.ptsVal += 1000
		offer(h, peerISS-4000, true) // RFC 6191 2: the timestamp decides, whatever the ISN
	})
	t.Run("timestamps, same TSval, higher ISN: a new connection", func(t *testing.T) {
		h := passiveTimeWait(t, true)
		offer(h, peerISS+100000, true) // RFC 6191 2
	})
	t.Run("timestamps, older TSval: ACK, no reuse", func(t *testing.T) {
		h := passiveTimeWait(t, true)
		h.ptsVal -= 100
		offer(h, peerISS+100000, false) // RFC 6191 2, PAWS: even with a higher ISN
	})
	t.Run("timestamps, same TSval, lower ISN: ACK, no reuse", func(t *testing.T) {
		h := passiveTimeWait(t, true)
		offer(h, peerISS-4000, false)
	})
	t.Run("no timestamps, higher ISN: a new connection", func(t *testing.T) {
		h := passiveTimeWait(t, false)
		offer(h, peerISS+100000, true) // RFC 9293 3.6.1, RFC 1122 4.2.2.13
	})
	t.Run("no timestamps, lower ISN: ACK, no reuse", func(t *testing.T) {
		h := passiveTimeWait(t, false)
		offer(h, peerISS-4000, false)
	})
	t.Run("not a bare SYN: no reuse", func(t *testing.T) {
		h := passiveTimeWait(t, false)
		for _, f := range []Flags{FlagACK, FlagSYN | FlagACK, FlagSYN | FlagRST, FlagSYN | FlagFIN, FlagRST} {
			s := h.seg(f, nil)
			s.Seq = peerISS + 100000
			if h.ln.ReuseTimeWait(h.ep, &s) {
				t.Fatalf("ReuseTimeWait of %v: got true, want false", f)
			}
		}
		h.wantState(StateTimeWait)
		h.expectNone()
	})
	t.Run("not in TIME-WAIT: no reuse", func(t *testing.T) {
		h := passiveEstablished(t, true)
		s := h.peerSyn()
		s.Seq = peerISS + 100000
		if h.ln.ReuseTimeWait(h.ep, &s) {
			t.Fatal("ReuseTimeWait in ESTABLISHED: got true, want false")
		}
		h.wantState(StateEstablished)
	})
}
