package gvisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tcpwheel/tcpwheel/internal/testbed"
	"github.com/tcpwheel/tcpwheel/tun"
)

// gVisor in its best configuration on a TUN.
//
// gVisor's own fdbased endpoint enables GSO only when its descriptor is a
// socket (fdbased.New sets the GSO kind inside `if isSocket`), and reads a
// non-socket with readv, one packet per call, without GRO: on a TUN it is
// the plain path. Its host GSO is meant for an AF_PACKET socket on a veth,
// which is not the same TUN. So this file gives gVisor what fdbased gives it
// on a socket, on our TUN: the TUN opened with IFF_VNET_HDR and TUNSETOFFLOAD
// (checksum and TSO4), gVisor told that the link does host GSO
// (stack.HostGSOSupported, up to 64 KB), its segments written whole with a
// virtio-net header (NEEDS_CSUM with the pseudo-header sum gVisor left in
// the TCP checksum, GSO_TCPV4 with gVisor's MSS when a segment is longer),
// as fdbased's writePacket does but without its Ethernet offset. Inbound,
// the kernel's TCP hands the TUN its TSO segments of up to 64 KB, which
// gVisor takes whole (gVisor's GRO, which only fdbased's recvmmsg path on a
// socket runs, would only merge what the kernel already merged); their
// checksums are partial or already verified, so the link declares
// CapabilityRXChecksumOffload and gVisor does not verify them (the packets
// come from the kernel of our own namespace). That is Tailscale's choice
// for its netstack on a TUN too.

// Linux's TUN offload flags (linux/if_tun.h) and virtio-net header
// (linux/virtio_net.h).
const (
	tunFCsum = 0x01 // TUN_F_CSUM
	tunFTSO4 = 0x02 // TUN_F_TSO4

	vnetHdrLen        = 10
	vnetFNeedsCsum    = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	vnetGSONone       = 0
	vnetGSOTCPv4      = 1
	vnetGSOECN        = 0x80
	gsoMaxSize        = 1 << 16 // gVisor keeps a segment's headers and payload within it
	maxInboundPacket  = 1 << 16
	vnetReadBufferLen = vnetHdrLen + maxInboundPacket
)

// VnetTUN is a TUN device opened with IFF_VNET_HDR and TSO4 + checksum
// offload: every packet read or written starts with a virtio-net header.
type VnetTUN struct {
	f  *os.File
	rc interface {
		Write(func(fd uintptr) bool) error
	}
	name string
	mtu  int
}

// OpenVnetTUN creates the TUN device name (IFF_TUN | IFF_NO_PI |
// IFF_VNET_HDR) in the calling thread's network namespace (call it inside
// the namespace it belongs in), with an MTU of mtu for the stack (the link's
// own MTU is the caller's to set), and turns on checksum and TSO4 offload.
// It fails, leaving nothing behind, if the kernel refuses any of it.
func OpenVnetTUN(name string, mtu int) (*VnetTUN, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("gvisor: open /dev/net/tun: %w", err)
	}
	fail := func(what string, err error) (*VnetTUN, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("gvisor: TUN %q: %s: %w", name, what, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fail("name", err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR | unix.IFF_TUN_EXCL)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fail("TUNSETIFF with IFF_VNET_HDR", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, vnetHdrLen); err != nil {
		return fail("TUNSETVNETHDRSZ", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4); err != nil {
		return fail("TUNSETOFFLOAD (checksum, TSO4)", err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun:"+name) // non-blocking: on Go's poller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gvisor: TUN %q: %w", name, err)
	}
	return &VnetTUN{f: f, rc: rc, name: ifr.Name(), mtu: mtu}, nil
}

// OpenVnetTUNOn opens a VnetTUN (named prefix and a unique suffix) in
// bed's namespace, with an MTU of mtu, and moves the kernel's address to
// it from the bed's own TUN: gVisor's best configuration on the bed.
func OpenVnetTUNOn(bed *testbed.Bed, prefix string, mtu int) (*VnetTUN, error) {
	var vt *VnetTUN
	if err := bed.Do(func() (err error) {
		vt, err = OpenVnetTUN(tun.UniqueName(prefix), mtu)
		return err
	}); err != nil {
		return nil, err
	}
	if err := bed.MoveKernelAddr(vt.Name(), mtu); err != nil {
		vt.Close()
		return nil, err
	}
	return vt, nil
}

// Name is the link's name.
func (t *VnetTUN) Name() string { return t.name }

// MTU is the MTU the stack is given.
func (t *VnetTUN) MTU() int { return t.mtu }

// Close closes the device (the kernel deletes the link).
func (t *VnetTUN) Close() error { return t.f.Close() }

// gsoLink is gVisor's link endpoint on a VnetTUN: host GSO out, the
// kernel's large segments in (see the comment at the top of this file).
type gsoLink struct {
	linkBase
	t         *VnetTUN
	closeOnce sync.Once
}

var (
	_ gstack.LinkEndpoint = (*gsoLink)(nil)
	_ gstack.GSOEndpoint  = (*gsoLink)(nil)
)

func newGSOLink(t *VnetTUN) *gsoLink {
	l := &gsoLink{t: t}
	l.done = make(chan struct{})
	l.read = l.reader
	return l
}

// MTU implements stack.LinkEndpoint.
func (l *gsoLink) MTU() uint32 { return uint32(l.t.mtu) }

// Capabilities implements stack.LinkEndpoint: inbound checksums are the
// kernel's (verified or left partial by it), so gVisor does not check them.
func (*gsoLink) Capabilities() gstack.LinkEndpointCapabilities {
	return gstack.CapabilityRXChecksumOffload
}

// GSOMaxSize implements stack.GSOEndpoint.
func (*gsoLink) GSOMaxSize() uint32 { return gsoMaxSize }

// SupportedGSO implements stack.GSOEndpoint: the host (the TUN's kernel
// side) segments.
func (*gsoLink) SupportedGSO() gstack.SupportedGSO { return gstack.HostGSOSupported }

// Close implements stack.LinkEndpoint: it closes the TUN, which ends the
// reader. It is idempotent.
func (l *gsoLink) Close() {
	l.closeOnce.Do(func() {
		close(l.done)
		l.t.Close()
	})
}

// vnetHeader is the virtio-net header for pkt, as fdbased's writePacket
// builds it for host GSO, with the checksum start counted from the IP
// header (a TUN has no Ethernet header).
func vnetHeader(pkt *gstack.PacketBuffer) [vnetHdrLen]byte {
	var h [vnetHdrLen]byte
	o := pkt.GSOOptions
	if o.Type == gstack.GSONone {
		return h
	}
	binary.LittleEndian.PutUint16(h[2:], uint16(pkt.HeaderSize()))
	if o.NeedsCsum {
		h[0] = vnetFNeedsCsum
		binary.LittleEndian.PutUint16(h[6:], o.L3HdrLen)
		binary.LittleEndian.PutUint16(h[8:], o.CsumOffset)
	}
	if o.Type == gstack.GSOTCPv4 && pkt.Data().Size() > int(o.MSS) {
		h[1] = vnetGSOTCPv4
		binary.LittleEndian.PutUint16(h[4:], o.MSS)
	}
	return h
}

// WritePackets implements stack.LinkWriter: one writev per packet, header
// first. A packet the kernel refuses is dropped (counted); only a closed
// device is reported.
func (l *gsoLink) WritePackets(pkts gstack.PacketBufferList) (int, tcpip.Error) {
	n := 0
	for _, pkt := range pkts.AsSlice() {
		h := vnetHeader(pkt)
		if h[1] == vnetGSOTCPv4 {
			l.gsoOut.Add(1)
		}
		iov := append([][]byte{h[:]}, pkt.AsSlices()...)
		var werr error
		err := l.t.rc.Write(func(fd uintptr) bool {
			_, werr = unix.Writev(int(fd), iov)
			return werr != unix.EAGAIN
		})
		if err == nil {
			err = werr
		}
		if closed := l.wrote(err); closed {
			return l.closedAfter(n)
		}
		n++
	}
	return n, nil
}

// reader delivers the TUN's packets, virtio-net header stripped, until the
// device is closed. Segments of any size are delivered whole; a GSO type
// other than TCPv4 (the only offload turned on) is dropped as not IPv4.
func (l *gsoLink) reader() {
	buf := make([]byte, vnetReadBufferLen)
	for {
		n, err := l.t.f.Read(buf)
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return
			}
			l.readErrors.Add(1)
			continue
		}
		p, ok := vnetPayload(buf[:n])
		if !ok {
			l.notIPv4.Add(1)
			continue
		}
		if len(p) > l.t.mtu {
			l.largeIn.Add(1)
		}
		l.deliver(p)
	}
}

// vnetPayload returns the IPv4 packet behind a virtio-net header, and false
// for what gVisor must not be given: a read shorter than the header and an
// IPv4 header, a GSO type other than none or TCPv4 (the only offload turned
// on), a packet that is not IPv4. The rest (checksum offsets, GSO sizes) is
// the kernel's own description of a packet it built, which gVisor does not
// need: it takes the segment whole and parses its headers itself.
func vnetPayload(b []byte) ([]byte, bool) {
	if len(b) < vnetHdrLen+header.IPv4MinimumSize {
		return nil, false
	}
	if gso := b[1] &^ vnetGSOECN; gso != vnetGSONone && gso != vnetGSOTCPv4 {
		return nil, false
	}
	p := b[vnetHdrLen:]
	if header.IPVersion(p) != header.IPv4Version {
		return nil, false
	}
	return p, true
}
