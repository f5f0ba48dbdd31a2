package record

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"time"
)

// Recording is a file read back: its header (nil for a pcapng file that no
// tcpwheel recorder wrote) and its events, packets included, in file order.
type Recording struct {
	Header *Header
	Events []Event
}

// Packets returns the recording's packet events.
func (r *Recording) Packets() []*Event {
	var ps []*Event
	for i := range r.Events {
		if k := r.Events[i].Kind; k == In || k == Out || k == Captured {
			ps = append(ps, &r.Events[i])
		}
	}
	return ps
}

// maxBlock bounds a block's length, so that a corrupt length cannot make the
// reader allocate gigabytes (a packet is at most 256 KiB, libpcap's
// MAXIMUM_SNAPLEN; a custom block of events is flushed at each packet).
const maxBlock = 16 << 20

// maxPacket bounds a packet's whole length (an IPv4 packet's total length
// field; IPv6 jumbograms aside).
const maxPacket = 65535

// iface is what the reader keeps of an Interface Description Block.
type iface struct {
	link  uint16
	units uint64 // timestamp units per second
}

// Parse reads a pcapng file: the section header, interfaces, packets (Enhanced
// and Simple Packet Blocks) and the recorder's custom blocks; it skips other
// blocks and custom blocks of other PENs. Every error wraps ErrFormat and
// names the block (counted from 1) and its offset.
func Parse(r io.Reader) (*Recording, error) {
	rd := &reader{r: r}
	rec := &Recording{}
	for {
		ok, err := rd.block()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if err := rd.handle(rec); err != nil {
			return nil, fmt.Errorf("%w: block %d (offset %d): %v", ErrFormat, rd.n, rd.off, err)
		}
	}
	if rd.n == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrFormat)
	}
	return rec, nil
}

type reader struct {
	r      io.Reader
	bo     binary.ByteOrder
	n      int   // blocks read
	off    int64 // the current block's offset
	next   int64 // the next block's offset
	typ    uint32
	body   []byte // the block without type, length and trailing length
	ifaces []iface
	events int
}

// block reads the next block; false at the end of the file.
func (rd *reader) block() (bool, error) {
	var h [8]byte
	rd.off = rd.next
	if _, err := io.ReadFull(rd.r, h[:]); err != nil {
		if err == io.EOF {
			return false, nil
		}
		return false, fmt.Errorf("%w: block %d (offset %d): truncated block header", ErrFormat, rd.n+1, rd.off)
	}
	rd.n++
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: block %d (offset %d): %s", ErrFormat, rd.n, rd.off, fmt.Sprintf(format, a...))
	}
	le := binary.LittleEndian
	if le.Uint32(h[:]) == blockSHB {
		var bom [4]byte
		if _, err := io.ReadFull(rd.r, bom[:]); err != nil {
			return false, fail("truncated section header")
		}
		switch le.Uint32(bom[:]) {
		case byteOrderLE:
			rd.bo = binary.LittleEndian
		case 0x4D3C2B1A:
			rd.bo = binary.BigEndian
		default:
			return false, fail("bad byte-order magic %#x", bom)
		}
		rd.typ = blockSHB
		total := rd.bo.Uint32(h[4:])
		if total < 28 || total%4 != 0 || total > maxBlock {
			return false, fail("bad section header length %d", total)
		}
		body, err := readN(rd.r, int(total)-16)
		if err != nil {
			return false, fail("truncated section header")
		}
		rd.body = append(bom[:], body...)
		return true, rd.trailer(total, fail)
	}
	if rd.bo == nil {
		return false, fail("not a pcapng file (no section header first)")
	}
	rd.typ = rd.bo.Uint32(h[:])
	total := rd.bo.Uint32(h[4:])
	if total < 12 || total%4 != 0 || total > maxBlock {
		return false, fail("bad block length %d", total)
	}
	body, err := readN(rd.r, int(total)-12)
	if err != nil {
		return false, fail("truncated block (%d bytes announced)", total)
	}
	rd.body = body
	return true, rd.trailer(total, fail)
}

// readN reads n bytes. Past 64 KiB the buffer grows as the bytes arrive, so
// that a corrupt length in a short file costs no more than the file.
func readN(r io.Reader, n int) ([]byte, error) {
	if n <= 64<<10 {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (rd *reader) trailer(total uint32, fail func(string, ...any) error) error {
	var t [4]byte
	if _, err := io.ReadFull(rd.r, t[:]); err != nil {
		return fail("truncated block (no trailing length)")
	}
	if got := rd.bo.Uint32(t[:]); got != total {
		return fail("trailing length %d differs from %d", got, total)
	}
	rd.next = rd.off + int64(total)
	return nil
}

// handle interprets the block just read.
func (rd *reader) handle(rec *Recording) error {
	b, bo := rd.body, rd.bo
	switch rd.typ {
	case blockSHB:
		if len(b) < 16 {
			return fmt.Errorf("section header too short")
		}
		if major := bo.Uint16(b[4:]); major != 1 {
			return fmt.Errorf("pcapng version %d.%d is not supported", major, bo.Uint16(b[6:]))
		}
		rd.ifaces = rd.ifaces[:0] // a new section starts its interfaces afresh
	case blockIDB:
		if len(b) < 8 {
			return fmt.Errorf("interface description too short")
		}
		ifc := iface{link: bo.Uint16(b[0:]), units: 1e6}
		err := rd.options(b[8:], func(code uint16, v []byte) error {
			if code != 9 || len(v) < 1 { // if_tsresol
				return nil
			}
			r := v[0]
			switch {
			case r&0x80 == 0 && r <= 19:
				ifc.units = uint64(math.Pow10(int(r)))
			case r&0x80 != 0 && r&0x7f <= 63:
				ifc.units = 1 << (r & 0x7f)
			default:
				return fmt.Errorf("bad if_tsresol %#x", r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		rd.ifaces = append(rd.ifaces, ifc)
	case blockEPB:
		return rd.epb(rec)
	case blockSPB:
		if len(b) < 4 {
			return fmt.Errorf("simple packet block too short")
		}
		if len(rd.ifaces) == 0 {
			return fmt.Errorf("a packet before any interface")
		}
		if rec.Header != nil { // as an EPB without epb_flags
			return fmt.Errorf("a packet without its direction (a simple packet block) in a recording")
		}
		n := min(int(bo.Uint32(b)), len(b)-4)
		rec.Events = append(rec.Events, Event{Kind: Captured, Data: b[4 : 4+n], Port: rd.ifaces[0].link, Block: rd.n, Index: rd.index()})
	case blockCB, blockCBNo:
		return rd.custom(rec)
	}
	return nil
}

func (rd *reader) index() int { rd.events++; return rd.events }

// epb reads an Enhanced Packet Block.
func (rd *reader) epb(rec *Recording) error {
	b, bo := rd.body, rd.bo
	if len(b) < 20 {
		return fmt.Errorf("enhanced packet block too short")
	}
	id := bo.Uint32(b)
	if int(id) >= len(rd.ifaces) {
		return fmt.Errorf("packet on interface %d; the section has %d", id, len(rd.ifaces))
	}
	ifc := rd.ifaces[id]
	ts := uint64(bo.Uint32(b[4:]))<<32 | uint64(bo.Uint32(b[8:]))
	capLen := bo.Uint32(b[12:])
	if uint64(capLen) > uint64(len(b)-20) {
		return fmt.Errorf("captured length %d beyond the block", capLen)
	}
	origLen := bo.Uint32(b[16:])
	if capLen < origLen && (rec.Header == nil || rec.Header.Payload || origLen > maxPacket) {
		// A plain capture's replay needs whole packets; a recording with
		// payloads has them all; no IP packet is longer than maxPacket.
		return fmt.Errorf("packet cut short by the snap length (%d of %d bytes)", capLen, origLen)
	}
	data := b[20 : 20+capLen]
	// Nanoseconds since the epoch (int64 holds them until 2262).
	sec, frac := ts/ifc.units, ts%ifc.units
	if sec > uint64(math.MaxInt64/1_000_000_000-1) { // nanoseconds overflow
		return fmt.Errorf("timestamp out of range")
	}
	// frac*1e9 overflows 64 bits past 1.8e10 units a second (if_tsresol
	// 11 and up, or 2^-35 s and finer): multiply and divide in 128 bits
	// (frac < units, so the quotient fits).
	hi, lo := bits.Mul64(frac, 1e9)
	sub, _ := bits.Div64(hi, lo, ifc.units)
	ns := int64(sec)*1e9 + int64(sub)
	ev := Event{Kind: Captured, Data: data, Port: ifc.link, Block: rd.n}
	if origLen > capLen {
		ev.Len = int(origLen)
	}
	optStart := 20 + (int(capLen)+3)&^3
	if optStart > len(b) {
		optStart = len(b)
	}
	err := rd.options(b[optStart:], func(code uint16, v []byte) error {
		if code != optEPBFlags || len(v) != 4 {
			return nil
		}
		switch bo.Uint32(v) & 3 {
		case dirInbound:
			ev.Kind = In
		case dirOutbound:
			ev.Kind = Out
		}
		return nil
	})
	if err != nil {
		return err
	}
	if h := rec.Header; h != nil {
		ev.T = time.Duration(ns-h.Wall.UnixNano()) + time.Duration(h.Origin)
		if ev.Kind == Captured {
			return fmt.Errorf("a packet without its direction (epb_flags) in a recording")
		}
	} else {
		ev.T = time.Duration(ns)
	}
	ev.Index = rd.index()
	rec.Events = append(rec.Events, ev)
	return nil
}

// options walks a block's options.
func (rd *reader) options(b []byte, f func(code uint16, v []byte) error) error {
	for len(b) >= 4 {
		code, n := rd.bo.Uint16(b), int(rd.bo.Uint16(b[2:]))
		if code == optEnd {
			return nil
		}
		padded := (n + 3) &^ 3
		if 4+padded > len(b) {
			return fmt.Errorf("option %d (%d bytes) beyond the block", code, n)
		}
		if err := f(code, b[4:4+n]); err != nil {
			return err
		}
		b = b[4+padded:]
	}
	return nil
}

// custom reads a custom block: ours carry the header or events.
func (rd *reader) custom(rec *Recording) error {
	b := rd.body
	if len(b) < 4 {
		return fmt.Errorf("custom block too short")
	}
	if rd.bo.Uint32(b) != PEN {
		return nil // another tool's
	}
	p := b[4:]
	if len(p) == 0 {
		return fmt.Errorf("empty tcpwheel block")
	}
	switch p[0] {
	case cbHeader:
		if rec.Header != nil {
			return fmt.Errorf("a second recording header")
		}
		if len(rec.Events) > 0 {
			return fmt.Errorf("the recording header after packets")
		}
		// The payload is padded with zeros to 4 bytes: JSON ends at the last '}'.
		js := p[1:]
		for len(js) > 0 && js[len(js)-1] == 0 {
			js = js[:len(js)-1]
		}
		var h Header
		if err := json.Unmarshal(js, &h); err != nil {
			return fmt.Errorf("recording header: %v", err)
		}
		if h.Recorder != RecorderName {
			return fmt.Errorf("a recording of %q, not of %s", h.Recorder, RecorderName)
		}
		if h.Format != Format {
			return fmt.Errorf("recording format %d; this version reads %d", h.Format, Format)
		}
		if !h.Addr.IsValid() || h.MTU <= 0 || h.Tick <= 0 {
			return fmt.Errorf("recording header without address, MTU or tick")
		}
		rec.Header = &h
	case cbEvents:
		if rec.Header == nil {
			return fmt.Errorf("tcpwheel events before the recording header")
		}
		if len(p) < 2 || p[1] != eventsVersion {
			return fmt.Errorf("events of an unknown version")
		}
		d := decoder{b: p[2:]}
		for len(d.b) > 0 {
			if len(d.b) < 4 && allZero(d.b) {
				break // padding
			}
			e, err := d.event()
			if err != nil {
				return fmt.Errorf("event %d: %v", rd.events+1, err)
			}
			e.Block, e.Index = rd.n, rd.index()
			rec.Events = append(rec.Events, e)
		}
	default:
		return fmt.Errorf("unknown tcpwheel block type %q", p[0])
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
