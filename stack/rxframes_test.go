package stack

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// frameQueue is the direct path's side of a GRO device for a manual
// stack's readReady: each read returns the next queued read (one frame, or
// several back to back, as a wrapper's), then tun.ErrWouldBlock.
type frameQueue struct{ queueDevice }

func (d *frameQueue) Offloads() tun.Offloads                    { return tun.Offloads{GRO: true} }
func (d *frameQueue) ReadFrame(buf []byte) (int, error)         { return d.ReadPacketNonblock(buf) }
func (d *frameQueue) ReadFrameNonblock(buf []byte) (int, error) { return d.ReadPacketNonblock(buf) }
func (d *frameQueue) WriteFrame([]byte) error                   { return errors.New("frameQueue: read only") }

// lendBed is a manual stack whose readReady reads GRO frames from a
// frameQueue into the buffers of its framePool, as the direct path does,
// with one connection from addrA:5000 to its port 80, accepted: seq is the
// client's next sequence number, ack the stack's.
type lendBed struct {
	m        *Manual
	link     link
	dev      *frameQueue
	c        *Conn
	seq, ack uint32
	ws       uint8  // the stack's window scale
	ack0     uint32 // the stack's first ACK
	sent     []byte
}

func newLendBed(t testing.TB, recvBuffer, quickAcks int) *lendBed {
	t.Helper()
	cfg := Config{Addr: addrB}
	cfg.TCP.RecvBuffer, cfg.TCP.QuickAcks = recvBuffer, quickAcks
	m, l := manualOn(t, cfg)
	ln, err := m.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	dev := &frameQueue{}
	m.poll, m.gro, m.frames = dev, true, newFramePool(tun.MaxFrame)
	m.ibuf = m.frames.get()
	t.Cleanup(func() { m.poll = nil })
	b := &lendBed{m: m, link: l, dev: dev, seq: 1000}
	syn := tcp.Segment{SrcPort: 5000, DstPort: 80, Seq: 999, Flags: tcp.FlagSYN, Window: 65535,
		Options: tcp.Options{MSS: 1460, HasMSS: true, WindowScale: 7, HasWS: true}}
	b.queue(t, b.frame(t, &syn))
	b.m.readReady()
	out := b.out(t)
	if len(out) != 1 || out[0].Flags != tcp.FlagSYN|tcp.FlagACK || !out[0].Options.HasWS {
		t.Fatalf("answer to the SYN: %+v, want one SYN-ACK with a window scale", out)
	}
	b.ack, b.ws = uint32(out[0].Seq)+1, out[0].Options.WindowScale
	b.ack0 = b.seq
	b.queue(t, b.data(t, 0))
	b.m.readReady()
	c, ok := ln.(*Listener).TryAccept()
	if !ok {
		t.Fatal("no connection to accept")
	}
	b.c = c
	return b
}

// frame is seg from addrA to addrB as a GRO frame (tuntest.GSOFrame: a
// partial checksum, as the kernel hands its own segments over).
func (b *lendBed) frame(t testing.TB, seg *tcp.Segment) []byte {
	t.Helper()
	p := make([]byte, seg.EncodedLen())
	if _, err := seg.Encode(p); err != nil {
		t.Fatal(err)
	}
	return tuntest.GSOFrame(ipv4Packet(addrA, addrB, protoTCP, p), 1460)
}

// data is a frame of the client's next n bytes (numbered from the first
// byte sent: sent's continuation).
func (b *lendBed) data(t testing.TB, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	for i := range p {
		p[i] = byte((len(b.sent)+i)*7 + (len(b.sent)+i)/251)
	}
	seg := tcp.Segment{SrcPort: 5000, DstPort: 80, Seq: seqnum.Value(b.seq), Ack: seqnum.Value(b.ack),
		Flags: tcp.FlagACK, Window: 65535, Payload: p}
	if n > 0 {
		seg.Flags |= tcp.FlagPSH
	}
	b.seq += uint32(n)
	b.sent = append(b.sent, p...)
	return b.frame(t, &seg)
}

// queue adds one read of the device: the frames, back to back.
func (b *lendBed) queue(t testing.TB, frames ...[]byte) {
	t.Helper()
	b.dev.q = append(b.dev.q, bytes.Join(frames, nil))
}

// out returns the segments the stack sent since the last call.
func (b *lendBed) out(t testing.TB) []tcp.Segment {
	t.Helper()
	var segs []tcp.Segment
	for _, p := range b.link.readAll(t) {
		seg, err := tcp.ParseSegment(p[ipv4HeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, seg)
	}
	return segs
}

// pool returns the frame pool's lent and held counts.
func (b *lendBed) pool() (lent, held uint64) {
	st := b.m.Stats()
	return st.Offload.FramesLent, st.Offload.FramesHeld
}

// noDoubleFree fails if the pool's free list holds a buffer twice (given
// back twice).
func (b *lendBed) noDoubleFree(t testing.TB) {
	t.Helper()
	seen := map[*byte]bool{}
	for _, f := range b.m.frames.free {
		if seen[&f[0]] {
			t.Fatal("a frame buffer is in the pool twice")
		}
		seen[&f[0]] = true
	}
}

// readAll reads what the Conn holds, in reads of at most k bytes.
func (b *lendBed) readAll(t testing.TB, k int) []byte {
	t.Helper()
	var got []byte
	p := make([]byte, k)
	for {
		n, wait, err := b.c.readSome(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if wait {
			return got
		}
		if n == 0 {
			t.Fatalf("a read of %d bytes returned none, with %d held", len(p), b.c.rx.len())
		}
		got = append(got, p[:n]...)
	}
}

// TestLentFramesData: large payloads are lent (their frame buffers taken
// by the Conn, no copy), small ones and the second frame of one read are
// copied, and Read returns every byte in order across both, however it
// cuts them; each lent buffer goes back to the pool once, when its last
// byte is read, and the loop reads on into another buffer meanwhile.
func TestLentFramesData(t *testing.T) {
	b := newLendBed(t, 1<<20, 0)
	big := tun.MaxFrame / 2      // the smallest payload lent
	b.queue(t, b.data(t, 300))   // copied
	b.queue(t, b.data(t, 40000)) // lent
	b.queue(t, b.data(t, big-1)) // copied: too small
	b.queue(t, b.data(t, big))   // lent
	b.queue(t, b.data(t, 60000)) // lent
	b.m.readReady()
	// One read of two frames (a wrapper's): the first lent, the second
	// copied, large enough as it is (the smallest lent lowered for it).
	b.m.frames.min = 20000
	b.queue(t, b.data(t, 25000), b.data(t, 25000))
	b.m.readReady()
	b.m.frames.min = big
	if lent, held := b.pool(); lent != 4 || held != 4 {
		t.Fatalf("lent %d, held %d: want 4, 4", lent, held)
	}
	if heldFrames(&b.c.rx) != 4 || b.c.rx.len() != len(b.sent) {
		t.Fatalf("rx holds %d frames and %d bytes, want 4 and %d", heldFrames(&b.c.rx), b.c.rx.len(), len(b.sent))
	}
	got := b.readAll(t, 7001)
	if !bytes.Equal(got, b.sent) {
		t.Fatalf("read %d bytes, want the %d sent, in order (first difference at %d)", len(got), len(b.sent), firstDiff(got, b.sent))
	}
	if lent, held := b.pool(); lent != 4 || held != 0 {
		t.Fatalf("after reading all: lent %d, held %d: want 4, 0", lent, held)
	}
	if len(b.m.frames.free) != 4 {
		t.Fatalf("the pool has %d free buffers, want the 4 given back", len(b.m.frames.free))
	}
	b.noDoubleFree(t)
	// More after the ring's bytes were read: the order holds with frames
	// after copies after frames, read in pieces that end inside each.
	b.sent = b.sent[:0]
	b.queue(t, b.data(t, 40000))
	b.queue(t, b.data(t, 10))
	b.queue(t, b.data(t, 40000))
	b.m.readReady()
	first := make([]byte, 39999)
	n, _, err := b.c.readSome(first, nil)
	if err != nil || n != len(first) {
		t.Fatalf("read %d, %v: want %d", n, err, len(first))
	}
	b.queue(t, b.data(t, 20))
	b.m.readReady()
	got = append(first[:n], b.readAll(t, 1<<20)...)
	if !bytes.Equal(got, b.sent) {
		t.Fatalf("read %d bytes, want the %d sent, in order (first difference at %d)", len(got), len(b.sent), firstDiff(got, b.sent))
	}
	if lent, held := b.pool(); lent != 6 || held != 0 {
		t.Fatalf("lent %d, held %d: want 6, 0", lent, held)
	}
	b.noDoubleFree(t)
	// Out of order: a large segment after a hole is the endpoint's copy
	// (its out-of-order queue) when the small one that fills the hole
	// delivers it, not the frame's: both are copied, no buffer is lent.
	b.sent = b.sent[:0]
	small := b.data(t, 100)
	b.queue(t, b.data(t, 40000))
	b.queue(t, small)
	b.m.readReady()
	if got := b.readAll(t, 1<<20); !bytes.Equal(got, b.sent) {
		t.Fatalf("read %d bytes, want the %d sent, in order (first difference at %d)", len(got), len(b.sent), firstDiff(got, b.sent))
	}
	if lent, held := b.pool(); lent != 6 || held != 0 {
		t.Fatalf("after the hole: lent %d, held %d: want 6, 0", lent, held)
	}
}

// heldFrames is how many lent frames rx holds.
func heldFrames(r *rxBuf) int {
	if r.lent == nil {
		return 0
	}
	return len(r.lent.frames)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestLentFramesWindow: the window counts lent bytes held unread exactly
// as copied ones: the same input sends the same ACKs, at the same points,
// with the same windows, whether the frames are lent or copied (a bed that
// lends nothing). Each ACK comes at its batch's end and advertises the
// buffer less what is held; a reader that never reads closes the window,
// holding no more buffers than the bytes need twice over; reading reopens
// it; a Close with unread data resets the connection and gives every
// buffer back.
func TestLentFramesWindow(t *testing.T) {
	lend := lentWindow(t, tun.MaxFrame/2)
	copied := lentWindow(t, 1<<30)
	if len(lend) != len(copied) {
		t.Fatalf("lending: %d segments, copying: %d", len(lend), len(copied))
	}
	for i := range lend {
		if lend[i] != copied[i] {
			t.Fatalf("segment %d: %s lending, %s copying", i, lend[i], copied[i])
		}
	}
}

// lentWindow runs TestLentFramesWindow's connection on a bed that lends
// payloads of min bytes or more, and returns what the stack sent, each
// segment as its flags, ACK and window field, and the step it came in.
func lentWindow(t *testing.T, min int) []string {
	t.Helper()
	const size = 256 << 10
	b := newLendBed(t, size, -1)
	b.m.frames.min = min
	lending := min <= tun.MaxFrame
	var sent []string
	step := 0
	out := func() []tcp.Segment {
		segs := b.out(t)
		for _, s := range segs {
			sent = append(sent, fmt.Sprintf("%d:%v ack %d win %d", step, s.Flags, uint32(s.Ack)-b.ack0, s.Window))
		}
		step++
		return segs
	}
	held := func(want uint64) {
		t.Helper()
		lent, h := b.pool()
		if !lending {
			want = 0
		}
		if h != want || lent < h {
			t.Fatalf("lent %d, held %d: want %d held", lent, h, want)
		}
	}
	out()
	// One batch of three reads within the SYN-ACK's window: one ACK, at
	// its end, for all of it.
	b.queue(t, b.data(t, 33000))
	b.queue(t, b.data(t, 32000))
	b.queue(t, b.data(t, 100))
	b.m.readReady()
	n := 65100
	if segs := out(); len(segs) != 1 || uint32(segs[0].Ack) != b.seq || int(segs[0].Window) != (size-n)>>b.ws {
		t.Fatalf("ACKs %+v: want one, of %d, window %d", segs, b.seq, (size-n)>>b.ws)
	}
	held(1)
	// The reader never reads: the window closes on the bytes.
	for range 2 {
		b.queue(t, b.data(t, 60000))
		b.m.readReady()
		n += 60000
		if segs := out(); len(segs) != 1 || int(segs[0].Window) != (size-n)>>b.ws {
			t.Fatalf("ACKs %+v: want one, window %d", segs, (size-n)>>b.ws)
		}
	}
	held(3)
	// The rest of the window, in two frames, which closes it.
	rest := (size - n) >> b.ws << b.ws
	b.queue(t, b.data(t, rest/2))
	b.queue(t, b.data(t, rest-rest/2))
	b.m.readReady()
	n += rest
	if segs := out(); len(segs) != 1 || segs[0].Window != 0 || uint32(segs[0].Ack) != b.seq {
		t.Fatalf("ACKs %+v: want one of %d with a zero window", segs, b.seq)
	}
	held(5)
	if b.c.rx.len() != n || (lending && heldFrames(&b.c.rx) != 5) {
		t.Fatalf("rx holds %d bytes in %d frames, want %d", b.c.rx.len(), heldFrames(&b.c.rx), n)
	}
	// Reading opens it (reads of 1000 bytes): window updates as the
	// window doubles, from the first that moves the edge by an MSS.
	got := b.readAll(t, 1000)
	if !bytes.Equal(got, b.sent) {
		t.Fatalf("read %d bytes, want the %d sent, in order (first difference at %d)", len(got), len(b.sent), firstDiff(got, b.sent))
	}
	var wins []int
	for _, s := range out() {
		wins = append(wins, int(s.Window)<<b.ws)
	}
	if want := []int{2000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000}; !slices.Equal(wins, want) {
		t.Fatalf("window updates %v, want %v", wins, want)
	}
	held(0)
	// Close with data unread: a RST, every buffer back.
	b.queue(t, b.data(t, 60000))
	b.queue(t, b.data(t, 60000))
	b.m.readReady()
	out()
	held(2)
	if err := b.c.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := out(); len(segs) != 1 || segs[0].Flags&tcp.FlagRST == 0 {
		t.Fatalf("Close with unread data sent %+v, want a RST", segs)
	}
	held(0)
	b.noDoubleFree(t)
	if _, err := b.c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
	}
	return sent
}

// BenchmarkUploadPath: the loop's receive path and Read for a bulk upload's
// GRO frames (45 segments of 1448 bytes each, 8 per batch), lent or copied
// (a bed that lends nothing): per frame, the loop's work and the reader's,
// on one goroutine (a manual loop), without the device's read.
func BenchmarkUploadPath(b *testing.B) {
	for _, lend := range []bool{true, false} {
		name := "copied"
		if lend {
			name = "lent"
		}
		b.Run(name, func(b *testing.B) {
			bed := newLendBed(b, 1<<20, 0)
			if !lend {
				bed.m.frames.min = 1 << 30
			}
			const payload, batch = 45 * 1448, 8
			n := (b.N + batch - 1) / batch * batch
			frames := make([][]byte, n)
			for i := range frames {
				frames[i] = bed.data(b, payload)
				bed.sent = bed.sent[:0]
			}
			buf := make([]byte, 256<<10)
			b.SetBytes(payload)
			b.ResetTimer()
			for i := 0; i < n; i += batch {
				bed.dev.q = append(bed.dev.q[:0], frames[i:i+batch]...)
				bed.m.readReady()
				for bed.c.rx.len() > 0 {
					bed.c.readSome(buf, nil)
				}
				bed.link.readAll(b) // the ACKs
			}
		})
	}
}
