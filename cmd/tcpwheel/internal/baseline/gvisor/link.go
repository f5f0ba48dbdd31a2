package gvisor

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tcpwheel/tcpwheel/tun"
)

// link is a gVisor stack.LinkEndpoint on a tun.Device: a raw IP link (no link
// header, no link address, no ARP). Outbound packets are flattened and written
// to the device on the goroutine that sends them, with no queue in between (so
// that a full queue never drops a packet that tcpwheel's stack would have sent,
// and no goroutine hop delays it); a reader goroutine delivers inbound packets.
type link struct {
	linkBase
	dev tun.Device
	mtu uint32 // immutable

	bufs sync.Pool // *[]byte of mtu bytes, for flattening outbound packets

	closeOnce sync.Once
}

// linkBase is what gVisor's link endpoints of this package share: the
// dispatcher, the reader goroutine (started on the first Attach), and the
// methods of a raw IP link (no link header, no link address, no ARP).
type linkBase struct {
	mu         sync.RWMutex
	dispatcher gstack.NetworkDispatcher // guarded by mu

	read      func() // the reader's loop, run on its goroutine; set by the link
	startOnce sync.Once
	done      chan struct{} // closed by Close
	readerWG  sync.WaitGroup

	// Counters: outbound packets the device refused, inbound read errors,
	// inbound packets that were not IPv4, packets too big for a buffer.
	writeErrors, readErrors, notIPv4, tooBig atomic.Uint64
	// gsoLink's: segments written for the kernel to split (GSO_TCPV4), and
	// segments read that were larger than the MTU (the kernel's TSO).
	gsoOut, largeIn atomic.Uint64
}

// base returns the shared part (Stack's Close and Stats use it).
func (l *linkBase) base() *linkBase { return l }

var _ gstack.LinkEndpoint = (*link)(nil)

func newLink(dev tun.Device) *link {
	l := &link{dev: dev, mtu: uint32(dev.MTU())}
	l.done = make(chan struct{})
	l.read = l.reader
	l.bufs.New = func() any { b := make([]byte, l.mtu); return &b }
	return l
}

// MTU implements stack.LinkEndpoint: the device's MTU.
func (l *link) MTU() uint32 { return l.mtu }

// SetMTU implements stack.LinkEndpoint; the device's MTU is fixed, so it does
// nothing.
func (*linkBase) SetMTU(uint32) {}

// MaxHeaderLength implements stack.LinkEndpoint: there is no link header.
func (*linkBase) MaxHeaderLength() uint16 { return 0 }

// LinkAddress implements stack.LinkEndpoint: there is no link address.
func (*linkBase) LinkAddress() tcpip.LinkAddress { return "" }

// SetLinkAddress implements stack.LinkEndpoint.
func (*linkBase) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities implements stack.LinkEndpoint: none; gVisor computes and checks
// every checksum, as tcpwheel's stack does.
func (*link) Capabilities() gstack.LinkEndpointCapabilities { return gstack.CapabilityNone }

// Attach implements stack.LinkEndpoint: it starts the reader on the first
// attach. A nil dispatcher detaches: inbound packets are then discarded.
func (l *linkBase) Attach(d gstack.NetworkDispatcher) {
	l.mu.Lock()
	l.dispatcher = d
	l.mu.Unlock()
	if d != nil {
		l.startOnce.Do(func() {
			l.readerWG.Add(1)
			go func() {
				defer l.readerWG.Done()
				l.read()
			}()
		})
	}
}

// IsAttached implements stack.LinkEndpoint.
func (l *linkBase) IsAttached() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.dispatcher != nil
}

// Wait implements stack.LinkEndpoint: it waits for the reader to end (after
// Close).
func (l *linkBase) Wait() { l.readerWG.Wait() }

// ARPHardwareType implements stack.LinkEndpoint.
func (*linkBase) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }

// AddHeader implements stack.LinkEndpoint: there is no header to add.
func (*linkBase) AddHeader(*gstack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint: there is no header to parse.
func (*linkBase) ParseHeader(*gstack.PacketBuffer) bool { return true }

// SetOnCloseAction implements stack.LinkEndpoint.
func (*linkBase) SetOnCloseAction(func()) {}

// Close implements stack.LinkEndpoint: it closes the device, which ends the
// reader. It is idempotent.
func (l *link) Close() {
	l.closeOnce.Do(func() {
		close(l.done)
		l.dev.Close()
	})
}

// WritePackets implements stack.LinkWriter: each packet, whole IPv4 header
// included, is written to the device in order. A packet the device refuses is
// dropped, as a lossy link would; only a closed device is reported.
func (l *link) WritePackets(pkts gstack.PacketBufferList) (int, tcpip.Error) {
	bp := l.bufs.Get().(*[]byte)
	defer l.bufs.Put(bp)
	n := 0
	for _, pkt := range pkts.AsSlice() {
		b := (*bp)[:0]
		if pkt.Size() > len(*bp) {
			l.tooBig.Add(1)
			n++
			continue
		}
		for _, s := range pkt.AsSlices() {
			b = append(b, s...)
		}
		if closed := l.wrote(l.dev.WritePacket(b)); closed {
			return l.closedAfter(n)
		}
		n++
	}
	return n, nil
}

// wrote counts a write's error, and reports whether the device is closed.
func (l *linkBase) wrote(err error) (closed bool) {
	switch {
	case err == nil:
		return false
	case errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrClosed):
		return true
	}
	l.writeErrors.Add(1)
	return false
}

// closedAfter is WritePackets' result when the device turned out closed
// after n packets: only a closed device is reported, and only if nothing
// was written.
func (*linkBase) closedAfter(n int) (int, tcpip.Error) {
	if n == 0 {
		return 0, &tcpip.ErrClosedForSend{}
	}
	return n, nil
}

// reader delivers the device's IPv4 packets to the stack until the device is
// closed.
func (l *link) reader() {
	buf := make([]byte, l.mtu)
	for {
		n, err := l.dev.ReadPacket(buf)
		if err != nil {
			if errors.Is(err, io.ErrShortBuffer) {
				l.tooBig.Add(1)
				continue
			}
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.readErrors.Add(1)
			continue
		}
		if v := header.IPVersion(buf[:n]); !(v == header.IPv4Version && n >= header.IPv4MinimumSize ||
			v == header.IPv6Version && n >= header.IPv6MinimumSize) {
			l.notIPv4.Add(1)
			continue
		}
		l.deliver(buf[:n])
	}
}

// deliver hands one inbound IPv4 or IPv6 packet (copied) to the stack, if
// attached (an IPv6 one is dropped by gVisor unless Config.Addr6 is set).
func (l *linkBase) deliver(p []byte) {
	l.mu.RLock()
	d := l.dispatcher
	l.mu.RUnlock()
	if d == nil {
		return
	}
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(p)})
	proto := header.IPv4ProtocolNumber
	if header.IPVersion(p) == header.IPv6Version {
		proto = header.IPv6ProtocolNumber
	}
	d.DeliverNetworkPacket(proto, pkt)
	pkt.DecRef()
}
