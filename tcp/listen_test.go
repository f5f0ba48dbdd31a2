package tcp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
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
		h.expect(flagsAre(FlagACK), ackIs(seq+6)) // the first data: quickack
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

// cookieSynAck sends the harness's peer SYN, with opts applied, to a listener
// and returns the SYN-ACK, which must carry a cookie: no state kept.
func (h *harness) cookieSynAck(opts ...func(*Segment)) Segment {
	h.t.Helper()
	syn := h.peerSyn()
	for _, f := range opts {
		f(&syn)
	}
	before := h.ln.Stats().SynCookiesSent
	h.send(syn)
	sa := h.expect(flagsAre(FlagSYN|FlagACK), ackIs(syn.Seq+1))
	if h.ln.Stats().SynCookiesSent != before+1 {
		h.t.Fatalf("SynCookiesSent: got %d, want %d", h.ln.Stats().SynCookiesSent, before+1)
	}
	h.pack = sa.Seq + 1
	return sa
}

// cookieAck sends the ACK of a cookie SYN-ACK, with payload, and returns the
// endpoint made from it (nil if none).
func (h *harness) cookieAck(payload []byte) *Endpoint {
	h.t.Helper()
	h.ep = nil
	h.send(h.seg(FlagACK, payload))
	return h.ep
}

func TestSynCookies(t *testing.T) {
	always := ListenerConfig{SynCookies: SynCookiesAlways}
	t.Run("SYN-ACK with a cookie; its ACK makes the connection, options kept", func(t *testing.T) {
		h := listen(t, always)
		sa := h.cookieSynAck()
		// RFC 4987 3.6 and Linux's cookie_init_timestamp: the options the
		// peer sent in our TSval's low 6 bits: window shift 7, SACK.
		for _, c := range []check{mssIs(1460), wsIs(5), sackPermIs(true), tsEcrIs(777), windowIs(65535)} {
			if err := c(&sa); err != nil {
				t.Fatal(err)
			}
		}
		if got := sa.Options.TSVal & cookieTSMask; got != 7|cookieTSSACK {
			t.Fatalf("TSval's low bits: got %#x, want %#x", got, 7|cookieTSSACK)
		}
		if h.ln.HalfOpen() != 0 || h.w.Len() != 0 {
			t.Fatalf("half-open %d timers %d, want 0 0: a cookie keeps no state", h.ln.HalfOpen(), h.w.Len())
		}
		h.advance(10 * time.Millisecond)
		ep := h.cookieAck([]byte("hi"))
		if ep == nil {
			t.Fatal("no connection accepted from the cookie's ACK")
		}
		h.wantState(StateEstablished)
		i := ep.Info()
		if !i.Timestamps || !i.SACK || i.SndWScale != 7 || i.RcvWScale != 5 || i.SndMSS != 1460-12 {
			t.Fatalf("Info: ts %v sack %v ws %d/%d mss %d, want true true 7/5 1448", i.Timestamps, i.SACK, i.SndWScale, i.RcvWScale, i.SndMSS)
		}
		if i.SndWnd != 65535<<7 {
			t.Fatalf("SndWnd: got %d, want %d (the ACK's window, scaled)", i.SndWnd, 65535<<7)
		}
		buf := make([]byte, 10)
		if n, _ := ep.Read(buf); string(buf[:n]) != "hi" {
			t.Fatalf("Read: got %q, want %q", buf[:n], "hi")
		}
		if st := h.ln.Stats(); st.SynCookiesSent != 1 || st.SynCookiesValid != 1 || st.Accepted != 1 || st.SynCookiesInvalid != 0 {
			t.Fatalf("stats %+v: want 1 cookie sent, 1 valid, 1 accepted", st)
		}
		h.expect(flagsAre(FlagACK), ackIs(peerISS+3)) // Read opened the window: an update
		ep.Write([]byte("yo"))
		s := h.expect(flagsAre(FlagACK|FlagPSH), seqIs(sa.Seq+1), ackIs(peerISS+3), payloadIs([]byte("yo")), tsEcrIs(777))
		if tsBefore(s.Options.TSVal, sa.Options.TSVal) {
			t.Fatalf("TSval %d before the SYN-ACK's %d: our clock went back", s.Options.TSVal, sa.Options.TSVal)
		}
	})
	t.Run("the MSS is one of Linux's msstab", func(t *testing.T) {
		for _, tc := range []struct {
			peer int // 0: no MSS option
			want int
		}{{0, 536}, {500, 536}, {1299, 536}, {1300, 1300}, {1439, 1300}, {1440, 1440}, {1460, 1460}, {9000, 1460}} {
			h := listen(t, always)
			h.cookieSynAck(func(s *Segment) { s.Options.HasMSS, s.Options.MSS = tc.peer > 0, uint16(tc.peer) })
			ep := h.cookieAck(nil)
			if ep == nil {
				t.Fatalf("peer MSS %d: no connection", tc.peer)
			}
			if got := ep.Info().SndMSS; got != tc.want-12 {
				t.Errorf("peer MSS %d: SndMSS got %d, want %d", tc.peer, got, tc.want-12)
			}
		}
	})
	t.Run("without timestamps, the MSS alone", func(t *testing.T) {
		h := listen(t, always)
		h.pts = false
		sa := h.cookieSynAck()
		for _, c := range []check{mssIs(1460), wsIs(-1), sackPermIs(false), tsIs(false)} {
			if err := c(&sa); err != nil {
				t.Fatal(err)
			}
		}
		ep := h.cookieAck(nil)
		if ep == nil {
			t.Fatal("no connection")
		}
		if i := ep.Info(); i.Timestamps || i.SACK || i.SndWScale != -1 || i.SndMSS != 1460 {
			t.Fatalf("Info: ts %v sack %v ws %d mss %d, want false false -1 1460", i.Timestamps, i.SACK, i.SndWScale, i.SndMSS)
		}
	})
	t.Run("timestamps without window scale and SACK", func(t *testing.T) {
		h := listen(t, always)
		sa := h.cookieSynAck(noWS, noSACK)
		if got := sa.Options.TSVal & cookieTSMask; got != cookieNoWS {
			t.Fatalf("TSval's low bits: got %#x, want %#x", got, cookieNoWS)
		}
		ep := h.cookieAck(nil)
		if i := ep.Info(); !i.Timestamps || i.SACK || i.SndWScale != -1 {
			t.Fatalf("Info: ts %v sack %v ws %d, want true false -1", i.Timestamps, i.SACK, i.SndWScale)
		}
	})
	t.Run("valid for two periods of the counter", func(t *testing.T) {
		for _, tc := range []struct {
			at    time.Duration
			valid bool
		}{{2*cookiePeriod - time.Millisecond, true}, {2 * cookiePeriod, false}} {
			h := listen(t, always)
			h.advanceTo(10 * time.Second) // counter 0
			h.cookieSynAck()
			h.advanceTo(tc.at)
			ep := h.cookieAck(nil)
			if (ep != nil) != tc.valid {
				t.Fatalf("ACK at %v: connection %v, want %v", tc.at, ep != nil, tc.valid)
			}
			if tc.valid {
				continue
			}
			h.expect(flagsAre(FlagRST), seqIs(h.pack)) // RFC 9293 3.10.7.2
			if st := h.ln.Stats(); st.SynCookiesInvalid != 1 || st.SynCookiesValid != 0 {
				t.Fatalf("stats %+v: want 1 invalid", st)
			}
		}
	})
	t.Run("an ACK that is not the cookie's: RST, counted", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			seq, ack seqnum.Size
		}{{"ACK + 4", 0, 4}, {"ACK - 4", 0, ^seqnum.Size(3)}, {"SEQ + 4", 4, 0}, {"SEQ - 4", ^seqnum.Size(3), 0}, {"ACK + 2^20", 0, 1 << 20}} {
			// (An offset of 1 to 3 may land on another MSS index: Linux's
			// cookie has the same 2 bits of slack.)
			h := listen(t, always)
			h.cookieSynAck()
			s := h.seg(FlagACK, nil)
			s.Seq, s.Ack = s.Seq.Add(tc.seq), s.Ack.Add(tc.ack)
			h.ln.HandleSegment(testID, &s)
			h.expect(flagsAre(FlagRST), seqIs(s.Ack))
			if st := h.ln.Stats(); h.ep != nil || st.SynCookiesInvalid != 1 || st.Accepted != 0 {
				t.Fatalf("%s: connection %v, stats %+v: want none, 1 invalid", tc.name, h.ep != nil, st)
			}
		}
	})
	t.Run("no cookie out: an ACK gets a RST, not checked", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		h.pack = 4242
		h.send(h.seg(FlagACK, nil))
		h.expect(flagsAre(FlagRST), seqIs(4242))
		if st := h.ln.Stats(); st.SynCookiesInvalid != 0 {
			t.Fatalf("SynCookiesInvalid: got %d, want 0", st.SynCookiesInvalid)
		}
	})
	t.Run("each listener has its own secret", func(t *testing.T) {
		a, b := listen(t, always), listen(t, always)
		sa, sb := a.cookieSynAck(), b.cookieSynAck()
		if sa.Seq == sb.Seq {
			t.Fatalf("both listeners sent cookie %d for the same SYN", sa.Seq)
		}
		b.pack = sa.Seq + 1 // a's cookie, returned to b
		if b.cookieAck(nil) != nil {
			t.Fatal("listener b accepted listener a's cookie")
		}
	})
	t.Run("accept queue full: the ACK is dropped; the next one connects", func(t *testing.T) {
		full := true
		h := listen(t, ListenerConfig{SynCookies: SynCookiesAlways, QueueFull: func() bool { return full }})
		h.cookieSynAck()
		if h.cookieAck([]byte("a")) != nil {
			t.Fatal("accepted while the queue is full")
		}
		h.expectNone()
		full = false
		h.pseq-- // the peer sends its data again
		if h.cookieAck([]byte("a")) == nil {
			t.Fatal("not accepted once the queue has room")
		}
		if st := h.ln.Stats(); st.DropsAcceptQueue != 1 || st.SynCookiesValid != 2 || st.Accepted != 1 {
			t.Fatalf("stats %+v: want 1 drop, 2 valid, 1 accepted", st)
		}
	})
	t.Run("refused by Accept: RST", func(t *testing.T) {
		h := listen(t, ListenerConfig{SynCookies: SynCookiesAlways, Accept: func(*Endpoint) bool { return false }})
		sa := h.cookieSynAck()
		h.send(h.seg(FlagACK, nil))
		h.expect(flagsAre(FlagRST), seqIs(sa.Seq+1))
		if st := h.ln.Stats(); st.Refused != 1 || h.w.Len() != 0 {
			t.Fatalf("refused %d timers %d, want 1 0", st.Refused, h.w.Len())
		}
	})
}

// spoofed returns the ID of the n-th spoofed SYN's source.
func spoofed(n int) ID {
	a := netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
	return ID{Local: localAP, Remote: netip.AddrPortFrom(a, uint16(1024+n%50000))}
}

// flood sends n spoofed SYNs to the listener, none of which is ever ACKed.
func (h *harness) flood(from, n int) {
	for i := from; i < from+n; i++ {
		s := h.peerSyn()
		s.Seq = seqnum.Value(i * 7919)
		h.ln.HandleSegment(spoofed(i), &s)
	}
}

// drain drops what the listener sent to spoofed addresses and returns the
// rest.
func (h *harness) drain() (spoofedN int, rest []Segment) {
	for i, s := range h.out.segs {
		if h.out.ids[i] == testID {
			rest = append(rest, s)
		} else {
			spoofedN++
		}
	}
	h.out.segs, h.out.ids = h.out.segs[:0], h.out.ids[:0]
	return spoofedN, rest
}

// stepTo advances the clock to each instant in turn, as a loop that wakes on
// time would (one jump would make every resend leave at the end of it).
func (h *harness) stepTo(ts ...time.Duration) {
	h.t.Helper()
	for _, t := range ts {
		h.advanceTo(t)
	}
}

func TestSynAckRetries(t *testing.T) {
	t.Run("default: resent at 1, 3, 7, 15, 31 s, dropped at 63 s (Linux tcp_synack_retries)", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN | FlagACK))
		for _, at := range []time.Duration{1, 3, 7, 15, 31} {
			h.expectAt(at*time.Second, flagsAre(FlagSYN|FlagACK), seqIs(testISS))
		}
		h.expectNothingUntil(63 * time.Second)
		h.expectNone()
		if st := h.ln.Stats(); h.ln.HalfOpen() != 0 || h.w.Len() != 0 || st.HalfOpenTimeouts != 1 {
			t.Fatalf("half-open %d timers %d timeouts %d, want 0 0 1", h.ln.HalfOpen(), h.w.Len(), st.HalfOpenTimeouts)
		}
	})
	t.Run("more than half the table taken: resent at 1, 3 s, dropped at 7 s", func(t *testing.T) {
		h := listen(t, ListenerConfig{Backlog: 16})
		h.flood(0, 9) // 9 of 16: more than half
		if n, _ := h.drain(); n != 9 {
			t.Fatalf("SYN-ACKs: got %d, want 9", n)
		}
		for _, at := range []time.Duration{1, 3} {
			h.advanceTo(at*time.Second - testTick)
			if n, _ := h.drain(); n != 0 {
				t.Fatalf("at %v: %d SYN-ACKs, want none yet", h.now(), n)
			}
			h.advanceTo(at * time.Second)
			if n, _ := h.drain(); n != 9 {
				t.Fatalf("at %v: %d SYN-ACKs, want 9", h.now(), n)
			}
		}
		h.advanceTo(7*time.Second - testTick)
		if h.ln.HalfOpen() != 9 {
			t.Fatalf("at %v: half-open %d, want 9", h.now(), h.ln.HalfOpen())
		}
		h.advanceTo(7 * time.Second)
		if n, _ := h.drain(); n != 0 || h.ln.HalfOpen() != 0 || h.w.Len() != 0 {
			t.Fatalf("at 7s: %d SYN-ACKs, half-open %d, timers %d; want 0 0 0", n, h.ln.HalfOpen(), h.w.Len())
		}
	})
	for _, tc := range []struct {
		name         string
		backlog, use int
	}{
		{"half the table: the full schedule", 16, 8},
		{"a small table counts as 8: 3 of 4 is no pressure", 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := listen(t, ListenerConfig{Backlog: tc.backlog})
			h.flood(0, tc.use)
			h.stepTo(time.Second, 3*time.Second, 7*time.Second)
			if n, _ := h.drain(); n != tc.use*4 || h.ln.HalfOpen() != tc.use {
				t.Fatalf("by 7s: %d segments, half-open %d; want %d (SYN-ACK and 3 resends each), %d", n, h.ln.HalfOpen(), tc.use*4, tc.use)
			}
		})
	}
}

func TestSynFlood(t *testing.T) {
	const backlog, n = 16, 5000
	t.Run("cookies: a legitimate handshake completes during the flood", func(t *testing.T) {
		h := listen(t, ListenerConfig{Backlog: backlog})
		h.flood(0, n)
		if st := h.ln.Stats(); h.ln.HalfOpen() != backlog || h.w.Len() != backlog || st.SynCookiesSent != n-backlog || st.DropsBacklog != 0 {
			t.Fatalf("half-open %d timers %d stats %+v: want %d half-open, %d timers, %d cookies, no drops", h.ln.HalfOpen(), h.w.Len(), st, backlog, backlog, n-backlog)
		}
		if got, _ := h.drain(); got != n {
			t.Fatalf("SYN-ACKs to the spoofed addresses: got %d, want %d", got, n)
		}
		h.advance(500 * time.Millisecond)
		h.flood(n, n) // the flood goes on
		h.send(h.peerSyn())
		h.flood(2*n, 100)
		_, rest := h.drain()
		if len(rest) != 1 || rest[0].Flags != FlagSYN|FlagACK {
			t.Fatalf("to the legitimate peer: %v, want one SYN-ACK", rest)
		}
		h.pack = rest[0].Seq + 1
		h.lastTS = rest[0].Options.TSVal
		h.advance(time.Millisecond)
		ep := h.cookieAck([]byte("GET /"))
		if ep == nil || ep.State() != StateEstablished {
			t.Fatal("the legitimate connection was not accepted during the flood")
		}
		if i := ep.Info(); !i.Timestamps || !i.SACK || i.SndWScale != 7 {
			t.Fatalf("Info: ts %v sack %v ws %d, want the SYN's options kept", i.Timestamps, i.SACK, i.SndWScale)
		}
		if h.ln.HalfOpen() > backlog {
			t.Fatalf("half-open: got %d, want at most %d", h.ln.HalfOpen(), backlog)
		}
		// The spoofed half-open connections are gone at 7 s (the table is
		// full: at most 2 SYN-ACK retries).
		h.stepTo(time.Second, 3*time.Second, 7*time.Second)
		if st := h.ln.Stats(); h.ln.HalfOpen() != 0 || st.HalfOpenTimeouts != backlog {
			t.Fatalf("at 7s: half-open %d, timeouts %d; want 0, %d", h.ln.HalfOpen(), st.HalfOpenTimeouts, backlog)
		}
	})
	t.Run("no cookies: SYNs dropped, the table frees itself within 7 s", func(t *testing.T) {
		h := listen(t, ListenerConfig{Backlog: backlog, DisableSynCookies: true})
		h.flood(0, n)
		if st := h.ln.Stats(); h.ln.HalfOpen() != backlog || st.DropsBacklog != n-backlog || st.SynCookiesSent != 0 {
			t.Fatalf("half-open %d stats %+v: want %d, %d backlog drops", h.ln.HalfOpen(), st, backlog, n-backlog)
		}
		h.send(h.peerSyn())
		if _, rest := h.drain(); len(rest) != 0 {
			t.Fatalf("to the legitimate peer: %v, want nothing (dropped)", rest)
		}
		h.stepTo(time.Second, 3*time.Second, 7*time.Second)
		h.drain()
		h.pseq-- // the peer's SYN again (Linux resends it at 1, 3, 7 s)
		h.send(h.peerSyn())
		h.expect(flagsAre(FlagSYN|FlagACK), seqIs(testISS), ackIs(peerISS+1))
		h.pack = testISS + 1
		h.send(h.seg(FlagACK, nil))
		if h.ep == nil {
			t.Fatal("not accepted after the flood's half-open connections expired")
		}
	})
}

// badFlagSets are the flag combinations dropped unanswered in every state.
var badFlagSets = []Flags{
	FlagSYN | FlagFIN,
	FlagSYN | FlagRST,
	FlagSYN | FlagFIN | FlagPSH | FlagURG, // nmap's fingerprinting probe
	FlagSYN | FlagRST | FlagACK,
	FlagSYN | FlagFIN | FlagACK,
}

func TestBadFlags(t *testing.T) {
	t.Run("LISTEN: dropped, counted, no connection, no cookie", func(t *testing.T) {
		for _, cfg := range []ListenerConfig{{}, {SynCookies: SynCookiesAlways}} {
			h := listen(t, cfg)
			for _, f := range badFlagSets {
				s := h.peerSyn()
				s.Flags = f
				h.send(s)
			}
			h.expectNone()
			if st := h.ln.Stats(); st.DropsBadFlags != uint64(len(badFlagSets)) || st.SYNsIn != 0 || st.SynCookiesSent != 0 || h.ln.HalfOpen() != 0 {
				t.Fatalf("stats %+v half-open %d: want %d bad-flag drops and nothing else", st, h.ln.HalfOpen(), len(badFlagSets))
			}
		}
	})
	t.Run("SYN-RECEIVED: the listener drops them before the half-open connection", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		syn := h.peerSyn()
		h.send(syn)
		h.expect(flagsAre(FlagSYN | FlagACK))
		for _, f := range badFlagSets {
			s := syn
			s.Flags = f
			h.ln.HandleSegment(testID, &s) // a SYN alone would get the SYN-ACK again
		}
		h.expectNone()
		if st := h.ln.Stats(); st.DropsBadFlags != uint64(len(badFlagSets)) || h.ln.HalfOpen() != 1 {
			t.Fatalf("bad-flag drops %d half-open %d, want %d 1", st.DropsBadFlags, h.ln.HalfOpen(), len(badFlagSets))
		}
	})
	t.Run("SYN-SENT: a SYN-ACK with FIN or RST is dropped", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		for _, f := range []Flags{FlagFIN, FlagRST} {
			s := h.peerSynAck()
			s.Flags |= f
			h.ep.HandleSegment(&s)
		}
		h.expectNone()
		h.wantState(StateSynSent)
		if i := h.ep.Info(); i.DropsBadFlags != 2 || i.ResetsReceived != 0 {
			t.Fatalf("bad-flag drops %d resets %d, want 2 0", i.DropsBadFlags, i.ResetsReceived)
		}
	})
	t.Run("ESTABLISHED: no challenge ACK, no reset", func(t *testing.T) {
		h := established(t, testConfig())
		for _, f := range badFlagSets {
			h.ep.HandleSegment(new(h.seg(f, nil))) // at RCV.NXT: a RST there would close
		}
		h.expectNone()
		h.wantState(StateEstablished)
		if i := h.ep.Info(); i.DropsBadFlags != uint64(len(badFlagSets)) || i.ChallengeACKs != 0 {
			t.Fatalf("bad-flag drops %d challenge ACKs %d, want %d 0", i.DropsBadFlags, i.ChallengeACKs, len(badFlagSets))
		}
	})
	t.Run("TIME-WAIT: no reuse, no ACK", func(t *testing.T) {
		h := passiveTimeWait(t, true)
		s := h.peerSyn()
		s.Flags |= FlagFIN
		s.Seq = peerISS + 100000
		s.Options.TSVal += 1000
		if h.ln.ReuseTimeWait(h.ep, &s) {
			t.Fatal("ReuseTimeWait took a SYN+FIN")
		}
		h.ep.HandleSegment(&s)
		h.expectNone()
		h.wantState(StateTimeWait)
		if i := h.ep.Info(); i.DropsBadFlags != 1 {
			t.Fatalf("bad-flag drops %d, want 1", i.DropsBadFlags)
		}
	})
}

// TestDropCounters: the drop paths that had no counter of their own.
func TestDropCounters(t *testing.T) {
	t.Run("SYN-SENT: neither SYN nor RST", func(t *testing.T) {
		h := newHarness(t)
		h.dial(testConfig())
		h.pack = testISS + 1
		h.send(h.seg(FlagACK, nil))
		h.expectNone()
		if i := h.ep.Info(); i.DropsNoSYN != 1 || i.DropsNoACK != 0 {
			t.Fatalf("DropsNoSYN %d DropsNoACK %d, want 1 0", i.DropsNoSYN, i.DropsNoACK)
		}
	})
	t.Run("data after the peer's FIN", func(t *testing.T) {
		h := established(t, noTLPConfig())
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.expect(flagsAre(FlagACK), ackIs(peerISS+2))
		h.wantState(StateCloseWait)
		h.pseq = peerISS + 2
		h.send(h.seg(FlagACK, []byte("late")))
		if i := h.ep.Info(); i.DropsDataAfterFIN != 1 || h.ep.Readable() != 0 {
			t.Fatalf("DropsDataAfterFIN %d readable %d, want 1 0", i.DropsDataAfterFIN, h.ep.Readable())
		}
	})
	t.Run("LISTEN: RST, and neither SYN nor ACK", func(t *testing.T) {
		h := listen(t, ListenerConfig{})
		h.send(h.seg(FlagRST, nil))
		h.send(h.seg(FlagFIN, nil))
		h.send(h.seg(0, nil))
		h.expectNone()
		if st := h.ln.Stats(); st.DropsRST != 1 || st.DropsOther != 2 {
			t.Fatalf("DropsRST %d DropsOther %d, want 1 2", st.DropsRST, st.DropsOther)
		}
	})
}
