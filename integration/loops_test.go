package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tun"
)

// loopsEnv is a stack with two loops (stack.Config.Loops) on a two-queue
// TUN with offloads, the kernel its peer.
type loopsEnv struct {
	bed *testbed.Bed
	st  *stack.Stack
}

func newLoopsEnv(t *testing.T, subnet byte) *loopsEnv {
	t.Helper()
	testbed.RequireRoot(t)
	ns := tun.UniqueName(nsPrefix)
	bed, err := testbed.New(testbed.Config{Namespace: ns, Link: tun.UniqueName(linkPrefix), Subnet: subnet, Offload: true, Queues: 2})
	if err != nil {
		t.Fatalf("test bed: %v", err)
	}
	e := &env{t: t, NS: ns}
	t.Cleanup(func() { e.checkGone() })
	t.Cleanup(func() {
		if err := bed.Close(); err != nil {
			t.Errorf("closing the test bed: %v", err)
		}
	})
	if len(bed.Devs) != 2 {
		t.Fatalf("bed has %d queues, want 2", len(bed.Devs))
	}
	st, err := stack.New(stack.Config{Device: bed.Devs[0], Queues: bed.Devs[1:], Loops: 2, Addr: bed.StackAddr})
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return &loopsEnv{bed: bed, st: st}
}

// checkLoops fails unless every loop carried connections, and returns the
// stack's Stats.
func (e *loopsEnv) checkLoops(t *testing.T) stack.Stats {
	t.Helper()
	st := e.st.Stats()
	if len(st.Loops) != 2 {
		t.Fatalf("Stats.Loops = %+v, want 2 loops", st.Loops)
	}
	for i, l := range st.Loops {
		if l.SegmentsIn == 0 {
			t.Errorf("loop %d handled no segments: %+v", i, st.Loops)
		}
	}
	var sum uint64
	for _, l := range st.Loops {
		sum += l.PacketsIn
	}
	if sum != st.PacketsIn {
		t.Errorf("Stats.PacketsIn %d, want the loops' sum %d", st.PacketsIn, sum)
	}
	return st
}

// TestLoopsInbound: many concurrent connections from the kernel to a stack
// with two loops all echo their data intact, and both loops carry some.
func TestLoopsInbound(t *testing.T) {
	e := newLoopsEnv(t, 92)
	ln, err := e.st.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	const conns, size = 64, 256 << 10
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			c, err := e.bed.KernelDial(ctx, 7, nil)
			if err != nil {
				t.Errorf("conn %d: dial: %v", i, err)
				return
			}
			defer c.Close()
			data := randomBytes(uint64(i), size)
			sum, n, err := echoThrough(c, data)
			if err != nil || n != size || sum != sha256.Sum256(data) {
				t.Errorf("conn %d: echoed %d of %d bytes, intact %v, err %v", i, n, size, sum == sha256.Sum256(data), err)
			}
		})
	}
	wg.Wait()
	st := e.checkLoops(t)
	// (The listeners may answer a stray ACK that came after its connection
	// closed, a duplicate of the one that closed it, with a RST: Linux's
	// too. The data's integrity above is the check.)
	if st.ResetsSent != 0 {
		t.Errorf("%d resets sent for segments no connection or listener took, want none", st.ResetsSent)
	}
	t.Logf("loops: %+v", st.Loops)
}

// TestLoopsDial: a stack with two loops dials the kernel many times
// (round-robin over the loops) and echoes what the kernel's side sends.
// After every connection has been idle for longer than the kernel keeps its
// flow table's entries (about 3 s), the kernel's packets come on the queue
// of the flow's hash, which for some is the other loop's: those are handed
// over to the owner, counted, and every connection's data still comes back
// intact.
func TestLoopsDial(t *testing.T) {
	e := newLoopsEnv(t, 93)
	kl, err := e.bed.KernelListen(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kl.Close() })
	port := kl.Addr().(*net.TCPAddr).Port
	const conns = 32
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for i := range conns {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		c, err := e.st.DialTCP(ctx, "tcp", netip.AddrPortFrom(e.bed.KernelAddr, uint16(port)).String())
		cancel()
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		wg.Go(func() { io.Copy(c, c) })
	}
	ks := make([]net.Conn, conns)
	for i := range ks {
		c, err := kl.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ks[i] = c
	}
	// The kernel speaks first: after the idle time its packets take the
	// hash's queue.
	roundTrips := func(round int) {
		var wg sync.WaitGroup
		for i, c := range ks {
			wg.Go(func() {
				msg := bytes.Repeat(fmt.Appendf(nil, "conn %d round %d;", i, round), 1000)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(msg); err != nil {
					t.Errorf("conn %d: write: %v", i, err)
					return
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
					t.Errorf("conn %d round %d: echo intact %v, err %v", i, round, bytes.Equal(got, msg), err)
				}
			})
		}
		wg.Wait()
	}
	roundTrips(0)
	before := e.st.Stats()
	time.Sleep(7 * time.Second) // the kernel's flow entries age out (tun's TUN_FLOW_EXPIRE, 3 s, checked as often)
	roundTrips(1)
	var st stack.Stats
	var out, in uint64
	// The loops are read one after the other: wait until none is in flight.
	waitUntil(5*time.Second, func() bool {
		st = e.checkLoops(t)
		out, in = 0, 0
		for _, l := range st.Loops {
			out, in = out+l.HandoffsOut, in+l.HandoffsIn
		}
		return out == in
	})
	t.Logf("loops before idling: %+v", before.Loops)
	t.Logf("loops after: %+v", st.Loops)
	if out == 0 || out != in {
		t.Errorf("handoffs out %d, in %d: want some, as many in as out", out, in)
	}
	if st.ResetsSent != 0 {
		t.Errorf("%d resets sent, want none", st.ResetsSent)
	}
}
