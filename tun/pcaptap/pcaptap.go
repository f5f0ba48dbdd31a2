// Package pcaptap wraps a tun.Device and records every packet it carries,
// in both directions, as a standard pcap capture that tcpdump, Wireshark
// and gopacket's pcapgo read.
//
// # Format
//
// The capture is classic pcap (version 2.4, little-endian), byte for byte
// as github.com/google/gopacket/pcapgo's Writer writes it (written here:
// gopacket's layers package, which pcapgo imports, has 5 MB of pointerful
// global tables that the garbage collector would scan at every cycle of
// every program that links the tap), with link type LINKTYPE_RAW (101: each
// record is a bare IPv4 packet, as on the device) and nanosecond timestamps
// (magic 0xa1b23c4d). Timestamps are taken from Config.Now at the moment of
// the operation: just before the wrapped device's WritePacket for egress,
// just after its ReadPacket returns for ingress. Records are written in the
// order they reach the tap's lock, so two packets crossing in opposite
// directions at the same instant may appear with timestamps slightly out
// of order.
//
// LINKTYPE_RAW has no direction field: whether a packet went out or came in
// is inferred from its addresses (the stack's address as source means
// egress). pcapng could carry direction per packet (the EPB flags option)
// if that is ever needed.
//
// # Where the tap sits
//
// Egress packets are recorded only if the wrapped device accepted them
// (WritePacket returned nil); ingress packets are recorded as read, so a
// truncated read (io.ErrShortBuffer) records the bytes that were read. A
// tap records what crosses its own position in the chain, so with
// package impair:
//
//	stack ── tap ── impair ── device   // Wrap(impair.Wrap(dev)): the stack's view
//	stack ── impair ── tap ── device   // impair.Wrap(Wrap(dev)): the wire's view
//
// A tap on the stack's side of the impairment sees everything the stack
// sent, including the packets impair then dropped (impair returns nil for
// them), and only the ingress packets impair let through. A tap on the wire
// side (wrap the device with the tap first, then impair on top) shows what
// really crossed the link: no dropped egress packets, and every ingress
// packet, including those impair then dropped before the stack saw them.
// Both taps may be used at once; see the example.
//
// # Failures
//
// The capture never breaks the data path: a packet that cannot be recorded
// (the writer failed) is still passed on, and counted in Stats().WriteErrors;
// the first such error is kept and returned by Err. Records are buffered
// (bufio, 64 KiB); Flush and Close push them out. After the writer has
// failed once, nothing more is written to it (bufio's errors are sticky),
// so a capture ends at its first failure. A writer that blocks does block
// the packets behind it.
package pcaptap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/tcpwheel/tcpwheel/tun"
)

// DefaultSnapLen is the snap length used when Config.SnapLen is zero: every
// IPv4 packet whole.
const DefaultSnapLen = 65535

// MaxSnapLen is the largest Config.SnapLen accepted: libpcap's limit
// (MAXIMUM_SNAPLEN).
const MaxSnapLen = 262144

// ErrConfig is wrapped by Wrap and Create when given an invalid
// configuration.
var ErrConfig = errors.New("pcaptap: invalid configuration")

// Config configures a Tap.
type Config struct {
	// SnapLen is the most bytes of each packet recorded; a longer packet is
	// recorded truncated, with its real length in the record header. 0 means
	// DefaultSnapLen; otherwise it must be in [1, MaxSnapLen].
	SnapLen int

	// Now returns the timestamp of each record; nil means time.Now. Tests
	// inject a manual clock here. It is called without the tap's lock, from
	// the goroutines calling ReadPacket and WritePacket. (A zero time.Time
	// is replaced with time.Now, as pcapgo's Writer does.)
	Now func() time.Time
}

// Stats counts the tap's records.
type Stats struct {
	Packets     uint64 // records written to the capture
	Bytes       uint64 // packet bytes recorded (captured lengths, without pcap headers)
	WriteErrors uint64 // packets passed on but not recorded: the writer failed or the tap was closed
}

// Tap is a tun.Device that records the packets passing through it to a pcap
// capture and passes them on unchanged. It is a tun.Pollable as well, and
// forwards the wrapped device's: when that is not Pollable, ReadFD returns an
// error wrapping tun.ErrNotPollable (and a stack then reads through a
// goroutine). All methods are safe for concurrent use.
type Tap struct {
	dev     tun.Device
	now     func() time.Time
	snapLen int

	mu     sync.Mutex
	out    *errWriter    // guarded by mu; the caller's writer
	buf    *bufio.Writer // guarded by mu; writes to out
	hdr    [16]byte      // guarded by mu; a record's header (writePacket)
	closer io.Closer     // guarded by mu; the file Create opened, or nil
	closed bool          // guarded by mu
	err    error         // guarded by mu; the first write error
	stats  Stats         // guarded by mu

	fmu      sync.Mutex // guards fscratch: WriteFrame's packets
	fscratch []byte
}

var _ tun.Pollable = (*Tap)(nil)

// Wrap returns a Tap that records dev's packets to w. It writes the pcap
// file header at once (and flushes it, so a capture is valid from the
// start); an error writing it is returned. The Tap owns dev, not w: Close
// closes dev and flushes w but leaves w open. Configuration errors wrap
// ErrConfig.
func Wrap(dev tun.Device, w io.Writer, cfg Config) (*Tap, error) {
	if dev == nil || w == nil {
		return nil, fmt.Errorf("%w: nil device or writer", ErrConfig)
	}
	if cfg.SnapLen == 0 {
		cfg.SnapLen = DefaultSnapLen
	}
	if cfg.SnapLen < 1 || cfg.SnapLen > MaxSnapLen {
		return nil, fmt.Errorf("%w: snap length %d not in [1, %d]", ErrConfig, cfg.SnapLen, MaxSnapLen)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Tap{dev: dev, now: cfg.Now, snapLen: cfg.SnapLen, out: &errWriter{w: w}}
	t.buf = bufio.NewWriterSize(t.out, 64<<10)
	if _, err := t.buf.Write(fileHeader(cfg.SnapLen)); err != nil {
		return nil, fmt.Errorf("pcaptap: writing file header: %w", err)
	}
	if err := t.buf.Flush(); err != nil {
		return nil, fmt.Errorf("pcaptap: writing file header: %w", err)
	}
	return t, nil
}

// Create is Wrap writing to a new file at path (truncating an existing
// one). Close closes the file as well as dev. On error, dev is left open.
func Create(path string, dev tun.Device, cfg Config) (*Tap, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("pcaptap: %w", err)
	}
	t, err := Wrap(dev, f, cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	t.closer = f
	return t, nil
}

// record writes one packet to the capture, or counts why it could not.
func (t *Tap) record(ts time.Time, pkt []byte) {
	caplen := min(len(pkt), t.snapLen)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		t.stats.WriteErrors++
		return
	}
	if err := t.writePacket(ts, pkt[:caplen], len(pkt)); err != nil {
		t.stats.WriteErrors++
		t.setErr(err)
		return
	}
	t.stats.Packets++
	t.stats.Bytes += uint64(caplen)
}

// The pcap file header's magic for nanosecond timestamps, and LINKTYPE_RAW.
const (
	magicNanos  = 0xA1B23C4D
	linkTypeRaw = 101
)

// fileHeader is the capture's header: version 2.4, no time zone or
// accuracy, the snap length, LINKTYPE_RAW.
func fileHeader(snapLen int) []byte {
	var b [24]byte
	le := binary.LittleEndian
	le.PutUint32(b[0:], magicNanos)
	le.PutUint16(b[4:], 2)
	le.PutUint16(b[6:], 4)
	le.PutUint32(b[16:], uint32(snapLen))
	le.PutUint32(b[20:], linkTypeRaw)
	return b[:]
}

// writePacket writes a record of data, the first bytes of a packet of
// length n, taken at ts (time.Now for a zero ts, as pcapgo's WritePacket).
// Under mu.
func (t *Tap) writePacket(ts time.Time, data []byte, n int) error {
	if ts.IsZero() {
		ts = time.Now()
	}
	le := binary.LittleEndian
	le.PutUint32(t.hdr[0:], uint32(ts.Unix()))
	le.PutUint32(t.hdr[4:], uint32(ts.Nanosecond()))
	le.PutUint32(t.hdr[8:], uint32(len(data)))
	le.PutUint32(t.hdr[12:], uint32(n))
	if _, err := t.buf.Write(t.hdr[:]); err != nil {
		return fmt.Errorf("error writing packet header: %v", err)
	}
	_, err := t.buf.Write(data)
	return err
}

// WritePacket implements tun.Device: it passes pkt to the wrapped device
// and records it if the device accepted it.
func (t *Tap) WritePacket(pkt []byte) error {
	ts := t.now()
	if err := t.dev.WritePacket(pkt); err != nil {
		return err
	}
	t.record(ts, pkt)
	return nil
}

// ReadPacket implements tun.Device: it reads from the wrapped device and
// records what was read, if anything.
func (t *Tap) ReadPacket(buf []byte) (int, error) {
	n, err := t.dev.ReadPacket(buf)
	if n > 0 {
		t.record(t.now(), buf[:n])
	}
	return n, err
}

// ReadFD implements tun.Pollable: the wrapped device's descriptor, or an
// error wrapping tun.ErrNotPollable if it is not a tun.Pollable.
func (t *Tap) ReadFD() (int, error) {
	p, ok := t.dev.(tun.Pollable)
	if !ok {
		return -1, fmt.Errorf("pcaptap %s: %w", t.dev.Name(), tun.ErrNotPollable)
	}
	return p.ReadFD()
}

// ReadPacketNonblock implements tun.Pollable like ReadPacket: it reads from
// the wrapped device without waiting and records what was read, if anything.
func (t *Tap) ReadPacketNonblock(buf []byte) (int, error) {
	p, ok := t.dev.(tun.Pollable)
	if !ok {
		return 0, fmt.Errorf("pcaptap %s: read: %w", t.dev.Name(), tun.ErrNotPollable)
	}
	n, err := p.ReadPacketNonblock(buf)
	if n > 0 {
		t.record(t.now(), buf[:n])
	}
	return n, err
}

// MTU implements tun.Device: the wrapped device's MTU.
func (t *Tap) MTU() int { return t.dev.MTU() }

// Name implements tun.Device: the wrapped device's name.
func (t *Tap) Name() string { return t.dev.Name() }

// Flush writes buffered records to the underlying writer. A failure is
// also remembered by Err.
func (t *Tap) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.flushLocked()
}

func (t *Tap) flushLocked() error {
	if t.closed {
		return nil
	}
	if err := t.buf.Flush(); err != nil {
		t.setErr(err)
		return fmt.Errorf("pcaptap: flush: %w", err)
	}
	return nil
}

// setErr remembers the first write error. pcapgo does not wrap its
// writer's errors, so the writer's own error is preferred when there is one.
func (t *Tap) setErr(err error) {
	if t.err != nil {
		return
	}
	if t.out.err != nil {
		err = t.out.err
	}
	t.err = fmt.Errorf("pcaptap: writing capture: %w", err)
}

// errWriter remembers the first error of the writer it wraps.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// Err returns the first error writing the capture, or nil.
func (t *Tap) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Stats returns the tap's counters.
func (t *Tap) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Close implements tun.Device: it closes the wrapped device, flushes the
// capture and, if Create opened it, closes the file. Packets still passing
// through after that are not recorded. It returns the errors of the three
// steps joined (errors.Join). Calling Close more than once is harmless;
// later calls return nil.
func (t *Tap) Close() error {
	errDev := t.dev.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	errFlush := t.flushLocked()
	t.closed = true
	var errFile error
	if t.closer != nil {
		if err := t.closer.Close(); err != nil {
			errFile = fmt.Errorf("pcaptap: %w", err)
		}
	}
	return errors.Join(errDev, errFlush, errFile)
}

var _ tun.Offloader = (*Tap)(nil)

// Offloads implements tun.Offloader: the wrapped device's.
func (t *Tap) Offloads() tun.Offloads { return tun.WrappedOffloads(t.dev) }

// ReadFrame implements tun.Offloader like ReadPacket: it records the
// packets of the frames read one by one, as the kernel would segment them
// (tun.SplitFrame), checksums filled in.
func (t *Tap) ReadFrame(buf []byte) (int, error) {
	o, ok := t.dev.(tun.Offloader)
	if !ok {
		return 0, fmt.Errorf("pcaptap %s: read frame: %w", t.dev.Name(), tun.ErrNoOffload)
	}
	n, err := o.ReadFrame(buf)
	t.recordFrames(buf, n, err)
	return n, err
}

// ReadFrameNonblock implements tun.Offloader like ReadFrame.
func (t *Tap) ReadFrameNonblock(buf []byte) (int, error) {
	o, ok := t.dev.(tun.Offloader)
	if !ok {
		return 0, fmt.Errorf("pcaptap %s: read frame: %w", t.dev.Name(), tun.ErrNoOffload)
	}
	n, err := o.ReadFrameNonblock(buf)
	t.recordFrames(buf, n, err)
	return n, err
}

// recordFrames records the packets of the frames in buf[:n]; a frame that
// is not one (a bad header) is recorded as the bytes after its header.
func (t *Tap) recordFrames(buf []byte, n int, err error) {
	if err != nil || n <= 0 {
		return
	}
	ts := t.now()
	t.fmu.Lock()
	defer t.fmu.Unlock()
	if t.fscratch == nil {
		t.fscratch = make([]byte, tun.MaxMTU)
	}
	tun.EachFrame(buf, n, func(fr []byte) {
		if tun.SplitFrame(fr, t.fscratch, true, func(pkt []byte) error {
			t.record(ts, pkt)
			return nil
		}) != nil && len(fr) > tun.VnetHdrLen {
			t.record(ts, fr[tun.VnetHdrLen:])
		}
	})
}

// WriteFrame implements tun.Offloader: it passes the frame to the wrapped
// device whole and, if the device accepted it, records its packets one by
// one as the kernel segments it (tun.SplitFrame), checksums filled in, so
// that the capture reads like one of the wire.
func (t *Tap) WriteFrame(frame []byte) error {
	o, ok := t.dev.(tun.Offloader)
	if !ok {
		return fmt.Errorf("pcaptap %s: write frame: %w", t.dev.Name(), tun.ErrNoOffload)
	}
	ts := t.now()
	if err := o.WriteFrame(frame); err != nil {
		return err
	}
	t.fmu.Lock()
	defer t.fmu.Unlock()
	if t.fscratch == nil {
		t.fscratch = make([]byte, tun.MaxMTU)
	}
	return tun.SplitFrame(frame, t.fscratch, true, func(pkt []byte) error {
		t.record(ts, pkt)
		return nil
	})
}
