package tun

import (
	"errors"
)

// DefaultMTU is the MTU used when a configuration leaves it zero.
const DefaultMTU = 1500

// MinMTU and MaxMTU bound the MTU of a device: 68 is the smallest MTU an IPv4
// link may have (RFC 791), 65535 the largest IPv4 packet.
const (
	MinMTU = 68
	MaxMTU = 65535
)

// Device moves whole IPv4 packets (no link header, no packet-info prefix).
//
// Every implementation in this module allows all methods to be called
// concurrently with each other.
type Device interface {
	// ReadPacket blocks until one packet is available and copies it into buf,
	// returning its length. Returns an error wrapping net.ErrClosed after Close.
	//
	// buf should hold at least MTU() bytes. A packet longer than buf is
	// truncated to len(buf) and consumed, and the error wraps
	// io.ErrShortBuffer; an empty buf returns (0, io.ErrShortBuffer) at once
	// and consumes nothing.
	ReadPacket(buf []byte) (int, error)

	// WritePacket sends one whole packet. Safe for concurrent use with ReadPacket.
	//
	// The device does not retain pkt: the caller may reuse it as soon as
	// WritePacket returns. A packet that is empty or longer than MTU() is
	// rejected with an error wrapping ErrPacketSize. Like a real link, a
	// device may drop a packet silently (a full queue, a link that is down);
	// an error means the packet was certainly not sent. After Close the
	// error wraps net.ErrClosed.
	WritePacket(pkt []byte) error

	// MTU returns the largest packet, in bytes, the device carries.
	MTU() int

	// Name returns the name of the device (the interface name for a TUN).
	Name() string

	// Close releases the device and unblocks pending ReadPacket calls.
	// Calling Close more than once is harmless.
	Close() error
}

var (
	// ErrPacketSize is wrapped by WritePacket when a packet is empty or
	// longer than the device's MTU.
	ErrPacketSize = errors.New("tun: packet size out of range")

	// ErrInvalidConfig is wrapped by constructors given an invalid name,
	// MTU or address.
	ErrInvalidConfig = errors.New("tun: invalid configuration")

	// ErrLinkExists is wrapped by Open (and netns.Attach) when a network
	// interface with the requested name already exists.
	ErrLinkExists = errors.New("tun: link already exists")
)

// ErrWouldBlock is returned by Pollable.ReadPacketNonblock when no packet is
// waiting.
var ErrWouldBlock = errors.New("tun: no packet waiting")

// ErrNotPollable is returned by Pollable.ReadFD of a wrapper whose wrapped
// device cannot be polled.
var ErrNotPollable = errors.New("tun: device cannot be polled")

// Pollable is an optional interface of a Device whose packets can be read
// without blocking, when a file descriptor polls readable: an event loop
// watches the descriptor (level-triggered, as with epoll) and reads the
// waiting packets itself, without a reader goroutine.
type Pollable interface {
	Device

	// ReadFD returns the descriptor that polls readable while a packet
	// waits. It stays the device's: it is valid until Close, and the caller
	// must stop watching it before calling Close. A wrapper whose wrapped
	// device is not Pollable returns an error wrapping ErrNotPollable.
	ReadFD() (int, error)

	// ReadPacketNonblock is ReadPacket without the wait: it returns an error
	// wrapping ErrWouldBlock at once when no packet is waiting.
	ReadPacketNonblock(buf []byte) (int, error)
}

// ErrNoOffload is wrapped by the frame methods of an Offloader that does not
// offer what was asked (Offloads says what it offers).
var ErrNoOffload = errors.New("tun: offload not enabled")

// Offloads says what an Offloader's frames may carry.
type Offloads struct {
	// GSO: WriteFrame takes a TCP/IPv4 segment of up to 64 KiB with a
	// virtio-net header (GSOTCPv4, gso_size the MSS) and a partial
	// checksum (VnetFlagNeedsCsum), which the kernel segments and
	// checksums. Without it, WriteFrame fails with ErrNoOffload.
	GSO bool
	// TSO6: the kernel took TUN_F_TSO6 too, and so TCP/IPv6 as well: with
	// GSO, WriteFrame also takes TCP/IPv6 segments of up to 64 KiB
	// (GSOTCPv6, no extension headers), and with GRO, ReadFrame may return
	// them. Without it, GSO and GRO are TCP/IPv4's only.
	TSO6 bool
	// GRO: ReadFrame returns frames, whose packets may be such segments
	// (the kernel's TSO, gso_size its MSS) and may carry partial or
	// verified checksums. Without it, read packets with ReadPacket.
	GRO bool
	// Err, when the device has neither, says why: the kernel refused
	// IFF_VNET_HDR or TUNSETOFFLOAD (the device fell back to plain
	// packets), or the device was opened without offloads.
	Err error
}

// Offloader is an optional interface of a Device that moves frames: a
// virtio-net header (VnetHdr, VnetHdrLen bytes) followed by an IPv4 packet
// that may be larger than the MTU (up to MaxFrame in all). A TUN opened with
// OpenOffload is one; the wrappers of this module (impair, pcaptap) are too,
// over an Offloader: they take frames apart (SplitFrame, FrameFilter) to do
// their work per packet, and offer what the device they wrap offers. Plain
// ReadPacket and WritePacket work on an Offloader as on any Device.
type Offloader interface {
	Device
	// Offloads reports what the frame methods offer, now.
	Offloads() Offloads
	// ReadFrame reads one frame into buf (which should hold MaxFrame
	// bytes), blocking, and returns its length: the header included. A
	// wrapper may return several frames back to back (the runs of packets
	// its work left of one frame: FrameFilter), each packet as long as its
	// IP header says (NextFrame, EachFrame split them).
	ReadFrame(buf []byte) (int, error)
	// ReadFrameNonblock is ReadFrame that returns an error wrapping
	// ErrWouldBlock at once when nothing waits (see Pollable).
	ReadFrameNonblock(buf []byte) (int, error)
	// WriteFrame writes one frame, header included (at most MaxFrame
	// bytes). The device does not retain it.
	WriteFrame(frame []byte) error
}

// MaxFramePieces bounds the pieces of a FrameVecWriter's frame: a TUN
// writes them with one writev, whose iovec array it keeps.
const MaxFramePieces = 64

// FrameVecWriter is an optional interface of an Offloader that writes a
// frame given as pieces (a writev): the header and the segments' headers
// in one buffer, the payload where it already is, so that it is not
// copied into one buffer first. A TUN opened with OpenOffload is one; the
// wrappers, which take frames apart, are not.
type FrameVecWriter interface {
	Offloader
	// WriteFrameVec writes one frame, the concatenation of pieces (at most
	// MaxFramePieces, non-empty, MaxFrame bytes in all, the header
	// included), as WriteFrame writes it whole. The device does not retain
	// the pieces.
	WriteFrameVec(pieces [][]byte) error
}
