//go:build linux

package integration

// Whole-stack benchmarks: the Linux kernel's TCP in a private network namespace
// is the peer of tcpwheel's stack over a TUN device, as in the integration tests.
//
//	go test -run '^$' -bench . -benchtime 2s ./integration/
//
// Every benchmark makes its own namespace (fresh names from tun.UniqueName), with
// the kernel side at 198.18.0.1/24 and the stack at 198.18.0.2; no packet leaves
// that namespace. The helpers here are prefixed "bench" so that they cannot clash
// with the other files of the package. TestBenchSmoke runs each body once with
// small sizes so that `go test` (without -bench) exercises the code.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/tcp"
)

// benchOffload opens the benchmarks' TUN with offloads (testbed.Config.Offload):
// GRO in, GSO frames out, the kernel segmenting them.
var benchOffload = flag.Bool("offload", false, "benchmarks: open the TUN with offloads (GSO and GRO)")

var (
	benchKernelPrefix = netip.MustParsePrefix("198.18.0.1/24")
	benchKernelAddr   = benchKernelPrefix.Addr()
	benchStackAddr    = netip.MustParseAddr("198.18.0.2")
)

const (
	benchChunk     = 1 << 20                // bytes per iteration of the bulk benchmarks
	benchTimeWait  = 100 * time.Millisecond // the stack's TIME-WAIT in the connection benchmarks
	benchIOTimeout = 30 * time.Second       // no single step may take longer: a stall fails
	benchMaxStream = 1 << 40                // bound on what a streaming writer sends
)

// benchCtl is what a benchmark body needs from its runner: a *testing.B for
// the benchmarks, a single iteration for TestBenchSmoke.
type benchCtl struct {
	tb     testing.TB
	loop   func() bool // like b.Loop
	iters  func() int  // iterations run, valid after loop returned false
	elapse func() time.Duration
	metric func(v float64, unit string)
}

func benchCtlB(b *testing.B) *benchCtl {
	b.ReportAllocs()
	return &benchCtl{
		tb:     b,
		loop:   b.Loop,
		iters:  func() int { return b.N },
		elapse: b.Elapsed,
		metric: b.ReportMetric,
	}
}

func benchCtlOnce(t *testing.T) *benchCtl {
	n := 0
	var start time.Time
	var took time.Duration
	return &benchCtl{
		tb: t,
		loop: func() bool {
			switch n {
			case 0:
				start = time.Now()
			case 1:
				took = time.Since(start)
				return false
			}
			n++
			return true
		},
		iters:  func() int { return 1 },
		elapse: func() time.Duration { return took },
		metric: func(v float64, unit string) { t.Logf("%.3f %s", v, unit) },
	}
}

// benchAttach makes a fresh test bed (198.18.0.0/24, and 2001:db8::/64
// with ipv6), closed by a cleanup (also when the benchmark fails).
func benchAttach(tb testing.TB, ipv6 bool) *testbed.Bed {
	tb.Helper()
	testbed.RequireRoot(tb)
	b, err := testbed.New(testbed.Config{Prefix: "twb", MTU: 1500, IPv6: ipv6, Offload: *benchOffload})
	if err != nil {
		tb.Fatalf("test bed: %v", err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Errorf("closing the test bed: %v", err)
		}
	})
	return b
}

// benchStack makes a test bed and starts a stack on its bare TUN device (no
// impairment layer in the measured path), with an IPv6 address too with
// ipv6; the cleanups close the stack, then the bed.
func benchStack(tb testing.TB, cfg tcp.Config, ipv6 bool) (*testbed.Bed, *stack.Stack) {
	tb.Helper()
	a := benchAttach(tb, ipv6)
	s, err := stack.New(stack.Config{Device: a.Att.Dev, Addr: benchStackAddr, Addr6: a.StackAddr6, TCP: cfg})
	if err != nil {
		tb.Fatalf("stack.New: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return a, s
}

// benchKernelListen listens on addr inside the namespace.
func benchKernelListen(tb testing.TB, a *testbed.Bed, addr string) net.Listener {
	tb.Helper()
	var ln net.Listener
	if err := a.Do(func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		tb.Fatalf("listening in the namespace on %s: %v", addr, err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln
}

// benchKernelDial dials addr (IPv4 or IPv6) from inside the namespace.
func benchKernelDial(a *testbed.Bed, addr string) (net.Conn, error) {
	var c net.Conn
	err := a.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, benchIOTimeout)
		return err
	})
	return c, err
}

// benchAccept accepts one connection from ln, with a time limit.
func benchAccept(ln net.Listener) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-time.After(benchIOTimeout):
		ln.Close() // unblocks Accept; the result is dropped
		return nil, errors.New("accept timed out")
	}
}

// benchPair connects dial's connection to ln and returns both ends; a cleanup
// closes them.
func benchPair(tb testing.TB, ln net.Listener, dial func() (net.Conn, error)) (dialed, accepted net.Conn) {
	tb.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := benchAccept(ln)
		ch <- res{c, err}
	}()
	d, err := dial()
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	r := <-ch
	if r.err != nil {
		tb.Fatalf("accept: %v", r.err)
	}
	tb.Cleanup(func() { r.c.Close() })
	return d, r.c
}

// benchRusage returns the process's user and system CPU time so far (all
// threads: the stack's loop and reader, the kernel's work done in our
// syscalls, and the Go runtime).
func benchRusage(tb testing.TB) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// benchStream measures a one-way transfer from src to dst: a goroutine writes
// to src without pause; each iteration reads chunk bytes from dst. warm chunks
// are read first, untimed, so that slow start is over. It reports MB/s (through
// SetBytes), and CPU time per MB.
func benchStream(ctl *benchCtl, src, dst net.Conn, chunk, warm int) {
	tb := ctl.tb
	if b, ok := tb.(*testing.B); ok {
		b.SetBytes(int64(chunk))
	}
	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for i := range buf {
			buf[i] = byte(i)
		}
		var sent int64
		for i := 0; sent < benchMaxStream; i++ {
			select {
			case <-stop:
				werr <- nil
				return
			default:
			}
			if i%16 == 0 { // a deadline costs a timer: re-arm it every 1 MiB
				src.SetWriteDeadline(time.Now().Add(benchIOTimeout))
			}
			n, err := src.Write(buf)
			sent += int64(n)
			if err != nil {
				select {
				case <-stop: // the reader is done and closed the connection
					err = nil
				default:
				}
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	var (
		once     sync.Once
		writeErr error
	)
	finish := func() error {
		once.Do(func() {
			close(stop)
			// Unblock a writer waiting for window: reset both ends.
			src.SetWriteDeadline(time.Now())
			dst.Close()
			src.Close()
			select {
			case writeErr = <-werr:
			case <-time.After(benchIOTimeout):
				writeErr = errors.New("writer did not stop")
			}
		})
		return writeErr
	}
	tb.Cleanup(func() { finish() })

	buf := make([]byte, chunk)
	read := func() error {
		dst.SetReadDeadline(time.Now().Add(benchIOTimeout))
		_, err := io.ReadFull(dst, buf)
		return err
	}
	for range warm {
		if err := read(); err != nil {
			finish()
			tb.Fatalf("warm-up read: %v", err)
		}
	}
	u0, s0 := benchRusage(tb)
	for ctl.loop() {
		if err := read(); err != nil {
			ctl.tb.Fatalf("read: %v (writer: %v)", err, finish())
		}
	}
	u1, s1 := benchRusage(tb)
	if err := finish(); err != nil {
		tb.Errorf("writer: %v", err)
	}
	mb := float64(ctl.iters()) * float64(chunk) / 1e6
	ctl.metric(float64((u1-u0)+(s1-s0))/1e6/mb, "cpu-ms/MB")
	ctl.metric(float64(s1-s0)/1e6/mb, "sys-ms/MB")
	if _, ok := tb.(*testing.B); !ok && ctl.elapse() > 0 { // a benchmark has MB/s from SetBytes
		ctl.metric(mb/ctl.elapse().Seconds(), "MB/s")
	}
}

// benchBulk is BenchmarkBulk's body: one connection over the TUN, dialed by
// the kernel, streaming in direction dir. ip "" is a bed with IPv4 only;
// "4" and "6" a bed with both, the kernel dialling the stack's address of
// that version.
func benchBulk(ctl *benchCtl, dir, ip string, chunk, warm int) {
	tb := ctl.tb
	a, s := benchStack(tb, tcp.Config{}, ip != "")
	to := benchStackAddr
	if ip == "6" {
		to = a.StackAddr6
	}
	ln, err := s.Listen("tcp", ":5001")
	if err != nil {
		tb.Fatalf("stack listen: %v", err)
	}
	tb.Cleanup(func() { ln.Close() })
	kc, sc := benchPair(tb, ln, func() (net.Conn, error) {
		return benchKernelDial(a, netip.AddrPortFrom(to, 5001).String())
	})
	switch dir {
	case "kernel-to-stack":
		benchStream(ctl, kc, sc, chunk, warm)
	case "stack-to-kernel":
		benchStream(ctl, sc, kc, chunk, warm)
	default:
		tb.Fatalf("unknown direction %q", dir)
	}
	benchLogStats(tb, s)
}

// benchLoopback is BenchmarkLoopback's body: the same stream between two
// kernel sockets on the namespace's loopback.
func benchLoopback(ctl *benchCtl, chunk, warm int) {
	tb := ctl.tb
	a := benchAttach(tb, false)
	ln := benchKernelListen(tb, a, "127.0.0.1:0")
	dialed, accepted := benchPair(tb, ln, func() (net.Conn, error) {
		return benchKernelDial(a, ln.Addr().String())
	})
	benchStream(ctl, dialed, accepted, chunk, warm)
}

// benchConnSetup is BenchmarkConnSetup's body: per iteration one connection
// is dialed, exchanges one byte each way, and is closed.
//
// The stack always closes first, so that TIME-WAIT lands on the stack, whose
// TimeWait is benchTimeWait, and never on the kernel, whose TIME-WAIT lasts
// 60 s and would hold its ephemeral ports:
//   - stack-to-kernel: the stack dials, writes a byte, reads the echo, closes;
//     the kernel's server reads the byte, echoes it, waits for EOF, closes.
//   - kernel-to-stack: the kernel dials, writes a byte, reads the echo, waits
//     for EOF and only then closes; the stack's server reads, echoes, closes.
//
// The kernel goes through CLOSE-WAIT and LAST-ACK to CLOSED, so its ports are
// free at once; the stack's 4-tuples linger benchTimeWait.
func benchConnSetup(ctl *benchCtl, dir string) {
	tb := ctl.tb
	a, s := benchStack(tb, tcp.Config{TimeWait: benchTimeWait}, false)

	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		srvErr  error
	)
	fail := func(err error) { errOnce.Do(func() { srvErr = err }) }
	// serve runs the server side of each accepted connection.
	serve := func(ln net.Listener, handle func(net.Conn) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return // the listener was closed
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					c.SetDeadline(time.Now().Add(benchIOTimeout))
					if err := handle(c); err != nil {
						fail(fmt.Errorf("server: %w", err))
					}
				}()
			}
		}()
	}

	var dial func() (net.Conn, error)
	var client func(net.Conn) error
	var run func(body func() error) error
	switch dir {
	case "stack-to-kernel":
		ln := benchKernelListen(tb, a, netip.AddrPortFrom(benchKernelAddr, 0).String())
		serve(ln, func(c net.Conn) error {
			if err := benchEcho(c); err != nil {
				return err
			}
			return benchExpectEOF(c)
		})
		tb.Cleanup(func() { ln.Close(); wg.Wait() })
		addr := ln.Addr().String()
		dial = func() (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), benchIOTimeout)
			defer cancel()
			return s.DialContext(ctx, "tcp", addr)
		}
		client = benchPing
		run = func(body func() error) error { return body() }
	case "kernel-to-stack":
		ln, err := s.Listen("tcp", ":5002")
		if err != nil {
			tb.Fatalf("stack listen: %v", err)
		}
		serve(ln, benchEcho)
		tb.Cleanup(func() { ln.Close(); wg.Wait() })
		addr := netip.AddrPortFrom(benchStackAddr, 5002).String()
		d := net.Dialer{Timeout: benchIOTimeout}
		dial = func() (net.Conn, error) { return d.Dial("tcp4", addr) }
		client = func(c net.Conn) error {
			if err := benchPing(c); err != nil {
				return err
			}
			return benchExpectEOF(c)
		}
		// The whole loop runs inside the namespace, on one locked thread, so
		// that every socket is created there without a setns per dial.
		run = a.Do
	default:
		tb.Fatalf("unknown direction %q", dir)
	}

	u0, s0 := benchRusage(tb)
	var loopErr error
	err := run(func() error {
		for ctl.loop() {
			c, err := dial()
			if err != nil {
				loopErr = fmt.Errorf("dial: %w", err)
				return nil
			}
			c.SetDeadline(time.Now().Add(benchIOTimeout))
			err = client(c)
			if cerr := c.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				loopErr = fmt.Errorf("client: %w", err)
				return nil
			}
		}
		return nil
	})
	u1, s1 := benchRusage(tb)
	if err == nil {
		err = loopErr
	}
	if err != nil {
		tb.Fatalf("%v (server: %v)", err, srvErr)
	}
	n := ctl.iters()
	if d := ctl.elapse(); d > 0 {
		ctl.metric(float64(n)/d.Seconds(), "conns/s")
	}
	ctl.metric(float64((u1-u0)+(s1-s0))/1e3/float64(n), "cpu-µs/conn")

	// TIME-WAIT must drain: the stack's connections go away benchTimeWait
	// after the last close (bounded wait).
	deadline := time.Now().Add(benchTimeWait*20 + 2*time.Second)
	var st stack.Stats
	for {
		st = s.Stats()
		if st.Connections == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(benchTimeWait / 4)
	}
	if st.Connections != 0 {
		tb.Errorf("%d connections still in the stack after TIME-WAIT (%v)", st.Connections, benchTimeWait)
	}
	if srvErr != nil {
		tb.Errorf("%v", srvErr)
	}
	benchLogStats(tb, s)
}

// benchPing writes a byte and reads the answer.
func benchPing(c net.Conn) error {
	b := []byte{'x'}
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := io.ReadFull(c, b); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

// benchEcho reads a byte and writes it back.
func benchEcho(c net.Conn) error {
	b := []byte{0}
	if _, err := io.ReadFull(c, b); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// benchExpectEOF waits for the peer's FIN.
func benchExpectEOF(c net.Conn) error {
	var b [1]byte
	n, err := c.Read(b[:])
	if err == io.EOF && n == 0 {
		return nil
	}
	return fmt.Errorf("want EOF, got %d bytes, %v", n, err)
}

func benchLogStats(tb testing.TB, s *stack.Stack) {
	st := s.Stats()
	tb.Logf("stack: packets in/out %d/%d, segments in/out %d/%d, resets sent %d, drops %+v, tcp %+v",
		st.PacketsIn, st.PacketsOut, st.SegmentsIn, st.SegmentsOut, st.ResetsSent, st.Drops, st.TCP)
}

var benchDirs = []string{"kernel-to-stack", "stack-to-kernel"}

// BenchmarkBulk streams over one TCP connection between the kernel (a Go
// socket in the namespace) and a stack.Conn, over the TUN; MB/s, and the
// process's CPU time per MB (both ends: the stack, and the kernel's work in
// our syscalls).
func BenchmarkBulk(b *testing.B) {
	for _, dir := range benchDirs {
		b.Run("dir="+dir, func(b *testing.B) {
			benchBulk(benchCtlB(b), dir, "", benchChunk, 8)
		})
	}
}

// BenchmarkBulkFamily is BenchmarkBulk over IPv4 and over IPv6, each on a
// bed with both (the kernel dials the stack's address of the version): the
// ratio of the two is the cost of IPv6 (its 20 more header bytes, MSS 1440
// against 1460, the extension-header walk).
func BenchmarkBulkFamily(b *testing.B) {
	for _, dir := range benchDirs {
		for _, ip := range []string{"4", "6"} {
			b.Run("dir="+dir+"/ip="+ip, func(b *testing.B) {
				benchBulk(benchCtlB(b), dir, ip, benchChunk, 8)
			})
		}
	}
}

// BenchmarkConnSetup measures connections per second: dial, one byte each
// way, close; the stack closes first and holds TIME-WAIT for benchTimeWait.
func BenchmarkConnSetup(b *testing.B) {
	for _, dir := range benchDirs {
		b.Run("dir="+dir, func(b *testing.B) {
			benchConnSetup(benchCtlB(b), dir)
		})
	}
}

// BenchmarkLoopback is the baseline for BenchmarkBulk: the same stream
// between two kernel sockets on the namespace's loopback (127.0.0.1, MTU
// 65536, no TUN and no userspace stack in the path).
func BenchmarkLoopback(b *testing.B) {
	benchLoopback(benchCtlB(b), benchChunk, 8)
}

// TestBenchSmoke runs each benchmark body once with small sizes.
func TestBenchSmoke(t *testing.T) {
	testbed.RequireRoot(t)
	const chunk, warm = 64 << 10, 1
	for _, dir := range benchDirs {
		t.Run("Bulk/dir="+dir, func(t *testing.T) { benchBulk(benchCtlOnce(t), dir, "", chunk, warm) })
		t.Run("Bulk/dir="+dir+"/ip=6", func(t *testing.T) { benchBulk(benchCtlOnce(t), dir, "6", chunk, warm) })
		t.Run("ConnSetup/dir="+dir, func(t *testing.T) { benchConnSetup(benchCtlOnce(t), dir) })
	}
	t.Run("Loopback", func(t *testing.T) { benchLoopback(benchCtlOnce(t), chunk, warm) })
}
