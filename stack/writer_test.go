package stack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/tuntest"
)

// gateDev is a pipe's end whose writes are kept (out), not passed on: the
// writes block until open is closed, and the writes whose numbers (from 1)
// are in fail fail. gateFrameDev makes it a tun.Offloader.
type gateDev struct {
	*tuntest.Endpoint
	open chan struct{}
	fail map[int]bool

	mu  sync.Mutex
	n   int
	out [][]byte
}

var errGate = errors.New("gateDev: this write fails")

func newGateDev(dev *tuntest.Endpoint, fail ...int) *gateDev {
	d := &gateDev{Endpoint: dev, open: make(chan struct{}), fail: map[int]bool{}}
	for _, i := range fail {
		d.fail[i] = true
	}
	return d
}

func (d *gateDev) WritePacket(pkt []byte) error { return d.write(pkt) }

func (d *gateDev) write(b []byte) error {
	<-d.open
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	if d.fail[d.n] {
		return errGate
	}
	d.out = append(d.out, append([]byte(nil), b...))
	return nil
}

// written returns the packets (or frames) written so far.
func (d *gateDev) written() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]byte(nil), d.out...)
}

// waitWritten waits until n writes have been made (bounded: a stuck writer
// fails the test, it does not hang it).
func (d *gateDev) waitWritten(t *testing.T, n int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		d.mu.Lock()
		got := d.n
		d.mu.Unlock()
		if got >= n {
			return
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%d writes of %d after 20 s", got, n)
		}
	}
}

// gateFrameDev is a gateDev with GSO frames.
type gateFrameDev struct{ *gateDev }

func (d gateFrameDev) Offloads() tun.Offloads                { return tun.Offloads{GSO: true} }
func (d gateFrameDev) ReadFrame([]byte) (int, error)         { return 0, tun.ErrWouldBlock }
func (d gateFrameDev) ReadFrameNonblock([]byte) (int, error) { return 0, tun.ErrWouldBlock }
func (d gateFrameDev) WriteFrame(f []byte) error             { return d.write(f) }

// writerStack is a stack on a real loop with a device writer of n slots,
// on dev; the test writes to peer, the pipe's other end. With hold1 the
// loop hands every packet to the writer at once (it writes none itself at
// a turn's end): a test whose device holds the writes needs the loop free.
func writerStack(t *testing.T, n int, dev tun.Device, hold1 bool) *Stack {
	t.Helper()
	s, err := New(Config{Device: dev, Addr: addrB, WriteQueue: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.wr == nil || !s.writing() {
		t.Fatal("WriteQueue set: no writer")
	}
	if hold1 {
		s.do(func() { s.wr.hold = 1 })
	}
	return s
}

// pings writes n echo requests to peer, for the stack to answer.
func pings(t *testing.T, peer *tuntest.Endpoint, n int) {
	t.Helper()
	for range n {
		if err := peer.WritePacket(echoPacket(addrA, addrB)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkIDs checks that the packets are the stack's echo replies with the
// IPv4 IDs want, in that order: the loop numbers its packets as it sends
// them.
func checkIDs(t *testing.T, pkts [][]byte, want []uint16) {
	t.Helper()
	if len(pkts) != len(want) {
		t.Fatalf("%d packets written, want %d", len(pkts), len(want))
	}
	for i, p := range pkts {
		if id := binary.BigEndian.Uint16(p[4:]); p[9] != protoICMP || id != want[i] {
			t.Fatalf("packet %d: protocol %d, IPv4 ID %d; want an echo reply with ID %d", i, p[9], id, want[i])
		}
	}
}

// seq returns from, from+1, ..., without the skipped.
func seq(from, n int, skip ...int) []uint16 {
	var ids []uint16
	for i := from; i < from+n; i++ {
		if slices.Contains(skip, i) {
			continue
		}
		ids = append(ids, uint16(i))
	}
	return ids
}

// TestWriterOrderBackPressure: with the device's first write held, the loop
// fills the writer's 4 slots and waits (counted), and nothing is lost or
// reordered: the 200 replies are written in the order the loop numbered
// them.
func TestWriterOrderBackPressure(t *testing.T) {
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 1024})
	d := newGateDev(dev)
	s := writerStack(t, 4, d, true)
	pings(t, peer, 200)
	for start := time.Now(); s.wr.waits.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatal("the loop never waited for the writer, whose device holds its first write")
		}
	}
	close(d.open)
	d.waitWritten(t, 200)
	checkIDs(t, d.written(), seq(1, 200))
	st := s.Stats()
	if st.EchoReplies != 200 || st.PacketsOut != 200 || st.DeviceErrors != 0 {
		t.Errorf("echo replies %d, packets out %d, device errors %d; want 200, 200, 0", st.EchoReplies, st.PacketsOut, st.DeviceErrors)
	}
	w := st.Writer
	if w.Queue != 4 || w.Queued != 200 || w.Waits == 0 || w.MaxDepth != 4 {
		t.Errorf("writer stats %+v: want Queue 4, Queued 200, Waits > 0, MaxDepth 4", w)
	}
}

// TestWriterDeviceErrors: the device's failures are counted as without a
// writer: DeviceErrors and Drops.DeviceWrite, and not in PacketsOut; the
// other packets go in order, whether the writer wrote them or the loop at
// a turn's end.
func TestWriterDeviceErrors(t *testing.T) {
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 1024})
	d := newGateDev(dev, 3, 7)
	close(d.open)
	s := writerStack(t, 8, d, false)
	pings(t, peer, 10)
	d.waitWritten(t, 10) // the last write succeeds: the failures before it are counted
	checkIDs(t, d.written(), seq(1, 10, 3, 7))
	st := s.Stats()
	if st.EchoReplies != 10 || st.PacketsOut != 8 || st.DeviceErrors != 2 || st.Drops.DeviceWrite != 2 {
		t.Errorf("echo replies %d, packets out %d, device errors %d, device write drops %d; want 10, 8, 2, 2",
			st.EchoReplies, st.PacketsOut, st.DeviceErrors, st.Drops.DeviceWrite)
	}
}

// TestWriterClose: Close waits for the writer to write what is queued
// (here held by the device), before the device is closed, and the writer
// goroutine is gone when it returns; the loop writes inline after.
func TestWriterClose(t *testing.T) {
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 1024})
	d := newGateDev(dev)
	s := writerStack(t, 16, d, true)
	pings(t, peer, 10)
	for start := time.Now(); s.Stats().Writer.Queued < 10; time.Sleep(time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatal("10 pings not answered in 20 s")
		}
	}
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while the writer held 10 packets it could not write")
	case <-time.After(20 * time.Millisecond):
	}
	close(d.open)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	checkIDs(t, d.written(), seq(1, 10))
	select {
	case <-s.wr.done:
	default:
		t.Fatal("the writer goroutine runs after Close")
	}
	if s.writing() {
		t.Error("after Close the loop still queues for a writer that is gone")
	}
}

// TestWriterFrames: while the writer is busy (its device holds a frame of
// one segment), a GSO frame is queued with its buffer (no copy), and the
// loop builds the next in another: the frames written are those built, in
// order, whatever the loop does with its buffer meanwhile.
func TestWriterFrames(t *testing.T) {
	dev, _ := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 1024})
	d := newGateDev(dev)
	s := writerStack(t, 8, gateFrameDev{d}, true)
	if !s.gso.on {
		t.Fatal("no GSO on a device that offers it")
	}
	id := tcp.ID{Local: netip.AddrPortFrom(addrB, 80), Remote: netip.AddrPortFrom(addrA, 5000)}
	payload := bytes.Repeat([]byte("x"), 1000)
	var bufs [][]byte
	s.do(func() {
		first := &tcp.Segment{SrcPort: 80, DstPort: 5000, Seq: 1, Flags: tcp.FlagACK | tcp.FlagFIN, Window: 100, Payload: payload[:100]}
		s.queueSegment(id, first, ipv4HeaderLen) // a frame of its own, held by the device
		for i := range 6 {                       // 3 frames of 2 segments: a FIN ends each
			seg := &tcp.Segment{SrcPort: 80, DstPort: 5000, Seq: seqnum.Value(101 + i*1000), Flags: tcp.FlagACK, Window: 100, Payload: payload}
			if i%2 == 1 {
				seg.Flags |= tcp.FlagFIN
			}
			s.queueSegment(id, seg, ipv4HeaderLen)
			if i%2 == 1 {
				bufs = append(bufs, s.gso.buf)
			}
		}
		s.flushFrame()
	})
	close(d.open)
	d.waitWritten(t, 4)
	frames := d.written()
	if len(frames) != 4 {
		t.Fatalf("%d frames written, want 4", len(frames))
	}
	for i, f := range frames {
		pkt := f[tun.VnetHdrLen:]
		seqNo := binary.BigEndian.Uint32(pkt[ipv4HeaderLen+4:])
		wantLen, wantSeq := ipv4HeaderLen+20+2000, 101+2000*(i-1)
		if i == 0 {
			wantLen, wantSeq = ipv4HeaderLen+20+100, 1
		}
		if len(pkt) != wantLen || seqNo != uint32(wantSeq) {
			t.Errorf("frame %d: %d bytes from sequence number %d; want %d from %d", i, len(pkt), seqNo, wantLen, wantSeq)
		}
	}
	for i := 1; i < len(bufs); i++ {
		if &bufs[i][0] == &bufs[i-1][0] {
			t.Error("the loop built two frames in a row in one buffer: the writer's slot was not swapped in")
		}
	}
	st := s.Stats()
	if o := st.Offload; o.FramesOut != 4 || o.GSOFramesOut != 3 || o.GSOSegmentsOut != 6 || st.PacketsOut != 7 {
		t.Errorf("offload %+v, packets out %d; want 4 frames, 3 of 2 segments, 7 packets", o, st.PacketsOut)
	}
	if w := st.Writer; w.Queued != 4 || w.Inline != 0 {
		t.Errorf("writer stats %+v: want 4 frames queued, none inline", w)
	}
}

// TestWriterConfig: WriteQueue is checked, and a manual stack has no writer.
func TestWriterConfig(t *testing.T) {
	dev, _ := tuntest.Pipe(1500)
	for _, n := range []int{-1, MaxWriteQueue + 1} {
		if _, err := New(Config{Device: dev, Addr: addrB, WriteQueue: n}); !errors.Is(err, ErrConfig) {
			t.Errorf("WriteQueue %d: %v, want ErrConfig", n, err)
		}
	}
	m, _ := manualOn(t, Config{Addr: addrB, WriteQueue: 64})
	if m.wr != nil {
		t.Error("a manual stack has a writer: its writes would not be synchronous")
	}
}

// TestWriterInline: a turn that sends fewer than holdBack packets while the
// writer has nothing to write writes them itself at its end, without
// waking the writer.
func TestWriterInline(t *testing.T) {
	dev, peer := tuntest.NewPipe(tuntest.PipeConfig{MTU: 1500, QueueLen: 1024})
	d := newGateDev(dev)
	close(d.open)
	s := writerStack(t, 8, d, false)
	for i := range 3 {
		pings(t, peer, 1)
		d.waitWritten(t, i+1)
	}
	checkIDs(t, d.written(), seq(1, 3))
	if w := s.Stats().Writer; w.Inline != 3 || w.Queued != 0 {
		t.Errorf("writer stats %+v: want 3 packets written inline, none queued", w)
	}
}

// TestWriterRecordingReplaysExactly: stacks with a device writer record what
// they send on the loop, as without one: their recordings (3 connections
// at 3% loss each way) replay exactly on a manual stack, which has none.
func TestWriterRecordingReplaysExactly(t *testing.T) {
	a, b, ra, rb := recordedPairWith(t, 0.03, Config{WriteQueue: 8}, false)
	if a.wr == nil || b.wr == nil {
		t.Fatal("WriteQueue set: no writer")
	}
	exchange(t, a, b, 3, 64<<10)
	if err := a.RecordErr(); err != nil {
		t.Fatal(err)
	}
	checkReplay(t, "dialer", ra.Bytes())
	checkReplay(t, "listener", rb.Bytes())
}
