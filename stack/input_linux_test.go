//go:build linux

package stack

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tcpwheel/tcpwheel/loop"
	"github.com/tcpwheel/tcpwheel/tun"
	"golang.org/x/sys/unix"
)

// seqpacketDevice is a tun.Pollable over one end of a non-blocking
// SOCK_SEQPACKET socketpair: a link that keeps packet boundaries and has a
// descriptor, as a TUN does, without needing root.
type seqpacketDevice struct {
	fd     int
	closed atomic.Bool
}

var _ tun.Pollable = (*seqpacketDevice)(nil)

func seqpacketPair(t *testing.T) (a, b *seqpacketDevice) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("socketpair: %v", err)
	}
	return &seqpacketDevice{fd: fds[0]}, &seqpacketDevice{fd: fds[1]}
}

func (d *seqpacketDevice) ReadFD() (int, error) { return d.fd, nil }

func (d *seqpacketDevice) ReadPacketNonblock(buf []byte) (int, error) {
	n, _, flags, _, err := unix.Recvmsg(d.fd, buf, nil, 0)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return 0, tun.ErrWouldBlock
	case err != nil:
		return 0, err
	case flags&unix.MSG_TRUNC != 0:
		return 0, io.ErrShortBuffer
	}
	return n, nil
}

// ReadPacket waits for a packet by polling; the direct path never calls it.
func (d *seqpacketDevice) ReadPacket(buf []byte) (int, error) {
	for !d.closed.Load() {
		n, err := d.ReadPacketNonblock(buf)
		if !errors.Is(err, tun.ErrWouldBlock) {
			return n, err
		}
		time.Sleep(time.Millisecond)
	}
	return 0, net.ErrClosed
}

func (d *seqpacketDevice) WritePacket(pkt []byte) error {
	_, err := unix.Write(d.fd, pkt)
	return err
}

func (d *seqpacketDevice) MTU() int     { return 1500 }
func (d *seqpacketDevice) Name() string { return "seqpacket" }
func (d *seqpacketDevice) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	return unix.Close(d.fd)
}

func TestInputPathDirect(t *testing.T) {
	da, db := seqpacketPair(t)
	a, err := New(Config{Device: da, Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(Config{Device: db, Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, s := dialPair(t, a, b)
	defer s.Close()
	defer c.Close()
	if _, err := c.Write([]byte("over the direct path")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := io.ReadAtLeast(s, buf, 20); err != nil || string(buf[:n]) != "over the direct path" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	for _, st := range []Stats{a.Stats(), b.Stats()} {
		if st.InputPath != "direct" {
			t.Errorf("InputPath %q, want direct", st.InputPath)
		}
		if st.PacketsIn == 0 || st.Wheel.Wakeups == 0 {
			t.Errorf("PacketsIn %d, Wakeups %d: want both > 0", st.PacketsIn, st.Wheel.Wakeups)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.DialContext(ctx, "tcp", "198.18.0.2:9999"); err == nil {
		t.Error("dial to a closed port over the direct path succeeded")
	}
}

func TestInputBatchesDirectPath(t *testing.T) {
	da, db := seqpacketPair(t)
	defer db.Close()
	// Room in the socket for the whole burst: beyond wmem_max, which only
	// root may exceed.
	if err := unix.SetsockoptInt(db.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20); err != nil {
		t.Skipf("a socket buffer for %d packets: %v", maxReadBatch+10, err)
	}
	s, err := New(Config{Device: da, Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = maxReadBatch + 10
	st := burst(t, s, n, db.WritePacket, nil)
	if st.InputPath != inputDirect {
		t.Fatalf("input path %q, want %q", st.InputPath, inputDirect)
	}
	checkBatches(t, st, n)
}

// TestRealTime: with Config.RealTime the loop's thread runs under SCHED_FIFO
// at that priority, and the stack works; a priority out of range is ErrConfig.
func TestRealTime(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root, and CI=true: run the tests as root")
		}
		t.Skip("needs root")
	}
	da, db := seqpacketPair(t)
	a, err := New(Config{Device: da, Addr: addrA, RealTime: 10})
	if err != nil {
		t.Fatalf("New with RealTime 10 as root: %v", err)
	}
	defer a.Close()
	attr, err := unix.SchedGetAttr(a.run.(*loop.Loop).ThreadID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_FIFO || attr.Priority != 10 {
		t.Fatalf("loop thread policy %d priority %d, want SCHED_FIFO (%d) at 10", attr.Policy, attr.Priority, unix.SCHED_FIFO)
	}
	b, err := New(Config{Device: db, Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, s := dialPair(t, a, b)
	c.Close()
	s.Close()
	for _, bad := range []int{-1, 100} {
		if _, err := New(Config{Device: da, Addr: addrA, RealTime: bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("RealTime %d: %v, want ErrConfig", bad, err)
		}
	}
}
