package stack

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
)

// Playback runs a flight recording (Config.Record, package stack/record)
// again, on a stack of its own built from the recording's header, on a
// manual loop and clock: it hands the stack the recorded packets at their
// instants, runs the recorded expiries, batch ends and application calls at
// theirs, and answers the stack's clock readings, ISNs, timestamp offsets
// and accept-queue questions with the recorded ones (of a recording without
// timestamp offsets, record.Header.TSOffsets, each connection's is its ISS,
// as it was then). What the stack sends (Sent) is then what it sent when
// recorded, segment for segment and instant for instant, unless the code
// changed: a Divergence says where the replayed stack asked for something
// the recording does not have at that point, and package stack/replay
// compares the packets.
//
// A Playback is not safe for concurrent use.
type Playback struct {
	s     *Stack
	m     *loop.Manual
	clock *timer.ManualClock
	ev    []record.Event
	next  int // the next event not yet run or consumed
	sent  []record.Event
	div   []Divergence
	re    *record.Writer // the re-recording, or nil
	// The bytes each connection's application wrote, from the recorded
	// packets (bytes never sent are zeros), and how many it has written.
	streams map[tcp.ID][]byte
	written map[tcp.ID]int
	// conns are the connections the replayed stack made, by 4-tuple (the
	// latest of each): the application may call one after it has closed.
	conns   map[tcp.ID]*Conn
	scratch []byte
}

// Divergence is a point where the replayed stack did not do what the
// recorded one did.
type Divergence struct {
	Event int // the recording's event (record.Event.Index), 0 if none
	What  string
}

func (d Divergence) String() string {
	if d.Event == 0 {
		return d.What
	}
	return fmt.Sprintf("event #%d: %s", d.Event, d.What)
}

// NewPlayback builds the recorded stack. If rerecord is not nil, the
// playback writes a recording of itself to it: with no divergence it holds
// the same events as rec (a recording refreshed after a deliberate change in
// behaviour, for replay.Test's update mode).
func NewPlayback(rec *record.Recording, rerecord io.Writer) (*Playback, error) {
	h := rec.Header
	if h == nil {
		return nil, fmt.Errorf("%w: not a tcpwheel recording (no recorder header)", ErrConfig)
	}
	clock := timer.NewManualClock(time.Duration(h.Origin))
	cfg := configFromHeader(h)
	cfg.Clock = clock
	cfg.Device = discard{mtu: h.MTU}
	s, m, err := newManualStack(cfg)
	if err != nil {
		return nil, err
	}
	p := &Playback{s: s, m: m, clock: clock, ev: rec.Events,
		streams: map[tcp.ID][]byte{}, written: map[tcp.ID]int{}, conns: map[tcp.ID]*Conn{}}
	if rerecord != nil {
		hdr := *h
		if p.re, err = record.NewWriter(rerecord, hdr); err != nil {
			return nil, err
		}
	}
	s.rec, s.play = (*tee)(p), (*player)(p)
	if !h.TSOffsets {
		// A recording from before the timestamp offsets were recorded
		// (2026-11-24): each connection's was its ISS, which the replay
		// knows; none is recorded, so that a re-recording holds the same
		// events.
		s.cfg.TCP.TSOffset = tcp.TSOffsetISS
	}
	if !h.OOOAcksHeld {
		// A recording from before the ACKs of out-of-order segments
		// waited for the end of their batch (2026-11-24): they went at
		// once.
		s.cfg.TCP.OutOfOrderAcksAtOnce = true
	}
	if !h.HalfCwndChunks {
		// A recording from before new data went in chunks of half cwnd
		// (2026-11-24): as large as the windows allowed.
		s.cfg.TCP.DisableHalfCwndChunks = true
	}
	p.buildStreams()
	return p, nil
}

// Stack returns the replayed stack (for its Stats).
func (p *Playback) Stack() *Stack { return p.s }

// Sent returns the packets the replayed stack sent so far, as Out events
// with their send times.
func (p *Playback) Sent() []record.Event { return p.sent }

// Divergences returns what the replay found out of step with the recording.
func (p *Playback) Divergences() []Divergence { return p.div }

// Run runs every remaining event. The error is for a re-recording that could
// not be written; what diverged is in Divergences.
func (p *Playback) Run() error {
	for p.next < len(p.ev) {
		e := &p.ev[p.next]
		p.next++
		p.run(e)
	}
	if p.re != nil {
		return p.re.Flush()
	}
	return nil
}

func (p *Playback) diverge(e *record.Event, format string, a ...any) {
	idx := 0
	if e != nil {
		idx = e.Index
	}
	p.div = append(p.div, Divergence{Event: idx, What: fmt.Sprintf(format, a...)})
}

// at moves the clock and the wheel's Now to t, as the live loop had them
// when it ran the event.
func (p *Playback) at(t time.Duration) {
	p.clock.Set(t)
	p.s.wheel.MoveNow(t)
}

// run performs one event on the loop.
func (p *Playback) run(e *record.Event) {
	s := p.s
	id := tcp.ID{Local: e.Local, Remote: e.Remote}
	conn := func() *Conn {
		c := p.conns[id]
		if c == nil {
			p.diverge(e, "%v on %v -> %v, a connection the replayed stack does not have", e.Kind, e.Local, e.Remote)
		}
		return c
	}
	_ = p.m.Post(func() {
		switch e.Kind {
		case record.Out:
			// an expectation, for the comparison
		case record.In:
			p.clock.Set(e.T)
			if e.Truncated() {
				s.skipChecksum = true // checked when recorded
			}
			s.handlePacketNow(e.Whole())
			s.skipChecksum = false
		case record.Batch:
			p.at(e.T)
			s.endBatch()
		case record.Expire:
			p.s.wheel.MoveNow(e.T2)
			p.clock.Set(e.T)
			s.onExpire(e.T2, e.T)
			s.wheel.Advance(e.T)
		case record.Listen:
			p.at(e.T)
			l := s.newListener()
			key, n, bound := splitListenData(e.Data)
			l.net, l.bound = n, bound
			if err := s.listen(l, e.Port, key); err != nil {
				p.diverge(e, "listen on port %d: %v", e.Port, err)
			}
		case record.ListenClose:
			p.at(e.T)
			if l := s.listeners[e.Port]; l != nil {
				l.closeLoop()
			} else {
				p.diverge(e, "no listener on port %d to close", e.Port)
			}
		case record.Dial:
			p.at(e.T)
			// The stack dials from its address of the remote's IP version
			// (tcp.Dial and the IP layer take that for granted).
			if a := e.Remote.Addr(); !a.IsValid() || a.Is4In6() || e.Local.Addr() != s.localFor(a) {
				p.diverge(e, "dial %v -> %v: not from the stack's address of the remote's IP version", e.Local, e.Remote)
			} else if _, err := s.dial(id); err != nil {
				p.diverge(e, "dial %v -> %v: %v", e.Local, e.Remote, err)
			}
		case record.Write:
			p.at(e.T)
			if !p.ioSize(e) {
				break
			}
			if c := conn(); c != nil {
				// As c.write, with the bytes the endpoint can take of the
				// e.N offered (tcp.Endpoint.Write takes no more than the
				// send buffer's free space): a large write costs no more.
				c.event(record.Write, e.N)
				n, _ := c.ep.Write(p.bytes(id, ioLen(e.N, c.ep.Writable())))
				p.written[id] += n
			}
		case record.Read:
			p.at(e.T)
			if !p.ioSize(e) {
				break
			}
			if c := conn(); c != nil {
				// As c.read, with a buffer of what the read can return.
				c.event(record.Read, e.N)
				n := ioLen(e.N, c.ep.Readable())
				if cap(p.scratch) < n {
					p.scratch = make([]byte, n)
				}
				c.ep.Read(p.scratch[:n])
			}
		case record.Close:
			p.at(e.T)
			if c := conn(); c != nil {
				c.close(e.N == 1)
			}
		case record.CloseWrite:
			p.at(e.T)
			if c := conn(); c != nil {
				c.closeWrite()
			}
		case record.Abort:
			p.at(e.T)
			if c := conn(); c != nil {
				c.abort()
			}
		case record.KeepAlive:
			p.at(e.T)
			if len(e.Args) != 3 {
				p.diverge(e, "keepalive with %d arguments, not 3 (idle, interval, count)", len(e.Args))
			} else if c := conn(); c != nil {
				c.keepAlive(net.KeepAliveConfig{Enable: e.N == 1, Idle: time.Duration(e.Args[0]),
					Interval: time.Duration(e.Args[1]), Count: int(e.Args[2])})
			}
		case record.StackClose:
			p.at(e.T)
			s.closeLoop()
		case record.UDPOpen, record.UDPDial:
			p.at(e.T)
			port, remote := e.Port, netip.AddrPort{}
			if e.Kind == record.UDPDial {
				port, remote = e.Local.Port(), e.Remote
			}
			if err := s.udpOpen(s.newUDPConn(), port, remote); err != nil {
				p.diverge(e, "open UDP port %d: %v", port, err)
			}
		case record.UDPBind:
			p.at(e.T)
			a, ok := netip.AddrFromSlice(e.Data)
			if !ok || !s.isLocal(a) {
				p.diverge(e, "open UDP port %d on %v, not an address of the stack", e.Port, a)
				break
			}
			u := s.newUDPConn()
			u.bound, u.net = a, net4
			if a.Is6() {
				u.net = net6
			}
			if err := s.udpOpen(u, e.Port, netip.AddrPort{}); err != nil {
				p.diverge(e, "open UDP port %d: %v", e.Port, err)
			}
		case record.UDPOpenNet:
			p.at(e.T)
			u := s.newUDPConn()
			if u.net = uint8(e.N); e.N != net4 && e.N != net6 {
				p.diverge(e, "open UDP port %d for IP version %d", e.Port, e.N)
			} else if err := s.udpOpen(u, e.Port, netip.AddrPort{}); err != nil {
				p.diverge(e, "open UDP port %d: %v", e.Port, err)
			}
		case record.UDPSend:
			p.at(e.T)
			if u := s.udp[e.Local.Port()]; u != nil {
				u.sendLoop(e.Remote, e.Data)
			} else {
				p.diverge(e, "a datagram from UDP port %d, which the replayed stack has not open", e.Local.Port())
			}
		case record.UDPClose:
			p.at(e.T)
			if u := s.udp[e.Port]; u != nil {
				u.closeLoop()
			} else {
				p.diverge(e, "no UDP socket on port %d to close", e.Port)
			}
		default:
			// A reading the replayed stack did not ask for.
			p.diverge(e, "the replayed stack did not ask for the recorded %v", e.Kind)
		}
	})
}

// ioSize reports whether e's size is one an application could have passed
// (not negative), and diverges if not.
func (p *Playback) ioSize(e *record.Event) bool {
	if e.N < 0 {
		p.diverge(e, "a %v of %d bytes", e.Kind, e.N)
		return false
	}
	return true
}

// ioLen is the length of a buffer that a read or write of n bytes, of which
// the endpoint can take or return avail, needs for the same outcome: at most
// avail, and not zero unless n is (tcp.Endpoint.Read tells a read of zero
// bytes apart).
func ioLen(n int64, avail int) int {
	return int(min(n, int64(max(avail, 1))))
}

// bytes returns the next n bytes id's application wrote.
func (p *Playback) bytes(id tcp.ID, n int) []byte {
	if cap(p.scratch) < n {
		p.scratch = make([]byte, n)
	}
	b := p.scratch[:n]
	clear(b)
	if st, w := p.streams[id], p.written[id]; w < len(st) {
		copy(b, st[w:])
	}
	return b
}

// buildStreams gathers each connection's outgoing bytes from the recorded
// packets, by position after its ISN.
func (p *Playback) buildStreams() {
	isn := map[tcp.ID]seqnum.Value{}
	sent := map[tcp.ID]int{} // payload bytes in the connection's packets so far
	for i := range p.ev {
		e := &p.ev[i]
		switch e.Kind {
		case record.ISN:
			isn[tcp.ID{Local: e.Local, Remote: e.Remote}] = seqnum.Value(uint32(e.N))
		case record.Out:
			id, seg, ok := parseTCP(e.Whole())
			if !ok || len(seg.Payload) == 0 {
				continue
			}
			base, ok := isn[id]
			if !ok {
				continue
			}
			off := int(uint32(seg.Seq - base - 1))
			if seg.Flags&tcp.FlagSYN != 0 {
				off = 0
			}
			// New data starts where the data sent before it ends: an offset
			// past all of it is a corrupt recording's (an edited ISN), which
			// must not make the stream that long.
			if off < 0 || off > sent[id] || off > 1<<30 {
				continue
			}
			sent[id] += len(seg.Payload)
			st := p.streams[id]
			if need := off + len(seg.Payload); need > len(st) {
				st = append(st, make([]byte, need-len(st))...)
			}
			copy(st[off:], seg.Payload)
			p.streams[id] = st
		}
	}
}

// parseTCP returns the connection (from the sender's side) and segment of an
// IPv4/TCP or IPv6/TCP packet.
func parseTCP(pkt []byte) (tcp.ID, tcp.Segment, bool) {
	src, dst, proto, off, end, ok := transportOf(pkt)
	if !ok || proto != protoTCP {
		return tcp.ID{}, tcp.Segment{}, false
	}
	seg, err := tcp.ParseSegment(pkt[off:end])
	if err != nil {
		return tcp.ID{}, tcp.Segment{}, false
	}
	return tcp.ID{Local: netip.AddrPortFrom(src, seg.SrcPort), Remote: netip.AddrPortFrom(dst, seg.DstPort)}, seg, true
}

// tee is the Playback as its stack's recorder: the packets sent are kept for
// the comparison, and everything goes to the re-recording if there is one.
type tee Playback

func (t *tee) Event(e *record.Event) {
	if t.re != nil {
		t.re.Event(e)
	}
}

func (t *tee) PacketCap(in bool, at time.Duration, pkt []byte, caplen int) {
	if !in {
		t.sent = append(t.sent, record.Event{Kind: record.Out, T: at, Data: append([]byte(nil), pkt...), Len: len(pkt)})
	}
	if t.re != nil {
		t.re.PacketCap(in, at, pkt, caplen)
	}
}

// player is the Playback as its stack's source of recorded readings: each
// is the next event not yet run, past the packets sent.
type player Playback

// take returns the next unconsumed event if it is of kind k, consuming it.
func (p *player) take(k record.Kind) *record.Event {
	for p.next < len(p.ev) && p.ev[p.next].Kind == record.Out {
		p.next++
	}
	if p.next < len(p.ev) && p.ev[p.next].Kind == k {
		e := &p.ev[p.next]
		p.next++
		return e
	}
	var at *record.Event
	got := "the end of the recording"
	if p.next < len(p.ev) {
		at = &p.ev[p.next]
		got = "a " + at.Kind.String() + " event"
	}
	(*Playback)(p).diverge(at, "the replayed stack asked for a %v where the recording has %s", k, got)
	return nil
}

func (p *player) registered(c *Conn) { p.conns[c.id] = c }

func (p *player) sendTime(now time.Duration) time.Duration {
	if e := p.take(record.SendTime); e != nil {
		return e.T
	}
	return max(p.clock.Now(), now)
}

func (p *player) choice(k record.Kind, id tcp.ID) (uint32, bool) {
	e := p.take(k)
	if e == nil {
		return 0, false
	}
	if e.Local != id.Local || e.Remote != id.Remote {
		(*Playback)(p).diverge(e, "the replayed stack chose its %v for %v -> %v, the recorded one is for %v -> %v", k, id.Local, id.Remote, e.Local, e.Remote)
	}
	return uint32(e.N), true
}

func (p *player) flag(k record.Kind, _ tcp.ID, _ uint16) (bool, bool) {
	e := p.take(k)
	if e == nil {
		return false, false
	}
	return e.N == 1, true
}

// discard is a Playback stack's device: what it sends is taken by the tee.
type discard struct{ mtu int }

var _ tun.Device = discard{}

func (discard) ReadPacket([]byte) (int, error) { return 0, net.ErrClosed }
func (discard) WritePacket([]byte) error       { return nil }
func (d discard) MTU() int                     { return d.mtu }
func (discard) Name() string                   { return "playback" }
func (discard) Close() error                   { return nil }

// SentMatches compares a packet the recorded stack sent (want) with one the
// replayed stack sent (got): equal but for the IP ID and checksum (the
// connections' packets may interleave differently, see ARCHITECTURE.md), and
// an IPv6 fragment header's identification (unpredictable, frag.go), at
// the same instant. Of a recorded packet whose payload the recording did not
// keep (record.Event.Truncated), the length and the headers are compared,
// less the TCP or UDP checksum, which covers the payload.
func SentMatches(want, got *record.Event) bool {
	x, y := want.Data, got.Data
	if want.T != got.T || max(want.Len, len(x)) != len(y) || len(x) < ipv4Fixed {
		return false
	}
	y = y[:len(x)]
	if x[0]>>4 == 6 { // no header checksum: all of it, less a fragment's ID
		if x[6] == nhFragment && len(x) >= ipv6HeaderLen+8 {
			x, y = slices.Clone(x), slices.Clone(y)
			clear(x[ipv6HeaderLen+4 : ipv6HeaderLen+8])
			clear(y[ipv6HeaderLen+4 : ipv6HeaderLen+8])
		}
		if sum := checksumAt(x); want.Truncated() && sum > 0 && sum+2 <= len(x) {
			return bytes.Equal(x[:sum], y[:sum]) && bytes.Equal(x[sum+2:], y[sum+2:])
		}
		return bytes.Equal(x, y)
	}
	if !bytes.Equal(x[:4], y[:4]) || !bytes.Equal(x[6:10], y[6:10]) {
		return false
	}
	if want.Truncated() {
		if sum := checksumAt(x); sum > 0 && sum+2 <= len(x) {
			return bytes.Equal(x[ipv4Fixed:sum], y[ipv4Fixed:sum]) && bytes.Equal(x[sum+2:], y[sum+2:])
		}
	}
	return bytes.Equal(x[ipv4Fixed:], y[ipv4Fixed:])
}

// ipv4Fixed is the part of an IPv4 header before its addresses.
const ipv4Fixed = 12

// checksumAt is the offset of an IP packet's TCP or UDP checksum, or 0;
// pkt may be a recording's headers only.
func checksumAt(pkt []byte) int {
	var proto uint8
	var off int
	switch {
	case len(pkt) >= ipv6HeaderLen && pkt[0]>>4 == 6:
		var d Drops
		c := walkIPv6(pkt, &d)
		if c.drop != nil {
			return 0
		}
		proto, off = c.proto, c.off
	case len(pkt) >= ipv4HeaderLen:
		proto, off = pkt[9], int(pkt[0]&0x0f)*4
	default:
		return 0
	}
	switch proto {
	case protoTCP:
		return off + 16
	case protoUDP:
		return off + 6
	}
	return 0
}
