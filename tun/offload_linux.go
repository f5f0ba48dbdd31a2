//go:build linux

package tun

import (
	"errors"
	"fmt"
	"io"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TUNSETOFFLOAD's flags (linux/if_tun.h; golang.org/x/sys/unix lacks them).
const (
	tunFCsum = 0x01 // TUN_F_CSUM: we take packets with partial checksums
	tunFTSO4 = 0x02 // TUN_F_TSO4: ... and TCP/IPv4 segments larger than the MTU
	tunFTSO6 = 0x04 // TUN_F_TSO6: ... and TCP/IPv6 ones (Offloads.TSO6)
)

// OpenOffload is Open for a TUN with offloads: it opens /dev/net/tun itself
// (songgao/water cannot ask for IFF_VNET_HDR) with
// IFF_TUN|IFF_NO_PI|IFF_VNET_HDR|IFF_TUN_EXCL, sets the header's size
// (TUNSETVNETHDRSZ, VnetHdrLen) and enables checksum and TCP segmentation
// offload (TUNSETOFFLOAD: TUN_F_CSUM|TUN_F_TSO4|TUN_F_TSO6, or without TSO6
// if the kernel refuses that). The device is then an Offloader whose
// Offloads report GSO and GRO.
//
// When the kernel refuses any of it, OpenOffload falls back to Open's plain
// device, whose Offloads report neither and say why (Offloads.Err); only
// errors Open would return too are returned.
//
// A plain read (ReadPacket, ReadPacketNonblock) turns GRO off for good
// (TUNSETOFFLOAD 0): a reader of packets no larger than the MTU is never
// handed the kernel's 64 KiB segments (a wrapper such as impair reads so).
// Frames the kernel had queued before are each read as one truncated
// packet. GSO (WriteFrame) stays: the kernel takes GSO frames from any
// IFF_VNET_HDR device.
func OpenOffload(name string, mtu int) (*TUN, error) {
	t, err := open(name, mtu, true)
	if !errors.Is(err, errOffload) {
		return t, err
	}
	t, perr := Open(name, mtu)
	if perr != nil {
		return nil, perr
	}
	t.offloads.Err = err
	return t, nil
}

// offloadFlags are the TUNSETOFFLOAD flags OpenOffload tries, in order (a
// kernel without TSO6 takes the second); a test replaces them with flags the
// kernel refuses, to see the fallback.
var offloadFlags = []int{tunFCsum | tunFTSO4 | tunFTSO6, tunFCsum | tunFTSO4}

// errOffload marks what OpenOffload falls back on.
var errOffload = errors.New("offloads refused")

// openVnet opens the device with IFF_VNET_HDR, with the calling thread
// locked and the name checked.
func openVnet(name string, mtu int) (*TUN, error) {
	return openVnetFlags(name, mtu, unix.IFF_TUN_EXCL)
}

// openTUNFD opens /dev/net/tun and attaches it to the device name with
// IFF_TUN|IFF_NO_PI and flags (IFF_VNET_HDR, IFF_TUN_EXCL, IFF_MULTI_QUEUE).
// It returns the descriptor and the device's name.
func openTUNFD(name string, flags uint16) (int, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, "", fmt.Errorf("tun: open %q: %w", name, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, "", fmt.Errorf("tun: open %q: %w: %w", name, ErrInvalidConfig, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
			return -1, "", fmt.Errorf("tun: open %q: %w: %w", name, ErrLinkExists, err)
		}
		if flags&unix.IFF_VNET_HDR != 0 {
			return -1, "", fmt.Errorf("tun: open %q: TUNSETIFF IFF_VNET_HDR: %w: %w", name, errOffload, err)
		}
		return -1, "", fmt.Errorf("tun: open %q: TUNSETIFF %#x: %w", name, flags, err)
	}
	return fd, ifr.Name(), nil
}

// openVnetFlags is openVnet with further TUNSETIFF flags (IFF_TUN_EXCL for
// a new device, IFF_MULTI_QUEUE for a queue of one).
func openVnetFlags(name string, mtu int, flags uint16) (*TUN, error) {
	fd, name, err := openTUNFD(name, unix.IFF_VNET_HDR|flags)
	if err != nil {
		return nil, err
	}
	return newVnet(fd, name, mtu)
}

// newVnet is the device with virtio-net headers on fd, attached to name
// with IFF_VNET_HDR: it sets the header's size and the offloads; on an
// error fd is closed.
func newVnet(fd int, name string, mtu int) (*TUN, error) {
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, VnetHdrLen); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun: open %q: TUNSETVNETHDRSZ: %w: %w", name, errOffload, err)
	}
	tso6 := false
	for i, flags := range offloadFlags {
		err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, flags)
		if err == nil {
			tso6 = flags&tunFTSO6 != 0
			break
		}
		if i == len(offloadFlags)-1 {
			unix.Close(fd)
			return nil, fmt.Errorf("tun: open %q: TUNSETOFFLOAD %#x: %w: %w", name, flags, errOffload, err)
		}
	}
	file, rc, wt, err := offPoller(fd) // fdwait_linux.go
	if err != nil {
		return nil, fmt.Errorf("tun: open %q: %w", name, err)
	}
	t := &TUN{file: file, rc: rc, name: name, mtu: mtu, vnet: true, wt: wt}
	t.offloads = Offloads{GSO: true, GRO: true, TSO6: tso6}
	t.gro.Store(true)
	t.wbuf = make([]byte, VnetHdrLen+mtu)
	t.nbFn = t.readNonblock
	t.viov = make([]unix.Iovec, 0, MaxFramePieces)
	t.vFn = t.writev
	return t, nil
}

var _ FrameVecWriter = (*TUN)(nil)

// Offloads implements Offloader. GRO is off after a plain read.
func (t *TUN) Offloads() Offloads {
	o := t.offloads
	o.GRO = o.GRO && t.gro.Load()
	if !t.vnet && o.Err == nil {
		o.Err = fmt.Errorf("tun %s: opened without offloads: %w", t.name, ErrNoOffload)
	}
	return o
}

// ReadFrame implements Offloader.
func (t *TUN) ReadFrame(buf []byte) (int, error) {
	if err := t.frameRead(buf); err != nil {
		return 0, err
	}
	n, err := t.readFile(buf)
	if err != nil {
		return 0, t.wrapErr("read", err)
	}
	return t.checkFrame(buf, n)
}

// ReadFrameNonblock implements Offloader.
func (t *TUN) ReadFrameNonblock(buf []byte) (int, error) {
	if err := t.frameRead(buf); err != nil {
		return 0, err
	}
	n, err := t.readNB(buf, t.nbFn)
	if err != nil {
		return 0, err
	}
	return t.checkFrame(buf, n)
}

func (t *TUN) frameRead(buf []byte) error {
	if !t.vnet || !t.gro.Load() {
		return fmt.Errorf("tun %s: read frame: %w", t.name, ErrNoOffload)
	}
	if len(buf) <= VnetHdrLen {
		return fmt.Errorf("tun %s: read frame: %w", t.name, io.ErrShortBuffer)
	}
	return nil
}

// checkFrame checks a frame of n bytes read into buf for truncation.
func (t *TUN) checkFrame(buf []byte, n int) (int, error) {
	if n < VnetHdrLen {
		return 0, fmt.Errorf("tun %s: read: %d-byte frame: %w", t.name, n, ErrBadVnetHdr)
	}
	if n >= len(buf) {
		if size := ipPacketSize(buf[VnetHdrLen:]); size < 0 || size > len(buf)-VnetHdrLen || n > len(buf) {
			return len(buf), fmt.Errorf("tun %s: read: frame longer than %d-byte buffer: %w", t.name, len(buf), io.ErrShortBuffer)
		}
	}
	return n, nil
}

// WriteFrame implements Offloader.
func (t *TUN) WriteFrame(frame []byte) error {
	if !t.vnet {
		return fmt.Errorf("tun %s: write frame: %w", t.name, ErrNoOffload)
	}
	if len(frame) <= VnetHdrLen || len(frame) > MaxFrame {
		return fmt.Errorf("tun %s: write frame: %d bytes: %w", t.name, len(frame), ErrPacketSize)
	}
	n, err := t.writeFile(frame)
	if err != nil {
		return t.wrapErr("write", err)
	}
	if n != len(frame) {
		return fmt.Errorf("tun %s: write: %d of %d bytes: %w", t.name, n, len(frame), io.ErrShortWrite)
	}
	return nil
}

// WriteFrameVec implements FrameVecWriter: one writev of the pieces,
// through the descriptor's RawConn; when the kernel says EAGAIN it waits
// for the descriptor to be writable (fdWait), as WriteFrame does.
func (t *TUN) WriteFrameVec(pieces [][]byte) error {
	if !t.vnet {
		return fmt.Errorf("tun %s: write frame: %w", t.name, ErrNoOffload)
	}
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	if len(pieces) == 0 || len(pieces) > MaxFramePieces || n <= VnetHdrLen || n > MaxFrame {
		return fmt.Errorf("tun %s: write frame: %d bytes in %d pieces: %w", t.name, n, len(pieces), ErrPacketSize)
	}
	t.vmu.Lock()
	defer t.vmu.Unlock()
	for _, p := range pieces {
		if len(p) == 0 {
			continue
		}
		v := unix.Iovec{Base: &p[0]}
		v.SetLen(len(p))
		t.viov = append(t.viov, v)
	}
	err := t.rc.Write(t.vFn)
	w, werr := t.vN, t.vErr
	clear(t.viov) // keeps no piece alive
	t.viov, t.vErr = t.viov[:0], nil
	switch {
	case err != nil: // the RawConn's own: the file is closed
		return fmt.Errorf("tun %s: write: %w", t.name, net.ErrClosed)
	case werr != nil:
		return t.wrapErr("write", werr)
	case w != n:
		return fmt.Errorf("tun %s: write: %d of %d bytes: %w", t.name, w, n, io.ErrShortWrite)
	}
	return nil
}

// writev is WriteFrameVec's RawConn.Write function: one writev of viov,
// again on EINTR, and on EAGAIN once the descriptor is writable.
func (t *TUN) writev(fd uintptr) bool {
	for {
		r, _, e := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&t.viov[0])), uintptr(len(t.viov)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if err := t.wt.wait(fd, unix.POLLOUT); err != nil {
				t.vN, t.vErr = 0, err
				return true
			}
			continue
		case 0:
			t.vN, t.vErr = int(r), nil
		default:
			t.vN, t.vErr = 0, e
		}
		return true
	}
}

// noGRO turns GRO off for a plain reader (see OpenOffload).
func (t *TUN) noGRO() {
	if !t.gro.Swap(false) {
		return
	}
	var err error
	if cerr := t.rc.Control(func(fd uintptr) { err = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, 0) }); cerr != nil {
		err = cerr
	}
	_ = err // a closed device reads nothing more; one that refused keeps sending frames that read as truncated
}

// readVnetPacket is ReadPacket of a vnet device: the frame is read into the
// scratch space after buf's packet and its packet moved into place.
func (t *TUN) readVnetPacket(buf []byte) (int, error) {
	t.noGRO()
	var hdr [VnetHdrLen]byte
	var n int
	var rerr error
	err := t.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = unix.Readv(int(fd), [][]byte{hdr[:], buf})
			switch rerr {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				if rerr = t.wt.wait(fd, unix.POLLIN); rerr == nil {
					continue
				}
			}
			return true
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, t.wrapErr("read", err)
	}
	return t.vnetPacket(hdr[:], buf, n)
}

// readVnetPacketNonblock is ReadPacketNonblock of a vnet device.
func (t *TUN) readVnetPacketNonblock(buf []byte) (int, error) {
	t.noGRO()
	n, hdr, err := t.readNBHdr(buf, t.readvNonblock)
	if err != nil {
		return 0, err
	}
	return t.vnetPacket(hdr[:], buf, n)
}

// readvNonblock reads a header into nbHdr and a packet into nbBuf.
func (t *TUN) readvNonblock(fd uintptr) bool {
	for {
		n, err := unix.Readv(int(fd), [][]byte{t.nbHdr[:], t.nbBuf})
		if err == unix.EINTR {
			continue
		}
		t.nbN, t.nbErr = n, err
		return true
	}
}

// vnetPacket checks the frame of n bytes read as hdr and buf, and completes
// its partial checksum. A GSO frame (read before GRO went off) is reported
// truncated: it is several packets.
func (t *TUN) vnetPacket(hdrb, buf []byte, n int) (int, error) {
	n -= VnetHdrLen
	if n < 0 {
		return 0, fmt.Errorf("tun %s: read: %w", t.name, ErrBadVnetHdr)
	}
	h, _ := ParseVnetHdr(hdrb)
	if h.IsGSO() {
		return min(n, len(buf)), fmt.Errorf("tun %s: read: a GSO frame of %d segments: %w", t.name, SegmentCount(h, buf[:min(n, len(buf))]), io.ErrShortBuffer)
	}
	n, err := t.checkTruncated(buf, n)
	if err != nil {
		return n, err
	}
	if err := h.Check(buf[:n]); err != nil {
		return 0, fmt.Errorf("tun %s: read: %w", t.name, err)
	}
	CompleteChecksum(h, buf[:n])
	return n, nil
}

// writeVnetPacket is WritePacket of a vnet device: a zero header in front.
func (t *TUN) writeVnetPacket(pkt []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	b := t.wbuf[:VnetHdrLen+len(pkt)]
	clear(b[:VnetHdrLen])
	copy(b[VnetHdrLen:], pkt)
	n, err := t.writeFile(b)
	if err != nil {
		return t.wrapErr("write", err)
	}
	if n != len(b) {
		return fmt.Errorf("tun %s: write: %d of %d bytes: %w", t.name, n, len(b), io.ErrShortWrite)
	}
	return nil
}

// readFile is the device's blocking read of one packet or frame into buf:
// the descriptor is off Go's poller, so an EAGAIN waits in fdWait.
func (t *TUN) readFile(buf []byte) (int, error) { return t.fileIO(buf, unix.POLLIN) }

// writeFile is the device's write of one packet or frame, which waits in
// fdWait while the kernel says EAGAIN (a TUN takes a frame whole or not at
// all).
func (t *TUN) writeFile(b []byte) (int, error) { return t.fileIO(b, unix.POLLOUT) }

// fileIO reads (ev unix.POLLIN) or writes b through the file, again each
// time the descriptor polls ready for ev after an EAGAIN.
func (t *TUN) fileIO(b []byte, ev int16) (int, error) {
	for {
		var n int
		var err error
		if ev == unix.POLLIN {
			n, err = t.file.Read(b)
		} else {
			n, err = t.file.Write(b)
		}
		if !errors.Is(err, unix.EAGAIN) {
			return n, err
		}
		if err := t.waitFD(ev); err != nil {
			return 0, err
		}
	}
}

// waitFD waits in fdWait for the descriptor to poll ready for ev, holding
// it (RawConn.Control) so that a Close cannot make it another one.
func (t *TUN) waitFD(ev int16) error {
	var werr error
	if err := t.rc.Control(func(fd uintptr) { werr = t.wt.wait(fd, ev) }); err != nil {
		return err
	}
	return werr
}
