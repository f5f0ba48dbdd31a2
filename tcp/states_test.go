package tcp

import (
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// Tests grouped by the state the endpoint is in when the test acts.

func TestSynSent(t *testing.T) {
	t.Run("SYN carries options", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		// checked again explicitly
		h2 := newHarness(t)
		ep, _ := Dial(OnWheel(h2.w), h2.out, testID, testConfig())
		_ = ep
		h2.expect(flagsAre(FlagSYN), seqIs(testISS), mssIs(1460), wsIs(5), sackPermIs(true), tsIs(true), tsEcrIs(0), windowIs(65535))
	})
	t.Run("SYN-ACK establishes", func(t *testing.T) {
		h := established(t, testConfig())
		i := h.ep.Info()
		if !i.Timestamps || !i.SACK || i.SndWScale != 7 || i.RcvWScale != 5 || i.SndMSS != 1460-12 {
			t.Fatalf("Info: got ts %v sack %v ws %d/%d mss %d, want true true 7/5 1448", i.Timestamps, i.SACK, i.SndWScale, i.RcvWScale, i.SndMSS)
		}
		if i.SndWnd != 65535 {
			t.Fatalf("SndWnd: got %d, want 65535 (a SYN's window is not scaled)", i.SndWnd)
		}
		if i.SRTT != 0+testTick || i.RTO != 200*time.Millisecond {
			// the SYN-ACK came in the same tick as the SYN: a sample of G
			t.Fatalf("Info: got srtt %v rto %v, want %v 200ms", i.SRTT, i.RTO, testTick)
		}
	})
	t.Run("SYN-ACK without options", func(t *testing.T) {
		h := established(t, testConfig(), noTS, noSACK, noWS, func(s *Segment) { s.Options.HasMSS = false })
		i := h.ep.Info()
		if i.Timestamps || i.SACK || i.SndWScale != -1 || i.SndMSS != DefaultMSS {
			t.Fatalf("Info: got ts %v sack %v ws %d mss %d, want false false -1 536", i.Timestamps, i.SACK, i.SndWScale, i.SndMSS)
		}
		h.ep.Write(data(10))
		h.expect(flagsAre(FlagACK|FlagPSH), tsIs(false), lenIs(10), windowIs(65535))
	})
	t.Run("RST with good ACK refuses", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		h.pack = testISS + 1
		h.send(h.seg(FlagRST|FlagACK, nil))
		h.wantState(StateClosed)
		h.wantErr(ErrConnectionRefused)
		if ev := h.takeEvents(); ev&(EventError|EventClosed) != EventError|EventClosed {
			t.Fatalf("events: got %v, want Error|Closed", ev)
		}
		if h.w.Len() != 0 {
			t.Fatalf("pending timers: got %d, want 0", h.w.Len())
		}
	})
	t.Run("RST without ACK is ignored", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		h.send(h.seg(FlagRST, nil))
		h.wantState(StateSynSent)
	})
	t.Run("bad ACK gets RST", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		h.pack = testISS + 5
		h.send(h.seg(FlagSYN|FlagACK, nil))
		h.expect(flagsAre(FlagRST), seqIs(testISS+5))
		h.wantState(StateSynSent)
	})
	t.Run("SYN retransmits at 1,3,7,15,31,63s, gives up at 127s", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		for _, at := range []time.Duration{1, 3, 7, 15, 31, 63} {
			h.expectAt(at*time.Second, flagsAre(FlagSYN), seqIs(testISS))
			h.expectNone()
		}
		h.expectNothingUntil(127 * time.Second)
		h.wantState(StateClosed)
		h.wantErr(ErrTimeout)
		h.expectNone() // no RST: the peer never answered
		if i := h.ep.Info(); i.SYNRetransmits != 6 {
			t.Fatalf("SYNRetransmits: got %d, want 6", i.SYNRetransmits)
		}
	})
	t.Run("SYN retransmitted: RTO 3s after handshake, IW 1 (RFC 6298 5.7, RFC 5681 3.1)", func(t *testing.T) {
		h := newHarness(t)
		cfg := testConfig()
		cfg.DisableTimestamps = true
		h.dial(cfg)
		h.expectAt(time.Second, flagsAre(FlagSYN))
		h.advance(10 * time.Millisecond)
		sa := h.peerSynAck()
		sa.Options.TS = false
		h.pts = false
		h.send(sa)
		h.expect(flagsAre(FlagACK))
		h.wantState(StateEstablished)
		if i := h.ep.Info(); i.RTO != 3*time.Second || i.Cwnd != i.SndMSS || i.Backoff != 0 {
			t.Fatalf("got RTO %v cwnd %d backoff %d, want 3s %d 0", i.RTO, i.Cwnd, i.Backoff, i.SndMSS)
		}
	})
	t.Run("SYN retransmitted with timestamps: the echo gives a sample", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		syn := h.expectAt(time.Second, flagsAre(FlagSYN))
		h.advance(50 * time.Millisecond)
		sa := h.peerSynAck()
		sa.Options.TSEcr = syn.Options.TSVal
		h.send(sa)
		h.expect(flagsAre(FlagACK))
		if i := h.ep.Info(); i.SRTT != 50*time.Millisecond || i.RTTSamples != 1 {
			t.Fatalf("got SRTT %v samples %d, want 50ms 1", i.SRTT, i.RTTSamples)
		}
	})
	t.Run("simultaneous open", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		syn := h.seg(FlagSYN, nil)
		syn.Options.HasMSS, syn.Options.MSS = true, 1000
		syn.Options.SACKPermitted = true
		syn.Options.HasWS, syn.Options.WindowScale = true, 0
		h.send(syn)
		h.wantState(StateSynReceived)
		h.expect(flagsAre(FlagSYN|FlagACK), seqIs(testISS), ackIs(peerISS+1))
		h.pack = testISS + 1
		h.send(h.seg(FlagSYN|FlagACK, nil)) // the peer's SYN-ACK: seq is now old
		h.pseq = peerISS + 1
		h.expect(flagsAre(FlagACK)) // out of window: ACK
		h.ackUpTo(testISS + 1)
		h.wantState(StateEstablished)
		if ev := h.takeEvents(); ev&EventEstablished == 0 {
			t.Fatalf("events: got %v, want Established", ev)
		}
	})
	t.Run("Close deletes the TCB", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		h.ep.Close()
		h.wantState(StateClosed)
		h.expectNone()
		if h.w.Len() != 0 {
			t.Fatalf("pending timers: got %d, want 0", h.w.Len())
		}
	})
}

// listen returns a harness with a listener; accepted endpoints become h.ep.
func listen(t *testing.T, cfg ListenerConfig) *harness {
	h := newHarness(t)
	cfg.Endpoint.ISN = testConfig().ISN
	if cfg.Endpoint.TSOffset == nil {
		cfg.Endpoint.TSOffset = testConfig().TSOffset
	}
	if cfg.Accept == nil {
		cfg.Accept = func(ep *Endpoint) bool { h.ep = ep; ep.SetNotify(h.notify); return true }
	}
	ln, err := NewListener(OnWheel(h.w), h.out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ln = ln
	return h
}

func (h *harness) peerSyn() Segment {
	s := h.seg(FlagSYN, nil)
	s.Options.HasMSS, s.Options.MSS = true, 1460
	s.Options.HasWS, s.Options.WindowScale = true, 7
	s.Options.SACKPermitted = true
	return s
}

func TestListen(t *testing.T) {
	t.Run("handshake", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN|FlagACK), seqIs(testISS), ackIs(peerISS+1), mssIs(1460), wsIs(5), sackPermIs(true), tsEcrIs(777))
		if h.ln.HalfOpen() != 1 {
			t.Fatalf("half-open: got %d, want 1", h.ln.HalfOpen())
		}
		h.advance(20 * time.Millisecond)
		h.pack = testISS + 1
		h.send(h.seg(FlagACK, []byte("hi")))
		if h.ep == nil {
			t.Fatal("no endpoint accepted")
		}
		h.wantState(StateEstablished)
		if h.ln.HalfOpen() != 0 {
			t.Fatalf("half-open: got %d, want 0", h.ln.HalfOpen())
		}
		buf := make([]byte, 10)
		if n, _ := h.ep.Read(buf); string(buf[:n]) != "hi" {
			t.Fatalf("Read: got %q, want %q", buf[:n], "hi")
		}
		if i := h.ep.Info(); i.SRTT != 20*time.Millisecond {
			t.Fatalf("SRTT: got %v, want 20ms", i.SRTT)
		}
	})
	t.Run("SYN-ACK retransmits at 1,3,7,15,31,63s, then drops", func(t *testing.T) {
		h := listen(t, ListenerConfig{SynAckRetries: 6}) // the default is Linux's 5 (TestSynAckRetries)
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN | FlagACK))
		for _, at := range []time.Duration{1, 3, 7, 15, 31, 63} {
			h.expectAt(at*time.Second, flagsAre(FlagSYN|FlagACK), seqIs(testISS))
		}
		h.expectNothingUntil(127 * time.Second)
		h.expectNone()
		if h.ln.HalfOpen() != 0 || h.w.Len() != 0 {
			t.Fatalf("half-open %d timers %d, want 0 0", h.ln.HalfOpen(), h.w.Len())
		}
	})
	t.Run("retransmitted SYN gets the SYN-ACK again", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		syn := h.peerSyn()
		h.send(syn)
		h.expect(flagsAre(FlagSYN | FlagACK))
		h.advance(300 * time.Millisecond)
		h.send(syn)
		h.expect(flagsAre(FlagSYN|FlagACK), seqIs(testISS), ackIs(peerISS+1))
	})
	t.Run("backlog full drops SYN", func(t *testing.T) {
		h := listen(t, ListenerConfig{Backlog: 1, DisableSynCookies: true}) // with them: TestSynCookies
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN | FlagACK))
		s := h.peerSyn()
		h.ln.HandleSegment(ID{Local: localAP, Remote: netip.MustParseAddrPort("198.18.0.3:80")}, &s)
		h.expectNone()
		if st := h.ln.Stats(); st.DropsBacklog != 1 {
			t.Fatalf("DropsBacklog: got %d, want 1", st.DropsBacklog)
		}
	})
	t.Run("ACK without connection gets RST", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		h.pack = 4242
		h.send(h.seg(FlagACK, nil))
		h.expect(flagsAre(FlagRST), seqIs(4242))
	})
	t.Run("RST in SYN-RECEIVED returns to LISTEN", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN | FlagACK))
		h.send(h.seg(FlagRST, nil))
		if h.ln.HalfOpen() != 0 || h.w.Len() != 0 {
			t.Fatalf("half-open %d timers %d, want 0 0", h.ln.HalfOpen(), h.w.Len())
		}
	})
	t.Run("bad ACK in SYN-RECEIVED gets RST", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN | FlagACK))
		h.pack = testISS + 7
		h.send(h.seg(FlagACK, nil))
		h.expect(flagsAre(FlagRST), seqIs(testISS+7))
		if h.ln.HalfOpen() != 1 {
			t.Fatalf("half-open: got %d, want 1", h.ln.HalfOpen())
		}
	})
	t.Run("refused by Accept", func(t *testing.T) {
		h := listen(t, ListenerConfig{Accept: func(*Endpoint) bool { return false }})
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN | FlagACK))
		h.pack = testISS + 1
		h.send(h.seg(FlagACK, nil))
		h.expect(flagsHave(FlagRST))
		if h.w.Len() != 0 {
			t.Fatalf("timers: got %d, want 0", h.w.Len())
		}
	})
}

func TestEstablished(t *testing.T) {
	t.Run("data out, ACK in", func(t *testing.T) {
		h := established(t, noTLPConfig()) // the ACK comes at 10 ms, after the PTO of 20 µs
		if n, err := h.ep.Write(data(3000)); n != 3000 || err != nil {
			t.Fatalf("Write: got %d, %v; want 3000, nil", n, err)
		}
		h.expect(seqIs(testISS+1), lenIs(1448), payloadIs(data(3000)[:1448]))
		h.expect(seqIs(testISS+1+1448), lenIs(1448))
		h.expect(seqIs(testISS+1+2896), lenIs(104))
		h.expectNone()
		h.advance(10 * time.Millisecond)
		h.ackUpTo(testISS + 1 + 3000)
		h.expectNone()
		wantSRTT := testTick + (10*time.Millisecond-testTick)/8 // RFC 6298 (2.3) after the handshake's sample of G
		if i := h.ep.Info(); i.Unacked != 0 || h.w.Len() != 0 || i.SRTT != wantSRTT {
			t.Fatalf("unacked %d timers %d srtt %v, want 0 0 %v", i.Unacked, h.w.Len(), i.SRTT, wantSRTT)
		}
	})
	t.Run("data in, Read, EOF after FIN", func(t *testing.T) {
		h := established(t, testConfig())
		h.sendData([]byte("hello"))
		if ev := h.takeEvents(); ev&EventReadable == 0 {
			t.Fatalf("events: got %v, want Readable", ev)
		}
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+5+1))
		h.wantState(StateCloseWait)
		buf := make([]byte, 100)
		n, err := h.ep.Read(buf)
		if string(buf[:n]) != "hello" || err != nil {
			t.Fatalf("Read: got %q, %v; want hello, nil", buf[:n], err)
		}
		if _, err := h.ep.Read(buf); err != io.EOF {
			t.Fatalf("Read: got %v, want EOF", err)
		}
	})
	t.Run("out-of-order data is ACKed at once with SACK, and reassembled", func(t *testing.T) {
		h := established(t, testConfig())
		d := data(300)
		base := h.pseq
		h.pseq = base + 100
		h.sendData(d[100:200])
		h.expect(flagsAre(FlagACK), ackIs(base), sackIs(SACKBlock{base + 100, base + 200}))
		h.pseq = base + 250
		h.sendData(d[250:300])
		h.expect(ackIs(base), sackIs(SACKBlock{base + 250, base + 300}, SACKBlock{base + 100, base + 200}))
		h.pseq = base
		h.sendData(d[:100])
		h.expect(ackIs(base+200), sackIs(SACKBlock{base + 250, base + 300})) // a hole filled: ACK now
		h.pseq = base + 200
		h.sendData(d[200:250])
		h.expect(ackIs(base+300), sackIs())
		buf := make([]byte, 400)
		n, _ := h.ep.Read(buf)
		if string(buf[:n]) != string(d) {
			t.Fatalf("Read: got %d bytes differing from the 300 sent", n)
		}
	})
	t.Run("RST in sequence resets", func(t *testing.T) {
		h := established(t, testConfig())
		h.send(h.seg(FlagRST, nil))
		h.wantState(StateClosed)
		h.wantErr(ErrConnectionReset)
		if _, err := h.ep.Read(make([]byte, 1)); !errors.Is(err, ErrConnectionReset) {
			t.Fatalf("Read: got %v, want ErrConnectionReset", err)
		}
		if _, err := h.ep.Write([]byte("x")); !errors.Is(err, ErrConnectionReset) {
			t.Fatalf("Write: got %v, want ErrConnectionReset", err)
		}
	})
	t.Run("RST in window but not exact gets a challenge ACK (RFC 5961 3.2)", func(t *testing.T) {
		h := established(t, testConfig())
		s := h.seg(FlagRST, nil)
		s.Seq += 10
		h.send(s)
		h.wantState(StateEstablished)
		h.expect(flagsAre(FlagACK), seqIs(testISS+1), ackIs(peerISS+1))
	})
	t.Run("RST out of window is dropped", func(t *testing.T) {
		h := established(t, testConfig())
		s := h.seg(FlagRST, nil)
		s.Seq += 1 << 30
		h.send(s)
		h.wantState(StateEstablished)
		h.expectNone()
	})
	t.Run("SYN gets a challenge ACK (RFC 5961 4.2)", func(t *testing.T) {
		h := established(t, testConfig())
		h.send(h.seg(FlagSYN, nil))
		h.wantState(StateEstablished)
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1))
	})
	t.Run("ACK of unsent data gets an ACK, is dropped", func(t *testing.T) {
		h := established(t, testConfig())
		h.pack = testISS + 100
		h.send(h.seg(FlagACK, []byte("x")))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1))
		if h.ep.Readable() != 0 {
			t.Fatal("data of a dropped segment was accepted")
		}
	})
	t.Run("segment without ACK is dropped", func(t *testing.T) {
		h := established(t, testConfig())
		h.send(h.seg(0, []byte("x")))
		h.expectNone()
		if h.ep.Readable() != 0 || h.ep.Info().DropsNoACK != 1 {
			t.Fatal("segment without ACK was not dropped")
		}
	})
	t.Run("out-of-window data gets an ACK", func(t *testing.T) {
		h := established(t, testConfig())
		s := h.seg(FlagACK, []byte("x"))
		s.Seq -= 10
		h.send(s)
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1))
	})
	t.Run("PAWS drops an old timestamp (RFC 7323 5.3)", func(t *testing.T) {
		h := established(t, testConfig())
		s := h.seg(FlagACK, []byte("x"))
		s.Options.TSVal = h.ptsVal - 1
		h.send(s)
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1))
		if h.ep.Readable() != 0 || h.ep.Info().DropsPAWS != 1 {
			t.Fatal("PAWS did not drop the segment")
		}
	})
	t.Run("PAWS lets a RST with an old timestamp through (RFC 7323 5.3 R1)", func(t *testing.T) {
		h := established(t, testConfig())
		s := h.seg(FlagRST, nil)
		s.Options.TSVal = h.ptsVal - 1
		h.send(s)
		h.wantState(StateClosed)
		if h.ep.Info().DropsPAWS != 0 {
			t.Fatal("PAWS dropped the RST")
		}
	})
	t.Run("Write before the handshake returns 0", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		if n, err := h.ep.Write([]byte("x")); n != 0 || err != nil {
			t.Fatalf("got %d, %v; want 0, nil", n, err)
		}
	})
	t.Run("send buffer bounds Write", func(t *testing.T) {
		cfg := testConfig()
		cfg.SendBuffer = 4000
		h := established(t, cfg)
		h.pwnd = 0
		if n, _ := h.ep.Write(data(5000)); n != 4000 {
			t.Fatalf("Write: got %d, want 4000", n)
		}
		if n, _ := h.ep.Write(data(10)); n != 0 {
			t.Fatalf("Write: got %d, want 0", n)
		}
	})
	t.Run("Abort sends RST", func(t *testing.T) {
		h := established(t, testConfig())
		h.ep.Abort()
		h.expect(flagsAre(FlagRST|FlagACK), seqIs(testISS+1), ackIs(peerISS+1), tsIs(true)) // as Linux's active reset
		h.wantState(StateClosed)
		if _, err := h.ep.Read(nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Read: got %v, want ErrClosed", err)
		}
	})
	t.Run("Close with unread data sends RST", func(t *testing.T) {
		h := established(t, testConfig())
		h.sendData([]byte("unread"))
		h.ep.Close()
		h.expect(flagsAre(FlagRST|FlagACK), ackIs(peerISS+1+6))
		h.wantState(StateClosed)
	})
}

func TestClosing(t *testing.T) {
	t.Run("active close: FIN-WAIT-1, FIN-WAIT-2, TIME-WAIT for 60s", func(t *testing.T) {
		h := established(t, testConfig())
		h.ep.CloseWrite()
		h.wantState(StateFinWait1)
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(testISS+1))
		if _, err := h.ep.Write([]byte("x")); !errors.Is(err, ErrWriteClosed) {
			t.Fatalf("Write: got %v, want ErrWriteClosed", err)
		}
		h.ackUpTo(testISS + 2)
		h.wantState(StateFinWait2)
		h.sendData([]byte("bye"))
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+1+3+1))
		h.wantState(StateTimeWait)
		start := h.now()
		h.advance(30 * time.Second)
		h.pseq = peerISS + 4
		h.send(h.seg(FlagACK|FlagFIN, nil)) // retransmitted FIN: ACK, restart 2MSL
		h.expect(flagsAre(FlagACK), ackIs(peerISS+5))
		h.expectNothingUntil(start + 90*time.Second)
		h.wantState(StateClosed)
		if ev := h.takeEvents(); ev&EventClosed == 0 {
			t.Fatalf("events: got %v, want Closed", ev)
		}
	})
	t.Run("FIN retransmitted at RTO", func(t *testing.T) {
		h := established(t, noTLPConfig())
		h.ep.CloseWrite()
		h.expect(flagsAre(FlagACK | FlagFIN))
		h.expectAt(200*time.Millisecond, flagsAre(FlagACK|FlagFIN), seqIs(testISS+1))
	})
	t.Run("FIN piggybacks on the last data", func(t *testing.T) {
		h := established(t, testConfig())
		h.pwnd = 0
		h.ackUpTo(testISS + 1)
		h.ep.Write([]byte("abc"))
		h.ep.CloseWrite()
		h.pwnd = 100
		h.ackUpTo(testISS + 1)
		h.expect(flagsAre(FlagACK|FlagPSH|FlagFIN), lenIs(3))
	})
	t.Run("passive close: CLOSE-WAIT, LAST-ACK, CLOSED", func(t *testing.T) {
		h := established(t, testConfig())
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+2))
		h.wantState(StateCloseWait)
		h.ep.Write([]byte("last"))
		h.expect(lenIs(4))
		h.ep.Close()
		h.wantState(StateLastAck)
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(testISS+5))
		h.ackUpTo(testISS + 6)
		h.wantState(StateClosed)
		if h.w.Len() != 0 {
			t.Fatalf("timers: got %d, want 0", h.w.Len())
		}
	})
	t.Run("simultaneous close: CLOSING, TIME-WAIT", func(t *testing.T) {
		h := established(t, testConfig())
		h.ep.CloseWrite()
		h.expect(flagsAre(FlagACK | FlagFIN))
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.wantState(StateClosing)
		h.expect(flagsAre(FlagACK), ackIs(peerISS+2))
		h.ackUpTo(testISS + 2)
		h.wantState(StateTimeWait)
	})
	t.Run("FIN-WAIT-2 timeout after Close", func(t *testing.T) {
		cfg := testConfig()
		cfg.FinWait2 = 10 * time.Second
		h := established(t, cfg)
		h.ep.Close()
		h.expect(flagsAre(FlagACK | FlagFIN))
		h.ackUpTo(testISS + 2)
		h.wantState(StateFinWait2)
		h.expectNothingUntil(10 * time.Second)
		h.wantState(StateClosed)
	})
	t.Run("FIN-WAIT-2 after CloseWrite has no timeout", func(t *testing.T) {
		cfg := testConfig()
		cfg.FinWait2 = 10 * time.Second
		h := established(t, cfg)
		h.ep.CloseWrite()
		h.expect(flagsAre(FlagACK | FlagFIN))
		h.ackUpTo(testISS + 2)
		h.advance(time.Hour)
		h.wantState(StateFinWait2)
	})
	t.Run("data after Close resets", func(t *testing.T) {
		h := established(t, testConfig())
		h.ep.Close()
		h.expect(flagsAre(FlagACK | FlagFIN))
		h.sendData([]byte("late"))
		h.expect(flagsHave(FlagRST))
		h.wantState(StateClosed)
	})
}

var _ = seqnum.Value(0)
