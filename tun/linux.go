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
// WritePacket strip and add it. Its file descriptor is non-blocking and,
// whichever opened it, not registered with Go's network poller, as package
// stack's loop polls it with its own epoll (see fdWait): its reads and
// writes wait in poll(2), which Close (it unblocks a pending ReadPacket)
// and SetReadDeadline wake. The exception is a plain device's blocking
// ReadPacket: once one has found nothing to read, they wait on a
// duplicate of the descriptor on the poller (readPlain).
type TUN struct {
	file *os.File
	rc   syscall.RawConn
	wt   *fdWait // the waits: the descriptor is off Go's poller (fdwait_linux.go)
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

	// A plain device's blocking reader's file (readPlain): a duplicate of
	// the descriptor on Go's network poller, made by the first ReadPacket
	// that finds nothing to read, nil until then. pmu guards making it,
	// setting its deadline and closing it.
	pmu   sync.Mutex
	pfile atomic.Pointer[os.File]

	// OpenOffload's device (offload_linux.go): every packet has a
	// virtio-net header in front of it.
	vnet     bool
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
	fd, ifname, err := openWater(name)
	if err != nil {
		return nil, err
	}
	return newPlain(fd, ifname, mtu)
}

// newPlain is the plain device (no virtio-net headers) on the descriptor
// fd, off Go's poller; on an error fd is closed.
func newPlain(fd int, name string, mtu int) (*TUN, error) {
	file, rc, wt, err := offPoller(fd) // fdwait_linux.go
	if err != nil {
		return nil, fmt.Errorf("tun: open %q: %w", name, err)
	}
	t := &TUN{file: file, rc: rc, name: name, mtu: mtu, wt: wt}
	t.nbFn = t.readNonblock
	return t, nil
}

// openWater opens the plain device name through water and returns a
// close-on-exec duplicate of its descriptor, and the device's name.
//
// water sets IFF_NO_PI unconditionally on Linux (syscalls_linux.go),
// clears IFF_PERSIST, and opens /dev/net/tun with O_NONBLOCK and without
// O_CLOEXEC, then hands the descriptor to os.NewFile, which registers it
// with Go's network poller. Nothing undoes that registration but closing
// the file (its Close deletes the descriptor from the poller's epoll set),
// so the descriptor is duplicated (F_DUPFD_CLOEXEC: the same open device,
// which the duplicate keeps attached) and water's closed. syscall.ForkLock
// is held meanwhile, so that no process started in between inherits
// water's descriptor, which would keep the device alive after Close.
func openWater(name string) (int, string, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	ifce, err := water.New(water.Config{
		DeviceType:             water.TUN,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: name},
	})
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			err = fmt.Errorf("%w: %w", ErrLinkExists, err)
		}
		return -1, "", fmt.Errorf("tun: open %q: %w", name, err)
	}
	file, ok := ifce.ReadWriteCloser.(*os.File)
	if !ok {
		ifce.Close()
		return -1, "", fmt.Errorf("tun: open %q: water returned %T, want *os.File", name, ifce.ReadWriteCloser)
	}
	defer file.Close()
	rc, err := file.SyscallConn()
	if err != nil {
		return -1, "", fmt.Errorf("tun: open %q: %w", name, err)
	}
	fd, err := dupCloexec(rc)
	if err != nil {
		return -1, "", fmt.Errorf("tun: open %q: %w", name, err)
	}
	return fd, ifce.Name(), nil
}

// dupCloexec returns a close-on-exec duplicate of rc's descriptor
// (F_DUPFD_CLOEXEC: the same open device). It fails with os.ErrClosed when
// rc's file is closed (Control fails only then), and with the fcntl's
// error as an *os.SyscallError.
func dupCloexec(rc syscall.RawConn) (int, error) {
	fd := -1
	var err error
	if cerr := rc.Control(func(f uintptr) { fd, err = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return -1, os.ErrClosed
	}
	if err != nil {
		return -1, os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
	}
	return fd, nil
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
	n, err := t.readPlain(buf)
	if err != nil {
		return 0, t.wrapErr("read", err)
	}
	return t.checkTruncated(buf, n)
}

// readPlain is ReadPacket's read of a plain device. Until a read finds
// nothing to read the descriptor stays off Go's poller; then the reader
// waits on a duplicate of it that is on the poller (pollerFile), as every
// later ReadPacket does: a goroutine that blocks in ReadPacket (gVisor's
// link endpoint in tcpwheel compare) parks in the poller, where a wait in
// poll(2), as fdWait's, would hold a thread in a blocking system call for
// every wait (http-down: 1.22x gVisor's CPU per GB, 6 pairs). A loop that
// watches the descriptor itself (ReadFD, ReadPacketNonblock) never blocks
// in ReadPacket, and its device stays off the poller.
func (t *TUN) readPlain(buf []byte) (int, error) {
	f := t.pfile.Load()
	if f == nil {
		// The poller's file fails a read past its deadline even when a
		// packet waits; so does the first read.
		if d := t.wt.rdl.Load(); d != nil && !time.Now().Before(*d) {
			return 0, os.ErrDeadlineExceeded
		}
		n, err := t.file.Read(buf)
		if !errors.Is(err, unix.EAGAIN) {
			return n, err
		}
		if f, err = t.pollerFile(); err != nil {
			return 0, err
		}
	}
	for {
		n, err := f.Read(buf)
		if !errors.Is(err, unix.EAGAIN) {
			return n, err
		}
		// Only if the poller would not take the descriptor (os.NewFile
		// then leaves it non-blocking and unwatched).
		if err := t.waitFD(unix.POLLIN); err != nil {
			return 0, err
		}
	}
}

// pollerFile returns the plain device's blocking reader's file, made on
// the first call: a close-on-exec duplicate of the descriptor, which is
// non-blocking (the flag is the open device's, shared by duplicates), so
// that os.NewFile registers it with Go's poller. It has the read deadline.
func (t *TUN) pollerFile() (*os.File, error) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if f := t.pfile.Load(); f != nil {
		return f, nil
	}
	if t.wt.closed.Load() {
		return nil, os.ErrClosed
	}
	fd, err := dupCloexec(t.rc)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	if d := t.wt.rdl.Load(); d != nil {
		if err := f.SetReadDeadline(*d); err != nil {
			f.Close()
			return nil, err
		}
	}
	t.pfile.Store(f)
	return f, nil
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

// ReadFD implements Pollable: the TUN's descriptor, which is non-blocking
// and on no epoll set of Go's (see fdWait).
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
	n, err := t.writeFile(pkt)
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
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if err := t.wt.setReadDeadline(deadline); err != nil {
		return t.wrapErr("set read deadline", err)
	}
	if f := t.pfile.Load(); f != nil {
		if err := f.SetReadDeadline(deadline); err != nil {
			return t.wrapErr("set read deadline", err)
		}
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
		t.wt.close() // wakes the waits first: they hold the descriptor
		t.pmu.Lock()
		if f := t.pfile.Load(); f != nil {
			f.Close() // ends a blocking ReadPacket's wait
		}
		t.pmu.Unlock()
		if err := t.file.Close(); err != nil {
			t.closeErr = fmt.Errorf("tun %s: close: %w", t.name, err)
		}
	})
	return t.closeErr
}

// wrapErr turns os.ErrClosed into net.ErrClosed, as Device promises, and
// keeps every other error (os.ErrDeadlineExceeded, errnos) matchable. Once
// Close has begun every error is net.ErrClosed: a RawConn of a closed file
// fails with an error that os.ErrClosed does not match.
func (t *TUN) wrapErr(op string, err error) error {
	if errors.Is(err, os.ErrClosed) || t.wt.closed.Load() {
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

// FromFD returns the TUN device open on fd: a descriptor of /dev/net/tun
// attached to a device (TUNSETIFF), such as one that another process
// opened with Open, OpenOffload or OpenQueues and passed to this one
// (exec.Cmd.ExtraFiles). The TUN takes fd over (Close closes it); a device
// stays until its last descriptor, in any process, is closed. Its name, and
// whether it has virtio-net headers (IFF_VNET_HDR: OpenOffload's, whose
// header size and offloads are then set again as OpenOffload sets them),
// are read from the descriptor (TUNGETIFF). mtu is as Open's. fd is made
// close-on-exec and non-blocking (its open file's status flags are shared
// with every duplicate, the other process's too); on an error it is closed.
func FromFD(fd int, mtu int) (*TUN, error) {
	mtu, err := checkOpen("", mtu)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr, err := unix.NewIfreq("")
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun: descriptor %d: %w", fd, err)
	}
	if err := unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun: descriptor %d: TUNGETIFF: %w", fd, err)
	}
	unix.CloseOnExec(fd)
	if ifr.Uint16()&unix.IFF_VNET_HDR != 0 {
		return newVnet(fd, ifr.Name(), mtu)
	}
	return newPlain(fd, ifr.Name(), mtu)
}
