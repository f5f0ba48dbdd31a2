package tcp

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// gsoMaxTest is the Config.GSOMax of the tests: a 64 KB frame's worth, as
// package stack sets it.
const gsoMaxTest = 65535 - 20 - HeaderMaxSize

// wireLog records every packet a link carries, cut as an Output cuts TSO
// segments: the instant, the side, the segment's fields and a checksum of
// its payload.
type wireLog []string

func (w *wireLog) add(l *link) func(int, *Segment) {
	return func(from int, s *Segment) {
		*w = append(*w, fmt.Sprintf("%v %d %v crc=%08x", l.w.Now(), from, s, crc32.ChecksumIEEE(s.Payload)))
	}
}

// TestGSOWireIdentical: a transfer whose sender sends TSO segments
// (Config.GSOMax) puts on the wire, cut as an Output must cut them
// (Segment.GSOPiece), exactly the packets of the same transfer sent one
// MSS at a time, at the same instants, whatever the link loses: every SACK,
// RACK, fast-retransmit, tail-loss-probe and RTO decision is taken on the
// same segments (splitGSO, gsoAcked). And the counters agree.
func TestGSOWireIdentical(t *testing.T) {
	const size = 2172 * 1448 // full-sized segments (timestamps on): the FIN rides on a TSO segment
	payload := randomBytes(size, 7)
	random := func(seed uint64, pct int) func() func(int, int, *Segment) bool {
		return func() func(int, int, *Segment) bool {
			r := rand.New(rand.NewPCG(seed, seed+1))
			return func(int, int, *Segment) bool { return r.IntN(1000) < pct }
		}
	}
	fixed := func(f func(from, n int, s *Segment) bool) func() func(int, int, *Segment) bool {
		return func() func(int, int, *Segment) bool { return f }
	}
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		drop func() func(int, int, *Segment) bool
		// before, if set, makes the link's before hook
		before func(l *link) func()
	}{
		{"clean", nil, nil, nil},
		{"every 50th data segment", nil, fixed(func(from, n int, s *Segment) bool { return from == 0 && n%50 == 0 }), nil},
		{"a burst", nil, fixed(func(from, n int, s *Segment) bool { return from == 0 && n >= 100 && n < 130 }), nil},
		{"ACKs", nil, fixed(func(from, n int, s *Segment) bool { return from == 1 && n%7 == 0 }), nil},
		{"the tail once: a probe", nil, func() func(int, int, *Segment) bool {
			fin, last := false, false
			return func(from, n int, s *Segment) bool {
				switch {
				case from == 0 && s.Flags.Has(FlagFIN) && !fin:
					fin = true
					return true
				case from == 0 && s.Seq.Add(seqnum.Size(2*len(s.Payload))) == seqnum.Value(0xfffff001).Add(size) && !last:
					last = true
					return true
				}
				return false
			}
		}, nil},
		{"resends lost too: RTOs", nil, func() func(int, int, *Segment) bool {
			lost := map[seqnum.Value]int{}
			return func(from, n int, s *Segment) bool {
				if k, ok := lost[s.Seq]; from == 0 && (n >= 300 && n < 340 || ok && k < 3) {
					lost[s.Seq] = k + 1
					return true
				}
				return false
			}
		}, nil},
		{"random 1%", nil, random(11, 10), nil},
		{"random 5% both ways", nil, random(13, 50), nil},
		{"random 2%, no SACK", func(c *Config) { c.DisableSACK = true }, random(17, 20), nil},
		{"random 2%, no RACK-TLP", func(c *Config) { c.DisableRACKTLP = true }, random(19, 20), nil},
		{"random 2%, no timestamps", func(c *Config) { c.DisableTimestamps = true }, random(23, 20), nil},
		{"random 2%, CUBIC, Nagle", func(c *Config) { c.CUBIC, c.Nagle = true, true }, random(29, 20), nil},
		{"a smaller path MTU mid-flight", nil, nil, func(l *link) func() {
			done := false
			return func() {
				if !done && l.sent[0] >= 500 {
					done = true
					l.client.ICMPTooBig(l.client.snd.una, 1200) // resegment: the flight resent
				}
			}
		}},
		{"small buffers", func(c *Config) { c.SendBuffer, c.RecvBuffer, c.SendBufferMax = 20000, 30000, 20000 }, random(31, 10), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs [2]wireLog
			var res [2]xferResult
			var tso [2][2]int
			for i, gso := range []int{0, gsoMaxTest} {
				l := newLink(t, 5*time.Millisecond)
				l.wire = logs[i].add(l)
				if tc.before != nil {
					l.before = tc.before(l)
				}
				cfg := func(c *Config) {
					if tc.cfg != nil {
						tc.cfg(c)
					}
					c.GSOMax = gso
				}
				var drop func(int, int, *Segment) bool
				if tc.drop != nil {
					drop = tc.drop()
				}
				res[i] = runTransferOn(t, l, payload, cfg, drop)
				tso[i] = l.tso
			}
			if tso[0] != [2]int{} || tso[1][0] == 0 {
				t.Fatalf("TSO segments sent (client, server): %v without GSOMax, %v with it; want none, then some from the client", tso[0], tso[1])
			}
			for i := range max(len(logs[0]), len(logs[1])) {
				if i >= len(logs[0]) || i >= len(logs[1]) || logs[0][i] != logs[1][i] {
					a, b := "(none)", "(none)"
					if i < len(logs[0]) {
						a = logs[0][i]
					}
					if i < len(logs[1]) {
						b = logs[1][i]
					}
					t.Fatalf("packet %d of %d/%d differs:\n one MSS: %s\n TSO:     %s", i, len(logs[0]), len(logs[1]), a, b)
				}
			}
			a, b := res[0].info.Counters, res[1].info.Counters
			if a != b {
				t.Fatalf("counters differ:\n one MSS: %+v\n TSO:     %+v", a, b)
			}
			t.Logf("%d packets, %d TSO segments from the client", len(logs[0]), tso[1][0])
		})
	}
}

// gsoEstablished is establishedRTT with TSO segments (Config.GSOMax), which
// the capture keeps whole.
func gsoEstablished(t *testing.T, cfg Config) *harness {
	t.Helper()
	cfg.GSOMax = gsoMaxTest
	if cfg.InitialCwnd == 0 {
		cfg.InitialCwnd = 20 // half cwnd, a chunk: 10 segments (gso.go, "Chunks")
	}
	h := establishedRTT(t, cfg, tlpRTT)
	h.out.whole = true
	return h
}

// gsoIs checks a TSO segment's GSOSize.
func gsoIs(n int) check {
	return func(s *Segment) error {
		if s.GSOSize != n {
			return fmt.Errorf("GSOSize: got %d, want %d", s.GSOSize, n)
		}
		return nil
	}
}

// wantQueue checks the retransmission queue: the segments' sequence
// numbers and lengths (in sequence space), their TSO pieces, and that
// those not SACKed have their RTO entry running at rtoAt.
func wantQueue(t *testing.T, e *Endpoint, rtoAt time.Duration, segs ...[3]int) {
	t.Helper()
	q := e.snd.rtxq
	if len(q) != len(segs) {
		t.Fatalf("%d segments queued, want %d", len(q), len(segs))
	}
	for i, s := range q {
		want := segs[i]
		if s.seq != seqnum.Value(want[0]) || int(s.len) != want[1] || s.gsoPieces() != want[2] {
			t.Errorf("segment %d: seq %d len %d pieces %d, want %d %d %d", i, s.seq, s.len, s.gsoPieces(), want[0], want[1], want[2])
		}
		if !s.sacked && (!s.entry.Pending() || s.rtoAt != rtoAt) {
			t.Errorf("segment %d: RTO entry pending %v at %v, want at %v", i, s.entry.Pending(), s.rtoAt, rtoAt)
		}
	}
}

// chunkEndIs checks Segment.ChunkEnd.
func chunkEndIs(v bool) check {
	return func(s *Segment) error {
		if s.ChunkEnd != v {
			return fmt.Errorf("ChunkEnd: got %v, want %v", s.ChunkEnd, v)
		}
		return nil
	}
}

func TestGSOSendsTSOSegments(t *testing.T) {
	h := gsoEstablished(t, testConfig()) // an initial window of 20
	h.ep.Write(data(60 * 1448))
	// Slow start's first window (20 segments) as two TSO segments of half
	// cwnd each (gso.go, "Chunks"), cut at the MSS, each a chunk's end.
	h.expect(seqIs(segSeq(0)), lenIs(10*1448), flagsAre(FlagACK|FlagPSH), gsoIs(1448), payloadIs(data(10*1448)), chunkEndIs(true))
	h.expect(seqIs(segSeq(10)), lenIs(10*1448), flagsAre(FlagACK|FlagPSH), gsoIs(1448), payloadIs(data(20 * 1448)[10*1448:]), chunkEndIs(true))
	h.expectNone()
	rto := tlpRTT + 200*time.Millisecond
	wantQueue(t, h.ep, rto, [3]int{int(segSeq(0)), 10 * 1448, 10}, [3]int{int(segSeq(10)), 10 * 1448, 10})
	if i := h.ep.Info(); i.DataSegsOut != 20 || i.BytesSent != 20*1448 || i.SegsOut != 2+20 || i.Unacked != 20 {
		t.Fatalf("data segments %d, bytes %d, segments %d, unacked %d; want 20, %d, 22, 20 (the packets)", i.DataSegsOut, i.BytesSent, i.SegsOut, i.Unacked, 20*1448)
	}
	h.advance(tlpRTT)
	h.ackUpTo(segSeq(20)) // slow start: cwnd 40, chunks of 20
	h.expect(seqIs(segSeq(20)), lenIs(20*1448), flagsAre(FlagACK|FlagPSH), gsoIs(1448), chunkEndIs(true))
	h.expect(seqIs(segSeq(40)), lenIs(20*1448), flagsAre(FlagACK|FlagPSH), gsoIs(1448), chunkEndIs(true))
	h.expectNone()
	// The tail: a FIN rides on the last TSO segment, and a part short of
	// the MSS goes as a segment of its own. cwnd 80: a chunk could take
	// 40 segments, a GSO frame 45 (the chunk's bound of a large cwnd).
	h.ep.Write(data(5*1448 + 100))
	h.ep.CloseWrite()
	h.expectNone()
	h.advance(tlpRTT)
	h.ackUpTo(segSeq(60))
	h.expect(seqIs(segSeq(60)), lenIs(5*1448), flagsAre(FlagACK|FlagPSH), gsoIs(1448), chunkEndIs(false))
	h.expect(seqIs(segSeq(65)), lenIs(100), flagsAre(FlagACK|FlagPSH|FlagFIN), gsoIs(0), chunkEndIs(false))
	h.expectNone()
	if h.out.tso != 5 {
		t.Fatalf("%d TSO segments, want 5", h.out.tso)
	}
}

// TestGSOChunks: new data goes in chunks of half cwnd (Linux's
// tcp_cwnd_test), at most GSOMax, the windows' room, each ending with
// Segment.ChunkEnd on its last segment: as TSO segments or, without
// GSOMax, MSS-sized segments; with PushLinux as its TSO chunks; with
// Config.DisableHalfCwndChunks as one chunk as large as the windows allow,
// with no ChunkEnd, as before.
func TestGSOChunks(t *testing.T) {
	type seg struct {
		n   int // segments (MSS)
		end bool
	}
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		iw    int
		write int
		whole bool // TSO segments (GSOMax), kept whole by the capture
		want  []seg
	}{
		{"TSO, initial window 10", func(*Config) {}, 10, 30, true, []seg{{5, true}, {5, true}}},
		{"TSO, a window of 100: the GSO size bounds a chunk", func(*Config) {}, 100, 100, true, []seg{{45, true}, {45, true}, {10, true}}},
		{"TSO, 7 segments", func(*Config) {}, 10, 7, true, []seg{{5, true}, {2, false}}},
		{"TSO, disabled", func(c *Config) { c.DisableHalfCwndChunks = true }, 10, 30, true, []seg{{10, false}}},
		{"one MSS per segment", func(c *Config) { c.GSOMax = -1 }, 6, 30, false, []seg{{1, false}, {1, false}, {1, true}, {1, false}, {1, false}, {1, true}}},
		// tcp_tso_autosize's share of the pacing rate (8 ms SRTT): 2 segments.
		{"PushLinux: its TSO chunks", func(c *Config) { c.PushPolicy = PushLinux }, 10, 30, false, []seg{{1, false}, {1, true}, {1, false}, {1, true}, {1, false}, {1, true}, {1, false}, {1, true}, {1, false}, {1, true}}},
		{"one MSS per segment, disabled", func(c *Config) { c.GSOMax, c.DisableHalfCwndChunks = -1, true }, 4, 30, false, []seg{{1, false}, {1, false}, {1, false}, {1, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.InitialCwnd = tc.iw
			cfg.SendBuffer = 256 << 10
			tc.cfg(&cfg)
			var h *harness
			if cfg.GSOMax < 0 {
				h = establishedRTT(t, cfg, tlpRTT)
			} else {
				h = gsoEstablished(t, cfg)
			}
			h.out.whole = tc.whole
			h.send(h.seg(FlagACK, nil)) // the peer's window, scaled: more than 100 segments
			h.ep.Write(data(tc.write * 1448))
			off := 0
			for _, w := range tc.want {
				h.expect(seqIs(segSeq(off)), lenIs(w.n*1448), chunkEndIs(w.end))
				off += w.n
			}
			h.expectNone()
		})
	}
}

func TestGSOFINOnTheLastPiece(t *testing.T) {
	cfg := testConfig()
	cfg.InitialCwnd = 10
	h := gsoEstablished(t, cfg)
	h.ep.Write(data(14 * 1448))
	h.expect(seqIs(segSeq(0)), lenIs(5*1448), flagsAre(FlagACK|FlagPSH), gsoIs(1448))
	h.expect(seqIs(segSeq(5)), lenIs(5*1448), flagsAre(FlagACK|FlagPSH), gsoIs(1448))
	h.ep.CloseWrite()
	h.expectNone()
	h.advance(tlpRTT)
	h.ackUpTo(segSeq(10))
	h.expect(seqIs(segSeq(10)), lenIs(4*1448), flagsAre(FlagACK|FlagPSH|FlagFIN), gsoIs(1448))
	h.expectNone()
	rto := 2*tlpRTT + 200*time.Millisecond
	wantQueue(t, h.ep, rto, [3]int{int(segSeq(10)), 4*1448 + 1, 4})
	// A SACK of the second piece cuts the segment: the FIN on the last.
	h.advance(tlpRTT)
	h.sackAck(segBlock(11))
	wantQueue(t, h.ep, rto, [3]int{int(segSeq(10)), 1448, 1}, [3]int{int(segSeq(11)), 1448, 1}, [3]int{int(segSeq(12)), 1448, 1}, [3]int{int(segSeq(13)), 1449, 1})
	if q := h.ep.snd.rtxq; q[3].flags != FlagPSH|FlagFIN || !q[3].push || q[2].flags != FlagPSH || q[2].push || q[0].flags != FlagPSH {
		t.Fatalf("pieces' flags %v %v %v, push %v %v; want PSH, PSH, PSH|FIN, push on the last alone", q[0].flags, q[2].flags, q[3].flags, q[2].push, q[3].push)
	}
}

func TestGSOPartialAck(t *testing.T) {
	h := gsoEstablished(t, testConfig())
	h.ep.Write(data(10 * 1448))
	h.expect(seqIs(segSeq(0)), lenIs(10*1448), gsoIs(1448))
	rto := tlpRTT + 200*time.Millisecond
	i0 := h.ep.Info()
	h.advance(tlpRTT)
	h.ackUpTo(segSeq(3)) // three pieces: the segment is trimmed, its entry runs on
	wantQueue(t, h.ep, rto, [3]int{int(segSeq(3)), 7 * 1448, 7})
	if i := h.ep.Info(); i.RTTSamples != i0.RTTSamples+1 || i.BytesAcked-i0.BytesAcked != 3*1448 || i.RACKRTT != tlpRTT {
		t.Fatalf("RTT samples %d, bytes acked %d, RACK's RTT %v; want %d, %d, %v (as of the pieces acknowledged)", i.RTTSamples, i.BytesAcked-i0.BytesAcked, i.RACKRTT, i0.RTTSamples+1, 3*1448, tlpRTT)
	}
	if r := h.ep.rack; r.endSeq != segSeq(3) || r.order != h.ep.rack.xmits-7 {
		t.Fatalf("RACK's segment ends at %d, order %d; want the third piece's: %d, %d", r.endSeq, r.order, segSeq(3), h.ep.rack.xmits-7)
	}
	h.ackUpTo(segSeq(5) + 100) // within a piece: its rest is the first piece
	wantQueue(t, h.ep, rto, [3]int{int(segSeq(5) + 100), 5*1448 - 100, 5})
	if i := h.ep.Info(); i.Unacked != 5 {
		t.Fatalf("unacked %d, want 5 (the packets left)", i.Unacked)
	}
	h.ackUpTo(segSeq(6)) // that piece
	wantQueue(t, h.ep, rto, [3]int{int(segSeq(6)), 4 * 1448, 4})
	if r := h.ep.rack; r.endSeq != segSeq(6) || r.order != h.ep.rack.xmits-4 {
		t.Fatalf("RACK's segment ends at %d, order %d; want the sixth piece's: %d, %d", r.endSeq, r.order, segSeq(6), h.ep.rack.xmits-4)
	}
	// A SACK splits what is left at the pieces' edges, as the MSS-sized
	// segments were; RACK's transmission order is one per piece.
	h.sackAck(segBlock(8))
	wantQueue(t, h.ep, rto, [3]int{int(segSeq(6)), 1448, 1}, [3]int{int(segSeq(7)), 1448, 1}, [3]int{int(segSeq(8)), 1448, 1}, [3]int{int(segSeq(9)), 1448, 1})
	q := h.ep.snd.rtxq
	for i := 1; i < len(q); i++ {
		if q[i].order != q[i-1].order+1 || q[i].sentAt != q[0].sentAt || q[i].xmits != 1 {
			t.Fatalf("piece %d: order %d after %d, sent at %v (want %v), xmits %d", i, q[i].order, q[i-1].order, q[i].sentAt, q[0].sentAt, q[i].xmits)
		}
	}
	if q[len(q)-1].order != h.ep.rack.xmits {
		t.Fatalf("the last piece's order %d, want RACK's last %d", q[len(q)-1].order, h.ep.rack.xmits)
	}
}

func TestGSOSACKResendsOneMSS(t *testing.T) {
	h := gsoEstablished(t, testConfig())
	h.ep.Write(data(10 * 1448))
	h.expect(seqIs(segSeq(0)), lenIs(10*1448), gsoIs(1448))
	h.advance(tlpRTT)
	// Pieces 1 and 2 lost: the SACK of 3..9 (seven segments, three or more
	// above them: RFC 6675 IsLost, RACK with no reordering window in
	// recovery) resends them one MSS each, not the whole.
	h.ackUpTo(segSeq(1))
	h.sackAck(SACKBlock{segSeq(3), segSeq(10)})
	h.expect(seqIs(segSeq(1)), lenIs(1448), gsoIs(0))
	h.expect(seqIs(segSeq(2)), lenIs(1448), gsoIs(0))
	h.expectNone()
	if i := h.ep.Info(); i.SegsRetransmitted != 2 || i.BytesRetrans != 2*1448 {
		t.Fatalf("retransmitted %d segments, %d bytes; want 2, %d", i.SegsRetransmitted, i.BytesRetrans, 2*1448)
	}
	// No TSO segment in recovery: new data goes one MSS at a time.
	h.ep.Write(data(5 * 1448))
	h.advance(tlpRTT)
	h.ackUpTo(segSeq(2))
	for _, s := range h.out.segs {
		if s.GSOSize != 0 {
			t.Fatalf("a TSO segment in recovery: %v", &s)
		}
	}
}

// TestGSONotWhileSACKed: while the peer holds SACKed data, new data goes
// one MSS at a time (the next SACK would cut a TSO segment again), and
// with PushLinux always.
func TestGSONotWhileSACKed(t *testing.T) {
	cfg := testConfig()
	cfg.InitialCwnd = 10
	h := gsoEstablished(t, cfg)
	h.ep.Write(data(30 * 1448))
	h.expect(seqIs(segSeq(0)), lenIs(5*1448), gsoIs(1448))
	h.expect(seqIs(segSeq(5)), lenIs(5*1448), gsoIs(1448))
	h.advance(tlpRTT)
	h.sackAck(segBlock(9)) // one segment: no recovery
	h.ackUpTo(segSeq(4))   // cwnd opens
	for i := 10; i < 18; i++ {
		h.expect(seqIs(segSeq(i)), lenIs(1448), gsoIs(0))
	}
	h.expectNone()
	if h.ep.fr.active {
		t.Fatal("in fast recovery")
	}
	t.Run("PushLinux", func(t *testing.T) {
		cfg := testConfig()
		cfg.PushPolicy = PushLinux
		h := gsoEstablished(t, cfg)
		h.ep.Write(data(10 * 1448))
		for i := range 10 {
			h.expect(seqIs(segSeq(i)), lenIs(1448), gsoIs(0))
		}
	})
}

func TestGSORTOResendsOneMSS(t *testing.T) {
	h := gsoEstablished(t, noTLPConfig())
	h.ep.Write(data(10 * 1448))
	h.expect(seqIs(segSeq(0)), lenIs(10*1448), gsoIs(1448))
	h.expectAt(tlpRTT+200*time.Millisecond, seqIs(segSeq(0)), lenIs(1448), gsoIs(0)) // RFC 6298 (5.4): the first MSS
	h.expectNone()
	if i := h.ep.Info(); i.RTOEvents != 1 || i.SegsRetransmitted != 1 {
		t.Fatalf("RTO events %d, retransmitted %d; want 1, 1", i.RTOEvents, i.SegsRetransmitted)
	}
	// Go-back-N resends the pieces as the window opens, one MSS each.
	h.advance(tlpRTT)
	h.ackUpTo(segSeq(1))
	h.expect(seqIs(segSeq(1)), lenIs(1448), gsoIs(0))
	h.expect(seqIs(segSeq(2)), lenIs(1448), gsoIs(0))
	h.expectNone()
}

func TestGSOTailLossProbe(t *testing.T) {
	cfg := testConfig()
	cfg.TLPMaxAckDelay = 40 * time.Millisecond
	h := gsoEstablished(t, cfg)
	h.ep.Write(data(10 * 1448))
	h.expect(seqIs(segSeq(0)), lenIs(10*1448), gsoIs(1448))
	// Ten packets in flight, not one: no TLP.max_ack_delay (RFC 8985 7.2).
	// The probe resends the last MSS-sized piece (RFC 8985 7.3).
	pto := 2*tlpRTT + DefaultTLPSlack
	h.expectAt(tlpRTT+pto, seqIs(segSeq(9)), lenIs(1448), gsoIs(0))
	if i := h.ep.Info(); i.TLPProbes != 1 || i.SegsRetransmitted != 1 {
		t.Fatalf("probes %d, retransmitted %d; want 1, 1", i.TLPProbes, i.SegsRetransmitted)
	}
	t.Run("one piece left: max_ack_delay", func(t *testing.T) {
		h := gsoEstablished(t, cfg)
		h.ep.Write(data(10 * 1448))
		h.expect(seqIs(segSeq(0)), lenIs(10*1448), gsoIs(1448))
		h.advance(tlpRTT)
		h.ackUpTo(segSeq(9)) // one piece left: one packet in flight
		h.expectAt(2*tlpRTT+2*tlpRTT+40*time.Millisecond, seqIs(segSeq(9)), lenIs(1448))
	})
}

func TestGSOPiece(t *testing.T) {
	p := data(2*1000 + 10)
	const base = seqnum.Value(0xfffffc00) // the pieces wrap
	s := Segment{SrcPort: 1, DstPort: 2, Seq: base, Ack: 7, Flags: FlagACK | FlagPSH | FlagFIN, Window: 9, Payload: p, PayloadStable: true, GSOSize: 1000, ChunkEnd: true}
	s.Options.TS, s.Options.TSVal = true, 5
	if n := s.GSOPieces(); n != 3 {
		t.Fatalf("%d pieces, want 3", n)
	}
	for i, want := range []struct {
		seq   seqnum.Value
		from  int
		to    int
		flags Flags
	}{{base, 0, 1000, FlagACK | FlagPSH}, {base.Add(1000), 1000, 2000, FlagACK | FlagPSH}, {base.Add(2000), 2000, 2010, FlagACK | FlagPSH | FlagFIN}} {
		g := s.GSOPiece(i)
		if g.Seq != want.seq || g.Flags != want.flags || &g.Payload[0] != &p[want.from] || len(g.Payload) != want.to-want.from ||
			g.GSOSize != 0 || g.Ack != 7 || g.Window != 9 || g.Options != s.Options || !g.PayloadStable || g.ChunkEnd != (i == 2) {
			t.Errorf("piece %d: %v gso %d chunk end %v, want seq %d, bytes %d-%d, %v, the chunk's end on the last alone, the rest as the whole", i, &g, g.GSOSize, g.ChunkEnd, want.seq, want.from, want.to, want.flags)
		}
	}
	s.GSOSize = 0
	if g := s.GSOPiece(0); s.GSOPieces() != 1 || len(g.Payload) != len(p) || g.Flags != s.Flags {
		t.Fatalf("no GSOSize: %d pieces, %v", s.GSOPieces(), &g)
	}
}

// TestGSOAcrossWrap: where the send buffer's storage (a ring) wraps mid-
// flight, a TSO segment ends at the wrap, its payload a view of the storage
// (PayloadStable), the one MSS across it a copy, and the next TSO segment
// starts after it; with Config.GSOAcrossWrap (a recording's stack) one TSO
// segment spans the wrap, its payload a copy, as the windows and GSOMax
// alone cut it. The storage is 16 KB: the first Write's 6 MSS at its
// front, 5 of them acknowledged (the ring not emptied: it starts again at
// the front only then), and 10 MSS more whose span from 6 MSS on wraps at
// 16384, 456 bytes into its sixth MSS (segSeq(11)).
func TestGSOAcrossWrap(t *testing.T) {
	const mss = 1448
	for _, tc := range []struct {
		across bool
		want   []struct{ seg, n, gso int } // the segments: first MSS index, MSS count, GSOSize
	}{
		{false, []struct{ seg, n, gso int }{{6, 5, mss}, {11, 1, 0}, {12, 4, mss}}},
		{true, []struct{ seg, n, gso int }{{6, 10, mss}}},
	} {
		t.Run(fmt.Sprintf("GSOAcrossWrap=%v", tc.across), func(t *testing.T) {
			cfg := testConfig()
			cfg.GSOAcrossWrap = tc.across
			h := gsoEstablished(t, cfg)
			var stable []bool
			out := h.ep.out
			h.ep.out = OutputFunc(func(id ID, s *Segment) {
				if len(s.Payload) > 0 {
					stable = append(stable, s.PayloadStable)
				}
				out.Send(id, s)
			})
			first, next := data(6*mss), randomBytes(10*mss, 3)
			if n, err := h.ep.Write(first); n != len(first) || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
			h.expect(seqIs(segSeq(0)), lenIs(6*mss), gsoIs(mss), payloadIs(first))
			h.expectNone()
			if c := h.ep.snd.buf.own().r.Cap(); c != 16384 {
				t.Fatalf("the ring's storage: %d bytes, want 16384", c)
			}
			h.advance(tlpRTT)
			h.ackUpTo(segSeq(5)) // cwnd 15 MSS, one in flight
			h.expectNone()
			if n, err := h.ep.Write(next); n != len(next) || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
			if c := h.ep.snd.buf.own().r.Cap(); c != 16384 {
				t.Fatalf("the ring's storage grew to %d bytes: it does not wrap", c)
			}
			var want []bool
			for _, w := range tc.want {
				from := (w.seg - 6) * mss
				h.expect(seqIs(segSeq(w.seg)), lenIs(w.n*mss), gsoIs(w.gso), flagsAre(FlagACK|FlagPSH), payloadIs(next[from:from+w.n*mss]))
				// A view of the storage unless it spans the wrap at
				// 16384 (the storage's bytes from 8688 on are next's).
				want = append(want, 8688+from+w.n*mss <= 16384 || 8688+from >= 16384)
			}
			h.expectNone()
			if fmt.Sprint(stable[1:]) != fmt.Sprint(want) {
				t.Fatalf("PayloadStable of the segments after the first: %v, want %v", stable[1:], want)
			}
			// In the retransmission queue as sent: the first Write's last
			// MSS, then one entry per segment, of its MSS pieces.
			q := h.ep.snd.rtxq
			if len(q) != 1+len(tc.want) {
				t.Fatalf("%d segments queued, want %d", len(q), 1+len(tc.want))
			}
			for i, w := range tc.want {
				if s := q[1+i]; s.seq != segSeq(w.seg) || int(s.len) != w.n*mss || s.gsoPieces() != w.n {
					t.Errorf("queued segment %d: seq %d, len %d, %d pieces; want %d, %d, %d", 1+i, s.seq, s.len, s.gsoPieces(), segSeq(w.seg), w.n*mss, w.n)
				}
			}
		})
	}
}
