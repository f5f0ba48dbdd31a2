package tuntest

import (
	"fmt"
	"io"
	"sync"

	"github.com/tcpwheel/tcpwheel/tun"
)

// Frames is a tun.Offloader for testing wrappers' frame paths: it keeps
// what is written to it, frames (WriteFrame) and packets (WritePacket)
// apart, and hands out the frames queued with Queue to ReadFrame and
// ReadFrameNonblock (tun.ErrWouldBlock when none is queued; ReadFrame does
// not wait). It offers GSO and GRO, TCP/IPv6 too (TSO6); its MTU is 1500.
type Frames struct {
	mu      sync.Mutex
	queue   [][]byte
	written [][]byte
	packets [][]byte
}

var _ tun.Offloader = (*Frames)(nil)

// Queue queues a frame for ReadFrame.
func (f *Frames) Queue(frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, append([]byte(nil), frame...))
}

// Written returns the frames and the packets written so far.
func (f *Frames) Written() (frames, packets [][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written, f.packets
}

// Offloads implements tun.Offloader.
func (f *Frames) Offloads() tun.Offloads { return tun.Offloads{GSO: true, GRO: true, TSO6: true} }

// ReadFrame implements tun.Offloader, without waiting.
func (f *Frames) ReadFrame(buf []byte) (int, error) { return f.ReadFrameNonblock(buf) }

// ReadFrameNonblock implements tun.Offloader.
func (f *Frames) ReadFrameNonblock(buf []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		return 0, tun.ErrWouldBlock
	}
	fr := f.queue[0]
	f.queue = f.queue[1:]
	if len(fr) > len(buf) {
		return copy(buf, fr), fmt.Errorf("tuntest: frame: %w", io.ErrShortBuffer)
	}
	return copy(buf, fr), nil
}

// WriteFrame implements tun.Offloader.
func (f *Frames) WriteFrame(frame []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written = append(f.written, append([]byte(nil), frame...))
	return nil
}

// ReadPacket implements tun.Device: nothing to read.
func (f *Frames) ReadPacket([]byte) (int, error) { return 0, tun.ErrWouldBlock }

// WritePacket implements tun.Device.
func (f *Frames) WritePacket(pkt []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.packets = append(f.packets, append([]byte(nil), pkt...))
	return nil
}

// MTU implements tun.Device.
func (f *Frames) MTU() int { return tun.DefaultMTU }

// Name implements tun.Device.
func (f *Frames) Name() string { return "frames" }

// Close implements tun.Device.
func (f *Frames) Close() error { return nil }

// GSOFrame returns the frame in which the kernel's TSO would hand over the
// TCP/IPv4 packet pkt: a GSO header (GSOTCPv4, gso_size mss, NEEDS_CSUM at
// the TCP checksum) and a copy of pkt with the pseudo-header's sum in its
// checksum field.
func GSOFrame(pkt []byte, mss int) []byte {
	ihl := int(pkt[0]&0xf) * 4
	thl := int(pkt[ihl+12]>>4) * 4
	f := make([]byte, tun.VnetHdrLen+len(pkt))
	tun.VnetHdr{Flags: tun.VnetFlagNeedsCsum, GSOType: tun.GSOTCPv4, HdrLen: uint16(ihl + thl), GSOSize: uint16(mss), CsumStart: uint16(ihl), CsumOffset: 16}.Put(f)
	p := f[tun.VnetHdrLen:]
	copy(p, pkt)
	sum := tun.PseudoSum4([4]byte(p[12:16]), [4]byte(p[16:20]), len(p)-ihl)
	p[ihl+16], p[ihl+17] = byte(sum>>8), byte(sum)
	return f
}

// Segments returns the packets the kernel would make of frame
// (tun.SplitFrame, checksums filled in), or panics on a bad frame.
func Segments(frame []byte) [][]byte {
	var out [][]byte
	if err := tun.SplitFrame(frame, make([]byte, tun.MaxMTU), true, func(p []byte) error {
		out = append(out, append([]byte(nil), p...))
		return nil
	}); err != nil {
		panic(err)
	}
	return out
}
