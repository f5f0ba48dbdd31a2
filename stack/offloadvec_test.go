package stack

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
	"github.com/tcpwheel/tcpwheel/tun"
)

// vecDev is a frameDev that also writes frames in pieces
// (tun.FrameVecWriter), as a TUN's writev: it keeps each such frame whole,
// as the kernel reads it at the write, and counts what its pieces were:
// views (not in the stack's frame buffer) or the buffer's.
type vecDev struct {
	frameDev
	buf     []byte // the stack's frame buffer (gso.buf)
	vframes int    // frames written in pieces
	pieces  int    // their pieces
	views   int    // of those, pieces that are views
	copies  int    // pieces in buf after the first: payloads copied after a view
	// quiet keeps no frame (the allocation test): hdr is then the last
	// frame's first piece's first bytes, n its length in all.
	quiet bool
	hdr   [128]byte
	n     int
}

var _ tun.FrameVecWriter = (*vecDev)(nil)

func (d *vecDev) WriteFrameVec(pieces [][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.vframes++
	d.pieces += len(pieces)
	n := 0
	for i, p := range pieces {
		n += len(p)
		switch {
		case !d.inBuf(p):
			d.views++
		case i > 0:
			d.copies++
		}
	}
	if d.quiet {
		copy(d.hdr[:], pieces[0])
		d.n = n
		return nil
	}
	f := make([]byte, 0, n)
	for _, p := range pieces {
		f = append(f, p...)
	}
	d.frames = append(d.frames, f)
	return nil
}

// inBuf reports whether p lies in the stack's frame buffer.
func (d *vecDev) inBuf(p []byte) bool {
	off := cap(d.buf) - cap(p)
	return len(p) > 0 && off >= 0 && off < len(d.buf) && &d.buf[off] == &p[0]
}

// vecPeer is newOffloadPeer on a vecDev.
func vecPeer(t *testing.T) (*offloadPeer, *vecDev) {
	t.Helper()
	d := &vecDev{}
	p := newOffloadPeerOn(t, d, Config{Addr: addrA, Addr6: addr6A, Clock: timer.NewManualClock(0)})
	d.buf = p.gso.buf
	return p, d
}

// vecPair is offloadPair with A on a vecDev.
func vecPair(t *testing.T) (a, b *offloadPeer, ca, cb *Conn, d *vecDev) {
	t.Helper()
	d = &vecDev{}
	a, b, ca, cb = offloadPairOn(t, d, addrB)
	d.buf = a.gso.buf
	return a, b, ca, cb, d
}

// framePayload returns the payload of a TCP/IPv4 frame, and its TCP header.
func framePayload(t *testing.T, f []byte) (tcp.Segment, []byte) {
	t.Helper()
	pkt := f[tun.VnetHdrLen:]
	ihl := int(pkt[0]&0xf) * 4
	seg, err := tcp.ParseSegment(pkt[ihl:])
	if err != nil {
		t.Fatal(err)
	}
	return seg, seg.Payload
}

// TestFrameViews: on a device that writes frames in pieces, a frame's
// stable payloads go as views of where they are (those that continue one
// another as one piece), a payload that is not stable (tcp's copy of a
// span that wraps, which its next send overwrites) is copied into the
// frame buffer, and the bytes written are the headers and exactly the
// payloads sent, though the temporary copy changed before the frame was
// written.
func TestFrameViews(t *testing.T) {
	a, d := vecPeer(t)
	id := tcp.ID{Local: netip.AddrPortFrom(addrA, 5555), Remote: netip.AddrPortFrom(addrB, 80)}
	store := make([]byte, 8000) // a send buffer's storage
	for i := range store {
		store[i] = byte(i*7 + 1)
	}
	tmp := bytes.Repeat([]byte{0xee}, 1000) // tcp's scratch copy of a wrapped span
	want := append(append(append(append([]byte(nil), store[:2000]...), tmp...), store[3000:4000]...), store[5000:5100]...)
	seg := func(seq seqnum.Value, p []byte, stable bool) *tcp.Segment {
		return &tcp.Segment{SrcPort: 5555, DstPort: 80, Seq: seq, Ack: 1, Flags: tcp.FlagACK, Window: 100, Payload: p, PayloadStable: stable}
	}
	frames := a.step(func() {
		a.queueSegment(id, seg(1000, store[0:1000], true), ipv4HeaderLen)
		a.queueSegment(id, seg(2000, store[1000:2000], true), ipv4HeaderLen)
		a.queueSegment(id, seg(3000, tmp, false), ipv4HeaderLen)
		clear(tmp) // the next send's copy
		a.queueSegment(id, seg(4000, store[3000:4000], true), ipv4HeaderLen)
		a.queueSegment(id, seg(5000, store[5000:5100], true), ipv4HeaderLen)
		clear(store[5000:5100]) // copied, being short (minView): the frame has the bytes as they were
	})
	if len(frames) != 1 || a.gso.segs != 0 {
		t.Fatalf("%d frames written, %d segments left: want one frame of 5", len(frames), a.gso.segs)
	}
	h, _ := tun.ParseVnetHdr(frames[0])
	if n := tun.SegmentCount(h, frames[0][tun.VnetHdrLen:]); n != 5 {
		t.Fatalf("a frame of %d segments, want 5", n)
	}
	s, p := framePayload(t, frames[0])
	if s.Seq != 1000 || !bytes.Equal(p, want) {
		t.Fatalf("the frame's payload (seq %d, %d bytes) is not the segments' (seq 1000, %d bytes)", s.Seq, len(p), len(want))
	}
	// The headers, the two stable payloads as one view, the copy (in buf,
	// after the view), a view, the short last payload copied.
	if d.vframes != 1 || d.pieces != 5 || d.views != 2 || d.copies != 2 {
		t.Fatalf("%d frames in %d pieces, %d views, %d copies; want 1 in 5: headers, a view of 2000 bytes, a copy, a view, a copy", d.vframes, d.pieces, d.views, d.copies)
	}
	if len(a.gso.vec) != 0 || cap(a.gso.vec) != tun.MaxFramePieces {
		t.Fatalf("pieces after the write: %d of %d", len(a.gso.vec), cap(a.gso.vec))
	}
	// A frame with nothing stable is written whole, as before.
	frames = a.step(func() {
		a.queueSegment(id, seg(9000, bytes.Repeat([]byte{1}, 1000), false), ipv4HeaderLen)
		a.queueSegment(id, seg(10000, bytes.Repeat([]byte{2}, 10), false), ipv4HeaderLen)
	})
	if _, p := framePayload(t, frames[0]); len(frames) != 1 || d.vframes != 1 || len(p) != 1010 || p[999] != 1 || p[1000] != 2 {
		t.Fatalf("%d frames, %d in pieces; want one, written whole", len(frames), d.vframes)
	}
}

// TestFrameViewsPieceLimit: a frame never has more than
// tun.MaxFramePieces pieces: once views that do not continue one another
// have taken all but one, the payloads that follow are copied, into that
// last piece. The bytes are the payloads'.
func TestFrameViewsPieceLimit(t *testing.T) {
	a, d := vecPeer(t)
	id := tcp.ID{Local: netip.AddrPortFrom(addrA, 5555), Remote: netip.AddrPortFrom(addrB, 80)}
	const mss, segs = minView + 88, 100 // views (minView), 58.8 KB: one frame
	store := make([]byte, 2*mss*segs)   // every other span: no view continues the one before
	for i := range store {
		store[i] = byte(i * 5)
	}
	var want []byte
	frames := a.step(func() {
		for i := range segs {
			p := store[2*mss*i : 2*mss*i+mss]
			want = append(want, p...)
			seg := tcp.Segment{SrcPort: 5555, DstPort: 80, Seq: seqnum.Value(1000 + mss*i), Ack: 1, Flags: tcp.FlagACK, Window: 100, Payload: p, PayloadStable: true}
			a.queueSegment(id, &seg, ipv4HeaderLen)
		}
	})
	if len(frames) != 1 {
		t.Fatalf("%d frames, want 1", len(frames))
	}
	if _, p := framePayload(t, frames[0]); !bytes.Equal(p, want) {
		t.Fatalf("the frame's payload (%d bytes) is not the segments' (%d)", len(p), len(want))
	}
	if d.pieces != tun.MaxFramePieces || d.views != tun.MaxFramePieces-2 || d.copies != 1 {
		t.Fatalf("%d pieces, %d views, %d copies; want %d, %d, 1", d.pieces, d.views, d.copies, tun.MaxFramePieces, tun.MaxFramePieces-2)
	}
}

// TestFrameViewsWrap: a bulk transfer through a device that writes frames
// in pieces, long enough for the send buffer's ring to wrap many times. The
// frames (several segments each) carry views of the send buffer, and a copy
// of the span that wraps; B, which takes each frame whole and does not
// check its checksum (the kernel's to fill), reads exactly the bytes
// written.
func TestFrameViewsWrap(t *testing.T) {
	a, b, ca, cb, d := vecPair(t)
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*31 + i>>11)
	}
	got := make([]byte, 0, len(data))
	buf := make([]byte, 64<<10)
	wrote := 0
	var acks [][]byte
	var now time.Duration
	multi := 0
	for range 5000 {
		got = readReady(cb, got, buf)
		if len(got) == len(data) {
			break
		}
		out := a.deliver(t, acks)
		out = append(out, a.step(func() {
			if wrote < len(data) {
				n, _ := ca.TryWrite(data[wrote:]) // the buffer never empties: its ring wraps
				wrote += n
			}
			now += time.Millisecond
			a.AdvanceTo(now)
		})...)
		for _, f := range out {
			if h, _ := tun.ParseVnetHdr(f); h.IsGSO() {
				multi++
			}
		}
		acks = b.deliver(t, out)
		acks = append(acks, b.step(func() { b.AdvanceTo(now) })...)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("B read %d bytes of %d, intact %v", len(got), len(data), bytes.Equal(got, data[:len(got)]))
	}
	if st := a.Stats(); st.Drops != (Drops{}) || st.DeviceErrors != 0 {
		t.Fatalf("A dropped: %+v, device errors %d", st.Drops, st.DeviceErrors)
	}
	// Every data frame went in pieces: views, and the wrapped spans copied.
	if d.vframes == 0 || d.views < d.vframes || d.copies == 0 || multi == 0 {
		t.Fatalf("%d frames in pieces (%d GSO frames): %d views, %d copies", d.vframes, multi, d.views, d.copies)
	}
	t.Logf("%d frames in pieces (%d GSO), %d pieces: %d views, %d copies", d.vframes, multi, d.pieces, d.views, d.copies)
}

// vecAck is the ACK B would send for everything in frame f: the next
// sequence number A sends, the timestamps echoed.
func vecAck(f []byte, n int) tcp.Segment {
	pkt := f[tun.VnetHdrLen:]
	ihl := int(pkt[0]&0xf) * 4
	seg, _ := tcp.ParseSegment(pkt[ihl : ihl+int(pkt[ihl+12]>>4)*4])
	end := seg.Seq.Add(seqnum.Size(n - tun.VnetHdrLen - ihl - int(pkt[ihl+12]>>4)*4))
	return tcp.Segment{SrcPort: seg.DstPort, DstPort: seg.SrcPort, Seq: seg.Ack, Ack: end, Flags: tcp.FlagACK, Window: 0xffff,
		Options: tcp.Options{TS: seg.Options.TS, TSVal: seg.Options.TSEcr, TSEcr: seg.Options.TSVal}}
}

// TestFrameViewsAckBeforeFlush: an ACK that covers bytes of the frame
// being built (a forged or blind one: no peer has seen them) lets the
// endpoint consume them, and its ring, emptied, starts again at the front
// of its storage, where the views point: the next Write of the same turn
// would overwrite them. The frame is written before the ACK is handled, so
// the bytes on the wire are the ones sent.
func TestFrameViewsAckBeforeFlush(t *testing.T) {
	a, _, ca, _, d := vecPair(t)
	first := bytes.Repeat([]byte{0xaa}, 4*1448)
	second := bytes.Repeat([]byte{0x55}, 4*1448)
	frames := a.step(func() {
		if n, err := ca.TryWrite(first); n != len(first) || err != nil {
			t.Fatalf("TryWrite: %d, %v", n, err)
		}
		if a.gso.segs != 4 || len(a.gso.vec) == 0 {
			t.Fatalf("the frame being built: %d segments, %d pieces; want 4 segments, views", a.gso.segs, len(a.gso.vec))
		}
		// The ACK for it all, as B would send it, from a copy of the frame.
		g := &a.gso
		f := make([]byte, 0, g.n)
		for _, p := range g.vec {
			f = append(f, p...)
		}
		ack := vecAck(f, g.n)
		if err := a.m.Post(func() { a.demuxTCP(addrB, addrA, &ack, nil); a.endBatch() }); err != nil {
			t.Fatal(err)
		}
		if n, err := ca.TryWrite(second); n != len(second) || err != nil {
			t.Fatalf("TryWrite: %d, %v", n, err)
		}
	})
	if len(frames) != 2 {
		t.Fatalf("%d frames, want the two writes'", len(frames))
	}
	for i, want := range [][]byte{first, second} {
		if _, p := framePayload(t, frames[i]); !bytes.Equal(p, want) {
			t.Fatalf("frame %d: its %d-byte payload is not write %d's (%d bytes of %#x)", i, len(p), i, len(want), want[0])
		}
	}
	if d.vframes != 2 {
		t.Fatalf("%d frames in pieces, want 2", d.vframes)
	}
}

// TestFrameViewsAbort: a connection aborted while its frame is being built
// (Conn.Abort: the Conn's bytes dropped, the endpoint's RST) sends the frame
// first, its bytes the ones written, then the RST.
func TestFrameViewsAbort(t *testing.T) {
	a, _, ca, _, d := vecPair(t)
	data := make([]byte, 5*1448)
	for i := range data {
		data[i] = byte(i*3 + 7)
	}
	frames := a.step(func() {
		if n, err := ca.TryWrite(data); n != len(data) || err != nil {
			t.Fatalf("TryWrite: %d, %v", n, err)
		}
		if len(a.gso.vec) == 0 {
			t.Fatal("no views in the frame being built")
		}
		if err := ca.Abort(); err != nil {
			t.Fatal(err)
		}
	})
	if len(frames) != 2 || d.vframes != 1 {
		t.Fatalf("%d frames (%d in pieces), want the data's in pieces and the RST", len(frames), d.vframes)
	}
	if _, p := framePayload(t, frames[0]); !bytes.Equal(p, data) {
		t.Fatalf("the data frame's %d-byte payload is not the %d bytes written", len(p), len(data))
	}
	if s, p := framePayload(t, frames[1]); s.Flags&tcp.FlagRST == 0 || len(p) != 0 {
		t.Fatalf("the second frame is %v, want the RST", &s)
	}
}

// TestFrameViewsAllocateNothing: a bulk sender on a device that writes its
// frames in pieces allocates nothing per segment, nor per frame: the pieces
// live in the stack's frame state, the TUN's iovecs in the TUN.
func TestFrameViewsAllocateNothing(t *testing.T) {
	a, _, ca, _, d := vecPair(t)
	d.quiet = true
	chunk := make([]byte, 256<<10)
	flush := a.flushFrame
	var ack tcp.Segment
	acked := func() {
		ack = vecAck(d.hdr[:], d.n)
		a.demuxTCP(addrB, addrA, &ack, nil)
		a.endBatch()
	}
	segs := func() uint64 { return a.counters.SegmentsOut }
	round := func() {
		if n, err := ca.TryWrite(chunk); n != len(chunk) || err != nil {
			t.Fatalf("TryWrite: %d, %v", n, err)
		}
		for range 1000 {
			a.m.Post(flush)
			if ca.ep.Info().SndBuffered == 0 {
				return
			}
			a.m.Post(acked)
		}
		t.Fatal("the round did not end")
	}
	for range 20 { // slow start opens cwnd; the rings grow
		round()
	}
	before, frames := segs(), d.vframes
	if n := testing.AllocsPerRun(10, round); n != 0 {
		t.Errorf("a round of %d bytes allocated %v times, want 0", len(chunk), n)
	}
	if s := segs() - before; s < 11*uint64(len(chunk)/1448) || d.vframes-frames < 11*(len(chunk)>>16) {
		t.Errorf("%d segments in %d frames in pieces in 11 rounds: want the chunks', in frames of several", s, d.vframes-frames)
	}
	if d.views == 0 {
		t.Error("no views")
	}
	t.Logf("11 rounds: %d segments in %d frames in pieces", segs()-before, d.vframes-frames)
}

// TestVecAckMatches checks vecAck, which the allocation test relies on: for
// a frame A wrote, its ACK is what B sends (sequence, acknowledgment and
// the echoed timestamp).
func TestVecAckMatches(t *testing.T) {
	a, b, ca, _ := offloadPair(t, false, addrB)
	frames := a.step(func() {
		if _, err := ca.TryWrite(make([]byte, 3*1448)); err != nil {
			t.Fatal(err)
		}
	})
	if len(frames) != 1 {
		t.Fatalf("%d frames", len(frames))
	}
	want := vecAck(frames[0], len(frames[0]))
	acks := b.deliver(t, frames)
	acks = append(acks, b.step(func() { b.AdvanceTo(time.Second) })...)
	if len(acks) == 0 {
		t.Fatal("B sent no ACK")
	}
	got, _ := framePayload(t, acks[0])
	if got.Seq != want.Seq || got.Ack != want.Ack || got.Options.TSEcr != want.Options.TSEcr {
		t.Fatalf("B's ACK %v, vecAck's %v", &got, &want)
	}
}

// TestFrameViewsForget: a connection the stack forgets while its frame,
// with views of its send buffer, is being built (a reset of the same
// turn, say) has the frame written first: from then on its buffers may
// be reused, by a pool of connections or of buffers.
func TestFrameViewsForget(t *testing.T) {
	a, _, ca, _, d := vecPair(t)
	data := bytes.Repeat([]byte{0x3c}, 3*1448)
	frames := a.step(func() {
		if n, err := ca.TryWrite(data); n != len(data) || err != nil {
			t.Fatalf("TryWrite: %d, %v", n, err)
		}
		if len(a.gso.vec) == 0 {
			t.Fatal("no views in the frame being built")
		}
		a.forget(ca)
		if d.vframes != 1 || len(a.gso.vec) != 0 {
			t.Fatalf("forgotten: %d frames written in pieces, %d pieces held; want the frame written", d.vframes, len(a.gso.vec))
		}
	})
	if len(frames) != 1 {
		t.Fatalf("%d frames, want 1", len(frames))
	}
	if _, p := framePayload(t, frames[0]); !bytes.Equal(p, data) {
		t.Fatalf("the frame's %d-byte payload is not the %d bytes written", len(p), len(data))
	}
}
