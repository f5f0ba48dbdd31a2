package tcp

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// The test harness: an endpoint on a manual clock and a wheel, a fake peer that
// sends segments built from a template, and composable checkers for what the
// endpoint sends ("got X, want Y").

const (
	testISS  seqnum.Value = 1000 // the endpoint's ISS
	peerISS  seqnum.Value = 5000 // the fake peer's ISS
	testTick              = timer.DefaultTick
)

var (
	localAP  = netip.MustParseAddrPort("198.18.0.1:4000")
	remoteAP = netip.MustParseAddrPort("198.18.0.2:80")
	testID   = ID{Local: localAP, Remote: remoteAP}
)

// capture is an Output that keeps copies of what is sent: a TSO segment
// (Config.GSOMax) cut into its packets as an Output must (GSOPiece), or
// whole, when whole is set.
type capture struct {
	segs  []Segment
	ids   []ID
	whole bool
	tso   int // TSO segments sent
}

func (c *capture) Send(id ID, seg *Segment) {
	if k := seg.GSOPieces(); k > 1 {
		c.tso++
		if !c.whole {
			for i := range k {
				p := seg.GSOPiece(i)
				c.add(id, &p)
			}
			return
		}
	}
	c.add(id, seg)
}

func (c *capture) add(id ID, seg *Segment) {
	s := *seg
	s.Payload = append([]byte(nil), seg.Payload...)
	// Round-trip through the wire format, so the encoder is exercised too.
	b := make([]byte, s.EncodedLen())
	if _, err := s.Encode(b); err != nil {
		panic(fmt.Sprintf("encode %v: %v", &s, err))
	}
	p, err := ParseSegment(b)
	if err != nil {
		panic(fmt.Sprintf("parse of encoded %v: %v", &s, err))
	}
	p.GSOSize, p.ChunkEnd = seg.GSOSize, seg.ChunkEnd // not on the wire
	c.segs = append(c.segs, p)
	c.ids = append(c.ids, id)
}

type harness struct {
	t      *testing.T
	clk    *timer.ManualClock
	w      *timer.Wheel
	out    *capture
	ep     *Endpoint
	ln     *Listener
	events Event
	// The fake peer.
	pseq   seqnum.Value // next sequence number the peer sends
	pack   seqnum.Value // what the peer acknowledges
	pwnd   uint16
	pts    bool   // the peer uses timestamps
	ptsVal uint32 // its clock
	lastTS uint32 // last TSVal seen from the endpoint
}

// testConfig has no quickack mode: the tests of delayed ACKs see them from
// the first segment (TestQuickAck tests the mode). Its timestamp clock's
// offset is the ISS (TSOffsetISS): two runs of a test send the same TSvals,
// testISS plus the milliseconds (TestTSOffset tests the default).
func testConfig() Config {
	return Config{ISN: func(ID, time.Duration) seqnum.Value { return testISS }, TSOffset: TSOffsetISS, QuickAcks: -1, GSOMax: *gsoMaxFlag}
}

// gsoMaxFlag runs the packet tables built on testConfig with TSO segments
// (Config.GSOMax), cut by the capture as an Output cuts them: `go test
// ./tcp/ -args -tcp.gsomax=65435`. They see the same packets.
var gsoMaxFlag = flag.Int("tcp.gsomax", 0, "Config.GSOMax of testConfig")

// noTLPConfig is testConfig without RACK-TLP, for the tests of what recovers
// a loss without it (the RTO, duplicate ACKs), at their exact instants. (The
// handshake of established has an RTT of zero, which makes a probe due 20 µs
// after any send.)
func noTLPConfig() Config {
	c := testConfig()
	c.DisableRACKTLP = true
	return c
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	clk := timer.NewManualClock(0)
	w, err := timer.New(timer.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, clk: clk, w: w, out: &capture{}, pseq: peerISS, pwnd: 65535, pts: true, ptsVal: 777}
}

func (h *harness) notify(ev Event) { h.events |= ev }

// takeEvents returns the events seen since the last call.
func (h *harness) takeEvents() Event { ev := h.events; h.events = 0; return ev }

// now is the time since the start of the test.
func (h *harness) now() time.Duration { return h.clk.Now() }

// advance moves the clock and the wheel by d.
func (h *harness) advance(d time.Duration) { h.w.Advance(h.clk.Advance(d)) }

// advanceTo moves the clock and the wheel to t.
func (h *harness) advanceTo(t time.Duration) {
	h.t.Helper()
	if t < h.now() {
		h.t.Fatalf("advanceTo(%v): already at %v", t, h.now())
	}
	h.w.Advance(h.clk.Set(t))
}

// seg builds a segment from the peer: flags, its current seq and ack, payload.
func (h *harness) seg(f Flags, payload []byte) Segment {
	s := Segment{SrcPort: remoteAP.Port(), DstPort: localAP.Port(), Seq: h.pseq, Ack: h.pack, Flags: f, Window: h.pwnd, Payload: payload}
	if f&FlagACK == 0 {
		s.Ack = 0
	}
	if h.pts {
		s.Options.TS, s.Options.TSVal, s.Options.TSEcr = true, h.ptsVal, h.lastTS
	}
	return s
}

// send hands s to the endpoint (or the listener, if the harness has one and no
// endpoint yet), and advances the peer's sequence number past it.
func (h *harness) send(s Segment) {
	h.t.Helper()
	if h.pseq == s.Seq {
		h.pseq = s.End()
	}
	if h.ep != nil {
		h.ep.HandleSegment(&s)
	} else {
		h.ln.HandleSegment(testID, &s)
	}
}

// sendData sends payload with ACK from the peer's next sequence number.
func (h *harness) sendData(payload []byte) { h.t.Helper(); h.send(h.seg(FlagACK, payload)) }

// ackUpTo sends a bare ACK of everything up to a.
func (h *harness) ackUpTo(a seqnum.Value) {
	h.t.Helper()
	h.pack = a
	h.send(h.seg(FlagACK, nil))
}

type check func(*Segment) error

func flagsAre(f Flags) check {
	return func(s *Segment) error {
		if s.Flags != f {
			return fmt.Errorf("flags: got %v, want %v", s.Flags, f)
		}
		return nil
	}
}

func flagsHave(f Flags) check {
	return func(s *Segment) error {
		if !s.Flags.Has(f) {
			return fmt.Errorf("flags: got %v, want at least %v", s.Flags, f)
		}
		return nil
	}
}

func seqIs(v seqnum.Value) check {
	return func(s *Segment) error {
		if s.Seq != v {
			return fmt.Errorf("seq: got %d, want %d", s.Seq, v)
		}
		return nil
	}
}

func ackIs(v seqnum.Value) check {
	return func(s *Segment) error {
		if s.Flags&FlagACK == 0 || s.Ack != v {
			return fmt.Errorf("ack: got %d (flags %v), want %d", s.Ack, s.Flags, v)
		}
		return nil
	}
}

func lenIs(n int) check {
	return func(s *Segment) error {
		if len(s.Payload) != n {
			return fmt.Errorf("payload length: got %d, want %d", len(s.Payload), n)
		}
		return nil
	}
}

func payloadIs(p []byte) check {
	return func(s *Segment) error {
		if !bytes.Equal(s.Payload, p) {
			return fmt.Errorf("payload: got %q, want %q", s.Payload, p)
		}
		return nil
	}
}

func windowIs(w uint16) check {
	return func(s *Segment) error {
		if s.Window != w {
			return fmt.Errorf("window: got %d, want %d", s.Window, w)
		}
		return nil
	}
}

func mssIs(m uint16) check {
	return func(s *Segment) error {
		if !s.Options.HasMSS || s.Options.MSS != m {
			return fmt.Errorf("MSS option: got %v/%d, want %d", s.Options.HasMSS, s.Options.MSS, m)
		}
		return nil
	}
}

func wsIs(ws int) check { // -1: absent
	return func(s *Segment) error {
		got := -1
		if s.Options.HasWS {
			got = int(s.Options.WindowScale)
		}
		if got != ws {
			return fmt.Errorf("window scale option: got %d, want %d", got, ws)
		}
		return nil
	}
}

func sackPermIs(b bool) check {
	return func(s *Segment) error {
		if s.Options.SACKPermitted != b {
			return fmt.Errorf("SACK-permitted: got %v, want %v", s.Options.SACKPermitted, b)
		}
		return nil
	}
}

func tsIs(present bool) check {
	return func(s *Segment) error {
		if s.Options.TS != present {
			return fmt.Errorf("timestamps: got %v, want %v", s.Options.TS, present)
		}
		return nil
	}
}

func tsEcrIs(v uint32) check {
	return func(s *Segment) error {
		if !s.Options.TS || s.Options.TSEcr != v {
			return fmt.Errorf("TSecr: got %v/%d, want %d", s.Options.TS, s.Options.TSEcr, v)
		}
		return nil
	}
}

func sackIs(blocks ...SACKBlock) check {
	return func(s *Segment) error {
		got := s.Options.SACKBlocks()
		if len(got) != len(blocks) {
			return fmt.Errorf("SACK blocks: got %v, want %v", got, blocks)
		}
		for i := range got {
			if got[i] != blocks[i] {
				return fmt.Errorf("SACK blocks: got %v, want %v", got, blocks)
			}
		}
		return nil
	}
}

// expect pops the next segment the endpoint sent and runs the checks on it.
func (h *harness) expect(checks ...check) Segment {
	h.t.Helper()
	if len(h.out.segs) == 0 {
		h.t.Fatalf("at %v: got no segment, want one", h.now())
	}
	s := h.out.segs[0]
	h.out.segs = h.out.segs[1:]
	h.out.ids = h.out.ids[1:]
	for _, c := range checks {
		if err := c(&s); err != nil {
			h.t.Fatalf("at %v: segment %v: %v", h.now(), &s, err)
		}
	}
	if s.Options.TS {
		h.lastTS = s.Options.TSVal
	}
	return s
}

// expectNone fails if the endpoint sent anything.
func (h *harness) expectNone() {
	h.t.Helper()
	if len(h.out.segs) > 0 {
		h.t.Fatalf("at %v: got %d segments (first %v), want none", h.now(), len(h.out.segs), &h.out.segs[0])
	}
}

// expectNothingUntil advances to one tick before t and checks that nothing was
// sent; then it advances to t.
func (h *harness) expectNothingUntil(t time.Duration) {
	h.t.Helper()
	h.expectNone()
	h.advanceTo(t - testTick)
	h.expectNone()
	h.advanceTo(t)
}

// expectAt checks that nothing is sent before t and a segment is, at t.
func (h *harness) expectAt(t time.Duration, checks ...check) Segment {
	h.t.Helper()
	h.expectNothingUntil(t)
	return h.expect(checks...)
}

func (h *harness) wantState(s State) {
	h.t.Helper()
	if h.ep.State() != s {
		h.t.Fatalf("at %v: state: got %v, want %v", h.now(), h.ep.State(), s)
	}
}

func (h *harness) wantErr(want error) {
	h.t.Helper()
	if got := h.ep.Err(); !errors.Is(got, want) {
		h.t.Fatalf("Err: got %v, want %v", got, want)
	}
}

// peerSynAck is the peer's SYN-ACK answering the endpoint's SYN.
func (h *harness) peerSynAck() Segment {
	s := h.seg(FlagSYN|FlagACK, nil)
	s.Ack = testISS + 1
	s.Options.HasMSS, s.Options.MSS = true, 1460
	s.Options.HasWS, s.Options.WindowScale = true, 7
	s.Options.SACKPermitted = true
	return s
}

// dial makes an active open and returns at SYN-SENT with the SYN taken.
func (h *harness) dial(cfg Config) Segment {
	h.t.Helper()
	ep, err := Dial(OnWheel(h.w), h.out, testID, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ep = ep
	ep.SetNotify(h.notify)
	return h.expect(flagsAre(FlagSYN), seqIs(testISS))
}

// established returns a harness whose endpoint completed an active open with a
// peer using MSS 1460, window scale 7, SACK and timestamps (unless synOpts
// changes them).
func established(t *testing.T, cfg Config, synOpts ...func(*Segment)) *harness {
	t.Helper()
	h := newHarness(t)
	h.dial(cfg)
	sa := h.peerSynAck()
	for _, f := range synOpts {
		f(&sa)
	}
	h.pts = sa.Options.TS
	h.pack = testISS + 1
	h.send(sa)
	h.expect(flagsAre(FlagACK), seqIs(testISS+1), ackIs(peerISS+1))
	h.wantState(StateEstablished)
	h.takeEvents()
	return h
}

func noTS(s *Segment)   { s.Options.TS = false }
func noSACK(s *Segment) { s.Options.SACKPermitted = false }
func noWS(s *Segment)   { s.Options.HasWS = false }

// data returns n bytes of a recognisable pattern.
func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}
