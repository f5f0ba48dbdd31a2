//go:build linux

package tuntest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tcpwheel/tcpwheel/tun"
)

// PollableFake is a tun.Pollable driven by the test: Inject queues a packet
// for the reader, and its descriptor (an eventfd in semaphore mode) polls
// readable exactly while a packet waits, as a TUN's does; Written returns
// what was written. It lets the tests of a wrapper check, without root, that
// the wrapper stays Pollable and that reads on the Pollable path go through
// the wrapper's logic.
//
// ReadPacket blocks while nothing waits; ReadPacketNonblock returns an error
// wrapping tun.ErrWouldBlock instead. Close unblocks ReadPacket; after it
// every method fails with an error wrapping net.ErrClosed. All methods are
// safe for concurrent use.
type PollableFake struct {
	mtu int

	mu       sync.Mutex
	nonEmpty sync.Cond // L is &mu; signalled on Inject, broadcast on Close
	toRead   [][]byte  // guarded by mu
	written  [][]byte  // guarded by mu
	efd      int       // guarded by mu; -1 after Close
}

var _ tun.Pollable = (*PollableFake)(nil)

// NewPollableFake returns an empty PollableFake with the given MTU (0 means
// tun.DefaultMTU).
func NewPollableFake(mtu int) (*PollableFake, error) {
	if mtu == 0 {
		mtu = tun.DefaultMTU
	}
	efd, err := unix.Eventfd(0, unix.EFD_SEMAPHORE|unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tuntest: eventfd: %w", err)
	}
	f := &PollableFake{mtu: mtu, efd: efd}
	f.nonEmpty.L = &f.mu
	return f, nil
}

// Inject queues a copy of pkt for the reader.
func (f *PollableFake) Inject(pkt []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.efd < 0 {
		return fmt.Errorf("tuntest fake: inject: %w", net.ErrClosed)
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1) // the eventfd counter is host-endian
	if _, err := unix.Write(f.efd, one[:]); err != nil {
		return fmt.Errorf("tuntest fake: inject: %w", err)
	}
	f.toRead = append(f.toRead, slices.Clone(pkt))
	f.nonEmpty.Signal()
	return nil
}

// Written returns copies of the packets written so far, oldest first.
func (f *PollableFake) Written() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]byte, len(f.written))
	for i, p := range f.written {
		out[i] = slices.Clone(p)
	}
	return out
}

// ReadPacket implements tun.Device.
func (f *PollableFake) ReadPacket(buf []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.toRead) == 0 && f.efd >= 0 {
		f.nonEmpty.Wait()
	}
	return f.popLocked(buf)
}

// ReadFD implements tun.Pollable.
func (f *PollableFake) ReadFD() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.efd < 0 {
		return -1, fmt.Errorf("tuntest fake: read fd: %w", net.ErrClosed)
	}
	return f.efd, nil
}

// ReadPacketNonblock implements tun.Pollable.
func (f *PollableFake) ReadPacketNonblock(buf []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.toRead) == 0 && f.efd >= 0 {
		return 0, fmt.Errorf("tuntest fake: read: %w", tun.ErrWouldBlock)
	}
	return f.popLocked(buf)
}

// popLocked hands out the oldest waiting packet and takes its count off the
// eventfd.
func (f *PollableFake) popLocked(buf []byte) (int, error) {
	if f.efd < 0 {
		return 0, fmt.Errorf("tuntest fake: read: %w", net.ErrClosed)
	}
	if len(buf) == 0 {
		return 0, fmt.Errorf("tuntest fake: read: %w", io.ErrShortBuffer)
	}
	var cnt [8]byte
	if _, err := unix.Read(f.efd, cnt[:]); err != nil {
		return 0, fmt.Errorf("tuntest fake: read: %w", err)
	}
	pkt := f.toRead[0]
	f.toRead = f.toRead[1:]
	n := copy(buf, pkt)
	if n < len(pkt) {
		return n, fmt.Errorf("tuntest fake: read: packet of %d bytes: %w", len(pkt), io.ErrShortBuffer)
	}
	return n, nil
}

// WritePacket implements tun.Device.
func (f *PollableFake) WritePacket(pkt []byte) error {
	if len(pkt) == 0 || len(pkt) > f.mtu {
		return fmt.Errorf("tuntest fake: write: %d bytes, MTU %d: %w", len(pkt), f.mtu, tun.ErrPacketSize)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.efd < 0 {
		return fmt.Errorf("tuntest fake: write: %w", net.ErrClosed)
	}
	f.written = append(f.written, slices.Clone(pkt))
	return nil
}

// MTU implements tun.Device.
func (f *PollableFake) MTU() int { return f.mtu }

// Name implements tun.Device.
func (f *PollableFake) Name() string { return "pollable-fake" }

// Close implements tun.Device; later calls are harmless.
func (f *PollableFake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.efd < 0 {
		return nil
	}
	err := unix.Close(f.efd)
	f.efd = -1
	f.toRead = nil
	f.nonEmpty.Broadcast()
	return err
}

// TB is the part of testing.TB the checks below use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// CheckWrapped fails the test unless dev, a wrapper of f, is a tun.Pollable
// that hands out f's descriptor and says tun.ErrWouldBlock while nothing
// waits. It returns dev as a tun.Pollable, for the test to go on checking
// that reads on that path go through the wrapper's logic.
func (f *PollableFake) CheckWrapped(t TB, dev tun.Device) tun.Pollable {
	t.Helper()
	p, ok := dev.(tun.Pollable)
	if !ok {
		t.Fatalf("%T on a Pollable device is not a tun.Pollable", dev)
	}
	want, err := f.ReadFD()
	if err != nil {
		t.Fatalf("fake: %v", err)
	}
	if fd, err := p.ReadFD(); err != nil || fd != want {
		t.Fatalf("%T.ReadFD() = %d, %v; want the wrapped device's %d", dev, fd, err, want)
	}
	if n, err := p.ReadPacketNonblock(make([]byte, p.MTU())); !errors.Is(err, tun.ErrWouldBlock) {
		t.Fatalf("%T.ReadPacketNonblock with nothing waiting = %d, %v; want ErrWouldBlock", dev, n, err)
	}
	return p
}

// CheckNotPollable fails the test unless p, a wrapper of a device that
// cannot be polled, says so (errors wrapping tun.ErrNotPollable), so that a
// stack keeps its reader goroutine.
func CheckNotPollable(t TB, p tun.Pollable) {
	t.Helper()
	if _, err := p.ReadFD(); !errors.Is(err, tun.ErrNotPollable) {
		t.Errorf("%T.ReadFD() error = %v, want ErrNotPollable", p, err)
	}
	if _, err := p.ReadPacketNonblock(make([]byte, tun.MinMTU)); !errors.Is(err, tun.ErrNotPollable) {
		t.Errorf("%T.ReadPacketNonblock() error = %v, want ErrNotPollable", p, err)
	}
}
