package stack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/tcpip/checksum"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// frameDev is a tun.Offloader that keeps every frame written to it (a
// packet written plainly becomes a frame with a zero header). It is never
// read: a Manual stack is handed its input.
type frameDev struct {
	mu     sync.Mutex
	frames [][]byte
	plain  int  // frames written as packets (WritePacket)
	no6    bool // no TSO6: GSO frames of TCP/IPv4 only
}

func (d *frameDev) ReadPacket([]byte) (int, error) { return 0, errors.New("frameDev: not read") }
func (d *frameDev) WritePacket(pkt []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plain++
	d.frames = append(d.frames, append(make([]byte, tun.VnetHdrLen), pkt...))
	return nil
}
func (d *frameDev) MTU() int                      { return 1500 }
func (d *frameDev) Name() string                  { return "frames" }
func (d *frameDev) Close() error                  { return nil }
func (d *frameDev) Offloads() tun.Offloads        { return tun.Offloads{GSO: true, GRO: true, TSO6: !d.no6} }
func (d *frameDev) ReadFrame([]byte) (int, error) { return 0, tun.ErrWouldBlock }
func (d *frameDev) ReadFrameNonblock([]byte) (int, error) {
	return 0, tun.ErrWouldBlock
}
func (d *frameDev) WriteFrame(f []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.frames = append(d.frames, append([]byte(nil), f...))
	return nil
}

// offloadDev is a device of an offloadPeer: a frameDev, or a device that
// keeps its frames in one.
type offloadDev interface {
	tun.Offloader
	base() *frameDev
}

func (d *frameDev) base() *frameDev { return d }

// take returns the frames written since the last call.
func (d *frameDev) take() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.frames
	d.frames = nil
	return f
}

// offloadPeer is a Manual stack on a frameDev that builds frames as the
// real loop does: what one step sends, flushed at the step's end.
type offloadPeer struct {
	*Manual
	dev *frameDev
}

func newOffloadPeer(t *testing.T, addr netip.Addr, clock *timer.ManualClock) *offloadPeer {
	t.Helper()
	return newOffloadPeerOn(t, &frameDev{}, Config{Addr: addr, Clock: clock})
}

// newOffloadPeerOn is newOffloadPeer on dev, with cfg.
func newOffloadPeerOn(t *testing.T, dev offloadDev, cfg Config) *offloadPeer {
	t.Helper()
	cfg.Device = dev
	m, err := NewManual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if !m.gso.on {
		t.Fatal("no GSO on a tun.Offloader")
	}
	m.gso.coalesce = true // flushed by step, as the loop's turn hook does
	return &offloadPeer{m, dev.base()}
}

// step runs f as one turn of the peer's loop, and returns the frames it
// wrote.
func (p *offloadPeer) step(f func()) [][]byte {
	f()
	p.m.Post(p.flushFrame)
	return p.dev.take()
}

// deliver hands frames to p as its device would have read them (GRO), in
// one batch.
func (p *offloadPeer) deliver(t *testing.T, frames [][]byte) [][]byte {
	t.Helper()
	return p.step(func() {
		if err := p.m.Wake(p.m.Clock().Now(), func() {
			for _, f := range frames {
				p.handleFrame(f)
			}
			if len(frames) > 0 {
				p.endBatch()
			}
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOffloadFrames: two stacks whose devices take frames. A's first flight
// of data, sent in one step, goes out as two GSO frames, one per chunk of
// half cwnd (tcp.Segment.ChunkEnd) (gso_size the MSS, partial checksum over
// the whole, the segments' headers the first's); B takes each whole as one
// segment, without checking the partial checksum,
// and reads the data intact; the counters count segments, not frames.
func TestOffloadFrames(t *testing.T) { offloadFrames(t, addrA, addrB, &frameDev{}) }

// TestOffloadFrames6 is TestOffloadFrames over IPv6, on devices with TSO6:
// a GSO_TCPV6 frame, its checksum's start after the 40-byte IPv6 header,
// the IPv6 payload length the frame's, the IPv6 pseudo-header's sum.
func TestOffloadFrames6(t *testing.T) { offloadFrames(t, addr6A, addr6B, &frameDev{}) }

// TestOffloadFramesVec and TestOffloadFramesVec6 are TestOffloadFrames and
// TestOffloadFrames6 with A on a device that writes frames in pieces: the
// payloads go as views of the send buffer (offloadvec_test.go), and the
// frames are the same.
func TestOffloadFramesVec(t *testing.T)  { offloadFrames(t, addrA, addrB, &vecDev{}) }
func TestOffloadFramesVec6(t *testing.T) { offloadFrames(t, addr6A, addr6B, &vecDev{}) }

// offloadFrames is TestOffloadFrames from srcA to dstB, IPv4 or IPv6.
func offloadFrames(t *testing.T, srcA, dstB netip.Addr, devA offloadDev) {
	v6 := srcA.Is6()
	ihl, typ := ipv4HeaderLen, uint8(tun.GSOTCPv4)
	if v6 {
		ihl, typ = ipv6HeaderLen, tun.GSOTCPv6
	}
	a, b, ca, cb := offloadPairOn(t, devA, dstB)
	var err error
	if d, ok := devA.(*vecDev); ok {
		d.buf = a.gso.buf
		defer func() {
			if d.vframes == 0 || d.views == 0 {
				t.Errorf("%d frames in pieces, %d views: want the data's as views", d.vframes, d.views)
			}
		}()
	}

	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	before := a.Stats()
	var wrote int
	frames := a.step(func() {
		if wrote, err = ca.TryWrite(data); err != nil {
			t.Fatal(err)
		}
	})
	after := a.Stats()
	segs := after.SegmentsOut - before.SegmentsOut
	// The initial window, 10 segments, in chunks of half cwnd (tcp's
	// Segment.ChunkEnd): two frames of five.
	if len(frames) != 2 || segs != 10 {
		t.Fatalf("%d segments sent in %d frames: want 10 in two frames of five (half cwnd each)", segs, len(frames))
	}
	var framed uint64
	largest := 0
	for i, f := range frames {
		h, err := tun.ParseVnetHdr(f)
		if err != nil {
			t.Fatal(err)
		}
		pkt := f[tun.VnetHdrLen:]
		largest = max(largest, len(pkt))
		thl := int(pkt[ihl+12]>>4) * 4
		n := uint64(tun.SegmentCount(h, pkt))
		if n != segs/2 {
			t.Fatalf("frame %d segments into %d packets, want %d", i, n, segs/2)
		}
		framed += n
		mss := (len(pkt) - ihl - thl) / int(n)
		want := tun.VnetHdr{Flags: tun.VnetFlagNeedsCsum, GSOType: typ, HdrLen: uint16(ihl + thl), GSOSize: uint16(mss), CsumStart: uint16(ihl), CsumOffset: 16}
		if h != want || (len(pkt)-ihl-thl)%mss != 0 {
			t.Fatalf("frame %d: header %+v of a %d-byte frame of %d segments, want %+v", i, h, len(pkt), n, want)
		}
		if err := h.Check(pkt); err != nil {
			t.Fatal(err)
		}
		// The IP header: the frame's length, and the rest as a plain packet's.
		ip := make([]byte, ihl)
		if v6 {
			binary.BigEndian.PutUint16(ip[4:], uint16(len(pkt)-ihl))
			ip[0], ip[6], ip[7] = 6<<4, protoTCP, pkt[7]
			s16, d16 := srcA.As16(), dstB.As16()
			copy(ip[8:], s16[:])
			copy(ip[24:], d16[:])
		} else {
			copy(ip, pkt[:ihl]) // the ID is the stack's
			ip[10], ip[11] = 0, 0
			binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip, 0))
			if binary.BigEndian.Uint16(ip[2:]) != uint16(len(pkt)) {
				t.Fatalf("IPv4 total length %d of a %d-byte frame", binary.BigEndian.Uint16(ip[2:]), len(pkt))
			}
		}
		if !bytes.Equal(pkt[:ihl], ip) {
			t.Fatalf("frame %d: IP header\n%x, want\n%x", i, pkt[:ihl], ip)
		}
		ps := tun.PseudoSum4(addrA.As4(), addrB.As4(), len(pkt)-ihl)
		if v6 {
			ps = tun.PseudoSum6(addr6A.As16(), addr6B.As16(), len(pkt)-ihl)
		}
		if got := binary.BigEndian.Uint16(pkt[ihl+16:]); got != ps {
			t.Fatalf("frame %d: TCP checksum field %#04x, want the pseudo-header's sum %#04x", i, got, ps)
		}
	}
	if framed != segs {
		t.Fatalf("the frames segment into %d packets, %d were sent", framed, segs)
	}
	if o := after.Offload; o.GSOFramesOut != 2 || o.GSOSegmentsOut != segs || o.MaxFrameOut != largest ||
		(o.GSOFramesOut6 == 2) != v6 || !o.GSO6 {
		t.Fatalf("offload stats %+v", o)
	}
	if after.PacketsOut-before.PacketsOut != segs {
		t.Fatalf("PacketsOut +%d for %d segments", after.PacketsOut-before.PacketsOut, segs)
	}

	bBefore := b.Stats()
	acks := b.deliver(t, frames)
	bAfter := b.Stats()
	if n := bAfter.SegmentsIn - bBefore.SegmentsIn; n != 2 {
		t.Fatalf("B took the frames as %d segments, want 2", n)
	}
	if o := bAfter.Offload; o.FramesIn == 0 || o.LargeFramesIn != 2 || o.MaxFrameIn != largest {
		t.Fatalf("B's offload stats %+v", o)
	}
	if bAfter.Drops != (Drops{}) {
		t.Fatalf("B dropped: %+v", bAfter.Drops)
	}
	// The rest, in steps, until B has it all.
	got := make([]byte, 0, len(data))
	buf := make([]byte, 64<<10)
	var now time.Duration
	for range 1000 {
		got = readReady(cb, got, buf)
		if len(got) == len(data) {
			break
		}
		if wrote < len(data) {
			n, _ := ca.TryWrite(data[wrote:])
			wrote += n
		}
		now += time.Millisecond
		out := a.deliver(t, acks)
		out = append(out, a.step(func() { a.AdvanceTo(now) })...)
		acks = b.deliver(t, out)
		acks = append(acks, b.step(func() { b.AdvanceTo(now) })...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("B read %d bytes of %d, intact %v", len(got), len(data), bytes.Equal(got, data[:len(got)]))
	}
}

// readReady appends to got what c has for a reader now, read through buf.
func readReady(c *Conn, got, buf []byte) []byte {
	for {
		n, _ := c.TryRead(buf)
		if n == 0 {
			return got
		}
		got = append(got, buf[:n]...)
	}
}

// offloadPair makes two offload peers, A (addrA, addr6A) and B (addrB,
// addr6B), on frameDevs with TSO6 unless no6, and connects A to B's
// dstB:80; no handshake segment goes in a GSO frame.
func offloadPair(t *testing.T, no6 bool, dstB netip.Addr) (a, b *offloadPeer, ca, cb *Conn) {
	t.Helper()
	return offloadPairOn(t, &frameDev{no6: no6}, dstB)
}

// offloadPairOn is offloadPair with A on devA.
func offloadPairOn(t *testing.T, devA offloadDev, dstB netip.Addr) (a, b *offloadPeer, ca, cb *Conn) {
	t.Helper()
	a = newOffloadPeerOn(t, devA, Config{Addr: addrA, Addr6: addr6A, Clock: timer.NewManualClock(0)})
	b = newOffloadPeerOn(t, &frameDev{no6: devA.base().no6}, Config{Addr: addrB, Addr6: addr6B, Clock: timer.NewManualClock(0)})
	ln, err := b.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	syn := a.step(func() {
		if ca, err = a.StartDial("tcp", 0, netip.AddrPortFrom(dstB, 80).String()); err != nil {
			t.Fatal(err)
		}
	})
	synack := b.deliver(t, syn)
	ack := a.deliver(t, synack)
	b.deliver(t, ack)
	c, ok := ln.(*Listener).TryAccept()
	if !ok {
		t.Fatal("no connection accepted")
	}
	for _, f := range append(append(syn, synack...), ack...) {
		if h, _ := tun.ParseVnetHdr(f); h.IsGSO() {
			t.Fatalf("a handshake segment went in a GSO frame: %+v", h)
		}
	}
	return a, b, ca, c
}

// TestOffloadFrameIPv4IDs: a GSO frame's IPv4 ID is its first segment's,
// and the segments joined to it use up theirs (the kernel's segmentation
// numbers the packets from the first's ID on): the next frame's ID is past
// them all, though only a segment that starts a frame has its IP header
// written (queueSegment).
func TestOffloadFrameIPv4IDs(t *testing.T) {
	a, _, ca, _ := offloadPair(t, false, addrB)
	id := func(f []byte) uint16 { return binary.BigEndian.Uint16(f[tun.VnetHdrLen+4:]) }
	var first, second [][]byte
	for i, n := range []int{5, 3} {
		f := a.step(func() {
			if _, err := ca.TryWrite(make([]byte, n*1448)); err != nil {
				t.Fatal(err)
			}
		})
		h, _ := tun.ParseVnetHdr(f[0])
		if len(f) != 1 || tun.SegmentCount(h, f[0][tun.VnetHdrLen:]) != n {
			t.Fatalf("write %d: %d frames, want one of %d segments", i, len(f), n)
		}
		if i == 0 {
			first = f
		} else {
			second = f
		}
	}
	if got, want := id(second[0]), id(first[0])+5; got != want {
		t.Fatalf("the second frame's IPv4 ID %d, want %d: the first's %d and its 5 segments'", got, want, id(first[0]))
	}
}

// TestOffloadSendTimeOfAFrame: while a frame is open, SendTime gives the
// segments that may join it the clock's reading for its first segment
// (the frame leaves whole, at the end of the turn), not a reading of their
// own; once the frame is written, the clock is read again.
func TestOffloadSendTimeOfAFrame(t *testing.T) {
	a, _, ca, _ := offloadPair(t, false, addrB)
	clock := a.m.Clock()
	t0 := 7 * time.Millisecond
	a.AdvanceTo(t0)
	if _, err := ca.TryWrite(make([]byte, 3*1448)); err != nil { // no step: the frame stays open
		t.Fatal(err)
	}
	if a.gso.n == 0 || !a.gso.open || a.gso.segs != 3 {
		t.Fatalf("no open frame of 3 segments: %d bytes, %d segments, open %v", a.gso.n, a.gso.segs, a.gso.open)
	}
	clock.Set(t0 + 5*time.Millisecond) // the clock moves; the wheel does not
	if got := a.timers().SendTime(); got != t0 {
		t.Fatalf("SendTime with a frame open: %v, want its first segment's %v", got, t0)
	}
	// That reading's segment starts a frame of its own (another
	// connection's, as the next ACK's segments would): the next segment
	// reads the clock, and the frame's later segments get that reading.
	id2 := tcp.ID{Local: netip.AddrPortFrom(addrA, 5555), Remote: netip.AddrPortFrom(addrB, 80)}
	seg := func(seq seqnum.Value) *tcp.Segment {
		return &tcp.Segment{SrcPort: 5555, DstPort: 80, Seq: seq, Ack: 1, Flags: tcp.FlagACK, Window: 100, Payload: make([]byte, 1000)}
	}
	a.queueSegment(id2, seg(1000), ipv4HeaderLen)
	t1 := t0 + 5*time.Millisecond
	if got := a.timers().SendTime(); got != t1 {
		t.Fatalf("SendTime in a frame started on the frame before's reading: %v, want the clock's %v", got, t1)
	}
	a.queueSegment(id2, seg(2000), ipv4HeaderLen)
	clock.Set(t0 + 9*time.Millisecond)
	if got := a.timers().SendTime(); got != t1 {
		t.Fatalf("SendTime after the frame's second segment: %v, want that segment's reading %v", got, t1)
	}
	a.m.Post(a.flushFrame)
	if got, want := a.timers().SendTime(), t0+9*time.Millisecond; got != want {
		t.Fatalf("SendTime with no frame open: %v, want the clock's %v", got, want)
	}
}

// TestOffloadSameHeader: a segment's TCP header matches the frame's first
// when they differ only in the sequence number, the checksum and PSH or
// FIN; any other byte, options included, makes it start a frame of its own.
func TestOffloadSameHeader(t *testing.T) {
	a, _, _, _ := offloadPair(t, false, addrB)
	id := tcp.ID{Local: netip.AddrPortFrom(addrA, 5555), Remote: netip.AddrPortFrom(addrB, 80)}
	for _, opts := range []tcp.Options{{}, {TS: true, TSVal: 0x01020304, TSEcr: 0x05060708},
		{TS: true, TSVal: 9, TSEcr: 10, NSACK: 2, SACK: [tcp.MaxSACKBlocks]tcp.SACKBlock{{Start: 1, End: 2}, {Start: 3, End: 4}}}} {
		a.m.Post(a.flushFrame)
		seg := tcp.Segment{SrcPort: 5555, DstPort: 80, Seq: 1000, Ack: 77, Flags: tcp.FlagACK | tcp.FlagPSH, Window: 100, Options: opts, Payload: make([]byte, 100)}
		a.queueSegment(id, &seg, ipv4HeaderLen)
		thl := seg.EncodedLen() - len(seg.Payload)
		first := a.gso.buf[tun.VnetHdrLen+ipv4HeaderLen:][:thl]
		if !a.sameHeader(bytes.Clone(first), thl) {
			t.Fatalf("%d-byte header: not the same as itself", thl)
		}
		for i := range thl {
			h := bytes.Clone(first)
			h[i] ^= 0xff
			want := i >= 4 && i < 8 || i == 16 || i == 17 // the sequence number, the checksum
			if got := a.sameHeader(h, thl); got != want {
				t.Errorf("%d-byte header, byte %d changed: same %v, want %v", thl, i, got, want)
			}
		}
		h := bytes.Clone(first)
		h[13] ^= 0x09 // PSH and FIN
		if !a.sameHeader(h, thl) {
			t.Errorf("%d-byte header: PSH and FIN changed: not the same", thl)
		}
	}
}

// TestOffloadSameSeg: a segment that continues the frame joins it,
// without its header encoded, when its fields are the frame's first's but
// for the sequence number, PSH and FIN (sameSeg), and starts a frame of its
// own when any other field of its header differs; sameSeg agrees with
// sameHeader on the encodings.
func TestOffloadSameSeg(t *testing.T) {
	a, _, _, _ := offloadPair(t, false, addrB)
	id := tcp.ID{Local: netip.AddrPortFrom(addrA, 5555), Remote: netip.AddrPortFrom(addrB, 80)}
	for _, tc := range []struct {
		name   string
		change func(*tcp.Segment)
		same   bool
	}{
		{"nothing", func(*tcp.Segment) {}, true},
		{"PSH", func(s *tcp.Segment) { s.Flags ^= tcp.FlagPSH }, true},
		{"FIN", func(s *tcp.Segment) { s.Flags |= tcp.FlagFIN }, true},
		{"payload", func(s *tcp.Segment) { s.Payload = bytes.Repeat([]byte{7}, 100); s.PayloadStable = true }, true},
		{"source port", func(s *tcp.Segment) { s.SrcPort++ }, false},
		{"destination port", func(s *tcp.Segment) { s.DstPort++ }, false},
		{"ACK", func(s *tcp.Segment) { s.Ack++ }, false},
		{"flag ACK", func(s *tcp.Segment) { s.Flags &^= tcp.FlagACK }, false},
		{"flag ECE", func(s *tcp.Segment) { s.Flags |= tcp.FlagECE }, false},
		{"window", func(s *tcp.Segment) { s.Window++ }, false},
		{"urgent", func(s *tcp.Segment) { s.Urgent++ }, false},
		{"TSVal", func(s *tcp.Segment) { s.Options.TSVal++ }, false},
		{"TSEcr", func(s *tcp.Segment) { s.Options.TSEcr++ }, false},
		{"no timestamps", func(s *tcp.Segment) { s.Options.TS = false }, false},
		{"a SACK block", func(s *tcp.Segment) { s.Options.NSACK, s.Options.SACK[0] = 1, tcp.SACKBlock{Start: 5, End: 6} }, false},
	} {
		first := tcp.Segment{SrcPort: 5555, DstPort: 80, Seq: 1000, Ack: 77, Flags: tcp.FlagACK | tcp.FlagPSH, Window: 100,
			Options: tcp.Options{TS: true, TSVal: 9, TSEcr: 10}, Payload: make([]byte, 100)}
		next := first
		next.Seq += 100
		tc.change(&next)
		if got := sameSeg(&first, &next); got != tc.same {
			t.Errorf("%s: sameSeg %v, want %v", tc.name, got, tc.same)
		}
		var ea, eb [100 + tcp.HeaderMaxSize]byte
		na, _ := first.Encode(ea[:])
		nb, _ := next.Encode(eb[:])
		thl := na - len(first.Payload)
		a.m.Post(a.flushFrame)
		a.queueSegment(id, &first, ipv4HeaderLen)
		if got := nb-len(next.Payload) == thl && a.sameHeader(eb[:thl], thl); got != tc.same {
			t.Errorf("%s: sameHeader of the encodings %v, want %v", tc.name, got, tc.same)
		}
		a.queueSegment(id, &next, ipv4HeaderLen)
		if want := map[bool]int{true: 2, false: 1}[tc.same]; a.gso.segs != want {
			t.Errorf("%s: the frame has %d segments after the second, want %d", tc.name, a.gso.segs, want)
		}
		if f := tcp.Flags(a.gso.buf[tun.VnetHdrLen+ipv4HeaderLen+13]); f != next.Flags {
			t.Errorf("%s: the frame's flags %v, want the last segment's, %v", tc.name, f, next.Flags)
		}
	}
	a.m.Post(a.flushFrame)
}

// TestOffloadNoTSO6: on a device that takes GSO frames of TCP/IPv4 only (no
// TSO6), TCP/IPv6 segments go out as plain packets, one write each.
func TestOffloadNoTSO6(t *testing.T) {
	a, _, ca, _ := offloadPair(t, true, addr6B)
	before := a.Stats()
	frames := a.step(func() {
		if _, err := ca.TryWrite(make([]byte, 20_000)); err != nil {
			t.Fatal(err)
		}
	})
	after := a.Stats()
	segs := after.SegmentsOut - before.SegmentsOut
	if segs < 2 || uint64(len(frames)) != segs || after.Offload.FramesOut6 != 0 || after.Offload.GSO6 {
		t.Fatalf("%d segments in %d writes, offload %+v: want one plain packet each", segs, len(frames), after.Offload)
	}
	for _, f := range frames {
		if h, _ := tun.ParseVnetHdr(f); h != (tun.VnetHdr{}) || f[tun.VnetHdrLen]>>4 != 6 {
			t.Fatalf("a frame %+v, IP version %d: want plain IPv6 packets", h, f[tun.VnetHdrLen]>>4)
		}
	}
}

// TestOffloadBadFrames: a frame whose virtio-net header is malformed is
// dropped and counted by reason, and never reaches TCP.
func TestOffloadBadFrames(t *testing.T) {
	p := newOffloadPeer(t, addrB, timer.NewManualClock(0))
	good := tcp4Seg(addrA, addrB, 3000)
	hdr := func(h tun.VnetHdr, pkt []byte) []byte {
		f := make([]byte, tun.VnetHdrLen, tun.VnetHdrLen+len(pkt))
		h.Put(f)
		return append(f, pkt...)
	}
	gso := tun.VnetHdr{Flags: tun.VnetFlagNeedsCsum, GSOType: tun.GSOTCPv4, HdrLen: 40, GSOSize: 1000, CsumStart: 20, CsumOffset: 16}
	long := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(long[2:], uint16(len(good)-100)) // IP says less than the frame holds
	for _, c := range []struct {
		name  string
		frame []byte
		drop  func(d Drops) uint64
	}{
		{"short header", []byte{1, 2, 3}, func(d Drops) uint64 { return d.BadVnetHeader }},
		{"unknown flag", hdr(tun.VnetHdr{Flags: 0x40}, good), func(d Drops) uint64 { return d.BadVnetHeader }},
		{"gso_size 0", hdr(tun.VnetHdr{Flags: 1, GSOType: tun.GSOTCPv4, CsumStart: 20, CsumOffset: 16}, good), func(d Drops) uint64 { return d.BadGSO }},
		{"larger than announced", hdr(gso, long), func(d Drops) uint64 { return d.BadGSO }},
		{"UDP GSO", hdr(tun.VnetHdr{Flags: 1, GSOType: tun.GSOUDPL4, GSOSize: 100, CsumStart: 20, CsumOffset: 6}, good), func(d Drops) uint64 { return d.BadGSO }},
		{"csum past the end", hdr(tun.VnetHdr{Flags: 1, CsumStart: 3000, CsumOffset: 40}, good), func(d Drops) uint64 { return d.BadChecksumOffset }},
		{"GSO csum elsewhere", hdr(tun.VnetHdr{Flags: 1, GSOType: tun.GSOTCPv4, GSOSize: 1000, CsumStart: 0, CsumOffset: 10}, good), func(d Drops) uint64 { return d.BadChecksumOffset }},
	} {
		before := p.Stats()
		p.deliver(t, [][]byte{c.frame})
		after := p.Stats()
		if n := c.drop(after.Drops) - c.drop(before.Drops); n != 1 {
			t.Errorf("%s: counted %d drops, want 1 (%+v)", c.name, n, after.Drops)
		}
		if after.SegmentsIn != before.SegmentsIn || after.PacketsIn != before.PacketsIn {
			t.Errorf("%s: reached the stack", c.name)
		}
	}
	// The good frame reaches TCP as one segment (no listener: a RST).
	before := p.Stats()
	p.deliver(t, [][]byte{hdr(gso, good)})
	if after := p.Stats(); after.SegmentsIn != before.SegmentsIn+1 || after.Drops.NoListener != before.Drops.NoListener+1 {
		t.Errorf("the good frame: segments in +%d, no listener +%d; want 1, 1", after.SegmentsIn-before.SegmentsIn, after.Drops.NoListener-before.Drops.NoListener)
	}
}

// TestOffloadIPv6Frame: a TCPv6 GSO frame (the TUN has TSO6) is no bad
// frame: it reaches the IP input whole, as one packet (which this IPv4
// stack then drops as not IPv4).
func TestOffloadIPv6Frame(t *testing.T) {
	p := newOffloadPeer(t, addrB, timer.NewManualClock(0))
	pkt := make([]byte, 40+20+3000)
	pkt[0] = 6 << 4
	binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)-40))
	pkt[6], pkt[7] = protoTCP, 64
	src, dst := netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8::2").As16()
	copy(pkt[8:], src[:])
	copy(pkt[24:], dst[:])
	tc := pkt[40:]
	tc[12], tc[13] = 5<<4, 0x10
	binary.BigEndian.PutUint16(tc[16:], tun.PseudoSum6(src, dst, len(tc)))
	f := make([]byte, tun.VnetHdrLen, tun.VnetHdrLen+len(pkt))
	tun.VnetHdr{Flags: tun.VnetFlagNeedsCsum, GSOType: tun.GSOTCPv6, HdrLen: 60, GSOSize: 1000, CsumStart: 40, CsumOffset: 16}.Put(f)
	f = append(f, pkt...)
	before := p.Stats()
	p.deliver(t, [][]byte{f})
	after := p.Stats()
	if after.Drops.NotIPv4 != before.Drops.NotIPv4+1 || after.Drops.BadGSO != before.Drops.BadGSO || after.Offload.LargeFramesIn != 1 {
		t.Fatalf("drops %+v, offload %+v: want it taken as one frame, and dropped as not IPv4", after.Drops, after.Offload)
	}
}

// tcp4Seg is a TCP/IPv4 ACK from src:40000 to dst:80 with n bytes of
// payload and the partial checksum of a GSO frame.
func tcp4Seg(src, dst netip.Addr, n int) []byte {
	p := make([]byte, ipv4HeaderLen+20+n)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, protoTCP
	s4, d4 := src.As4(), dst.As4()
	copy(p[12:], s4[:])
	copy(p[16:], d4[:])
	binary.BigEndian.PutUint16(p[10:], ^checksum.Checksum(p[:ipv4HeaderLen], 0))
	t := p[ipv4HeaderLen:]
	binary.BigEndian.PutUint16(t[0:], 40000)
	binary.BigEndian.PutUint16(t[2:], 80)
	binary.BigEndian.PutUint32(t[4:], 1)
	binary.BigEndian.PutUint32(t[8:], 1)
	t[12], t[13] = 5<<4, 0x10
	binary.BigEndian.PutUint16(t[14:], 1000)
	binary.BigEndian.PutUint16(t[16:], tun.PseudoSum4(s4, d4, len(t)))
	return p
}

// TestOffloadTrustsVnetChecksum: a TCP frame whose virtio-net header says
// its checksum was verified (DATA_VALID) is taken without checking it, over
// IPv4 and over IPv6 alike (IPv6 frames were once checked in full, which
// made downloads over IPv6 slower); without the flag, a bad checksum is a
// counted drop.
func TestOffloadTrustsVnetChecksum(t *testing.T) {
	p := newOffloadPeerOn(t, &frameDev{}, Config{Addr: addrB, Addr6: addr6B, Clock: timer.NewManualClock(0)})
	for _, v6 := range []bool{false, true} {
		src, dst := addrA, addrB
		if v6 {
			src, dst = addr6A, addr6B
		}
		seg := synTo(t, netip.AddrPortFrom(src, 40000), netip.AddrPortFrom(dst, 9), 1000) // no listener on 9: a RST
		seg[16] ^= 0xff                                                                   // a wrong checksum
		pkt := ipPacket(src, dst, protoTCP, seg)
		for _, valid := range []bool{true, false} {
			f := make([]byte, tun.VnetHdrLen, tun.VnetHdrLen+len(pkt))
			h := tun.VnetHdr{}
			if valid {
				h.Flags = tun.VnetFlagDataValid
			}
			h.Put(f)
			f = append(f, pkt...)
			before := p.Stats()
			p.deliver(t, [][]byte{f})
			after := p.Stats()
			taken := after.SegmentsIn - before.SegmentsIn
			bad := after.Drops.BadTCPChecksum - before.Drops.BadTCPChecksum
			if valid && (taken != 1 || bad != 0) || !valid && (taken != 0 || bad != 1) {
				t.Errorf("IPv6 %v, DATA_VALID %v: %d segments taken, %d bad checksums", v6, valid, taken, bad)
			}
		}
	}
}

// TestOffloadFINRidesData: a Close in the turn of the last Write sends a
// bare FIN right after the data segment; it rides on that segment's frame
// as its FIN flag: one packet, data+FIN, where TCP sent two segments (both
// counted in SegmentsOut, one in PacketsOut, FINsJoined one). The peer
// takes the data and the FIN from it and ACKs both; on a GSO frame the FIN
// is on its last packet only. A FIN in a turn of its own is a packet of
// its own, as before.
func TestOffloadFINRidesData(t *testing.T) {
	const fin, psh, ack = 0x01, 0x08, 0x10
	flagsOf := func(pkt []byte) byte { return pkt[ipv4HeaderLen+13] }
	payloadOf := func(pkt []byte) int { return len(pkt) - ipv4HeaderLen - int(pkt[ipv4HeaderLen+12]>>4)*4 }

	a, b, ca, cb := offloadPair(t, false, addrB)
	before := a.Stats()
	data := []byte("HTTP/1.0 200 OK\r\n\r\nhello")
	frames := a.step(func() {
		if _, err := ca.TryWrite(data); err != nil {
			t.Fatal(err)
		}
		if err := ca.Close(); err != nil {
			t.Fatal(err)
		}
	})
	after := a.Stats()
	if len(frames) != 1 {
		t.Fatalf("a Write and a Close in one turn went out in %d frames, want 1", len(frames))
	}
	h, _ := tun.ParseVnetHdr(frames[0])
	pkt := frames[0][tun.VnetHdrLen:]
	if h.IsGSO() || flagsOf(pkt) != fin|psh|ack || payloadOf(pkt) != len(data) {
		t.Fatalf("the frame: GSO %v, flags %#02x, %d bytes of payload; want one packet, FIN|PSH|ACK, %d bytes", h.IsGSO(), flagsOf(pkt), payloadOf(pkt), len(data))
	}
	seq := binary.BigEndian.Uint32(pkt[ipv4HeaderLen+4:])
	if segs, pkts, joined := after.SegmentsOut-before.SegmentsOut, after.PacketsOut-before.PacketsOut,
		after.Offload.FINsJoined-before.Offload.FINsJoined; segs != 2 || pkts != 1 || joined != 1 {
		t.Fatalf("%d segments sent, %d packets, %d FINs joined; want 2, 1, 1", segs, pkts, joined)
	}
	acks := b.deliver(t, frames)
	buf := make([]byte, 100)
	if n, err := cb.TryRead(buf); n != len(data) || err != nil || string(buf[:n]) != string(data) {
		t.Fatalf("B read %q, %v; want %q", buf[:n], err, data)
	}
	if n, err := cb.TryRead(buf); n != 0 || err != io.EOF {
		t.Fatalf("B's read after the data: %d, %v; want EOF (the FIN)", n, err)
	}
	if len(acks) != 1 {
		t.Fatalf("B answered with %d frames, want its ACK", len(acks))
	}
	if got, want := binary.BigEndian.Uint32(acks[0][tun.VnetHdrLen+ipv4HeaderLen+8:]), seq+uint32(len(data))+1; got != want {
		t.Fatalf("B ACKs %d, want %d: the data and the FIN", got, want)
	}
	a.deliver(t, acks)
	if st := ca.ep.Info().State; st != tcp.StateFinWait2 {
		t.Fatalf("A is in %v after B's ACK, want FIN-WAIT-2", st)
	}

	// Unanswered, the one packet waits for the tail-loss probe of one
	// packet in flight (tcp.Config.FINJoinsData: 2*SRTT plus
	// TLP.max_ack_delay, capped at the RTO), not 2*SRTT + 2 ms: the peer
	// may hold its ACK of a FIN until its own.
	a4, _, ca4, _ := offloadPair(t, false, addrB)
	a4.step(func() {
		ca4.TryWrite(data)
		ca4.Close()
	})
	if f := a4.step(func() { a4.AdvanceTo(a4.m.Clock().Now() + 100*time.Millisecond) }); len(f) != 0 {
		t.Fatalf("%d frames within 100 ms of data+FIN, want none before the probe of one packet", len(f))
	}
	if i := ca4.ep.Info(); i.TLPProbes != 0 {
		t.Fatalf("%d probes within 100 ms, want 0", i.TLPProbes)
	}

	// On a GSO frame: the FIN is on its last packet only; on a device that
	// writes frames in pieces too (the payloads as views, the headers in
	// the frame buffer, where the FIN is set).
	for _, vec := range []bool{false, true} {
		var a2 *offloadPeer
		var ca2 *Conn
		var d *vecDev
		if vec {
			a2, _, ca2, _, d = vecPair(t)
		} else {
			a2, _, ca2, _ = offloadPair(t, false, addrB)
		}
		frames = a2.step(func() {
			if _, err := ca2.TryWrite(make([]byte, 3*1448)); err != nil {
				t.Fatal(err)
			}
			if err := ca2.Close(); err != nil {
				t.Fatal(err)
			}
		})
		if len(frames) != 1 || vec && (d.vframes != 1 || d.views == 0) {
			t.Fatalf("pieces %v: 3 full segments and a Close went out in %d frames, want 1 (of views: %v)", vec, len(frames), vec)
		}
		pkts := tuntest.Segments(frames[0])
		if len(pkts) != 3 {
			t.Fatalf("pieces %v: the frame segments into %d packets, want 3", vec, len(pkts))
		}
		for i, p := range pkts {
			if got, last := flagsOf(p)&fin != 0, i == len(pkts)-1; got != last || payloadOf(p) != 1448 {
				t.Fatalf("pieces %v: packet %d of 3: FIN %v, %d bytes; want FIN on the last only, 1448 bytes each", vec, i, got, payloadOf(p))
			}
		}
	}

	// A Close in a turn after the Write's: the FIN is a packet of its own.
	a3, _, ca3, _ := offloadPair(t, false, addrB)
	if f := a3.step(func() { ca3.TryWrite(data) }); len(f) != 1 || flagsOf(f[0][tun.VnetHdrLen:])&fin != 0 {
		t.Fatalf("the Write's turn: %d frames, want 1 without FIN", len(f))
	}
	f := a3.step(func() { ca3.Close() })
	if len(f) != 1 || flagsOf(f[0][tun.VnetHdrLen:]) != fin|ack || payloadOf(f[0][tun.VnetHdrLen:]) != 0 {
		t.Fatalf("the Close's turn: %d frames, want one bare FIN", len(f))
	}
	if j := a3.Stats().Offload.FINsJoined; j != 0 {
		t.Fatalf("FINsJoined %d, want 0", j)
	}
}
