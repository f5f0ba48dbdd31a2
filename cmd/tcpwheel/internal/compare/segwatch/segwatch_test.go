package segwatch

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"

	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

var (
	stackAP  = netip.MustParseAddrPort("198.18.0.2:40000")
	kernelAP = netip.MustParseAddrPort("198.18.0.1:80")
)

// tcpSeg describes a synthetic segment.
type tcpSeg struct {
	seq, ack uint32
	flags    header.TCPFlags
	payload  int
	wnd      uint16
	sacks    []header.SACKBlock
}

// packet builds an IPv4 TCP packet from src to dst.
func packet(src, dst netip.AddrPort, s tcpSeg) []byte {
	var opts []byte
	if len(s.sacks) > 0 {
		opts = make([]byte, 40)
		n := header.EncodeSACKBlocks(s.sacks, opts)
		for n%4 != 0 {
			opts[n] = header.TCPOptionNOP
			n++
		}
		opts = opts[:n]
	}
	thl := header.TCPMinimumSize + len(opts)
	total := header.IPv4MinimumSize + thl + s.payload
	b := make([]byte, total)
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(total), TTL: 64, Protocol: uint8(header.TCPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(src.Addr().As4()), DstAddr: tcpip.AddrFrom4(dst.Addr().As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	t := header.TCP(b[header.IPv4MinimumSize:])
	wnd := s.wnd
	if wnd == 0 {
		wnd = 1000
	}
	t.Encode(&header.TCPFields{
		SrcPort: src.Port(), DstPort: dst.Port(), SeqNum: s.seq, AckNum: s.ack,
		DataOffset: uint8(thl), Flags: s.flags, WindowSize: wnd,
	})
	copy(t[header.TCPMinimumSize:], opts)
	return b
}

// harness feeds a Watcher on a manual clock.
type harness struct {
	t   *testing.T
	now time.Duration
	w   *Watcher
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t}
	h.w = New(Config{Local: stackAP.Addr(), Now: func() time.Duration { return h.now }})
	t.Cleanup(h.w.Close)
	return h
}

func (h *harness) at(d time.Duration) *harness { h.now = d; return h }
func (h *harness) out(s tcpSeg) *harness       { h.w.Egress(packet(stackAP, kernelAP, s)); return h }
func (h *harness) in(s tcpSeg) *harness        { h.w.Ingress(packet(kernelAP, stackAP, s)); return h }

// setRTO fakes a sampled RTO for the flow.
func (h *harness) setRTO(d time.Duration) {
	h.w.mu.Lock()
	f := h.w.flowLocked(Flow{Local: stackAP, Remote: kernelAP})
	f.rto, f.rtoKnown = d, true
	h.w.mu.Unlock()
}

func (h *harness) events(want int) []Event {
	h.t.Helper()
	ev := h.w.Events()
	if len(ev) != want {
		h.t.Fatalf("got %d events %+v, want %d", len(ev), ev, want)
	}
	return ev
}

const (
	ack = header.TCPFlagAck
	syn = header.TCPFlagSyn
	fin = header.TCPFlagFin
	psh = header.TCPFlagPsh
	ms  = time.Millisecond
)

// establish runs a handshake from the stack (ISN isn) and returns the first data
// sequence number.
func (h *harness) establish(isn uint32) uint32 {
	h.at(0).out(tcpSeg{seq: isn, flags: syn})
	h.in(tcpSeg{seq: 5000, ack: isn + 1, flags: syn | ack})
	h.out(tcpSeg{seq: isn + 1, ack: 5001, flags: ack})
	return isn + 1
}

func TestNoRetransmissions(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	for i := range 10 {
		h.at(time.Duration(i) * ms).out(tcpSeg{seq: s + uint32(i)*1000, flags: ack, payload: 1000})
		h.in(tcpSeg{seq: 5001, ack: s + uint32(i+1)*1000, flags: ack})
	}
	h.events(0)
	if st := h.w.Stats(); st.EgressSegments != 11 || st.Flows != 1 {
		t.Errorf("stats %+v: want 11 segments with sequence space (SYN + 10), 1 flow", st)
	}
}

// EgressACKs counts the stack's pure ACKs: not its data, SYN or FIN, nor
// a RST.
func TestEgressACKs(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100) // its last segment is a pure ACK
	for i := range 3 {
		h.in(tcpSeg{seq: 5001 + uint32(i)*1000, ack: s, flags: ack, payload: 1000})
		h.out(tcpSeg{seq: s, ack: 5001 + uint32(i+1)*1000, flags: ack})
	}
	h.out(tcpSeg{seq: s, ack: 8001, flags: ack | fin})
	h.out(tcpSeg{seq: s + 1, flags: header.TCPFlagRst})
	if st := h.w.Stats(); st.EgressACKs != 4 || st.EgressSegments != 2 {
		t.Errorf("stats %+v: want 4 pure ACKs (handshake + 3), 2 segments with sequence space (SYN, FIN)", st)
	}
}

func TestRTO(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	h.setRTO(200 * ms)
	h.at(10 * ms).out(tcpSeg{seq: s, flags: ack | psh, payload: 500})
	h.at(210*ms + 300*time.Microsecond).out(tcpSeg{seq: s, flags: ack | psh, payload: 500})
	ev := h.events(1)[0]
	if ev.Kind != KindRTO || ev.Gap != 200*ms+300*time.Microsecond || ev.Nth != 1 || !ev.RTOKnown || ev.RTO != 200*ms {
		t.Fatalf("event %+v: want an RTO retransmission 200.3ms after the original, RTO 200ms", ev)
	}
	if got := ev.Slack(); got != 300*time.Microsecond {
		t.Errorf("slack %v, want 300µs", got)
	}
	// Backoff: the next one counts from the retransmission, with the doubled RTO.
	h.setRTO(400 * ms)
	h.at(611 * ms).out(tcpSeg{seq: s, flags: ack | psh, payload: 500})
	ev = h.events(2)[1]
	if ev.Kind != KindRTO || ev.Nth != 2 || ev.Gap != 400*ms+700*time.Microsecond || ev.SinceOriginal != 601*ms {
		t.Fatalf("event %+v: want the 2nd RTO retransmission 400.7ms after the 1st, 601ms after the original", ev)
	}
}

func TestFastRetransmit(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	h.setRTO(200 * ms)
	for i := range 6 {
		h.at(ms).out(tcpSeg{seq: s + uint32(i)*1000, flags: ack, payload: 1000})
	}
	h.at(2 * ms).in(tcpSeg{seq: 5001, ack: s + 1000, flags: ack}) // the 2nd segment is lost
	for i := range 3 {
		h.in(tcpSeg{seq: 5001, ack: s + 1000, flags: ack, sacks: []header.SACKBlock{{
			Start: seqnum.Value(s + 2000), End: seqnum.Value(s + uint32(3+i)*1000)}}})
	}
	h.at(3 * ms).out(tcpSeg{seq: s + 1000, flags: ack, payload: 1000})
	ev := h.events(1)[0]
	if ev.Kind != KindFast || ev.DupAcks != 3 || !ev.SACKed || ev.Gap != 2*ms {
		t.Fatalf("event %+v: want a fast retransmit after 3 dupACKs", ev)
	}
}

func TestRACKAndTLP(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	h.setRTO(200 * ms)
	for i := range 3 {
		h.at(ms).out(tcpSeg{seq: s + uint32(i)*1000, flags: ack, payload: 1000})
	}
	// The last one is lost: the stack probes it after 2*SRTT.
	h.at(2 * ms).in(tcpSeg{seq: 5001, ack: s + 2000, flags: ack})
	h.at(11 * ms).out(tcpSeg{seq: s + 2000, flags: ack, payload: 1000})
	if ev := h.events(1)[0]; ev.Kind != KindTLP || ev.Gap != 10*ms {
		t.Fatalf("event %+v: want a TLP 10ms after the original", ev)
	}
	// Then new data, the first of which is lost, and one SACK above it.
	h.at(20 * ms).out(tcpSeg{seq: s + 3000, flags: ack, payload: 1000})
	h.out(tcpSeg{seq: s + 4000, flags: ack, payload: 1000})
	h.at(21 * ms).in(tcpSeg{seq: 5001, ack: s + 3000, flags: ack, sacks: []header.SACKBlock{{Start: seqnum.Value(s + 4000), End: seqnum.Value(s + 5000)}}})
	h.at(22 * ms).out(tcpSeg{seq: s + 3000, flags: ack, payload: 1000})
	ev := h.events(2)[1]
	if ev.Kind != KindRACK || ev.DupAcks != 0 || !ev.SACKed {
		t.Fatalf("event %+v: want RACK (a SACK above, no dupACK: the ACK advanced)", ev)
	}
}

func TestSYNACKRetransmission(t *testing.T) {
	h := newHarness(t)
	// The stack is the server: the kernel's SYN, then the stack's SYN-ACK, twice.
	h.at(0).in(tcpSeg{seq: 5000, flags: syn})
	h.out(tcpSeg{seq: 7000, ack: 5001, flags: syn | ack})
	h.at(1000*ms + 400*time.Microsecond).out(tcpSeg{seq: 7000, ack: 5001, flags: syn | ack})
	h.at(3001 * ms).out(tcpSeg{seq: 7000, ack: 5001, flags: syn | ack})
	ev := h.events(2)
	if ev[0].Kind != KindRTO || !ev[0].SYN || ev[0].RTO != time.Second || ev[0].Slack() != 400*time.Microsecond {
		t.Errorf("event %+v: want the SYN-ACK's RTO retransmission, RTO 1s, slack 400µs", ev[0])
	}
	if ev[1].RTO != 2*time.Second || ev[1].Nth != 2 {
		t.Errorf("event %+v: want the second SYN-ACK retransmission with RTO 2s", ev[1])
	}
}

func TestTailFINAndProbes(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	h.setRTO(200 * ms)
	h.at(ms).out(tcpSeg{seq: s, flags: ack, payload: 1000})
	h.out(tcpSeg{seq: s + 1000, flags: ack | fin})
	h.at(2 * ms).in(tcpSeg{seq: 5001, ack: s + 1000, flags: ack})
	h.at(202 * ms).out(tcpSeg{seq: s + 1000, flags: ack | fin})
	ev := h.events(1)[0]
	if ev.Kind != KindRTO || !ev.FIN || ev.Len != 1 {
		t.Fatalf("event %+v: want the FIN's RTO retransmission", ev)
	}
	// Everything acknowledged, then keepalive probes (no data, and one byte).
	h.in(tcpSeg{seq: 5001, ack: s + 1001, flags: ack})
	h.at(300 * ms).out(tcpSeg{seq: s + 1000, flags: ack})
	h.at(400 * ms).out(tcpSeg{seq: s + 1000, flags: ack, payload: 1})
	ev2 := h.events(3)
	for _, e := range ev2[1:] {
		if e.Kind != KindProbe {
			t.Errorf("event %+v: want a probe", e)
		}
	}
	// A pure ACK at SND.NXT is nothing.
	h.at(500 * ms).out(tcpSeg{seq: s + 1001, ack: 5001, flags: ack})
	h.events(3)
}

func TestSequenceWrap(t *testing.T) {
	h := newHarness(t)
	s := h.establish(0xffff_fc00) // data wraps past 2^32
	h.setRTO(200 * ms)
	h.at(ms).out(tcpSeg{seq: s, flags: ack, payload: 1000})
	h.out(tcpSeg{seq: s + 1000, flags: ack, payload: 1000})
	h.at(2 * ms).in(tcpSeg{seq: 5001, ack: s + 1000, flags: ack})
	h.at(203 * ms).out(tcpSeg{seq: s + 1000, flags: ack, payload: 1000})
	ev := h.events(1)[0]
	if ev.Seq != s+1000 || ev.Kind != KindRTO || ev.Gap != 202*ms {
		t.Fatalf("event %+v: want an RTO retransmission of seq %d across the wrap", ev, s+1000)
	}
}

func TestPartialRetransmissionAndUnknownFlow(t *testing.T) {
	h := newHarness(t)
	// A flow joined in the middle: its first segment is taken as new.
	h.at(0).out(tcpSeg{seq: 9000, flags: ack, payload: 100})
	h.events(0)
	// A repacketized retransmission covering an old and a new range.
	h.at(300 * ms).out(tcpSeg{seq: 9050, flags: ack, payload: 100})
	ev := h.events(1)[0]
	if ev.Gap != 300*ms || ev.RTOKnown || ev.Kind != KindOther || ev.Acked {
		t.Errorf("event %+v: want a retransmission 300ms after the original, of unknown kind (no ACK, no RTO)", ev)
	}
	h.at(301 * ms).out(tcpSeg{seq: 9150, flags: ack, payload: 10})
	h.events(1) // new data
	// Garbage and other protocols are ignored.
	h.w.Egress([]byte{0x45, 0, 0})
	h.w.Ingress(nil)
	h.events(1)
}

func TestTrackAndDevice(t *testing.T) {
	a, b := tuntest.Pipe(1500)
	defer b.Close()
	w := New(Config{Local: stackAP.Addr()})
	var calls atomic.Int64
	w.Track(Flow{Local: stackAP, Remote: kernelAP}, func() Sample {
		calls.Add(1)
		return Sample{RTO: 250 * ms}
	})
	w.Track(Flow{Local: stackAP, Remote: kernelAP}, func() Sample { panic("tracked twice") })
	d := Wrap(a, w)
	if err := d.WritePacket(packet(stackAP, kernelAP, tcpSeg{seq: 1, flags: syn})); err != nil {
		t.Fatal(err)
	}
	go b.WritePacket(packet(kernelAP, stackAP, tcpSeg{seq: 5, ack: 2, flags: syn | ack}))
	buf := make([]byte, 1500)
	if _, err := d.ReadPacket(buf); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.Close()
	w.Close()
	if calls.Load() == 0 {
		t.Error("the RTO was never sampled")
	}
	if st := w.Stats(); st.EgressPackets != 1 || st.IngressPackets != 1 {
		t.Errorf("stats %+v: want one packet each way", st)
	}
	d.Close()
}

func TestProbeGap(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	h.at(10 * ms).in(tcpSeg{seq: 5001, ack: s, flags: ack})
	h.at(210 * ms).out(tcpSeg{seq: s - 1, flags: ack})
	h.at(211 * ms).in(tcpSeg{seq: 5001, ack: s, flags: ack})
	h.at(411 * ms).out(tcpSeg{seq: s - 1, flags: ack})
	ev := h.events(2)
	if ev[0].Kind != KindProbe || ev[0].Gap != 200*ms || ev[1].Gap != 200*ms {
		t.Fatalf("events %+v: want two probes, each 200ms after the flow's last packet", ev)
	}
}

// TestTimeoutCount: the stack's count of RTO expirations decides between an RTO
// and a probe timed like one.
func TestTimeoutCount(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	fl := Flow{Local: stackAP, Remote: kernelAP}
	sample := func(at time.Duration, rto time.Duration, timeouts uint64) {
		h.w.mu.Lock()
		f := h.w.flowLocked(fl)
		f.kick = make(chan struct{}, 1) // as if tracked
		h.w.applyLocked(f, at, Sample{RTO: rto, Timeouts: timeouts, HasTimeouts: true})
		h.w.mu.Unlock()
	}
	sample(0, 200*ms, 0)
	h.at(ms).out(tcpSeg{seq: s, flags: ack, payload: 100})
	sample(2*ms, 200*ms, 0)
	// A probe at the RTO's deadline: the count stays.
	h.at(201 * ms).out(tcpSeg{seq: s, flags: ack, payload: 100})
	sample(201*ms+10*time.Microsecond, 200*ms, 0)
	// Then the timer: the count grows, and so does the RTO.
	h.at(401 * ms).out(tcpSeg{seq: s, flags: ack, payload: 100})
	// A sample that began before the retransmission tells nothing about it.
	sample(400*ms, 200*ms, 0)
	sample(401*ms+10*time.Microsecond, 400*ms, 1)
	ev := h.events(2)
	if ev[0].Kind != KindTLP || !ev[0].TimeoutKnown || ev[0].TimedOut || !ev[0].Quiet {
		t.Errorf("event %+v: want a TLP (no RTO expiry counted)", ev[0])
	}
	if ev[1].Kind != KindRTO || !ev[1].TimedOut || ev[1].RTO != 200*ms {
		t.Errorf("event %+v: want an RTO (expiry counted), with the RTO before it, 200ms", ev[1])
	}
	h.w.mu.Lock()
	h.w.flowLocked(fl).kick = nil
	h.w.mu.Unlock()
}

func TestAlreadyAcknowledged(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	h.setRTO(200 * ms)
	h.at(ms).out(tcpSeg{seq: s, flags: ack, payload: 1000})
	h.out(tcpSeg{seq: s + 1000, flags: ack, payload: 1000})
	h.at(2 * ms).in(tcpSeg{seq: 5001, ack: s + 2000, flags: ack})
	// The stack had not read that ACK yet: it resends the first segment.
	h.at(2*ms + 10*time.Microsecond).out(tcpSeg{seq: s, flags: ack, payload: 1000})
	ev := h.events(1)[0]
	if ev.Kind != KindOther || !ev.Acked || ev.Nth != 0 {
		t.Fatalf("event %+v: want a spurious retransmission of acknowledged data", ev)
	}
}

func TestMidBurstIsNotTLP(t *testing.T) {
	h := newHarness(t)
	s := h.establish(100)
	h.setRTO(200 * ms)
	for i := range 4 {
		h.at(ms).out(tcpSeg{seq: s + uint32(i)*1000, flags: ack, payload: 1000})
	}
	// A segment of the middle resent right away, without evidence: not a TLP.
	h.at(ms + 30*time.Microsecond).out(tcpSeg{seq: s + 1000, flags: ack, payload: 1000})
	if ev := h.events(1)[0]; ev.Kind != KindOther {
		t.Fatalf("event %+v: want other", ev)
	}
}
