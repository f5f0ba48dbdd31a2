package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sync/atomic"
	"time"
)

// Format is the version of the recording format this package writes and
// reads.
const Format = 1

// PEN is the Private Enterprise Number in the recorder's custom blocks:
// 32473, which RFC 5612 reserves for documentation and examples. Readers
// skip custom blocks of other PENs, and other tools skip ours.
const PEN = 32473

// Block types and option codes of pcapng (draft-ietf-opsawg-pcapng).
const (
	blockSHB    = 0x0A0D0D0A
	blockIDB    = 0x00000001
	blockSPB    = 0x00000003
	blockEPB    = 0x00000006
	blockCB     = 0x00000BAD // a custom block that may be copied
	blockCBNo   = 0x40000BAD // one that may not
	byteOrderLE = 0x1A2B3C4D
	optEnd      = 0
	optEPBFlags = 2
	// the section header's and the interface's options
	optSHBUserAppl   = 4
	optIfName        = 2
	optIfDescription = 3
	optIfTSResol     = 9
	linkTypeRaw      = 101 // LINKTYPE_RAW: each packet an IPv4 or IPv6 header first
	// epb_flags' direction bits
	dirInbound  = 1
	dirOutbound = 2
)

// The section's application and its interface, in the section header and
// the interface description.
const (
	appName       = "tcpwheel"
	ifName        = "tcpwheel"
	ifDescription = "tcpwheel flight recording: packets as the stack handled and sent them"
)

// Custom block payload types, after the PEN.
const (
	cbHeader = 'H' // the Header, as JSON
	cbEvents = 'E' // events (eventsVersion, then events)
)

// Header is what a replay needs to rebuild the stack: its configuration,
// and where its clock stood. It is the recording's first custom block, in
// JSON.
type Header struct {
	Recorder string     `json:"recorder"` // "tcpwheel"
	Format   int        `json:"format"`
	Addr     netip.Addr `json:"addr"`
	Addr6    netip.Addr `json:"addr6,omitzero"` // the stack's IPv6 address, if it had one
	// MoreAddrs are the stack's further addresses (stack.Config.MoreAddrs).
	MoreAddrs []netip.Addr `json:"more_addrs,omitempty"`
	Prefix    netip.Prefix `json:"prefix,omitzero"`
	MTU       int          `json:"mtu"`
	Tick      Duration     `json:"tick"`
	TTL       uint8        `json:"ttl"`
	Backlog   int          `json:"backlog"`
	// Origin is the wheel's origin on the stack's clock: its Now when the
	// stack started. Wall is the wall clock then; packets' timestamps are
	// Wall plus their T less Origin.
	Origin Duration  `json:"origin"`
	Wall   time.Time `json:"wall"`
	TCP    TCP       `json:"tcp"`
	// Payload: the packets are recorded whole. Without it, a TCP or UDP
	// packet is recorded up to the end of its TCP or UDP header (its
	// payload is not: the stack's behaviour does not depend on the bytes,
	// only on their count and checksum, which the recorder checked), and
	// the Enhanced Packet Block gives its whole length.
	Payload bool `json:"payload,omitempty"`
	// TSOffsets: the recording has a TSOffset event wherever TCP asked
	// for a connection's timestamp offset (tcp.Config.TSOffset; recordings
	// from 2026-11-24 on). Without it a connection's offset was its ISS
	// (tcp.TSOffsetISS), which a replay uses.
	TSOffsets bool `json:"ts_offsets,omitempty"`
	// OOOAcksHeld: the recording's stack held the ACKs of out-of-order
	// segments to the end of their batch (tcp.Config.OutOfOrderAcksAtOnce
	// unset; recordings from 2026-11-24 on). Without it they went at once,
	// which a replay then does.
	OOOAcksHeld bool `json:"ooo_acks_held,omitempty"`
	// HalfCwndChunks: the recording's stack sent new data in chunks of
	// at most half cwnd (tcp.Config.DisableHalfCwndChunks unset;
	// recordings from 2026-11-24 on). Without it a chunk was as large as
	// the windows allowed, which a replay then does.
	HalfCwndChunks bool `json:"half_cwnd_chunks,omitempty"`
}

// RecorderName is Header.Recorder for recordings of this stack.
const RecorderName = "tcpwheel"

// TCP is tcp.Config without its functions, every field as set (defaults
// filled in by the stack), under the same names: the stack copies them by
// name. Fields added after the first recordings are omitted when zero, so
// older recordings read as they were written.
type TCP struct {
	MSS                   int      `json:"mss"`
	MSS6                  int      `json:"mss6,omitempty"`
	SendBuffer            int      `json:"send_buffer"`
	SendBufferMax         int      `json:"send_buffer_max,omitempty"`
	RecvBuffer            int      `json:"recv_buffer"`
	InitialRTO            Duration `json:"initial_rto"`
	MinRTO                Duration `json:"min_rto"`
	MaxRTO                Duration `json:"max_rto"`
	SYNRetries            int      `json:"syn_retries"`
	Retries2              int      `json:"retries2"`
	UserTimeout           Duration `json:"user_timeout"`
	KeepAlive             bool     `json:"keepalive"`
	KeepIdle              Duration `json:"keep_idle"`
	KeepInterval          Duration `json:"keep_interval"`
	KeepCount             int      `json:"keep_count"`
	DelayedACK            Duration `json:"delayed_ack"`
	QuickAcks             int      `json:"quick_acks,omitempty"`
	TimeWait              Duration `json:"time_wait"`
	FinWait2              Duration `json:"fin_wait2"`
	InitialCwnd           int      `json:"initial_cwnd"`
	CUBIC                 bool     `json:"cubic,omitempty"`
	SlowStartAfterIdle    bool     `json:"slow_start_after_idle,omitempty"`
	Nagle                 bool     `json:"nagle,omitempty"`
	DisableRACKTLP        bool     `json:"disable_rack_tlp"`
	DisableRecoveryProbe  bool     `json:"disable_recovery_probe"`
	TLPMaxAckDelay        Duration `json:"tlp_max_ack_delay"`
	TLPSlack              Duration `json:"tlp_slack"`
	FINJoinsData          bool     `json:"fin_joins_data,omitempty"`
	GSOMax                int      `json:"gso_max,omitempty"`
	GSOAcrossWrap         bool     `json:"gso_across_wrap,omitempty"`
	DisableHalfCwndChunks bool     `json:"disable_half_cwnd_chunks,omitempty"`
	DisableTimestamps     bool     `json:"disable_timestamps"`
	DisableSACK           bool     `json:"disable_sack"`
	DisableWindowScale    bool     `json:"disable_window_scale"`
	DisableAckCoalescing  bool     `json:"disable_ack_coalescing,omitempty"`
	OutOfOrderAcksAtOnce  bool     `json:"out_of_order_acks_at_once,omitempty"`
	TraceTimers           bool     `json:"trace_timers,omitempty"`
	LinuxRTO              bool     `json:"linux_rto,omitempty"`
	PushPolicy            uint8    `json:"push_policy,omitempty"`
	TSOMinSegs            int      `json:"tso_min_segs,omitempty"`
}

// Duration is a time.Duration written as "200ms" in JSON.
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Stats counts what a Writer wrote.
type Stats struct {
	Packets uint64 // Enhanced Packet Blocks
	Events  uint64 // events in custom blocks
	Blocks  uint64 // custom blocks
	Bytes   uint64 // bytes of the file, section header included
	Errors  uint64 // records not written: the writer had failed
}

// Writer writes a recording: a pcapng section with one interface (LINKTYPE_RAW,
// nanosecond timestamps), an Enhanced Packet Block per packet with its
// direction in epb_flags, and the other events in custom blocks between them,
// in the order the loop ran them. Every block is written here (writeSection:
// the section header and the interface, as gopacket's pcapgo.NgWriter writes
// them), not with gopacket: its layers package, which pcapgo imports, has
// 5 MB of global tables with pointers that the garbage collector would scan
// at every cycle of every program that links the stack.
//
// The blocks are encoded into a buffer of bufSize bytes; a full buffer is
// handed to a goroutine that writes it to the underlying writer, one buffer
// after another in order, while the caller fills the next: the caller (the
// stack's loop) never waits for a write unless maxInFlight buffers are
// still being written. Flush writes out what is buffered and waits for it.
//
// A Writer is not safe for concurrent use: the stack calls it on its loop
// only. After the underlying writer fails, nothing more is written (the
// recording ends at the last buffer written whole, or within the one that
// failed) and Err returns the error; records encoded before the caller
// learnt of it are counted in Stats as written, later ones as Errors.
type Writer struct {
	out     io.Writer
	buf     []byte // the buffer being filled
	hdr     Header
	pending []byte // events not yet written: the payload of the next custom block
	npend   int
	stats   Stats
	err     error
	scratch [32]byte

	// The writing goroutines: each writes one buffer after the one before
	// it (last: closed once the latest buffer handed off is written); slots
	// bounds the buffers handed off and not yet written; spare holds
	// written buffers for reuse; werr is the first write error.
	last  chan struct{}
	slots chan struct{}
	spare chan []byte
	werr  atomic.Pointer[error]
}

// bufSize is the Writer's buffer: a write to the underlying writer per this
// many bytes.
const bufSize = 1 << 20

// maxInFlight bounds the buffers handed off and not yet written: beyond it,
// the caller waits for the writes (a writer slower than the loop slows the
// loop down rather than filling memory).
const maxInFlight = 2

// NewWriter writes the section header, the interface and h to w, and returns
// a Writer for the events. h.Recorder and h.Format are set here.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Recorder, h.Format = RecorderName, Format
	rw := &Writer{out: w, buf: make([]byte, 0, bufSize), hdr: h,
		slots: make(chan struct{}, maxInFlight), spare: make(chan []byte, maxInFlight)}
	rw.writeSection()
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("record: header: %w", err)
	}
	rw.writeCB(append([]byte{cbHeader}, js...))
	return rw, nil
}

// writeSection writes the section header block (option shb_userappl
// "tcpwheel") and the interface description block (LINKTYPE_RAW, no snap
// length; if_name, if_description, if_tsresol 9: nanoseconds), byte for
// byte as pcapgo.NewNgWriterInterface writes them (TestWriteSectionAsPcapgo).
func (w *Writer) writeSection() {
	shb := appendOptions(nil, ngOpt{optSHBUserAppl, appName})
	w.writeBlock(blockSHB, shbBody(), shb)
	var idb [8]byte
	binary.LittleEndian.PutUint16(idb[0:], linkTypeRaw) // then reserved, snap length: 0
	opts := appendOptions(nil, ngOpt{optIfName, ifName}, ngOpt{optIfDescription, ifDescription}, ngOpt{optIfTSResol, "\x09"})
	w.writeBlock(blockIDB, idb[:], opts)
}

// shbBody is a section header block's fixed part: the byte-order magic,
// version 1.0, the section's length unspecified (-1).
func shbBody() []byte {
	var b [16]byte
	binary.LittleEndian.PutUint32(b[0:], byteOrderLE)
	binary.LittleEndian.PutUint16(b[4:], 1) // major
	binary.LittleEndian.PutUint64(b[8:], math.MaxUint64)
	return b[:]
}

// writeBlock writes a block of type typ: its fixed part, its options, and
// the lengths around them.
func (w *Writer) writeBlock(typ uint32, fixed, opts []byte) {
	total := 8 + len(fixed) + len(opts) + 4
	var b [8]byte
	binary.LittleEndian.PutUint32(b[0:], typ)
	binary.LittleEndian.PutUint32(b[4:], uint32(total))
	w.write(b[:])
	w.write(fixed)
	w.write(opts)
	w.write(b[4:8])
}

// ngOpt is a pcapng option: its code and its value's bytes.
type ngOpt struct {
	code uint16
	val  string
}

// appendOptions appends opts to b, each padded to 4 bytes, and the end of
// options.
func appendOptions(b []byte, opts ...ngOpt) []byte {
	for _, o := range opts {
		b = binary.LittleEndian.AppendUint16(b, o.code)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(o.val)))
		b = append(b, o.val...)
		b = append(b, make([]byte, (4-len(o.val)&3)&3)...)
	}
	return binary.LittleEndian.AppendUint32(b, optEnd)
}

// Header returns the header written.
func (w *Writer) Header() Header { return w.hdr }

// Event records a non-packet event. It is buffered until the next packet,
// Flush or Close.
func (w *Writer) Event(e *Event) {
	if layout[e.Kind%numKinds] == 0 && e.Kind != Batch || e.Kind >= numKinds {
		return
	}
	if w.npend == 0 {
		w.pending = append(w.pending[:0], cbEvents, eventsVersion)
	}
	w.pending = appendEvent(w.pending, e)
	w.npend++
	w.stats.Events++
}

// Packet records a packet the stack handled (in) or sent, at t on the stack's
// clock.
func (w *Writer) Packet(in bool, t time.Duration, pkt []byte) { w.PacketCap(in, t, pkt, len(pkt)) }

// PacketCap records the first caplen bytes of pkt, with its whole length, as
// a snap length does (caplen at most len(pkt)): a recording without payloads
// (Header.Payload false) keeps each TCP and UDP packet's headers only, as
// tcpdump -s does.
func (w *Writer) PacketCap(in bool, t time.Duration, pkt []byte, caplen int) {
	w.flushEvents()
	if w.failed() {
		w.stats.Errors++
		return
	}
	orig := len(pkt)
	pkt = pkt[:min(max(caplen, 0), orig)]
	n := len(pkt)
	pad := (4 - n&3) & 3
	total := 28 + n + pad + 12 + 4 // header, data, epb_flags + end of options, trailing length
	ts := uint64(w.hdr.Wall.UnixNano() + int64(t-time.Duration(w.hdr.Origin)))
	b := w.scratch[:28]
	le := binary.LittleEndian
	le.PutUint32(b[0:], blockEPB)
	le.PutUint32(b[4:], uint32(total))
	le.PutUint32(b[8:], 0) // interface 0
	le.PutUint32(b[12:], uint32(ts>>32))
	le.PutUint32(b[16:], uint32(ts))
	le.PutUint32(b[20:], uint32(n))
	le.PutUint32(b[24:], uint32(orig))
	w.write(b)
	w.write(pkt)
	tail := w.scratch[:3+12+4] // the header is in the buffer: scratch is free
	clear(tail[:3])
	t2 := tail[3-pad:]
	o := t2[pad:]
	le.PutUint16(o[0:], optEPBFlags)
	le.PutUint16(o[2:], 4)
	dir := uint32(dirOutbound)
	if in {
		dir = dirInbound
	}
	le.PutUint32(o[4:], dir)
	le.PutUint32(o[8:], optEnd) // code 0, length 0
	le.PutUint32(o[12:], uint32(total))
	w.write(t2)
	if !w.failed() {
		w.stats.Packets++
	}
}

// flushEvents writes the pending events as one custom block.
func (w *Writer) flushEvents() {
	if w.npend == 0 {
		return
	}
	w.writeCB(w.pending)
	w.npend = 0
	w.pending = w.pending[:0]
}

// writeCB writes a custom block with our PEN and payload p.
func (w *Writer) writeCB(p []byte) {
	if w.failed() {
		w.stats.Errors++
		return
	}
	pad := (4 - len(p)&3) & 3
	total := 12 + len(p) + pad + 4 // type, length, PEN; payload; trailing length
	le := binary.LittleEndian
	b := w.scratch[:12]
	le.PutUint32(b[0:], blockCB)
	le.PutUint32(b[4:], uint32(total))
	le.PutUint32(b[8:], PEN)
	w.write(b)
	w.write(p)
	var tail [3 + 4]byte
	le.PutUint32(tail[3:], uint32(total))
	w.write(tail[3-pad:])
	if !w.failed() {
		w.stats.Blocks++
	}
}

// write appends b to the buffer, and hands the buffer off when it is full.
func (w *Writer) write(b []byte) {
	if w.failed() {
		return
	}
	w.buf = append(w.buf, b...)
	w.stats.Bytes += uint64(len(b))
	if len(w.buf) >= bufSize {
		w.handOff()
	}
}

// failed reports whether the underlying writer has failed, taking its
// error as the Writer's.
func (w *Writer) failed() bool {
	if w.err != nil {
		return true
	}
	if e := w.werr.Load(); e != nil {
		w.err = fmt.Errorf("record: %w", *e)
		return true
	}
	return false
}

// handOff hands the buffer to a goroutine that writes it once the buffer
// before it is written, and takes a fresh one. It waits only while
// maxInFlight buffers are being written.
func (w *Writer) handOff() {
	if len(w.buf) == 0 {
		return
	}
	w.slots <- struct{}{}
	b, prev, done := w.buf, w.last, make(chan struct{})
	go func() {
		if prev != nil {
			<-prev
		}
		if w.werr.Load() == nil {
			if _, err := w.out.Write(b); err != nil {
				w.werr.Store(&err)
			}
		}
		select {
		case w.spare <- b[:0]:
		default:
		}
		<-w.slots
		close(done)
	}()
	w.last = done
	select {
	case w.buf = <-w.spare:
	default:
		w.buf = make([]byte, 0, bufSize)
	}
}

// Flush writes the pending events and the buffer out, and waits until the
// underlying writer has taken everything handed to it.
func (w *Writer) Flush() error {
	w.flushEvents()
	if !w.failed() {
		w.handOff()
	}
	if w.last != nil {
		<-w.last
	}
	w.failed()
	return w.err
}

// Err returns the first write error, as far as the caller has learnt of it
// (Flush waits for every write).
func (w *Writer) Err() error {
	w.failed()
	return w.err
}

// Stats returns the Writer's counts.
func (w *Writer) Stats() Stats { return w.stats }

// ErrFormat is wrapped by every error about a file's content.
var ErrFormat = errors.New("record: bad file")

// IsPcapng reports whether b starts like a pcapng file.
func IsPcapng(b []byte) bool {
	return len(b) >= 4 && binary.LittleEndian.Uint32(b) == blockSHB
}
