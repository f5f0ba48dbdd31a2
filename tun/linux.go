//go:build linux

package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/songgao/water"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TUN is a Linux TUN device (IFF_TUN|IFF_NO_PI) opened through
// github.com/songgao/water (Open), or by OpenOffload itself with
// IFF_VNET_HDR and offloads, which water cannot ask for: then it is an
// Offloader, every packet has a virtio-net header, and ReadPacket and
// WritePacket strip and add it. Its file descriptor is non-blocking. Open's
// is registered with Go's network poller, so Close unblocks a pending
// ReadPacket and SetReadDeadline works; OpenOffload's is not, as package
// stack's loop polls it with its own epoll (see fdWait): its reads and
// writes wait in poll(2), which Close and SetReadDeadline wake.
type TUN struct {
	file *os.File
	rc   syscall.RawConn
	name string
	mtu  int

	// ReadPacketNonblock's call, kept here so that a read allocates nothing.
	nbMu  sync.Mutex
	nbBuf []byte
	nbN   int
	nbErr error
	nbFn  func(fd uintptr) bool

	closeOnce sync.Once
	closeErr  error

	// OpenOffload's device (offload_linux.go): every packet has a
	// virtio-net header in front of it.
	vnet     bool
	wt       *fdWait     // the vnet device's waits: its descriptor is off Go's poller
	offloads Offloads    // what OpenOffload got (or why not: Err)
	gro      atomic.Bool // GRO still on: no plain read has turned it off
	wmu      sync.Mutex  // guards wbuf
	wbuf     []byte      // WritePacket's frame: a zero header and the packet
	nbHdr    [VnetHdrLen]byte

	// WriteFrameVec's writev (offload_linux.go): its iovecs and the
	// RawConn.Write function's results, kept here so that a write
	// allocates nothing.
	vmu  sync.Mutex
	viov []unix.Iovec
	vN   int
	vErr error
	vFn  func(fd uintptr) bool
}

var (
	_ Device   = (*TUN)(nil)
	_ Pollable = (*TUN)(nil)
)

// Open creates the TUN device name in the calling thread's network
// namespace and returns it. mtu is the MTU the device reports and enforces
// on writes (0 means DefaultMTU); Open does not configure the link at all:
// it stays down, without addresses, with the kernel's default MTU, until
// someone configures it (package netns does so inside a namespace).
//
// The device is not persistent: closing it deletes the link. If a link
// called name already exists, Open fails with an error wrapping
// ErrLinkExists rather than attaching to it (water does not ask the kernel
// for IFF_TUN_EXCL, so Open checks by name first). An empty name lets the
// kernel choose one (tun0, tun1, ...).
func Open(name string, mtu int) (*TUN, error) {
	return open(name, mtu, false)
}

// open is Open, and OpenOffload with vnet.
func open(name string, mtu int, vnet bool) (*TUN, error) {
	mtu, err := checkOpen(name, mtu)
	if err != nil {
		return nil, err
	}

	// The existence check and the device must see the same namespace.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	if err := checkNewLink(name); err != nil {
		return nil, err
	}
	if vnet {
		return openVnet(name, mtu)
	}
	// water sets IFF_NO_PI unconditionally on Linux (syscalls_linux.go),
	// clears IFF_PERSIST, and opens /dev/net/tun with O_NONBLOCK, so
	// os.NewFile puts the descriptor on the poller.
	ifce, err := water.New(water.Config{
		DeviceType:             water.TUN,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: name},
	})
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			err = fmt.Errorf("%w: %w", ErrLinkExists, err)
		}
		return nil, fmt.Errorf("tun: open %q: %w", name, err)
	}
	file, ok := ifce.ReadWriteCloser.(*os.File)
	if !ok {
		ifce.Close()
		return nil, fmt.Errorf("tun: open %q: water returned %T, want *os.File", name, ifce.ReadWriteCloser)
	}
	t := &TUN{file: file, name: ifce.Name(), mtu: mtu}
	t.nbFn = t.readNonblock
	if err := t.setCloseOnExec(); err != nil {
		t.Close()
		return nil, fmt.Errorf("tun: open %q: %w", name, err)
	}
	return t, nil
}

// setCloseOnExec marks the descriptor close-on-exec, which water omits: a
// child process that inherited it would keep the device alive after Close.
// It goes through SyscallConn because File.Fd would switch the descriptor to
// blocking mode and take it off the poller.
func (t *TUN) setCloseOnExec() error {
	rc, err := t.file.SyscallConn()
	if err != nil {
		return err
	}
	t.rc = rc
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		_, cerr = unix.FcntlInt(fd, unix.F_SETFD, unix.FD_CLOEXEC)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("fcntl FD_CLOEXEC: %w", cerr)
	}
	return nil
}

// ReadPacket implements Device. The kernel does not report truncation on a
// TUN without packet information, so a packet that fills buf exactly is
// reported as truncated when its IP header says it is longer, or when buf
// is too short to hold an IP header.
func (t *TUN) ReadPacket(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("tun %s: read: %w", t.name, io.ErrShortBuffer)
	}
	if t.vnet {
		return t.readVnetPacket(buf)
	}
	n, err := t.file.Read(buf)
	if err != nil {
		return 0, t.wrapErr("read", err)
	}
	return t.checkTruncated(buf, n)
}

// checkTruncated checks the n bytes read into buf for truncation.
func (t *TUN) checkTruncated(buf []byte, n int) (int, error) {
	// With IFF_NO_PI the kernel truncates silently: it returns the number
	// of bytes copied (some kernels the full length). Only the IP header
	// tells whether there was more.
	if n >= len(buf) {
		if size := ipPacketSize(buf); size < 0 || size > len(buf) || n > len(buf) {
			return len(buf), fmt.Errorf("tun %s: read: packet longer than %d-byte buffer: %w", t.name, len(buf), io.ErrShortBuffer)
		}
		n = len(buf)
	}
	return n, nil
}

// ReadFD implements Pollable: the TUN's descriptor, which is non-blocking.
// (Open's is on Go's network poller too; OpenOffload's is not: see
// fdWait.)
func (t *TUN) ReadFD() (int, error) {
	fd := -1
	if err := t.rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1, t.wrapErr("read fd", err)
	}
	return fd, nil
}

// ReadPacketNonblock implements Pollable. It reads through the descriptor's
// RawConn, so a concurrent Close cannot make it read another descriptor.
func (t *TUN) ReadPacketNonblock(buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("tun %s: read: %w", t.name, io.ErrShortBuffer)
	}
	if t.vnet {
		return t.readVnetPacketNonblock(buf)
	}
	n, err := t.readNB(buf, t.nbFn)
	if err != nil {
		return 0, err
	}
	return t.checkTruncated(buf, n)
}

// readNB runs fn, a non-blocking read into t.nbBuf, through the RawConn.
func (t *TUN) readNB(buf []byte, fn func(uintptr) bool) (int, error) {
	n, _, err := t.readNBHdr(buf, fn)
	return n, err
}

// readNBHdr is readNB that also returns t.nbHdr as fn left it (the
// virtio-net header a readv of readvNonblock filled), copied under the lock.
func (t *TUN) readNBHdr(buf []byte, fn func(uintptr) bool) (int, [VnetHdrLen]byte, error) {
	t.nbMu.Lock()
	t.nbBuf = buf
	err := t.rc.Read(fn)
	n, rerr, hdr := t.nbN, t.nbErr, t.nbHdr
	t.nbBuf, t.nbErr = nil, nil
	t.nbMu.Unlock()
	switch {
	case err != nil:
		return 0, hdr, t.wrapErr("read", err)
	case rerr == unix.EAGAIN:
		return 0, hdr, ErrWouldBlock
	case rerr != nil:
		return 0, hdr, t.wrapErr("read", rerr)
	}
	return n, hdr, nil
}

// readNonblock is the RawConn.Read function of ReadPacketNonblock: one read,
// never a wait.
func (t *TUN) readNonblock(fd uintptr) bool {
	for {
		n, err := unix.Read(int(fd), t.nbBuf)
		if err == unix.EINTR {
			continue
		}
		t.nbN, t.nbErr = n, err
		return true
	}
}

// ipPacketSize returns the length of the IP packet that starts p, as its
// header says, or -1 if p is too short to say.
func ipPacketSize(p []byte) int {
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		return int(binary.BigEndian.Uint16(p[2:4])) // RFC 791: Total Length
	case len(p) >= 40 && p[0]>>4 == 6:
		return 40 + int(binary.BigEndian.Uint16(p[4:6])) // RFC 8200: Payload Length
	}
	return -1
}

// WritePacket implements Device.
func (t *TUN) WritePacket(pkt []byte) error {
	if len(pkt) == 0 || len(pkt) > t.mtu {
		return fmt.Errorf("tun %s: write: %d bytes, MTU %d: %w", t.name, len(pkt), t.mtu, ErrPacketSize)
	}
	if t.vnet {
		return t.writeVnetPacket(pkt)
	}
	n, err := t.file.Write(pkt)
	if err != nil {
		return t.wrapErr("write", err)
	}
	if n != len(pkt) {
		return fmt.Errorf("tun %s: write: %d of %d bytes: %w", t.name, n, len(pkt), io.ErrShortWrite)
	}
	return nil
}

// SetReadDeadline sets the deadline for pending and future ReadPacket
// calls; a zero t means none. A read that misses it fails with an error
// wrapping os.ErrDeadlineExceeded.
func (t *TUN) SetReadDeadline(deadline time.Time) error {
	if t.wt != nil {
		if err := t.wt.setReadDeadline(deadline); err != nil {
			return t.wrapErr("set read deadline", err)
		}
		return nil
	}
	if err := t.file.SetReadDeadline(deadline); err != nil {
		return t.wrapErr("set read deadline", err)
	}
	return nil
}

// MTU implements Device. It is the value given to Open, not read back from
// the kernel.
func (t *TUN) MTU() int { return t.mtu }

// Name implements Device: the interface name.
func (t *TUN) Name() string { return t.name }

// Close implements Device. Closing the descriptor deletes the link,
// wherever (in whichever namespace) it is.
func (t *TUN) Close() error {
	t.closeOnce.Do(func() {
		if t.wt != nil {
			t.wt.close() // wakes the waits first: they hold the descriptor
		}
		if err := t.file.Close(); err != nil {
			t.closeErr = fmt.Errorf("tun %s: close: %w", t.name, err)
		}
	})
	return t.closeErr
}

// wrapErr turns os.ErrClosed into net.ErrClosed, as Device promises, and
// keeps every other error (os.ErrDeadlineExceeded, errnos) matchable.
func (t *TUN) wrapErr(op string, err error) error {
	if errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("tun %s: %s: %w", t.name, op, net.ErrClosed)
	}
	return fmt.Errorf("tun %s: %s: %w", t.name, op, err)
}

// LinkExists reports whether a link called name exists in the calling
// thread's network namespace (lock the goroutine to its thread first, with
// runtime.LockOSThread, if that matters). It only reads.
func LinkExists(name string) (bool, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return false, fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	return linkExistsIn(h, name)
}

func linkExistsIn(h *netlink.Handle, name string) (bool, error) {
	_, err := h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &notFound):
		return false, nil
	default:
		return false, fmt.Errorf("netlink: link %q: %w", name, err)
	}
}

// checkOpen checks an open's name and MTU, and returns the MTU with its
// default filled in.
func checkOpen(name string, mtu int) (int, error) {
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if mtu < MinMTU || mtu > MaxMTU {
		return 0, fmt.Errorf("tun: open %q: MTU %d not in [%d, %d]: %w", name, mtu, MinMTU, MaxMTU, ErrInvalidConfig)
	}
	if name != "" {
		if err := CheckLinkName(name); err != nil {
			return 0, fmt.Errorf("tun: open: %w", err)
		}
	}
	return mtu, nil
}

// checkNewLink fails if a link named name exists in the calling thread's
// namespace (the caller holds its OS thread, so that the device it then
// opens sees the same namespace). An empty name is the kernel's to pick.
func checkNewLink(name string) error {
	if name == "" {
		return nil
	}
	exists, err := LinkExists(name)
	if err != nil {
		return fmt.Errorf("tun: open %q: %w", name, err)
	}
	if exists {
		return fmt.Errorf("tun: open %q: %w", name, ErrLinkExists)
	}
	return nil
}
