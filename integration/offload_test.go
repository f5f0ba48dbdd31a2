package integration

import (
	"context"
	"crypto/sha256"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun"
	"github.com/tcpwheel/tcpwheel/tun/impair"
)

// offloadEcho runs a stack on a test bed with TUN offloads (and the given
// impairment), has the kernel send n bytes through the stack's echo server
// and checks that every byte came back; it returns the stack's counters.
func offloadEcho(t *testing.T, imp impair.Config, n int) (stack.Stats, *testbed.Bed, *stack.Stack) {
	return echoOn(t, testbed.Config{Subnet: 7, Offload: true, Impair: imp}, n)
}

// echoOn is offloadEcho on a bed made from cfg. It returns the stack's
// Stats as the echo ended, the bed, and the stack, which may still send
// (an ACK of a FIN the kernel resent).
func echoOn(t *testing.T, cfg testbed.Config, n int) (stack.Stats, *testbed.Bed, *stack.Stack) {
	t.Helper()
	bed, st := stackOnBed(t, cfg)
	ln, err := st.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := bed.KernelDial(ctx, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := randomBytes(uint64(n), n)
	sum, got, err := echoThrough(c, data)
	if err != nil {
		t.Fatalf("echo after %d of %d bytes: %v", got, n, err)
	}
	if got != int64(n) || sum != sha256.Sum256(data) {
		t.Fatalf("echo: %d bytes came back of %d, intact %v", got, n, sum == sha256.Sum256(data))
	}
	return st.Stats(), bed, st
}

// stackOnBed makes a test bed from cfg and a stack on its device, both
// closed at the test's end.
func stackOnBed(t *testing.T, cfg testbed.Config) (*testbed.Bed, *stack.Stack) {
	t.Helper()
	testbed.RequireRoot(t)
	bed, err := testbed.New(cfg)
	if err != nil {
		t.Fatalf("test bed: %v", err)
	}
	t.Cleanup(func() {
		if err := bed.Close(); err != nil {
			t.Errorf("closing the test bed: %v", err)
		}
	})
	st, err := stack.New(stack.Config{Device: bed.Dev, Addr: bed.StackAddr})
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return bed, st
}

// TestOffloadEcho: with the kernel as the peer over a TUN with offloads and
// nothing in between, 32 MB go each way intact, and the counters show that
// frames larger than the MTU were received (the kernel's TSO segments, taken
// whole) and sent (GSO frames, which the kernel took whole), with no drop.
func TestOffloadEcho(t *testing.T) {
	const n = 32 << 20
	st, bed, _ := offloadEcho(t, impair.Config{}, n)
	if bed.Imp != nil {
		t.Fatal("the bed has an impairment layer with nothing to do")
	}
	o := st.Offload
	t.Logf("offloads %+v", o)
	if !o.GSO || !o.GRO || o.Why != "" || st.InputPath != "direct" {
		t.Fatalf("offloads %+v on the %s path: want GSO and GRO on the direct path", o, st.InputPath)
	}
	mtu := tun.DefaultMTU
	if o.LargeFramesIn == 0 || o.MaxFrameIn <= mtu {
		t.Errorf("no frame larger than the MTU came in: %d of %d frames, the largest %d bytes", o.LargeFramesIn, o.FramesIn, o.MaxFrameIn)
	}
	if o.GSOFramesOut == 0 || o.MaxFrameOut <= mtu || o.GSOSegmentsOut < 2*o.GSOFramesOut {
		t.Errorf("no frame larger than the MTU went out: %d GSO frames of %d segments, the largest %d bytes", o.GSOFramesOut, o.GSOSegmentsOut, o.MaxFrameOut)
	}
	// The point of it all: fewer writes than segments, and fewer segments
	// in (each frame is one) than n bytes need at the MTU.
	if o.FramesOut >= st.SegmentsOut {
		t.Errorf("frames out %d for %d segments", o.FramesOut, st.SegmentsOut)
	}
	if full := uint64(n / (mtu - 40)); st.SegmentsIn >= full {
		t.Errorf("%d segments in for %d bytes: as many as %d-byte packets take (%d)", st.SegmentsIn, n, mtu, full)
	}
	for _, d := range st.DropCounts() {
		if d.N != 0 && d.Name != "tcp.OutOfWindow" { // a window probe now and then
			t.Errorf("drops %s: %d", d.Name, d.N)
		}
	}
	if st.DeviceErrors != 0 {
		t.Errorf("%d device errors", st.DeviceErrors)
	}
	// The echo's reader is woken with batches of bulk data, its writer
	// with room: an unlocked loop (the default with a P to spare) yields
	// to them before it sleeps (loop.Loop.YieldToWoken).
	t.Logf("loop %s: %d wakeups, %d yields to a woken reader or writer", st.LoopThread, st.Wheel.Wakeups, st.Wheel.WokenYields)
	if y := st.Wheel.WokenYields; (y > 0) != (st.LoopThread == "unlocked") {
		t.Errorf("%s loop: %d yields to a woken reader or writer, want some only if unlocked", st.LoopThread, y)
	}
}

// TestOffloadUploadYields: the kernel sends 32 MB to a server of the stack
// that only reads (its writer never waits), over a TUN with offloads: the
// reader, woken with batches of the kernel's GRO'd frames, is the only
// goroutine the loop can yield to (loop.Loop.YieldToWoken, from
// Stack.wakeReaders), which an unlocked loop does and a parked one does not.
// A yield needs the reader to have caught up and waited when a batch
// comes, which a busy machine can keep from happening for a whole upload
// (make test once saw none in 175 wakeups): an unlocked loop gets up to
// three uploads to show one.
func TestOffloadUploadYields(t *testing.T) {
	bed, st := stackOnBed(t, testbed.Config{Subnet: 7, Offload: true})
	ln, err := st.Listen("tcp", ":9")
	if err != nil {
		t.Fatal(err)
	}
	for try := 1; ; try++ {
		uploadTo(t, bed, ln, 32<<20, uint64(9+try))
		s := st.Stats()
		t.Logf("upload %d, loop %s: %d wakeups, %d yields to the woken reader; %d of %d frames in larger than the MTU",
			try, s.LoopThread, s.Wheel.Wakeups, s.Wheel.WokenYields, s.Offload.LargeFramesIn, s.Offload.FramesIn)
		y, unlocked := s.Wheel.WokenYields, s.LoopThread == "unlocked"
		if y > 0 && !unlocked {
			t.Fatalf("%s loop: %d yields to the woken reader, want none", s.LoopThread, y)
		}
		if (y > 0) == unlocked && s.Offload.LargeFramesIn > 0 {
			return
		}
		if !unlocked || try == 3 {
			t.Fatalf("%s loop after %d uploads: %d yields to the woken reader, %d frames in larger than the MTU; want yields only if unlocked, and large frames",
				s.LoopThread, try, y, s.Offload.LargeFramesIn)
		}
	}
}

// uploadTo has the kernel send n bytes (randomBytes(seed, n)) to a server
// of ln's that only reads, and fails unless it read them all.
func uploadTo(t *testing.T, bed *testbed.Bed, ln net.Listener, n int, seed uint64) {
	t.Helper()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		m, _ := io.Copy(io.Discard, c)
		got <- m
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := bed.KernelDial(ctx, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(randomBytes(seed, n)); err != nil {
		t.Fatalf("kernel write: %v", err)
	}
	c.Close()
	select {
	case m := <-got:
		if m != int64(n) {
			t.Fatalf("the stack's server read %d bytes of %d", m, n)
		}
	case <-ctx.Done():
		t.Fatal("the stack's server did not read everything in time")
	}
}

// TestOffloadPlain: on a TUN without offloads the stack says so, and why,
// and moves no frame.
func TestOffloadPlain(t *testing.T) {
	st, _, _ := echoOn(t, testbed.Config{Subnet: 7}, 1<<20)
	o := st.Offload
	if o.GSO || o.GRO || o.Why == "" || o.FramesIn != 0 || o.FramesOut != 0 {
		t.Fatalf("offloads %+v on a plain TUN", o)
	}
	t.Logf("why: %s", o.Why)
}

// TestOffloadThroughImpair: through the impairment layer (1% loss each
// way), which takes the frames apart to drop packets one by one (the
// stack's GSO frames on the way out, the kernel's TSO segments on the way
// in), 8 MB go each way intact, and large frames still move both ways.
func TestOffloadThroughImpair(t *testing.T) {
	const n = 8 << 20
	st, bed, s := offloadEcho(t, impair.Config{Seed: 3, EgressLoss: 0.01, IngressLoss: 0.01}, n)
	o := st.Offload
	t.Logf("offloads %+v", o)
	if !o.GSO || !o.GRO {
		t.Fatalf("offloads %+v: want GSO and GRO through the wrapper", o)
	}
	if o.GSOFramesOut == 0 || o.LargeFramesIn == 0 {
		t.Errorf("%d GSO frames out, %d large frames in: want some each way", o.GSOFramesOut, o.LargeFramesIn)
	}
	is := bed.Imp.Stats()
	if is.EgressDropped == 0 || is.IngressDropped == 0 {
		t.Errorf("impair dropped %d out, %d in: want some each way", is.EgressDropped, is.IngressDropped)
	}
	// Every packet the stack sent met the loss one by one: as many passed
	// or dropped as it sent (its GSO frames' segments included). The stack
	// may send after the echo ended (an ACK of a FIN the kernel resent, the
	// loss having taken the first), so the count is checked between the
	// stack's before and its after: Stats runs on the loop, whose device
	// writes the impairment layer counts as they are made.
	after := s.Stats().PacketsOut
	if sent := is.EgressPassed + is.EgressDropped; sent < st.PacketsOut || sent > after {
		t.Errorf("impair saw %d packets out; the stack had sent %d as the echo ended and %d after", sent, st.PacketsOut, after)
	}
	if st.Drops.Truncated != 0 || st.Drops.BadVnetHeader != 0 || st.Drops.BadGSO != 0 || st.Drops.BadChecksumOffset != 0 {
		t.Errorf("drops %+v", st.Drops)
	}
}

// TestOffloadIPv6Send: the stack dials the kernel over IPv6 on a TUN with
// offloads (TSO6) and nothing in between, and sends it 32 MB, which arrive
// intact; the counters show GSO frames of TCP/IPv6 (GSO_TCPV6) larger than
// the MTU went out, fewer writes than segments, and no drop.
func TestOffloadIPv6Send(t *testing.T) {
	const n = 32 << 20
	st, bed := offloadStack(t, 66)
	if o := st.Stats().Offload; !o.GSO || !o.GSO6 {
		t.Skipf("no TSO6 on this kernel's TUN: offloads %+v", o)
	}
	kln, err := bed.KernelListen6(context.Background(), 5007, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kln.Close() })
	type result struct {
		n   int64
		sum [sha256.Size]byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := kln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		h := sha256.New()
		m, err := io.Copy(h, c)
		done <- result{m, [sha256.Size]byte(h.Sum(nil)), err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := st.DialContext(ctx, "tcp6", net.JoinHostPort(bed.KernelAddr6.String(), "5007"))
	if err != nil {
		t.Fatalf("stack dial over IPv6: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	data := randomBytes(6, n)
	if _, err := c.Write(data); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := c.(*stack.Conn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != n || r.sum != sha256.Sum256(data) {
		t.Fatalf("the kernel read %d bytes of %d (%v), intact %v", r.n, n, r.err, r.sum == sha256.Sum256(data))
	}
	s := st.Stats()
	o := s.Offload
	t.Logf("offloads %+v, segments out %d", o, s.SegmentsOut)
	mtu := tun.DefaultMTU
	if o.GSOFramesOut6 == 0 || o.MaxFrameOut <= mtu || o.GSOSegmentsOut < 2*o.GSOFramesOut {
		t.Errorf("no TCP/IPv6 frame larger than the MTU went out: %d GSO frames over IPv6 of %d, %d segments, the largest %d bytes", o.GSOFramesOut6, o.GSOFramesOut, o.GSOSegmentsOut, o.MaxFrameOut)
	}
	if o.FramesOut6 >= s.SegmentsOut {
		t.Errorf("frames out over IPv6 %d for %d segments", o.FramesOut6, s.SegmentsOut)
	}
	if s.Drops.DeviceWrite != 0 || s.DeviceErrors != 0 || s.Drops.BadGSO != 0 || s.Drops.BadVnetHeader != 0 || s.Drops.BadChecksumOffset != 0 || s.Drops.BadTCPChecksum != 0 {
		t.Errorf("drops %+v, %d device errors", s.Drops, s.DeviceErrors)
	}
}

// offloadStack is a stack with IPv4 and IPv6 on a test bed (subnet) whose
// TUN has offloads, and nothing between the two; both close at cleanup.
func offloadStack(t *testing.T, subnet byte) (*stack.Stack, *testbed.Bed) {
	t.Helper()
	testbed.RequireRoot(t)
	bed, err := testbed.New(testbed.Config{Subnet: subnet, IPv6: true, Offload: true})
	if err != nil {
		t.Fatalf("test bed: %v", err)
	}
	t.Cleanup(func() {
		if err := bed.Close(); err != nil {
			t.Errorf("closing the test bed: %v", err)
		}
	})
	st, err := stack.New(stack.Config{Device: bed.Dev, Addr: bed.StackAddr, Addr6: bed.StackAddr6})
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, bed
}
