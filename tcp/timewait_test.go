package tcp

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// twPath is one way to TIME-WAIT after the application's Close.
type twPath struct {
	name string
	opts []func(*Segment) // on the peer's SYN-ACK
	cfg  func(*Config)
	run  func(h *harness)
}

var twPaths = []twPath{
	{name: "active close", run: func(h *harness) {
		h.sendData([]byte("request"))
		h.expectAck(h)
		buf := make([]byte, 16)
		h.ep.Read(buf)
		h.ep.Write([]byte("reply"))
		h.ep.Close()
		h.expect(flagsAre(FlagACK|FlagPSH), lenIs(5))
		h.expect(flagsAre(FlagACK|FlagFIN), seqIs(testISS+1+5))
		h.ackUpTo(testISS + 1 + 5 + 1)
		h.advance(3 * time.Millisecond)
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.expect(flagsAre(FlagACK))
	}},
	{name: "the peer's window small until TIME-WAIT", run: func(h *harness) {
		h.pwnd = 100 // the largest window seen stays small: RFC 5961 5.2's bound on old ACKs
		h.ackUpTo(testISS + 1)
		h.ep.Close()
		h.expect(flagsAre(FlagACK | FlagFIN))
		h.pack = testISS + 2
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.expect(flagsAre(FlagACK))
	}},
	{name: "simultaneous close, no timestamps", opts: []func(*Segment){noTS}, run: func(h *harness) {
		h.ep.Close()
		h.expect(flagsAre(FlagACK | FlagFIN))
		h.send(h.seg(FlagACK|FlagFIN, nil))
		h.expect(flagsAre(FlagACK))
		h.ackUpTo(testISS + 2)
	}},
	{name: "CloseWrite, the peer's FIN, then Close; no window scaling, small buffer", opts: []func(*Segment){noWS},
		cfg: func(c *Config) { c.RecvBuffer = 3000 },
		run: func(h *harness) {
			h.ep.CloseWrite()
			h.expect(flagsAre(FlagACK | FlagFIN))
			h.ackUpTo(testISS + 2)
			h.sendData(data(1000)) // the window shrinks to 1000: reading it after
			h.sendData(data(1000)) // the FIN moves the edge of the record's first ACK
			h.send(h.seg(FlagACK|FlagFIN, nil))
			h.out.segs = nil
			buf := make([]byte, 1000)
			for {
				if _, err := h.ep.Read(buf); err != nil {
					break
				}
			}
			h.advance(time.Second)
			h.ep.Close()
		}},
}

// expectAck takes the ACK of data, at once or at the delayed-ACK timeout.
func (h *harness) expectAck(*harness) {
	h.t.Helper()
	h.advance(DefaultDelayedACK)
	h.expect(flagsAre(FlagACK))
}

// toTimeWait is a harness whose endpoint went path's way to TIME-WAIT, the
// application gone (EventTimeWait seen).
func toTimeWait(t *testing.T, p twPath) *harness {
	t.Helper()
	cfg := testConfig()
	if p.cfg != nil {
		p.cfg(&cfg)
	}
	h := established(t, cfg, p.opts...)
	p.run(h)
	h.wantState(StateTimeWait)
	if ev := h.takeEvents(); ev&EventTimeWait == 0 {
		t.Fatalf("%s: events %v, want TimeWait", p.name, ev)
	}
	h.out.segs = nil
	return h
}

// handOver hands h's endpoint to a record on h's wheel and capture.
func handOver(t *testing.T, h *harness) (TimeWait, *TimeWaitHost, *[]ID) {
	t.Helper()
	var closed []ID
	host := &TimeWaitHost{Timers: OnWheel(h.w), Output: h.out, Closed: func(id ID) { closed = append(closed, id) }}
	pending := h.w.Len()
	r, ok := h.ep.TimeWait(host)
	if !ok {
		t.Fatal("TimeWait = nil for an endpoint in TIME-WAIT after Close")
	}
	h.wantState(StateClosed)
	if ev := h.takeEvents(); ev&EventClosed == 0 {
		t.Fatalf("the endpoint's events after TimeWait: %v, want Closed", ev)
	}
	if h.w.Len() != pending || len(h.out.segs) != 0 {
		t.Fatalf("TimeWait: %d timers pending (before %d), %d segments sent", h.w.Len(), pending, len(h.out.segs))
	}
	return r, host, &closed
}

// twSegment is a segment to a connection in TIME-WAIT, random in the ways
// that decide its answer: flags, sequence and acknowledgment numbers near
// and far from the edges, window, timestamps older and newer, payload.
func twSegment(rng *rand.Rand, rcvNxt, sndNxt seqnum.Value, tsRecent uint32) Segment {
	flags := []Flags{FlagACK, FlagACK | FlagFIN, FlagACK | FlagPSH, FlagRST, FlagRST | FlagACK, FlagSYN, FlagSYN | FlagACK, FlagSYN | FlagFIN, 0, FlagFIN}
	near := func(base seqnum.Value) seqnum.Value {
		d := []int32{0, 0, 0, 1, -1, 2, -2, 100, -100, 1500, 2999, 3000, 65535, -65535, 1 << 20, -(1 << 20), 1 << 30, -(1 << 30)}
		return base.Add(seqnum.Size(d[rng.IntN(len(d))]))
	}
	s := Segment{SrcPort: remoteAP.Port(), DstPort: localAP.Port(), Flags: flags[rng.IntN(len(flags))],
		Seq: near(rcvNxt), Ack: near(sndNxt), Window: uint16(rng.IntN(3) * 30000)}
	if rng.IntN(4) > 0 {
		s.Options.TS, s.Options.TSEcr = true, rng.Uint32()
		s.Options.TSVal = tsRecent + uint32([]int32{0, 1, 5, -1, -5, 1 << 30}[rng.IntN(6)])
	}
	if n := rng.IntN(3); n > 0 {
		s.Payload = data(n * 3)
	}
	return s
}

// counterDelta is b - a, field by field.
func counterDelta(a, b Counters) Counters {
	var d Counters
	va, vb, vd := reflect.ValueOf(a), reflect.ValueOf(b), reflect.ValueOf(&d).Elem()
	for i := range vd.NumField() {
		vd.Field(i).SetUint(vb.Field(i).Uint() - va.Field(i).Uint())
	}
	return d
}

// twDiff is a differential test's pair: two harnesses went the same way to
// TIME-WAIT; a keeps its endpoint, b's went to rec.
type twDiff struct {
	t      *testing.T
	name   string
	a, b   *harness
	rec    TimeWait
	host   *TimeWaitHost
	closed *[]ID
	before Counters
}

func newTWDiff(t *testing.T, p twPath) *twDiff {
	d := &twDiff{t: t, name: p.name, a: toTimeWait(t, p), b: toTimeWait(t, p)}
	d.before = d.a.ep.Counters()
	d.rec, d.host, d.closed = handOver(t, d.b)
	return d
}

// advance moves both clocks by dt.
func (d *twDiff) advance(dt time.Duration) { d.a.advance(dt); d.b.advance(dt) }

// segment hands seg to both, after comparing their reuse tests.
func (d *twDiff) segment(seg Segment, at string) {
	if got, want := d.rec.reusableBy(&seg), d.a.ep.reusableBy(&seg); got != want {
		d.t.Fatalf("%s %s: record reusableBy(%v) = %v, endpoint's %v", d.name, at, &seg, got, want)
	}
	sa, sb := seg, seg
	d.a.ep.HandleSegment(&sa)
	d.rec.HandleSegment(&sb)
}

// same fails unless both sent the same segments and counted the same, and
// reports whether they are closed (both, or the test fails).
func (d *twDiff) same(at string) bool {
	t, a, b := d.t, d.a, d.b
	if len(a.out.segs) != len(b.out.segs) {
		t.Fatalf("%s %s: endpoint sent %v, record %v", d.name, at, a.out.segs, b.out.segs)
	}
	for i := range a.out.segs {
		if !reflect.DeepEqual(a.out.segs[i], b.out.segs[i]) {
			t.Fatalf("%s %s: endpoint sent %v, record %v", d.name, at, &a.out.segs[i], &b.out.segs[i])
		}
	}
	if got, want := d.host.Counters, counterDelta(d.before, a.ep.Counters()); got != want {
		t.Fatalf("%s %s: record counted %+v, endpoint %+v", d.name, at, got, want)
	}
	aClosed := a.ep.State() == StateClosed
	if aClosed != d.rec.Closed() || len(*d.closed) != btoi(d.rec.Closed()) {
		t.Fatalf("%s %s at %v: endpoint closed %v, record closed %v (host told %d times)",
			d.name, at, a.now(), aClosed, d.rec.Closed(), len(*d.closed))
	}
	if !aClosed && a.w.Len() != b.w.Len() {
		t.Fatalf("%s %s: %d timers pending with the endpoint, %d with the record", d.name, at, a.w.Len(), b.w.Len())
	}
	return aClosed
}

// TestTimeWaitRecordAnswersAsTheEndpoint is a differential test: two
// harnesses go the same way to TIME-WAIT; one keeps its endpoint, the other
// hands it to a record; both then get the same random segments at the same
// instants (and time passes, past 2*MSL at times). Every segment sent, every
// counter, the instant each closes, and RFC 6191's reuse test must be the
// same.
func TestTimeWaitRecordAnswersAsTheEndpoint(t *testing.T) {
	for pi, p := range twPaths {
		for seed := range uint64(150) {
			rng := rand.New(rand.NewPCG(seed, uint64(pi)))
			d := newTWDiff(t, p)
			for step := range 60 {
				at := fmt.Sprintf("seed %d step %d", seed, step)
				if rng.IntN(5) == 0 {
					d.advance(time.Duration(rng.IntN(40)) * time.Second / time.Duration(1+rng.IntN(4)))
				} else {
					ep := d.a.ep
					d.segment(twSegment(rng, ep.rcv.nxt, ep.snd.nxt, ep.tsRecent), at)
				}
				if d.same(at) {
					break
				}
			}
		}
	}
}

// TestTimeWaitRecordWindowUpdateRule: only a segment that RFC 9293's
// SND.WL1/SND.WL2 rule lets update the window can raise the largest window
// seen, which bounds the ACKs taken as old (RFC 5961 5.2).
func TestTimeWaitRecordWindowUpdateRule(t *testing.T) {
	d := newTWDiff(t, twPaths[1]) // the peer's window was 100
	rcv, snd := d.a.ep.rcv.nxt, d.a.ep.snd.nxt
	ack := func(seq, ack seqnum.Value, wnd uint16) Segment {
		return Segment{SrcPort: remoteAP.Port(), DstPort: localAP.Port(), Flags: FlagACK, Seq: seq, Ack: ack, Window: wnd}
	}
	d.segment(ack(rcv+50, snd, 10), "a later segment: the window is its")
	d.same("1")
	d.segment(ack(rcv, snd, 60000), "an earlier one: its window is not taken")
	d.same("2")
	d.segment(ack(rcv+50, snd-1, 60000), "as late, an older ACK: not taken either")
	d.same("3")
	d.segment(ack(rcv+50, snd-100000, 0), "an ACK older than the largest window: a challenge ACK")
	d.same("4")
	if n := len(d.a.out.segs); n != 1 || d.host.Counters.ChallengeACKs != 1 {
		t.Fatalf("%d segments sent, %d challenge ACKs; want 1 1", n, d.host.Counters.ChallengeACKs)
	}
	d.segment(ack(rcv+51, snd, 60000), "later: taken")
	d.segment(ack(rcv+51, snd-100000, 0), "now within the largest window")
	d.same("5")
	if n := len(d.a.out.segs); n != 1 {
		t.Fatalf("%d segments sent, want the one challenge ACK", n)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestTimeWaitRecordTimesOut: the record ends at the instant the
// endpoint's 2*MSL would have (taken over, not restarted), and a FIN
// restarts it.
func TestTimeWaitRecordTimesOut(t *testing.T) {
	h := toTimeWait(t, twPaths[0])
	entered := h.now()
	h.advance(10 * time.Second)
	rec, _, closed := handOver(t, h)
	h.advanceTo(entered + DefaultTimeWait - testTick)
	if rec.Closed() {
		t.Fatal("closed before 2*MSL")
	}
	h.advanceTo(entered + DefaultTimeWait)
	if !rec.Closed() || len(*closed) != 1 || (*closed)[0] != h.ep.ID() || h.w.Len() != 0 {
		t.Fatalf("at 2*MSL: closed %v, host told %d times, %d timers pending", rec.Closed(), len(*closed), h.w.Len())
	}

	h = toTimeWait(t, twPaths[0])
	rec, _, closed = handOver(t, h)
	h.advance(50 * time.Second)
	h.pseq--                            // the FIN again
	h.send(h.seg(FlagACK|FlagFIN, nil)) // to the closed endpoint: dropped
	fin := h.seg(FlagACK|FlagFIN, nil)
	fin.Seq--
	rec.HandleSegment(&fin)
	h.expect(flagsAre(FlagACK), ackIs(fin.Seq+1))
	restarted := h.now()
	h.advanceTo(restarted + DefaultTimeWait - testTick)
	if rec.Closed() {
		t.Fatal("a FIN did not restart 2*MSL")
	}
	h.advanceTo(restarted + DefaultTimeWait)
	if !rec.Closed() || len(*closed) != 1 {
		t.Fatal("not closed 2*MSL after the FIN")
	}
}

// TestTimeWaitOnlyAfterClose: no record for an endpoint the application
// has not closed (it may still read), nor for one in another state; the
// endpoint is left as it was.
func TestTimeWaitOnlyAfterClose(t *testing.T) {
	host := &TimeWaitHost{Closed: func(ID) {}}
	h := established(t, testConfig())
	if _, ok := h.ep.TimeWait(host); ok {
		t.Fatal("a record of an ESTABLISHED endpoint")
	}
	h.ep.CloseWrite()
	h.expect(flagsAre(FlagACK | FlagFIN))
	h.ackUpTo(testISS + 2)
	h.send(h.seg(FlagACK|FlagFIN, nil))
	h.wantState(StateTimeWait)
	if ev := h.takeEvents(); ev&EventTimeWait != 0 {
		t.Fatalf("EventTimeWait before Close: %v", ev)
	}
	if _, ok := h.ep.TimeWait(host); ok {
		t.Fatal("a record of an endpoint the application has not closed")
	}
	h.wantState(StateTimeWait)
	h.ep.Close()
	if ev := h.takeEvents(); ev&EventTimeWait == 0 {
		t.Fatalf("Close in TIME-WAIT: events %v, want TimeWait", ev)
	}
}

// TestTimeWaitRecordReuse: a newer SYN replaces the record through the
// listener (RFC 6191) with the ISS the endpoint's reuse gives, and the
// record closes; an old one does not.
func TestTimeWaitRecordReuse(t *testing.T) {
	h := passiveTimeWait(t, true)
	rec, _, closed := handOver(t, h)
	old := h.peerSyn()
	old.Seq = peerISS + 1
	old.Options.TSVal = rec.rec().tsRecent - 1
	if h.ln.ReuseTimeWaitRecord(rec, &old) || rec.Closed() || rec.Replace(&old) {
		t.Fatal("an older SYN replaced the record")
	}
	syn := h.peerSyn()
	syn.Seq = peerISS + 1000
	if !h.ln.ReuseTimeWaitRecord(rec, &syn) || !rec.Closed() || len(*closed) != 1 {
		t.Fatal("a newer SYN did not replace the record")
	}
	h.expect(flagsAre(FlagSYN|FlagACK), seqIs(reuseISS), ackIs(syn.Seq+1))
	if st := h.ln.Stats(); st.TimeWaitReused != 1 || h.ln.HalfOpen() != 1 {
		t.Fatalf("TimeWaitReused %d, half-open %d; want 1 1", st.TimeWaitReused, h.ln.HalfOpen())
	}
	if rec.Replace(&syn) || h.ln.ReuseTimeWaitRecord(rec, &syn) {
		t.Fatal("a closed record was replaced again")
	}
}

// TestTimeWaitRecordSize: a record stays within 128 bytes, and neither it
// nor the index's key holds a pointer: the garbage collector does not scan
// a host's table (a busy server's minute of TIME-WAIT), and a field more
// with a pointer would make it.
func TestTimeWaitRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(twRecord{}); got > 128 {
		t.Fatalf("a record is %d bytes, want at most 128", got)
	}
	for _, v := range []any{twRecord{}, twKey{}, int32(0)} {
		if p := pointerIn(reflect.TypeOf(v)); p != "" {
			t.Fatalf("%T holds a pointer: %s", v, p)
		}
	}
	t.Logf("record: %d bytes, key %d, handle %d; Endpoint: %d", unsafe.Sizeof(twRecord{}), unsafe.Sizeof(twKey{}), unsafe.Sizeof(TimeWait{}), unsafe.Sizeof(Endpoint{}))
}

// pointerIn names a field of t that is or holds a pointer, or returns "".
func pointerIn(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if p := pointerIn(t.Field(i).Type); p != "" {
				return t.Field(i).Name + "." + p
			}
		}
		return ""
	case reflect.Array:
		return pointerIn(t.Elem())
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	}
	return t.String()
}
