package tcp

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// A back-to-back pair: two endpoints on one wheel, a link between them with a
// fixed one-way delay and a drop filter, all on the manual clock.

type inflightPkt struct {
	at   time.Duration
	to   ID // the receiver's view
	seg  Segment
	from int
}

type link struct {
	t      *testing.T
	clk    *timer.ManualClock
	w      *timer.Wheel
	delay  time.Duration
	queue  []inflightPkt
	drop   func(from int, n int, seg *Segment) bool // n counts segments from that side
	onSend func(from int, seg *Segment)             // sees every segment before drop
	sent   [2]int
	drops  int
	// tso counts the TSO segments each side sent (Config.GSOMax), which
	// Send cuts into their packets as an Output must (Segment.GSOPiece).
	tso [2]int
	// wire, when set, sees every packet sent, before drop; before, when
	// set, runs before each step.
	wire   func(from int, seg *Segment)
	before func()
	// toServer, when set, is offered each segment for the server side
	// first (as a stack's demultiplexer offers a SYN to a listener's
	// TIME-WAIT reuse), and reports whether it took it.
	toServer func(seg *Segment) bool
	client   *Endpoint
	server   *Endpoint
	ln       *Listener
}

type linkOut struct {
	l    *link
	side int
}

func (o linkOut) Send(id ID, seg *Segment) {
	if k := seg.GSOPieces(); k > 1 {
		o.l.tso[o.side]++
		for i := range k {
			p := seg.GSOPiece(i)
			o.send(id, &p)
		}
		return
	}
	o.send(id, seg)
}

func (o linkOut) send(id ID, seg *Segment) {
	l := o.l
	if l.wire != nil {
		l.wire(o.side, seg)
	}
	l.sent[o.side]++
	s := *seg
	s.Payload = append([]byte(nil), seg.Payload...)
	if l.onSend != nil {
		l.onSend(o.side, &s)
	}
	if l.drop != nil && l.drop(o.side, l.sent[o.side], &s) {
		l.drops++
		return
	}
	l.queue = append(l.queue, inflightPkt{at: l.w.Now() + l.delay, to: id.Reverse(), seg: s, from: o.side})
}

func newLink(t *testing.T, delay time.Duration) *link {
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return &link{t: t, clk: clk, w: w, delay: delay}
}

// open puts a listener configured by lcfg on the server side of the link (its
// Accept, if unset, makes the accepted endpoint l.server) and dials it from the
// client side with ccfg; it returns the client.
func (l *link) open(t *testing.T, lcfg ListenerConfig, ccfg Config) *Endpoint {
	t.Helper()
	if lcfg.Accept == nil {
		lcfg.Accept = func(ep *Endpoint) bool { l.server = ep; return true }
	}
	ln, err := NewListener(OnWheel(l.w), linkOut{l, 1}, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	l.ln = ln
	c, err := Dial(OnWheel(l.w), linkOut{l, 0}, testID, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	l.client = c
	return c
}

// step delivers the next due packet or fires the next timer, advancing the
// clock to whichever comes first. It reports false when nothing is left.
func (l *link) step() bool {
	if l.before != nil {
		l.before()
	}
	next, ok := l.w.NextDeadline()
	if len(l.queue) > 0 && (!ok || l.queue[0].at <= next) {
		p := l.queue[0]
		l.queue = l.queue[1:]
		l.w.Advance(l.clk.Set(p.at))
		if p.from == 0 {
			if l.toServer != nil && l.toServer(&p.seg) {
				return true
			}
			if l.server != nil {
				l.server.HandleSegment(&p.seg)
			} else {
				l.ln.HandleSegment(p.to, &p.seg)
			}
		} else {
			l.client.HandleSegment(&p.seg)
		}
		return true
	}
	if !ok {
		return false
	}
	l.w.Advance(l.clk.Set(next))
	return true
}

// randomBytes returns n bytes from a generator seeded with seed.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestEndToEnd(t *testing.T) {
	const size = 1 << 20
	payload := randomBytes(size, 1)
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		drop func(from, n int, seg *Segment) bool
	}{
		{"clean", nil, nil},
		{"lose the SYN and the SYN-ACK", nil, func(from, n int, s *Segment) bool { return n == 1 }},
		{"lose every 50th data segment", nil, func(from, n int, s *Segment) bool { return from == 0 && n%50 == 0 }},
		{"lose a burst", nil, func(from, n int, s *Segment) bool { return from == 0 && n >= 100 && n < 110 }},
		{"lose ACKs too", nil, func(from, n int, s *Segment) bool { return n%37 == 0 }},
		{"random 2% both ways", nil, func() func(int, int, *Segment) bool {
			r := rand.New(rand.NewPCG(3, 4))
			return func(int, int, *Segment) bool { return r.IntN(100) < 2 }
		}()},
		{"no SACK, no timestamps, 2%", func(c *Config) { c.DisableSACK, c.DisableTimestamps = true, true }, func() func(int, int, *Segment) bool {
			r := rand.New(rand.NewPCG(5, 6))
			return func(int, int, *Segment) bool { return r.IntN(100) < 2 }
		}()},
		{"small buffers, no window scale", func(c *Config) { c.DisableWindowScale, c.RecvBuffer, c.SendBuffer = true, 20000, 10000 }, func(from, n int, s *Segment) bool { return from == 0 && n%23 == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) { transfer(t, payload, tc.cfg, tc.drop) })
	}
}

// transfer sends payload from a dialled endpoint to an accepted one over a
// 5 ms link that drops what drop says, closes both, and checks the result.
func transfer(t *testing.T, payload []byte, cfgf func(*Config), drop func(from, n int, seg *Segment) bool) {
	t.Helper()
	runTransfer(t, payload, 5*time.Millisecond, cfgf, drop)
}

// xferResult is what runTransfer measured of the client's data segments.
type xferResult struct {
	dataLost  int           // client data segments the link dropped
	rtx       int           // client data segments sent again
	rtxAcked  int           // of them, data the receiver had already cumulatively acknowledged
	rtxSndUna int           // of them, data below the sender's own SND.UNA
	doneAt    time.Duration // when the receiver had read all the data and the FIN
	info      Info
}

func runTransfer(t *testing.T, payload []byte, delay time.Duration, cfgf func(*Config), drop func(from, n int, seg *Segment) bool) xferResult {
	t.Helper()
	return runTransferOn(t, newLink(t, delay), payload, cfgf, drop)
}

// runTransferOn is runTransfer on the link l.
func runTransferOn(t *testing.T, l *link, payload []byte, cfgf func(*Config), drop func(from, n int, seg *Segment) bool) xferResult {
	t.Helper()
	var res xferResult
	size := len(payload)
	var maxEnd seqnum.Value
	started := false
	l.onSend = func(from int, s *Segment) {
		if from != 0 || len(s.Payload) == 0 {
			return
		}
		end := s.Seq.Add(seqnum.Size(len(s.Payload)))
		if !started {
			maxEnd, started = end, true
			return
		}
		if s.Seq.LessThan(maxEnd) {
			res.rtx++
			if l.server != nil && end.LessThanEq(l.server.rcv.nxt) {
				res.rtxAcked++
			}
			if end.LessThanEq(l.client.snd.una) {
				res.rtxSndUna++
			}
		}
		if maxEnd.LessThan(end) {
			maxEnd = end
		}
	}
	l.drop = func(from, n int, s *Segment) bool {
		if drop == nil || !drop(from, n, s) {
			return false
		}
		if from == 0 && len(s.Payload) > 0 {
			res.dataLost++
		}
		return true
	}
	// wraps; the TSvals of two runs the same (TSOffsetISS)
	cfg := Config{ISN: func(ID, time.Duration) seqnum.Value { return 0xfffff000 }, TSOffset: TSOffsetISS}
	if cfgf != nil {
		cfgf(&cfg)
	}
	lcfg := cfg
	lcfg.ISN = func(ID, time.Duration) seqnum.Value { return 42 }
	c := l.open(t, ListenerConfig{Endpoint: lcfg}, cfg)
	var got bytes.Buffer
	written, eof, closed := 0, false, false
	buf := make([]byte, 70000)
	for steps := 0; steps < 5_000_000; steps++ {
		if c.State() == StateEstablished && written < size {
			n, err := c.Write(payload[written:])
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			written += n
			if written == size {
				c.Close()
			}
		}
		if s := l.server; s != nil && !eof {
			for {
				n, err := s.Read(buf)
				got.Write(buf[:n])
				if err == io.EOF {
					eof = true
					res.doneAt = l.clk.Now()
					s.Close()
					break
				}
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if n == 0 {
					break
				}
			}
		}
		if !l.step() {
			closed = true
			break
		}
	}
	if !closed {
		t.Fatalf("did not finish: client %v, server %v, %d bytes received, at %v", c.State(), l.server.State(), got.Len(), l.clk.Now())
	}
	if got.Len() != size || !bytes.Equal(got.Bytes(), payload) {
		t.Fatalf("received %d bytes, want %d intact", got.Len(), size)
	}
	if c.State() != StateClosed || l.server.State() != StateClosed || c.Err() != nil || l.server.Err() != nil {
		t.Fatalf("final: client %v %v, server %v %v; want CLOSED without error", c.State(), c.Err(), l.server.State(), l.server.Err())
	}
	if l.w.Len() != 0 {
		t.Fatalf("timers left: %d", l.w.Len())
	}
	ci := c.Info()
	res.info = ci
	t.Logf("%v: done at %v (data in %v), %d drops (%d data), client: %d segs out, %d retransmits (%d RTO, %d fast of which %d RACK, %d TLP; %d of data the receiver had acknowledged), srtt %v",
		t.Name(), l.clk.Now(), res.doneAt, l.drops, res.dataLost, ci.SegsOut, ci.SegsRetransmitted, ci.RTOEvents, ci.FastRetransmits, ci.RACKRetransmits, ci.TLPProbes, res.rtxAcked, ci.SRTT)
	return res
}

func TestEndToEndRandomLoss(t *testing.T) {
	payload := data(256 << 10)
	for seed := range uint64(20) {
		for _, loss := range []int{5, 15} {
			t.Run(fmt.Sprintf("seed %d loss %d%%", seed, loss), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(loss)))
				transfer(t, payload, func(c *Config) { c.DisableSACK = seed%2 == 1 }, func(int, int, *Segment) bool { return r.IntN(100) < loss })
			})
		}
	}
}

// TestDataAfterPeerFIN: the client half-closes first; the server then writes
// more than one window and closes, so most of its data is still queued when it
// enters LAST-ACK and must go out as ACKs open the window.
func TestDataAfterPeerFIN(t *testing.T) {
	payload := data(200 << 10)
	l := newLink(t, time.Millisecond)
	c := l.open(t, ListenerConfig{}, Config{})
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	halfClosed, serverDone, eof := false, false, false
	for steps := 0; steps < 1_000_000 && l.step(); steps++ {
		if !halfClosed && c.State() == StateEstablished {
			c.CloseWrite()
			halfClosed = true
		}
		if s := l.server; s != nil && !serverDone && s.State() == StateCloseWait {
			if n, err := s.Write(payload); err != nil || n != len(payload) {
				t.Fatalf("server Write = %d, %v; want %d", n, err, len(payload))
			}
			s.Close()
			if s.State() != StateLastAck {
				t.Fatalf("server in %v after Close, want LAST-ACK", s.State())
			}
			serverDone = true
		}
		for !eof {
			n, err := c.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				eof = true
			} else if err != nil {
				t.Fatalf("client Read: %v", err)
			}
			if n == 0 {
				break
			}
		}
	}
	if !eof || !bytes.Equal(got.Bytes(), payload) {
		t.Fatalf("client got %d bytes (eof %v), want %d intact; server %v", got.Len(), eof, len(payload), l.server.State())
	}
	if l.server.State() != StateClosed {
		t.Fatalf("server ends in %v, want CLOSED", l.server.State())
	}
}

// TestTailLossRecovery: over a 0.2 ms link, the last data segment and the FIN
// are lost. RACK-TLP recovers within a few SRTTs (the target: 15 ms)
// when two segments are in flight; without it the RTO does, after MinRTO (200
// ms). When the FIN rides on the last data segment, that segment is alone in
// flight once the rest is ACKed, and its PTO is 2*SRTT + TLP.max_ack_delay
// (RFC 8985 7.2; Linux adds TCP_RTO_MIN when packets_out == 1, whatever the
// segment carries): past the RTO, so the RTO recovers it, as on Linux.
func TestTailLossRecovery(t *testing.T) {
	const size = 20000
	for _, tc := range []struct {
		name       string
		disable    bool
		separate   bool // the FIN in a segment of its own
		within     time.Duration
		notBefore  time.Duration
		wantProbes uint64
		byRTO      bool // recovered by the RTO, RACK-TLP on or not
	}{
		{"RACK-TLP, the FIN on the last data segment: alone in flight, the probe capped at the RTO", false, false, time.Second, DefaultMinRTO - 2*testTick, 1, true},
		{"RACK-TLP, the last data segment and the FIN apart", false, true, 15 * time.Millisecond, 0, 1, false},
		{"RTO alone, the last data segment and the FIN apart", true, true, time.Second, DefaultMinRTO, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLink(t, 200*time.Microsecond)
			payload := data(size)
			var lostAt time.Duration
			var dataLost, finLost bool
			l.drop = func(from, n int, s *Segment) bool {
				if from != 0 {
					return false
				}
				end := s.Seq.Add(seqnum.Size(len(s.Payload)))
				last := len(s.Payload) > 0 && end == testISS+1+size && !dataLost
				fin := s.Flags&FlagFIN != 0 && !finLost
				if last || fin {
					dataLost = dataLost || last
					finLost = finLost || fin
					if lostAt == 0 {
						lostAt = l.w.Now()
					}
					return true
				}
				return false
			}
			cfg := Config{ISN: func(ID, time.Duration) seqnum.Value { return testISS }, DisableRACKTLP: tc.disable}
			c := l.open(t, ListenerConfig{Endpoint: cfg}, cfg)
			written, closed := 0, false
			var doneAt time.Duration
			buf := make([]byte, size)
			for steps := 0; steps < 100000 && doneAt == 0; steps++ {
				if c.State() == StateEstablished && written < size {
					n, _ := c.Write(payload[written:])
					written += n
					if !tc.separate && written == size {
						c.Close()
						closed = true
					}
				}
				if tc.separate && !closed && written == size && c.snd.max == testISS+1+size {
					c.Close() // all the data has gone: the FIN goes alone
					closed = true
				}
				if s := l.server; s != nil {
					s.Read(buf)
					if s.rcv.finRcvd {
						doneAt = l.w.Now()
					}
				}
				if !l.step() {
					break
				}
			}
			if !dataLost || !finLost || doneAt == 0 {
				t.Fatalf("data lost %v, FIN lost %v, done at %v", dataLost, finLost, doneAt)
			}
			took := doneAt - lostAt
			ci := c.Info()
			t.Logf("tail loss at %v recovered in %v (SRTT %v): %d probes, %d RACK retransmits, %d RTO events",
				lostAt, took, ci.SRTT, ci.TLPProbes, ci.RACKRetransmits, ci.RTOEvents)
			if took > tc.within || took < tc.notBefore {
				t.Errorf("recovered in %v, want within [%v, %v]", took, tc.notBefore, tc.within)
			}
			if lim := 10*ci.SRTT + DefaultTLPSlack; !tc.byRTO && took > lim {
				t.Errorf("recovered in %v, want within 10 SRTT + the PTO's slack (%v)", took, lim)
			}
			if ci.TLPProbes != tc.wantProbes || (!tc.byRTO && ci.RTOEvents != 0) {
				t.Errorf("probes %d, RTO events %d; want %d probes and, with RACK-TLP, no RTO", ci.TLPProbes, ci.RTOEvents, tc.wantProbes)
			}
		})
	}
}

// TestAcceptQueueFull: while the stack's accept queue is full the handshake's
// final ACK is dropped (Linux's tcp_abort_on_overflow = 0), not answered with a
// RST; the SYN-ACK retransmission completes the handshake once there is room.
func TestAcceptQueueFull(t *testing.T) {
	l := newLink(t, time.Millisecond)
	full := true
	c := l.open(t, ListenerConfig{QueueFull: func() bool { return full }}, Config{})
	ln := l.ln
	for l.clk.Now() < 500*time.Millisecond && l.step() {
	}
	if c.State() != StateEstablished {
		t.Fatalf("client in %v, want ESTABLISHED (its ACK was sent)", c.State())
	}
	if l.server != nil || ln.HalfOpen() != 1 {
		t.Fatalf("accepted %v, half-open %d while the queue is full; want not accepted, 1", l.server != nil, ln.HalfOpen())
	}
	st := ln.Stats()
	if st.DropsAcceptQueue == 0 || st.ResetsSent != 0 || st.Refused != 0 {
		t.Fatalf("listener stats %+v: want the ACK dropped and counted, no RST, no refusal", st)
	}
	full = false
	for steps := 0; l.server == nil && steps < 1000 && l.step(); steps++ {
	}
	if l.server == nil {
		t.Fatalf("not accepted after the queue emptied (at %v)", l.clk.Now())
	}
	if at := l.clk.Now(); at < time.Second || at > time.Second+10*time.Millisecond {
		t.Fatalf("accepted at %v, want right after the SYN-ACK retransmission at 1s", at)
	}
	if l.server.State() != StateEstablished || c.Info().ResetsReceived != 0 {
		t.Fatalf("server %v, client resets %d; want ESTABLISHED and none", l.server.State(), c.Info().ResetsReceived)
	}
}

// TestLossRecoveryEconomy: each lost segment is resent about once per loss
// episode, whatever mix of RACK, SACK and NewReno finds it, nothing the
// sender knows to be acknowledged is resent, and recovery needs no RTO where
// SACK and RACK can see the loss. (Before the fixes of this test's commit: 45
// retransmissions for the burst of 10 with RACK, 19 without; 46 for 22 lost
// at 1% seed 1; at 5%, 2 to 8 RTOs and 1.8 to 3.5 s per 4 MB. After: 10 and
// 10; 23; 0 to 2 RTOs and 1.3 to 1.9 s.)
func TestLossRecoveryEconomy(t *testing.T) {
	dataOnly := func(f func(n int) bool) func(int, int, *Segment) bool {
		return func(from, n int, s *Segment) bool { return from == 0 && len(s.Payload) > 0 && f(n) }
	}
	random := func(seed uint64, pct float64) func(int, int, *Segment) bool {
		r := rand.New(rand.NewPCG(seed, 99))
		return dataOnly(func(int) bool { return r.Float64() < pct/100 })
	}
	for _, tc := range []struct {
		name    string
		size    int
		delay   time.Duration
		cfg     func(*Config)
		drop    func(int, int, *Segment) bool
		slack   int     // retransmissions allowed beyond the losses
		ratio   float64 // or, when set, at most ratio × losses (+ slack)
		maxRTO  uint64
		maxTime time.Duration // 0: unchecked
	}{
		{"every 50th", 1 << 20, 5 * time.Millisecond, nil, dataOnly(func(n int) bool { return n%50 == 0 }), 2, 0, 0, 0},
		{"every 50th, no RACK", 1 << 20, 5 * time.Millisecond, func(c *Config) { c.DisableRACKTLP = true }, dataOnly(func(n int) bool { return n%50 == 0 }), 2, 0, 0, 0},
		{"burst of 10", 1 << 20, 5 * time.Millisecond, nil, dataOnly(func(n int) bool { return n >= 100 && n < 110 }), 2, 0, 0, 0},
		{"burst of 10, no RACK", 1 << 20, 5 * time.Millisecond, func(c *Config) { c.DisableRACKTLP = true }, dataOnly(func(n int) bool { return n >= 100 && n < 110 }), 2, 0, 0, 0},
		{"1% seed 1", 4 << 20, time.Millisecond, nil, random(1, 1), 3, 1.3, 0, 700 * time.Millisecond},
		{"1% seed 2", 4 << 20, time.Millisecond, nil, random(2, 1), 3, 1.3, 0, 700 * time.Millisecond},
		{"1% seed 3", 4 << 20, time.Millisecond, nil, random(3, 1), 3, 1.3, 0, 700 * time.Millisecond},
		{"5% seed 1", 4 << 20, time.Millisecond, nil, random(1, 5), 3, 1.3, 3, 2500 * time.Millisecond},
		{"5% seed 2", 4 << 20, time.Millisecond, nil, random(2, 5), 3, 1.3, 3, 2500 * time.Millisecond},
		{"5% seed 3", 4 << 20, time.Millisecond, nil, random(3, 5), 3, 1.3, 3, 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The receiver's buffer of the limits' measurements: with the 1
			// MB default (since 2026-11-24) the sender keeps four times as
			// much in flight, and at 1% seed 1 resent 81 segments for 22
			// lost (RACK): a sender's question, open.
			cfg := func(c *Config) {
				c.RecvBuffer = 256 << 10
				if tc.cfg != nil {
					tc.cfg(c)
				}
			}
			r := runTransfer(t, data(tc.size), tc.delay, cfg, tc.drop)
			limit := r.dataLost + tc.slack
			if tc.ratio > 0 {
				limit = int(tc.ratio*float64(r.dataLost)) + tc.slack
			}
			if r.rtx > limit {
				t.Errorf("%d retransmissions for %d lost data segments, want at most %d", r.rtx, r.dataLost, limit)
			}
			if r.rtxSndUna != 0 {
				t.Errorf("%d retransmissions of data below SND.UNA", r.rtxSndUna)
			}
			if r.info.RTOEvents > tc.maxRTO {
				t.Errorf("%d RTO events, want at most %d", r.info.RTOEvents, tc.maxRTO)
			}
			if tc.maxTime > 0 && r.doneAt > tc.maxTime {
				t.Errorf("data delivered at %v, want by %v", r.doneAt, tc.maxTime)
			}
		})
	}
}

// TestRecoveryProbeSavesRTOs: with loss in both directions (ACKs lost too),
// fast recovery can go silent; the recovery probe ends such silences after a
// PTO where the RFC's behaviour waits for the RTO. The same seeded losses,
// with and without it: no more RTOs and less time with it.
func TestRecoveryProbeSavesRTOs(t *testing.T) {
	run := func(disable bool) (rtos, probes uint64, total time.Duration) {
		for seed := range uint64(8) {
			r := rand.New(rand.NewPCG(seed, 7))
			res := runTransfer(t, data(2<<20), time.Millisecond, func(c *Config) {
				// Quickack off: its immediate ACKs after each stall change the seeded
				// run's ACK losses, and this test is about the silences of recovery.
				c.DisableRecoveryProbe, c.QuickAcks = disable, -1
			},
				func(int, int, *Segment) bool { return r.Float64() < 0.05 })
			rtos += res.info.RTOEvents
			probes += res.info.RecoveryProbes
			total += res.doneAt
		}
		return rtos, probes, total
	}
	onRTO, onProbes, onTime := run(false)
	offRTO, offProbes, offTime := run(true)
	t.Logf("with the probe: %d RTOs, %d probes, %v; without: %d RTOs, %d probes, %v", onRTO, onProbes, onTime, offRTO, offProbes, offTime)
	if onProbes == 0 || offProbes != 0 {
		t.Fatalf("recovery probes: %d with, %d without; want some and none", onProbes, offProbes)
	}
	// Since limited transmit (RFC 3042), which keeps the ACK clock going on the
	// first duplicate ACKs, these seeds leave the probe no RTO to save (before
	// it: 6 RTOs with the probe, 8 without, 7.9 s and 8.4 s; with it: 3 and 3,
	// 5.90 s and 5.92 s): it must cost none and save time.
	if onRTO > offRTO || onTime >= offTime {
		t.Errorf("with the probe %d RTOs in %v, without %d in %v: want no more and sooner", onRTO, onTime, offRTO, offTime)
	}
}
