//go:build linux

package tun

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inFreshNamespace runs fn on a thread moved into a new, unnamed network
// namespace of its own (the devices fn opens live and die there), and
// moves the thread back.
func inFreshNamespace(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (CI=true: not skipping)")
		}
		t.Skip("needs root")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := vnetns.New() // unshares: this thread is in it now
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	defer func() {
		if err := vnetns.Set(orig); err != nil {
			panic("cannot move the thread back: " + err.Error()) // never let it serve other goroutines
		}
	}()
	fn()
}

func TestOpenOffload(t *testing.T) {
	inFreshNamespace(t, func() {
		dev, err := OpenOffload("twoff0", 1500)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		if o := dev.Offloads(); !o.GSO || !o.GRO || o.Err != nil {
			t.Fatalf("Offloads = %+v, want GSO and GRO", o)
		}
		if _, err := dev.ReadFrameNonblock(make([]byte, MaxFrame)); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("ReadFrameNonblock on a quiet device: %v", err)
		}
		// A plain read turns GRO off for good; GSO stays.
		if _, err := dev.ReadPacketNonblock(make([]byte, 1500)); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("ReadPacketNonblock on a quiet device: %v", err)
		}
		if o := dev.Offloads(); !o.GSO || o.GRO {
			t.Fatalf("Offloads after a plain read = %+v, want GSO only", o)
		}
		if _, err := dev.ReadFrameNonblock(make([]byte, MaxFrame)); !errors.Is(err, ErrNoOffload) {
			t.Fatalf("ReadFrameNonblock after a plain read: %v, want ErrNoOffload", err)
		}
		if err := dev.WriteFrame(make([]byte, MaxFrame+1)); !errors.Is(err, ErrPacketSize) {
			t.Fatalf("WriteFrame of %d bytes: %v, want ErrPacketSize", MaxFrame+1, err)
		}
	})
}

// TestOpenOffloadFallback: a kernel that refuses TUNSETOFFLOAD (here: flags
// it does not know) gives the plain device, which says why.
func TestOpenOffloadFallback(t *testing.T) {
	saved := offloadFlags
	offloadFlags = []int{1 << 20}
	defer func() { offloadFlags = saved }()
	inFreshNamespace(t, func() {
		dev, err := OpenOffload("twoff1", 1500)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		o := dev.Offloads()
		if o.GSO || o.GRO || !errors.Is(o.Err, errOffload) {
			t.Fatalf("Offloads = %+v, want none and why", o)
		}
		t.Logf("fell back: %v", o.Err)
		if dev.vnet {
			t.Fatal("the fallback device has virtio-net headers")
		}
		if err := dev.WriteFrame(make([]byte, 100)); !errors.Is(err, ErrNoOffload) {
			t.Fatalf("WriteFrame on the fallback: %v, want ErrNoOffload", err)
		}
		if _, err := dev.ReadFrame(make([]byte, MaxFrame)); !errors.Is(err, ErrNoOffload) {
			t.Fatalf("ReadFrame on the fallback: %v, want ErrNoOffload", err)
		}
	})
}

// TestWriteFrameVec: a frame written in pieces (one writev) reaches the
// kernel as the pieces put together: a UDP datagram whose header and
// payload are in four pieces arrives at a socket in the device's
// namespace, its payload exactly; pieces beyond MaxFramePieces, or too
// few bytes, are refused; after Close the write fails with net.ErrClosed.
func TestWriteFrameVec(t *testing.T) {
	inFreshNamespace(t, func() {
		dev, err := OpenOffload("twvec0", 1500)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		link, err := h.LinkByName("twvec0")
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr("198.18.0.1/30")
		if err := h.AddrAdd(link, addr); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: 9999, Addr: [4]byte{198, 18, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, 1000)
		for i := range payload {
			payload[i] = byte(i*11 + 3)
		}
		hdr := make([]byte, VnetHdrLen+28) // a zero virtio-net header, IPv4, UDP
		ip := hdr[VnetHdrLen:]
		ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
		binary.BigEndian.PutUint16(ip[2:], uint16(28+len(payload)))
		copy(ip[12:], []byte{198, 18, 0, 2, 198, 18, 0, 1})
		binary.BigEndian.PutUint16(ip[10:], ^ipv4HeaderSum(ip[:20]))
		binary.BigEndian.PutUint16(ip[20:], 5555)
		binary.BigEndian.PutUint16(ip[22:], 9999)
		binary.BigEndian.PutUint16(ip[24:], uint16(8+len(payload))) // checksum 0: none
		if err := dev.WriteFrameVec([][]byte{hdr, payload[:1], payload[1:600], payload[600:]}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2000)
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			t.Fatalf("the datagram did not arrive: %v", err)
		}
		if !bytes.Equal(buf[:n], payload) {
			t.Fatalf("received %d bytes, not the %d written in pieces", n, len(payload))
		}
		many := make([][]byte, MaxFramePieces+1)
		many[0] = hdr
		for i := 1; i < len(many); i++ {
			many[i] = payload[:1]
		}
		if err := dev.WriteFrameVec(many); !errors.Is(err, ErrPacketSize) {
			t.Fatalf("%d pieces: %v, want ErrPacketSize", len(many), err)
		}
		if err := dev.WriteFrameVec([][]byte{hdr[:VnetHdrLen]}); !errors.Is(err, ErrPacketSize) {
			t.Fatalf("a header alone: %v, want ErrPacketSize", err)
		}
		dev.Close()
		if err := dev.WriteFrameVec([][]byte{hdr, payload}); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("after Close: %v, want net.ErrClosed", err)
		}
	})
}

// ipv4HeaderSum is the RFC 1071 sum of an IPv4 header.
func ipv4HeaderSum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// TestFromFD: a duplicate of an open device's descriptor becomes a TUN of
// the same device, plain or with virtio-net headers as the original.
func TestFromFD(t *testing.T) {
	inFreshNamespace(t, func() {
		for _, tc := range []struct {
			name string
			open func(string, int) (*TUN, error)
			vnet bool
		}{{"twfd0", Open, false}, {"twfd1", OpenOffload, true}} {
			dev, err := tc.open(tc.name, 1500)
			if err != nil {
				t.Fatal(err)
			}
			fd, err := dev.ReadFD()
			if err != nil {
				t.Fatal(err)
			}
			dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromFD(dup, 1400)
			if err != nil {
				t.Fatalf("%s: FromFD: %v", tc.name, err)
			}
			if got.Name() != tc.name || got.MTU() != 1400 || got.vnet != tc.vnet || got.Offloads().GSO != tc.vnet {
				t.Errorf("%s: FromFD = %q MTU %d vnet %v offloads %+v", tc.name, got.Name(), got.MTU(), got.vnet, got.Offloads())
			}
			if _, err := got.ReadPacketNonblock(make([]byte, 2000)); !errors.Is(err, ErrWouldBlock) {
				t.Errorf("%s: a read of nothing: %v, want ErrWouldBlock", tc.name, err)
			}
			got.Close()
			dev.Close()
		}
		if _, err := FromFD(-1, 0); err == nil {
			t.Error("FromFD(-1) succeeded")
		}
	})
}
