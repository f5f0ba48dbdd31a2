package stack

import (
	"time"

	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// The flight recorder: what the stack does that its packets alone do not
// show, written beside them (Config.Record, package record), and read back by
// a Playback. Everything the loop does depends only on
//
//   - the packets it handles, and when (In);
//   - the expiries that fire timers, and when (Expire), and the batches the
//     input came in (Batch);
//   - the application's calls, and when (Listen, Dial, Write, Read, Close,
//     ...; UDP sockets opened, datagrams sent with their payload, sockets
//     closed), at the wheel's Now when the loop ran them (UDP reads change
//     nothing the stack sends, and are not recorded);
//   - the clock readings of segments leaving (SendTime), the ISNs (ISN), the
//     accept queue as the application's goroutines leave it (QueueFull,
//     Accepted), the SYN-cookie keys and the ports chosen (in Listen, Dial);
//
// so a Playback that does the same things in the same order, on a manual
// clock set to the same instants, with the same readings handed back,
// sends the same segments: the recording replays exactly by construction.
// Each hook below records one of them when recording, and takes it from the
// recording when playing back.

// sink takes the recording: a *record.Writer, or a Playback's tee.
type sink interface {
	Event(e *record.Event)
	PacketCap(in bool, t time.Duration, pkt []byte, caplen int)
}

// source hands a Playback's stack the recorded readings.
type source interface {
	sendTime(now time.Duration) time.Duration
	// choice is the number of kind k (ISN, TSOffset) recorded for the
	// connection id (Stack.choose).
	choice(k record.Kind, id tcp.ID) (uint32, bool)
	flag(k record.Kind, id tcp.ID, port uint16) (bool, bool)
	// registered tells of a connection made, so that the application's
	// calls on it find it even after it left the demultiplexer.
	registered(c *Conn)
}

// note records an event of the application or the loop at the wheel's Now.
func (s *Stack) note(k record.Kind, id tcp.ID, n int64) {
	if s.rec == nil {
		return
	}
	s.hasSendAt = false
	s.rec.Event(&record.Event{Kind: k, T: s.wheel.Now(), Local: id.Local, Remote: id.Remote, N: n})
}

// recordHeader describes the stack for a recording.
func (s *Stack) recordHeader(wall time.Time) record.Header {
	d := func(v time.Duration) record.Duration { return record.Duration(v) }
	return record.Header{
		Addr: s.cfg.Addr, Addr6: s.cfg.Addr6, MoreAddrs: s.cfg.MoreAddrs, Prefix: s.cfg.Prefix, MTU: s.dev.MTU(), Tick: d(s.wheel.Tick()),
		TTL: s.cfg.TTL, Backlog: s.cfg.Backlog, Origin: d(s.wheel.Now()), Wall: wall, Payload: s.cfg.RecordPayload,
		TCP: tcpRecord(s.cfg.TCP), TSOffsets: true, OOOAcksHeld: true, HalfCwndChunks: true,
	}
}

// configFromHeader is the Config a recording's stack had (less its device
// and clock).
func configFromHeader(h *record.Header) Config {
	d := func(v record.Duration) time.Duration { return time.Duration(v) }
	return Config{
		RecordPayload: h.Payload,
		Addr:          h.Addr, Addr6: h.Addr6, MoreAddrs: h.MoreAddrs, Prefix: h.Prefix, Tick: d(h.Tick), TTL: h.TTL, Backlog: h.Backlog,
		TCP: tcpFromRecord(h.TCP),
	}
}

// wrapISN returns gen (nil: a tcp.NewISN) for the endpoints, its ISNs
// going through the recorder (choose).
func (s *Stack) wrapISN(gen tcp.ISNFunc) tcp.ISNFunc {
	if gen == nil {
		gen = tcp.NewISN()
	}
	return func(id tcp.ID, now time.Duration) seqnum.Value {
		return seqnum.Value(s.choose(record.ISN, id, func() uint32 { return uint32(gen(id, now)) }))
	}
}

// wrapTSOffset returns gen (nil: a tcp.NewTSOffset) for the endpoints, its
// timestamp offsets going through the recorder (choose). The stack's
// connections share it: with the default, one secret for the stack
// (newLoops draws it for all the loops), so that the TSvals of the stack's
// connections to one address come from one clock (RFC 6191's test of a SYN
// to a 4-tuple in TIME-WAIT, tcp.Config.TSOffset).
func (s *Stack) wrapTSOffset(gen tcp.TSOffsetFunc) tcp.TSOffsetFunc {
	if gen == nil {
		gen = tcp.NewTSOffset()
	}
	return func(id tcp.ID, iss seqnum.Value) uint32 {
		return s.choose(record.TSOffset, id, func() uint32 { return gen(id, iss) })
	}
}

// choose is a number chosen for the connection id (k: an ISN, a timestamp
// offset), through the recorder: the recorded one when playing back, else
// gen's; recorded when recording.
func (s *Stack) choose(k record.Kind, id tcp.ID, gen func() uint32) uint32 {
	v, ok := uint32(0), false
	if s.play != nil {
		v, ok = s.play.choice(k, id)
	}
	if !ok {
		v = gen()
	}
	if s.rec != nil {
		s.rec.Event(&record.Event{Kind: k, Local: id.Local, Remote: id.Remote, N: int64(v)})
	}
	return v
}

// flag is a fact of the application's goroutines the loop reads (whether an
// accept queue is full, whether a connection went into it): recorded, or
// taken from the recording.
func (s *Stack) flag(k record.Kind, id tcp.ID, port uint16, live func() bool) bool {
	v, ok := false, false
	if s.play != nil {
		v, ok = s.play.flag(k, id, port)
	}
	if !ok {
		v = live()
	}
	if s.rec != nil {
		n := int64(0)
		if v {
			n = 1
		}
		s.rec.Event(&record.Event{Kind: k, Local: id.Local, Remote: id.Remote, Port: port, N: n})
	}
	return v
}

// timers is the stack's tcp.Timers: the wheel's, with SendTime going through
// the recorder.
type timers struct {
	*timer.Wheel
	s *Stack
}

var _ tcp.Timers = timers{}

func (s *Stack) timers() tcp.Timers { return timers{s.wheel, s} }

// SendTime is the wheel's clock, clamped to the wheel's Now (tcp.OnWheel's),
// recorded; or the recorded reading. The next packet out is stamped with it.
// A segment that may join the GSO frame being built gets the frame's reading
// (gsoState.at): the frame leaves whole, at the end of the loop's turn, so
// its first segment's reading is as true of the others as their own would
// be, and a bulk sender read the clock once per segment (3% of a download's
// CPU). A recording stack reads it for each, as the recorder records each.
func (t timers) SendTime() time.Duration {
	s := t.s
	now := t.Wheel.Now()
	var at time.Duration
	g := &s.gso
	switch {
	case s.play != nil:
		at = s.play.sendTime(now)
	case s.rec == nil && g.atOK && g.n > 0 && g.open:
		return max(g.at, now)
	default:
		at = max(t.Wheel.Clock().Now(), now)
		g.pendAt, g.pend = at, true
	}
	if s.rec != nil {
		s.rec.Event(&record.Event{Kind: record.SendTime, T: at})
		s.sendAt, s.hasSendAt = at, true
	}
	return at
}

// recordIn records a packet the stack is about to handle, at the wheel's Now.
func (s *Stack) recordIn(pkt []byte) {
	s.hasSendAt = false
	s.rec.PacketCap(true, s.wheel.Now(), pkt, s.capLen(pkt, true))
}

// capLen is how much of pkt a recording keeps: all of it with
// Config.RecordPayload, else the IP, TCP and UDP headers of a TCP or UDP
// packet, whose payload bytes change nothing the stack does (only their
// count, and their checksum: an input packet whose checksum fails is kept
// whole, so that the replay drops it too). Anything else is kept whole, and
// so are the datagrams received over IPv6 (see below).
func (s *Stack) capLen(pkt []byte, in bool) int {
	if s.cfg.RecordPayload {
		return len(pkt)
	}
	src, dst, proto, hl, total, ok := transportOf(pkt)
	if !ok || in && proto == protoUDP && src.Is6() {
		// Malformed, or a fragment; or a datagram over IPv6, which an
		// ICMPv6 port unreachable would quote whole (RFC 4443 2.4 (c)).
		return len(pkt)
	}
	in = in && !s.skipChecksum // a Playback's packet, checked when recorded
	b := pkt[hl:total]
	switch proto {
	case protoTCP:
		if len(b) < tcp.HeaderMinSize {
			return len(pkt)
		}
		thl := int(b[12]>>4) * 4
		if thl < tcp.HeaderMinSize || thl > len(b) || in && !tcp.VerifyChecksum(src, dst, b) {
			return len(pkt)
		}
		return hl + thl
	case protoUDP:
		if len(b) < udpHeaderLen || in && !udpChecksumOK(src, dst, b) {
			return len(pkt)
		}
		return hl + udpHeaderLen
	}
	return len(pkt)
}

// recordOut records a packet sent: at the send time read for it, if one was,
// else at the wheel's Now.
func (s *Stack) recordOut(pkt []byte) {
	t := s.wheel.Now()
	if s.hasSendAt {
		t, s.hasSendAt = s.sendAt, false
	}
	s.rec.PacketCap(false, t, pkt, s.capLen(pkt, false))
}

// endBatch ends a batch of input: recorded, then the ACKs held for its end
// are sent (flushAcks).
func (s *Stack) endBatch() {
	s.releaseRead()
	if s.rec != nil {
		s.hasSendAt = false
		s.rec.Event(&record.Event{Kind: record.Batch, T: s.wheel.Now()})
	}
	s.flushAcks()
	if len(s.retired) > 0 {
		s.recycleEndpoints() // timewait.go
	}
}

// onExpire is the loop's expiry hook while recording.
func (s *Stack) onExpire(before, now time.Duration) {
	s.hasSendAt = false
	s.rec.Event(&record.Event{Kind: record.Expire, T: now, T2: before})
}

// event records an application's call on c at the wheel's Now.
func (c *Conn) event(k record.Kind, n int64) { c.s.note(k, c.id, n) }

// notePort records an event of the listener on port (Listen: with its
// SYN-cookie key) at the wheel's Now.
func (s *Stack) notePort(k record.Kind, port uint16, key []byte) {
	if s.rec != nil {
		s.hasSendAt = false
		s.rec.Event(&record.Event{Kind: k, T: s.wheel.Now(), Port: port, Data: key})
	}
}

// noConn is the zero tcp.ID, for events of no connection.
var noConn tcp.ID
