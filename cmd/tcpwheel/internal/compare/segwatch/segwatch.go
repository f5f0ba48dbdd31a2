// Package segwatch watches the TCP segments a stack sends and receives at its
// device, and reports each retransmission and probe the stack sends: when, how
// long after the previous transmission of the same sequence range, the stack's
// RTO at that moment, and what kind it most likely was.
//
// It knows nothing of the stack: it sees only packets, so the same watcher
// judges tcpwheel and gVisor alike. Put it on the stack's side of the
// impairment layer, so that it sees every packet the stack sent (also those
// that are then dropped) and only the packets the stack really received:
//
//	stack ── segwatch.Wrap ── pcap tap ── impair ── TUN
//
// # Retransmissions
//
// An egress segment whose sequence range (SYN and FIN included) starts below
// the highest sequence number sent so far on its flow is a retransmission. Its
// gap is the time since the previous transmission of the range it starts in;
// SinceOriginal is the time since the first. Its kind is inferred, in this
// order:
//
//  1. a segment of at most one byte at SND.UNA-1 is a probe (keepalive or
//     zero-window), not a retransmission;
//  2. a repeated SYN or SYN-ACK is an RTO (the SYN timer);
//  3. at SND.UNA, at least RTO (less a small tolerance) after the previous
//     transmission: RTO;
//  4. after at least 3 duplicate ACKs since the last advance of SND.UNA: fast
//     retransmit;
//  5. after a SACK block above the segment, with fewer duplicate ACKs: RACK;
//  6. before the RTO, with neither, of the last segment sent, and with nothing
//     sent since its previous transmission: TLP (a tail loss probe, at about
//     2*SRTT);
//  7. anything else (the other segments resent after an RTO, and ranges already
//     acknowledged, which are flagged Acked): other.
//
// The RTO is the stack's own figure, sampled by a Track callback after every
// packet of the flow (so the value in force when the timer fired is the last one
// sampled before the retransmission), or, for SYN and SYN-ACK retransmissions
// on untracked flows, the initial RTO with its backoff. Where the callback also
// counts the connection's RTO expirations, the count overrides the timing: the
// first retransmission after the count grew is an RTO, and one timed like an
// RTO that the count does not credit is a TLP (gVisor caps its probe timeout at
// the RTO's deadline, so the two can coincide).
package segwatch

import (
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"

	"github.com/tcpwheel/tcpwheel/tun"
)

// Kind is what a retransmission or probe most likely was.
type Kind uint8

const (
	KindRTO   Kind = iota + 1 // the retransmission timer fired
	KindTLP                   // a tail loss probe (RACK-TLP's PTO)
	KindRACK                  // RACK loss detection: a SACK above, few duplicate ACKs
	KindFast                  // fast retransmit: 3 or more duplicate ACKs
	KindOther                 // resent after a recovery started (e.g. after an RTO)
	KindProbe                 // a keepalive or zero-window probe (not a retransmission)
)

var kindNames = [...]string{KindRTO: "rto", KindTLP: "tlp", KindRACK: "rack", KindFast: "fast", KindOther: "other", KindProbe: "probe"}

// String returns "rto", "tlp", "rack", "fast", "other" or "probe".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Flow is a connection seen from the stack.
type Flow struct {
	Local, Remote netip.AddrPort
}

func (f Flow) String() string { return f.Local.String() + "->" + f.Remote.String() }

// Event is one retransmission or probe sent by the stack.
type Event struct {
	At       time.Duration // on the watcher's clock
	Flow     Flow
	Kind     Kind
	Seq      uint32
	Len      int  // sequence space: payload, plus one for SYN and for FIN
	SYN, FIN bool // the segment carries SYN (a SYN or SYN-ACK), FIN
	Nth      int  // 1 for the first retransmission of the range, 2 for the next...
	// Gap is the time since the previous transmission of the range; for a
	// probe, the time since the flow's previous packet either way.
	Gap           time.Duration
	SinceOriginal time.Duration
	// RTO is the stack's RTO in force before this segment, and RTOKnown whether
	// there was one: sampled from the stack, or the initial RTO (with backoff)
	// for a SYN or SYN-ACK.
	RTO      time.Duration
	RTOKnown bool
	// Acked: the range had already been acknowledged (as far as the watcher
	// saw) when it was sent again: a spurious retransmission.
	Acked   bool
	DupAcks int  // duplicate ACKs received since SND.UNA last advanced
	SACKed  bool // a SACK block above the segment had been received
	// Quiet: nothing else with sequence space was sent on the flow between the
	// previous transmission of the range and this one, so no other send could
	// have re-armed the timer: Slack is then the timer's own lateness.
	Quiet bool
	// TimeoutKnown says whether the stack's count of RTO expirations was sampled
	// before and after this segment; TimedOut whether it grew (the first
	// segment after the expiry gets the credit).
	TimeoutKnown, TimedOut bool

	timeoutsBefore uint64
	pending        bool // waiting for the tracker's next sample
}

// Slack is Gap - RTO: how late the retransmission came after its timer was due.
// Meaningful for KindRTO.
func (e Event) Slack() time.Duration { return e.Gap - e.RTO }

// Config configures a Watcher.
type Config struct {
	// Local is the stack's address: packets from it are egress.
	Local netip.Addr
	// Now is the clock; nil means time since New, on the monotonic clock.
	Now func() time.Duration
	// InitialRTO is assumed for SYN and SYN-ACK retransmissions of flows whose
	// RTO is not sampled; zero means 1 s (RFC 6298 (2.1)).
	InitialRTO time.Duration
	// MaxEvents bounds the events kept; zero means 1<<20. Later events are
	// counted in Stats().EventsLost.
	MaxEvents int
}

// Stats counts what the watcher saw.
type Stats struct {
	EgressPackets, IngressPackets uint64
	EgressSegments                uint64 // TCP segments with sequence space (data, SYN, FIN)
	EgressACKs                    uint64 // pure ACKs: no sequence space, no RST, not a probe
	Flows                         int
	Events                        map[string]int // by kind
	EventsLost                    uint64
}

// Watcher follows every TCP flow of one stack. Its methods are safe for
// concurrent use.
type Watcher struct {
	cfg   Config
	start time.Time

	mu     sync.Mutex
	flows  map[Flow]*flow
	events []Event
	stats  Stats
	closed bool
	wg     sync.WaitGroup
}

// flow is the state of one connection. Guarded by Watcher.mu.
type flow struct {
	started bool
	sndMax  seqnum.Value // the highest sequence number sent, plus one
	una     seqnum.Value // the highest cumulative ACK received
	unaSeen bool
	dupAcks int
	sackTop seqnum.Value // the highest SACK right edge received above una
	sacked  bool
	wnd     uint16 // the window of the last ACK received, unscaled
	spans   []span // in sequence order, non-overlapping; below una pruned

	synTx int // SYN or SYN-ACK transmissions

	last time.Duration // the flow's last packet, either way

	lastSeqTx time.Duration // the last egress segment with sequence space

	// The stack's RTO and count of RTO expirations, sampled by the tracker
	// goroutine.
	rto         time.Duration
	rtoKnown    bool
	timeouts    uint64
	hasTimeouts bool
	pending     []int         // events waiting for the next sample
	kick        chan struct{} // nil unless tracked
}

// Sample is what a Track callback reads from the stack: the connection's
// current RTO, and, where the stack counts them, its RTO expirations so far.
type Sample struct {
	RTO         time.Duration
	Timeouts    uint64
	HasTimeouts bool
}

// span is a range first sent as one segment.
type span struct {
	start, end  seqnum.Value
	first, last time.Duration
	count       int // transmissions
}

// New returns a watcher.
func New(cfg Config) *Watcher {
	if cfg.InitialRTO == 0 {
		cfg.InitialRTO = time.Second
	}
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = 1 << 20
	}
	w := &Watcher{cfg: cfg, start: time.Now(), flows: make(map[Flow]*flow)}
	if w.cfg.Now == nil {
		w.cfg.Now = func() time.Duration { return time.Since(w.start) }
	}
	return w
}

// Now reads the watcher's clock.
func (w *Watcher) Now() time.Duration { return w.cfg.Now() }

// seg is the part of a TCP segment the watcher reads.
type seg struct {
	flow    Flow // from the stack's side
	seq     seqnum.Value
	ack     seqnum.Value
	flags   header.TCPFlags
	payload int
	wnd     uint16
	sacks   []header.SACKBlock
}

func (s *seg) seqLen() int {
	n := s.payload
	if s.flags&header.TCPFlagSyn != 0 {
		n++
	}
	if s.flags&header.TCPFlagFin != 0 {
		n++
	}
	return n
}

// TCPPacket splits a TCP packet over IPv4 (not a fragment), or over IPv6
// with no extension header (the stacks send none), into its addresses and
// its TCP header and payload (not checked beyond the IP header).
func TCPPacket(pkt []byte) (src, dst netip.Addr, t header.TCP, ok bool) {
	switch header.IPVersion(pkt) {
	case header.IPv4Version:
		ip := header.IPv4(pkt)
		if !ip.IsValid(len(pkt)) || ip.Protocol() != uint8(header.TCPProtocolNumber) || ip.FragmentOffset() != 0 || ip.More() {
			return src, dst, nil, false
		}
		hlen, tlen := int(ip.HeaderLength()), int(ip.TotalLength())
		return netip.AddrFrom4(ip.SourceAddress().As4()), netip.AddrFrom4(ip.DestinationAddress().As4()), header.TCP(pkt[hlen:tlen]), true
	case header.IPv6Version:
		ip := header.IPv6(pkt)
		if !ip.IsValid(len(pkt)) || ip.NextHeader() != uint8(header.TCPProtocolNumber) {
			return src, dst, nil, false
		}
		end := header.IPv6MinimumSize + int(ip.PayloadLength())
		return netip.AddrFrom16(ip.SourceAddress().As16()), netip.AddrFrom16(ip.DestinationAddress().As16()), header.TCP(pkt[header.IPv6MinimumSize:end]), true
	}
	return src, dst, nil, false
}

// parse reads a TCP packet (see TCPPacket); egress tells which end is the
// stack.
func parse(pkt []byte, egress bool) (seg, bool) {
	srcIP, dstIP, t, ok := TCPPacket(pkt)
	if !ok {
		return seg{}, false
	}
	if len(t) < header.TCPMinimumSize {
		return seg{}, false
	}
	off := int(t.DataOffset())
	if off < header.TCPMinimumSize || off > len(t) {
		return seg{}, false
	}
	src := netip.AddrPortFrom(srcIP, t.SourcePort())
	dst := netip.AddrPortFrom(dstIP, t.DestinationPort())
	s := seg{
		seq: seqnum.Value(t.SequenceNumber()), ack: seqnum.Value(t.AckNumber()),
		flags: t.Flags(), payload: len(t) - off, wnd: t.WindowSize(),
	}
	if egress {
		s.flow = Flow{Local: src, Remote: dst}
	} else {
		s.flow = Flow{Local: dst, Remote: src}
		if off > header.TCPMinimumSize && s.flags&header.TCPFlagAck != 0 {
			s.sacks = header.ParseTCPOptions(t[header.TCPMinimumSize:off]).SACKBlocks
		}
	}
	return s, true
}

// Egress records a packet the stack sent (a whole IPv4 or IPv6 packet). pkt is not
// retained.
func (w *Watcher) Egress(pkt []byte) {
	now := w.cfg.Now()
	s, ok := parse(pkt, true)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.EgressPackets++
	if !ok || s.flow.Local.Addr() != w.cfg.Local {
		return
	}
	f := w.flowLocked(s.flow)
	defer f.poke()
	idle := now - f.last
	f.last = now
	if s.flags&header.TCPFlagRst != 0 {
		return
	}
	n := s.seqLen()
	if f.isProbe(&s, n) {
		w.addLocked(Event{At: now, Flow: s.flow, Kind: KindProbe, Seq: uint32(s.seq), Len: n, Gap: idle,
			RTO: f.rto, RTOKnown: f.rtoKnown, DupAcks: f.dupAcks})
		return
	}
	if n == 0 {
		w.stats.EgressACKs++
		return
	}
	w.stats.EgressSegments++
	start, end := s.seq, s.seq.Add(seqnum.Size(n))
	if s.flags&header.TCPFlagSyn != 0 {
		f.synTx++
	}
	if !f.started {
		// The first segment of the flow: a SYN, or, for a flow the watcher
		// joined late, whatever comes first.
		f.started = true
		f.sndMax = start
	}
	if !start.LessThan(f.sndMax) {
		// New data (possibly after a hole, which the stack never leaves).
		f.lastSeqTx = now
		f.spans = append(f.spans, span{start: start, end: end, first: now, last: now, count: 1})
		f.sndMax = end
		return
	}
	w.retransmittedLocked(f, &s, now, n)
}

// isProbe reports whether s, of n bytes of sequence space, is a window or
// keepalive probe: at most one byte at SND.UNA-1.
func (f *flow) isProbe(s *seg, n int) bool {
	return f.unaSeen && n <= 1 && s.flags&(header.TCPFlagSyn|header.TCPFlagFin) == 0 && s.seq == f.una.Add(^seqnum.Size(0))
}

// retransmittedLocked records s, a retransmission of at least its first
// bytes (n of sequence space), as an event, and marks what it resent.
func (w *Watcher) retransmittedLocked(f *flow, s *seg, now time.Duration, n int) {
	start, end := s.seq, s.seq.Add(seqnum.Size(n))
	i := f.find(start)
	ev := f.retransmission(s, now, i, n, w.cfg.InitialRTO)
	if f.hasTimeouts && f.kick != nil && len(w.events) < w.cfg.MaxEvents {
		ev.timeoutsBefore, ev.pending = f.timeouts, true
		f.pending = append(f.pending, len(w.events))
	}
	w.addLocked(ev)
	f.markResent(i, start, end, now)
}

// retransmission is the event of s, a retransmission of n bytes of sequence
// space starting in span i (-1: below every span kept), classified.
func (f *flow) retransmission(s *seg, now time.Duration, i, n int, initialRTO time.Duration) Event {
	start, end := s.seq, s.seq.Add(seqnum.Size(n))
	isSYN := s.flags&header.TCPFlagSyn != 0
	var prev span
	if i >= 0 {
		prev = f.spans[i]
	} else {
		// Below everything kept (already acknowledged, or sent before the
		// watcher saw the flow): time it against nothing.
		prev = span{first: now, last: now}
	}
	quiet := i >= 0 && f.lastSeqTx == prev.last
	f.lastSeqTx = now
	ev := Event{
		At: now, Flow: s.flow, Seq: uint32(s.seq), Len: n, Quiet: quiet,
		SYN: isSYN, FIN: s.flags&header.TCPFlagFin != 0,
		Nth: prev.count, Gap: now - prev.last, SinceOriginal: now - prev.first,
		RTO: f.rto, RTOKnown: f.rtoKnown, DupAcks: f.dupAcks,
		SACKed: f.sacked && end.LessThanEq(f.sackTop),
	}
	if i < 0 {
		ev.Nth, ev.Acked = 0, true
	}
	if isSYN && !ev.RTOKnown {
		ev.RTO = initialRTO << max(f.synTx-2, 0)
		ev.RTOKnown = true
	}
	ev.Kind = classify(ev, f.unaSeen && start == f.una || isSYN, end == f.sndMax)
	return ev
}

// markResent marks every span from i on that [start, end) covers as sent
// again at now, and adds a span for the bytes beyond the highest sent.
func (f *flow) markResent(i int, start, end seqnum.Value, now time.Duration) {
	for j := max(i, 0); j < len(f.spans) && f.spans[j].start.LessThan(end); j++ {
		if f.spans[j].end.LessThanEq(start) {
			continue
		}
		f.spans[j].last = now
		f.spans[j].count++
	}
	if f.sndMax.LessThan(end) {
		// Retransmitted and extended with new bytes.
		f.spans = append(f.spans, span{start: f.sndMax, end: end, first: now, last: now, count: 1})
		f.sndMax = end
	}
}

// classify infers the kind of a retransmission (see the package doc); atUna
// says the segment starts at SND.UNA, last that it ends at the highest sequence
// number sent.
func classify(ev Event, atUna, last bool) Kind {
	switch {
	case ev.Acked:
		return KindOther
	case ev.SYN:
		return KindRTO
	case atUna && (!ev.RTOKnown || ev.Gap >= ev.RTO-tolerance(ev.RTO)):
		return KindRTO
	case ev.DupAcks >= 3:
		return KindFast
	case ev.SACKed:
		return KindRACK
	case last && ev.Quiet && ev.RTOKnown && ev.Gap < ev.RTO-tolerance(ev.RTO):
		return KindTLP
	}
	return KindOther
}

// tolerance is how much earlier than the RTO a retransmission may come and still
// count as the RTO's: the RTO sampled may be a little above the one the timer was
// armed with (a later RTT sample).
func tolerance(rto time.Duration) time.Duration {
	return max(rto/20, time.Millisecond)
}

// find returns the index of the span holding v, or -1.
func (f *flow) find(v seqnum.Value) int {
	i := sort.Search(len(f.spans), func(i int) bool { return v.LessThan(f.spans[i].end) })
	if i < len(f.spans) && f.spans[i].start.LessThanEq(v) {
		return i
	}
	return -1
}

// Ingress records a packet the stack received (a whole IPv4 or IPv6 packet). pkt is not
// retained.
func (w *Watcher) Ingress(pkt []byte) {
	s, ok := parse(pkt, false)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.IngressPackets++
	if !ok || s.flow.Local.Addr() != w.cfg.Local || s.flags&header.TCPFlagAck == 0 {
		return
	}
	f := w.flowLocked(s.flow)
	defer f.poke()
	f.last = w.cfg.Now()
	switch {
	case !f.unaSeen || f.una.LessThan(s.ack):
		f.una, f.unaSeen = s.ack, true
		f.dupAcks = 0
		// Forget what is acknowledged, keeping the span holding una-1 so that a
		// probe there is still recognised as such.
		k := 0
		for k < len(f.spans) && f.spans[k].end.LessThanEq(f.una) {
			k++
		}
		if k > 0 {
			f.spans = append(f.spans[:0], f.spans[k:]...)
		}
	case s.ack == f.una && s.payload == 0 && s.flags&(header.TCPFlagSyn|header.TCPFlagFin) == 0 &&
		s.wnd == f.wnd && f.una.LessThan(f.sndMax):
		f.dupAcks++ // RFC 5681 2: a duplicate ACK
	}
	f.wnd = s.wnd
	for _, b := range s.sacks {
		if f.una.LessThan(b.End) && (!f.sacked || f.sackTop.LessThan(b.End)) {
			f.sackTop, f.sacked = b.End, true
		}
	}
	if f.sacked && f.sackTop.LessThanEq(f.una) {
		f.sacked = false
	}
}

func (w *Watcher) flowLocked(fl Flow) *flow {
	f := w.flows[fl]
	if f == nil {
		f = &flow{}
		w.flows[fl] = f
		w.stats.Flows++
	}
	return f
}

func (w *Watcher) addLocked(ev Event) {
	if len(w.events) >= w.cfg.MaxEvents {
		w.stats.EventsLost++
		return
	}
	w.events = append(w.events, ev)
}

// poke asks the flow's tracker, if any, for a fresh RTO sample.
func (f *flow) poke() {
	if f.kick != nil {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// Track samples the stack's state for fl by calling sample after every packet
// of the flow (coalesced), on a goroutine of its own, until Close. sample may
// block on the stack (it must not be called from inside the stack's send path,
// which is why it runs here). Tracking a flow twice keeps the first tracker.
func (w *Watcher) Track(fl Flow, sample func() Sample) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	f := w.flowLocked(fl)
	if f.kick != nil {
		return
	}
	kick := make(chan struct{}, 1)
	f.kick = kick
	kick <- struct{}{} // a first sample now
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for range kick {
			t0 := w.cfg.Now()
			v := sample()
			w.mu.Lock()
			w.applyLocked(f, t0, v)
			w.mu.Unlock()
		}
	}()
}

// applyLocked takes a sample that started at t0.
func (w *Watcher) applyLocked(f *flow, t0 time.Duration, v Sample) {
	if v.RTO <= 0 {
		return // the connection is gone: keep the last sample
	}
	f.rto, f.rtoKnown = v.RTO, true
	if !v.HasTimeouts {
		return
	}
	credited := false
	keep := f.pending[:0]
	for _, i := range f.pending {
		ev := &w.events[i]
		if ev.At >= t0 {
			keep = append(keep, i) // sent after the sample began: the next one tells
			continue
		}
		ev.pending = false
		ev.TimeoutKnown = true
		if v.Timeouts > ev.timeoutsBefore && !credited {
			ev.TimedOut, credited = true, true
		}
	}
	f.pending = keep
	f.timeouts, f.hasTimeouts = v.Timeouts, true
}

// Close stops the trackers and waits for them. Egress and Ingress still work
// afterwards, without RTO samples.
func (w *Watcher) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		for _, f := range w.flows {
			if f.kick != nil {
				close(f.kick)
				f.kick = nil
			}
		}
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// Events returns a copy of the events so far, in order.
//
// Where the stack's RTO expirations were counted around a retransmission, the
// count decides between an RTO and the rest: a retransmission timed like an RTO
// after which the count did not grow was a probe (gVisor's TLP, whose PTO is
// capped at the RTO's deadline), and one the count credits is an RTO whatever
// its timing.
func (w *Watcher) Events() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := append([]Event(nil), w.events...)
	for i := range evs {
		evs[i].Kind = evs[i].finalKind()
	}
	return evs
}

func (ev *Event) finalKind() Kind {
	if !ev.TimeoutKnown || ev.SYN {
		return ev.Kind
	}
	switch {
	case ev.TimedOut:
		return KindRTO
	case ev.Kind == KindRTO:
		return KindTLP
	}
	return ev.Kind
}

// Stats returns the watcher's counters.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.Events = make(map[string]int)
	for i := range w.events {
		st.Events[w.events[i].finalKind().String()]++
	}
	return st
}

// Device is a tun.Device that shows every packet to a Watcher: egress before the
// wrapped device's WritePacket, ingress after its ReadPacket (or
// ReadPacketNonblock). It is a tun.Pollable and forwards the wrapped device's:
// a stack that reads a watched TUN takes the same direct path as on the bare
// TUN. When the wrapped device is not Pollable, ReadFD returns an error
// wrapping tun.ErrNotPollable (and the stack reads through a goroutine).
type Device struct {
	tun.Device
	w *Watcher

	fmu      sync.Mutex // guards fscratch: WriteFrame's packets
	fscratch []byte
}

var _ tun.Pollable = (*Device)(nil)

// Wrap returns dev watched by w.
func Wrap(dev tun.Device, w *Watcher) *Device { return &Device{Device: dev, w: w} }

// WritePacket implements tun.Device.
func (d *Device) WritePacket(pkt []byte) error {
	d.w.Egress(pkt)
	return d.Device.WritePacket(pkt)
}

// ReadPacket implements tun.Device.
func (d *Device) ReadPacket(buf []byte) (int, error) {
	n, err := d.Device.ReadPacket(buf)
	if err == nil {
		d.w.Ingress(buf[:n])
	}
	return n, err
}

// ReadFD implements tun.Pollable: the wrapped device's descriptor.
func (d *Device) ReadFD() (int, error) {
	p, ok := d.Device.(tun.Pollable)
	if !ok {
		return -1, fmt.Errorf("segwatch %s: %w", d.Name(), tun.ErrNotPollable)
	}
	return p.ReadFD()
}

// ReadPacketNonblock implements tun.Pollable like ReadPacket.
func (d *Device) ReadPacketNonblock(buf []byte) (int, error) {
	p, ok := d.Device.(tun.Pollable)
	if !ok {
		return 0, fmt.Errorf("segwatch %s: read: %w", d.Name(), tun.ErrNotPollable)
	}
	n, err := p.ReadPacketNonblock(buf)
	if err == nil {
		d.w.Ingress(buf[:n])
	}
	return n, err
}

var _ tun.Offloader = (*Device)(nil)

// Offloads implements tun.Offloader: the wrapped device's.
func (d *Device) Offloads() tun.Offloads { return tun.WrappedOffloads(d.Device) }

// ReadFrame implements tun.Offloader like ReadPacket: the watcher sees each
// packet of the frames read, as the kernel would segment them.
func (d *Device) ReadFrame(buf []byte) (int, error) {
	o, ok := d.Device.(tun.Offloader)
	if !ok {
		return 0, fmt.Errorf("segwatch %s: read frame: %w", d.Name(), tun.ErrNoOffload)
	}
	n, err := o.ReadFrame(buf)
	d.watchFrames(buf, n, err)
	return n, err
}

// ReadFrameNonblock implements tun.Offloader like ReadFrame.
func (d *Device) ReadFrameNonblock(buf []byte) (int, error) {
	o, ok := d.Device.(tun.Offloader)
	if !ok {
		return 0, fmt.Errorf("segwatch %s: read frame: %w", d.Name(), tun.ErrNoOffload)
	}
	n, err := o.ReadFrameNonblock(buf)
	d.watchFrames(buf, n, err)
	return n, err
}

func (d *Device) watchFrames(buf []byte, n int, err error) {
	if err != nil || n <= 0 {
		return
	}
	d.fmu.Lock()
	defer d.fmu.Unlock()
	if d.fscratch == nil {
		d.fscratch = make([]byte, tun.MaxMTU)
	}
	tun.EachFrame(buf, n, func(fr []byte) {
		_ = tun.SplitFrame(fr, d.fscratch, false, func(pkt []byte) error {
			d.w.Ingress(pkt)
			return nil
		})
	})
}

// WriteFrame implements tun.Offloader: the watcher sees each packet of the
// frame, as the kernel segments it (tun.SplitFrame), before the frame goes
// to the wrapped device whole.
func (d *Device) WriteFrame(frame []byte) error {
	o, ok := d.Device.(tun.Offloader)
	if !ok {
		return fmt.Errorf("segwatch %s: write frame: %w", d.Name(), tun.ErrNoOffload)
	}
	d.fmu.Lock()
	if d.fscratch == nil {
		d.fscratch = make([]byte, tun.MaxMTU)
	}
	err := tun.SplitFrame(frame, d.fscratch, false, func(pkt []byte) error {
		d.w.Egress(pkt)
		return nil
	})
	d.fmu.Unlock()
	if err != nil {
		return fmt.Errorf("segwatch %s: write frame: %w", d.Name(), err)
	}
	return o.WriteFrame(frame)
}
