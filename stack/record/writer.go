package record

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
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
	// epb_flags' direction bits
	dirInbound  = 1
	dirOutbound = 2
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
	Recorder string       `json:"recorder"` // "tcpwheel"
	Format   int          `json:"format"`
	Addr     netip.Addr   `json:"addr"`
	Prefix   netip.Prefix `json:"prefix,omitzero"`
	MTU      int          `json:"mtu"`
	Tick     Duration     `json:"tick"`
	TTL      uint8        `json:"ttl"`
	Backlog  int          `json:"backlog"`
	// Origin is the wheel's origin on the stack's clock: its Now when the
	// stack started. Wall is the wall clock then; packets' timestamps are
	// Wall plus their T less Origin.
	Origin Duration  `json:"origin"`
	Wall   time.Time `json:"wall"`
	TCP    TCP       `json:"tcp"`
}

// RecorderName is Header.Recorder for recordings of this stack.
const RecorderName = "tcpwheel"

// TCP is tcp.Config without its functions, every field as set (defaults
// filled in by the stack).
type TCP struct {
	MSS                  int      `json:"mss"`
	SendBuffer           int      `json:"send_buffer"`
	RecvBuffer           int      `json:"recv_buffer"`
	InitialRTO           Duration `json:"initial_rto"`
	MinRTO               Duration `json:"min_rto"`
	MaxRTO               Duration `json:"max_rto"`
	SYNRetries           int      `json:"syn_retries"`
	Retries2             int      `json:"retries2"`
	UserTimeout          Duration `json:"user_timeout"`
	KeepAlive            bool     `json:"keepalive"`
	KeepIdle             Duration `json:"keep_idle"`
	KeepInterval         Duration `json:"keep_interval"`
	KeepCount            int      `json:"keep_count"`
	DelayedACK           Duration `json:"delayed_ack"`
	TimeWait             Duration `json:"time_wait"`
	FinWait2             Duration `json:"fin_wait2"`
	InitialCwnd          int      `json:"initial_cwnd"`
	DisableRACKTLP       bool     `json:"disable_rack_tlp"`
	DisableRecoveryProbe bool     `json:"disable_recovery_probe"`
	TLPMaxAckDelay       Duration `json:"tlp_max_ack_delay"`
	TLPSlack             Duration `json:"tlp_slack"`
	DisableTimestamps    bool     `json:"disable_timestamps"`
	DisableSACK          bool     `json:"disable_sack"`
	DisableWindowScale   bool     `json:"disable_window_scale"`
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
	Bytes   uint64 // bytes handed to the writer
	Errors  uint64 // records not written: the writer had failed
}

// Writer writes a recording: a pcapng section with one interface (LINKTYPE_RAW,
// nanosecond timestamps), an Enhanced Packet Block per packet with its
// direction in epb_flags, and the other events in custom blocks between them,
// in the order the loop ran them. The section header and interface blocks are
// gopacket's (pcapgo.NgWriter); the packet and custom blocks are written here,
// since pcapgo writes neither packet options nor custom blocks.
//
// A Writer is not safe for concurrent use: the stack calls it on its loop
// only. After the underlying writer fails, nothing more is written (the
// recording ends at its last whole block) and Err returns the error.
type Writer struct {
	bw      *bufio.Writer
	hdr     Header
	pending []byte // events not yet written: the payload of the next custom block
	npend   int
	stats   Stats
	err     error
	scratch [32]byte
}

// bufSize is the Writer's buffer: the loop writes to the file once per this
// many bytes.
const bufSize = 1 << 20

// NewWriter writes the section header, the interface and h to w, and returns
// a Writer for the events. h.Recorder and h.Format are set here.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Recorder, h.Format = RecorderName, Format
	bw := bufio.NewWriterSize(w, bufSize)
	ng, err := pcapgo.NewNgWriterInterface(bw, pcapgo.NgInterface{
		Name:                "tcpwheel",
		Description:         "tcpwheel flight recording: packets as the stack handled and sent them",
		LinkType:            layers.LinkTypeRaw,
		SnapLength:          0,
		TimestampResolution: 9,
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "tcpwheel"}})
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := ng.Flush(); err != nil { // into bw, which we write to from here on
		return nil, fmt.Errorf("record: %w", err)
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("record: header: %w", err)
	}
	rw := &Writer{bw: bw, hdr: h}
	rw.writeCB(append([]byte{cbHeader}, js...))
	if rw.err != nil {
		return nil, rw.err
	}
	return rw, nil
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
func (w *Writer) Packet(in bool, t time.Duration, pkt []byte) {
	w.flushEvents()
	if w.err != nil {
		w.stats.Errors++
		return
	}
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
	le.PutUint32(b[24:], uint32(n))
	w.write(b)
	w.write(pkt)
	var tail [3 + 12 + 4]byte
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
	if w.err == nil {
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
	if w.err != nil {
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
	if w.err == nil {
		w.stats.Blocks++
	}
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(b)
	w.stats.Bytes += uint64(n)
	if err != nil {
		w.err = fmt.Errorf("record: %w", err)
	}
}

// Flush writes the pending events and the buffer out.
func (w *Writer) Flush() error {
	w.flushEvents()
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("record: %w", err)
		}
	}
	return w.err
}

// Err returns the first write error.
func (w *Writer) Err() error { return w.err }

// Stats returns the Writer's counts.
func (w *Writer) Stats() Stats { return w.stats }

// ErrFormat is wrapped by every error about a file's content.
var ErrFormat = errors.New("record: bad file")

// IsPcapng reports whether b starts like a pcapng file.
func IsPcapng(b []byte) bool {
	return len(b) >= 4 && binary.LittleEndian.Uint32(b) == blockSHB
}
