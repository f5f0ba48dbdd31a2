package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Kind is what an event is.
type Kind uint8

// The kinds of events. In and Out are the packets (Enhanced Packet Blocks);
// the rest travel in custom blocks. An event's T is the wheel's Now when the
// loop ran it (for In: when the stack handled the packet).
const (
	// In: a packet the stack handled, at T.
	In Kind = iota + 1
	// Out: a packet the stack sent; T is its send time (the RTO's base if a
	// timer was armed from it, else the wheel's Now).
	Out
	// Expire: the loop's EXPIRY_PROCESSING, Advance(T), with the wheel's
	// Now at T2 before it. Only expiries that had a timer due are recorded.
	Expire
	// Batch: the end of a batch of input packets (one device read burst).
	Batch
	// SendTime: a reading of the clock as the instant a segment leaves
	// (tcp.Timers.SendTime), T.
	SendTime
	// ISN: the initial sequence number N chosen for the connection Local,
	// Remote.
	ISN
	// QueueFull: whether (N: 0 or 1) the accept queue of the listener on
	// Port was full when a handshake completed.
	QueueFull
	// Accepted: whether (N) the connection Local, Remote went into its
	// listener's accept queue.
	Accepted
	// Listen: a listener opened on Port, at T, with Data its SYN-cookie key.
	Listen
	// ListenClose: the listener on Port closed, at T.
	ListenClose
	// Dial: the application dialled Remote from Local, at T.
	Dial
	// Write: the application wrote N bytes (offered; the send buffer takes
	// what fits) on the connection, at T.
	Write
	// Read: the application read, with a buffer of N bytes, at T.
	Read
	// Close: the application closed the connection at T; N is 1 when
	// unread data made it a reset.
	Close
	// CloseWrite: the application shut down the sending side, at T.
	CloseWrite
	// Abort: the application reset the connection at T.
	Abort
	// KeepAlive: keepalive set on the connection at T: N is 1 to enable,
	// Args its idle time, interval (ns) and count.
	KeepAlive
	// StackClose: the stack closed at T (every connection aborted).
	StackClose
	// Captured: a packet of a pcapng file that no tcpwheel recorder wrote,
	// of unknown direction (no epb_flags); T is its timestamp in ns since the
	// Unix epoch, Port its interface's link type.
	Captured
	// UDPOpen: the application opened an unconnected UDP socket on Port, at
	// T (ListenUDP, ListenPacket).
	UDPOpen
	// UDPDial: the application opened a UDP socket on Local connected to
	// Remote, at T (DialUDP).
	UDPDial
	// UDPSend: the application sent a datagram from Local to Remote, at T,
	// with Data its payload.
	UDPSend
	// UDPClose: the application closed the UDP socket on Port, at T.
	UDPClose
	// UDPOpenNet: the application opened an unconnected UDP socket on Port
	// for one IP version only, N (4 or 6: "udp4", "udp6"), at T; UDPOpen's
	// takes both.
	UDPOpenNet
	// UDPBind: the application opened an unconnected UDP socket on Port
	// bound to one of the stack's addresses, Data (4 or 16 bytes), at T.
	UDPBind
	// TSOffset: the offset N of the timestamp clock chosen for the
	// connection Local, Remote (tcp.Config.TSOffset), each time TCP asked
	// for one. A recording whose Header has TSOffsets holds them; in an
	// older one a connection's offset was its ISS.
	TSOffset
	numKinds
)

var kindNames = [numKinds]string{
	In: "in", Out: "out", Expire: "expire", Batch: "batch", SendTime: "sendtime",
	ISN: "isn", QueueFull: "queuefull", Accepted: "accepted", Listen: "listen",
	ListenClose: "listen-close", Dial: "dial", Write: "write", Read: "read",
	Close: "close", CloseWrite: "closewrite", Abort: "abort",
	KeepAlive: "keepalive", StackClose: "stack-close", Captured: "captured",
	UDPOpen: "udp-open", UDPDial: "udp-dial", UDPSend: "udp-send", UDPClose: "udp-close",
	UDPOpenNet: "udp-open-net", UDPBind: "udp-bind", TSOffset: "tsoffset",
}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Nondeterministic reports whether the stack consumes events of kind k while
// it runs another (a clock reading, an ISN, the accept queue's state), as
// opposed to the actions a replay performs in order.
func (k Kind) Nondeterministic() bool {
	switch k {
	case SendTime, ISN, TSOffset, QueueFull, Accepted:
		return true
	}
	return false
}

// Event is one entry of a recording.
type Event struct {
	Kind          Kind
	T, T2         time.Duration
	Local, Remote netip.AddrPort // the connection (Local is the stack's end)
	Port          uint16
	N             int64
	Args          []int64
	Data          []byte // the packet (In, Out), the cookie key (Listen) or the payload (UDPSend)
	// Len is a packet's whole length when the recording kept its headers
	// only (Header.Payload false), more than len(Data); else 0 or len(Data).
	Len int
	// Block is the event's block in the file (counted from 1, as
	// Wireshark's frame numbers count packets); Index its place among the
	// events. Set by the Reader.
	Block, Index int
}

func (e *Event) String() string {
	s := fmt.Sprintf("#%d %s t=%v", e.Index, e.Kind, e.T)
	switch e.Kind {
	case Expire:
		s += fmt.Sprintf(" (now %v before)", e.T2)
	case ISN, TSOffset, Accepted:
		s += fmt.Sprintf(" %v->%v n=%d", e.Local, e.Remote, e.N)
	case QueueFull:
		s += fmt.Sprintf(" port=%d full=%d", e.Port, e.N)
	case Listen, ListenClose, UDPOpen, UDPClose:
		s += fmt.Sprintf(" port=%d", e.Port)
	case UDPOpenNet:
		s += fmt.Sprintf(" port=%d ipv%d", e.Port, e.N)
	case UDPBind:
		a, _ := netip.AddrFromSlice(e.Data)
		s += fmt.Sprintf(" %v", netip.AddrPortFrom(a, e.Port))
	case UDPDial:
		s += fmt.Sprintf(" %v->%v", e.Local, e.Remote)
	case UDPSend:
		s += fmt.Sprintf(" %v->%v %d bytes", e.Local, e.Remote, len(e.Data))
	case Dial, CloseWrite, Abort, StackClose:
		if e.Local.IsValid() {
			s += fmt.Sprintf(" %v->%v", e.Local, e.Remote)
		}
	case Write, Read, Close:
		s += fmt.Sprintf(" %v->%v n=%d", e.Local, e.Remote, e.N)
	case KeepAlive:
		s += fmt.Sprintf(" %v->%v on=%d %v", e.Local, e.Remote, e.N, e.Args)
	case In, Out, Captured:
		s += fmt.Sprintf(" %d bytes", len(e.Data))
	}
	return s
}

// The custom blocks' payload: a format version, then events.
const eventsVersion = 1

// field layouts, by kind
const (
	fT = 1 << iota
	fT2
	fConn
	fPort
	fN
	fArgs
	fData
)

var layout = [numKinds]uint8{
	Expire:      fT | fT2,
	Batch:       fT,
	SendTime:    fT,
	ISN:         fConn | fN,
	QueueFull:   fPort | fN,
	Accepted:    fConn | fN,
	Listen:      fT | fPort | fData,
	ListenClose: fT | fPort,
	Dial:        fT | fConn,
	Write:       fT | fConn | fN,
	Read:        fT | fConn | fN,
	Close:       fT | fConn | fN,
	CloseWrite:  fT | fConn,
	Abort:       fT | fConn,
	KeepAlive:   fT | fConn | fN | fArgs,
	StackClose:  fT,
	UDPOpen:     fT | fPort,
	UDPDial:     fT | fConn,
	UDPSend:     fT | fConn | fData,
	UDPClose:    fT | fPort,
	UDPOpenNet:  fT | fPort | fN,
	UDPBind:     fT | fPort | fData,
	TSOffset:    fConn | fN,
}

// appendEvent encodes a custom-block event.
func appendEvent(b []byte, e *Event) []byte {
	b = append(b, byte(e.Kind))
	l := layout[e.Kind]
	if l&fT != 0 {
		b = binary.AppendVarint(b, int64(e.T))
	}
	if l&fT2 != 0 {
		b = binary.AppendVarint(b, int64(e.T2))
	}
	if l&fConn != 0 {
		b = appendAddrPort(b, e.Local)
		b = appendAddrPort(b, e.Remote)
	}
	if l&fPort != 0 {
		b = binary.AppendUvarint(b, uint64(e.Port))
	}
	if l&fN != 0 {
		b = binary.AppendVarint(b, e.N)
	}
	if l&fArgs != 0 {
		b = binary.AppendUvarint(b, uint64(len(e.Args)))
		for _, a := range e.Args {
			b = binary.AppendVarint(b, a)
		}
	}
	if l&fData != 0 {
		b = binary.AppendUvarint(b, uint64(len(e.Data)))
		b = append(b, e.Data...)
	}
	return b
}

func appendAddrPort(b []byte, ap netip.AddrPort) []byte {
	a := ap.Addr().AsSlice()
	b = append(b, byte(len(a)))
	b = append(b, a...)
	return binary.AppendUvarint(b, uint64(ap.Port()))
}

// errShort is a field cut off by the block's end.
var errShort = errors.New("event cut short")

// decoder reads events from a custom block's payload.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint(limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	if v > limit {
		d.err = fmt.Errorf("value %d above %d", v, limit)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = errShort
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) addrPort() netip.AddrPort {
	n := int(d.uvarintByte())
	if d.err != nil {
		return netip.AddrPort{}
	}
	if n != 4 && n != 16 {
		d.err = fmt.Errorf("address of %d bytes", n)
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(d.bytes(n))
	p := d.uvarint(65535)
	return netip.AddrPortFrom(a, uint16(p))
}

func (d *decoder) uvarintByte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// maxArgs bounds an event's Args, maxData its Data, against corrupt counts.
const (
	maxArgs = 16
	maxData = 1 << 16
)

// event decodes the next event.
func (d *decoder) event() (Event, error) {
	var e Event
	e.Kind = Kind(d.uvarintByte())
	if d.err != nil {
		return e, d.err
	}
	if e.Kind == 0 || e.Kind >= numKinds || e.Kind == In || e.Kind == Out || e.Kind == Captured {
		return e, fmt.Errorf("unknown event kind %d", uint8(e.Kind))
	}
	l := layout[e.Kind]
	if l&fT != 0 {
		e.T = time.Duration(d.varint())
	}
	if l&fT2 != 0 {
		e.T2 = time.Duration(d.varint())
	}
	if l&fConn != 0 {
		e.Local, e.Remote = d.addrPort(), d.addrPort()
	}
	if l&fPort != 0 {
		e.Port = uint16(d.uvarint(65535))
	}
	if l&fN != 0 {
		e.N = d.varint()
	}
	if l&fArgs != 0 {
		n := d.uvarint(maxArgs)
		for range n {
			e.Args = append(e.Args, d.varint())
		}
	}
	if l&fData != 0 {
		n := d.uvarint(maxData)
		e.Data = d.bytes(int(n))
	}
	if d.err != nil {
		return e, fmt.Errorf("%v event: %w", e.Kind, d.err)
	}
	return e, nil
}

// Whole returns a packet event's packet at its whole length: Data, padded
// with zeros where the recording did not keep the payload.
func (e *Event) Whole() []byte {
	if e.Len <= len(e.Data) {
		return e.Data
	}
	b := make([]byte, e.Len)
	copy(b, e.Data)
	return b
}

// Truncated reports whether the recording kept only the start of the
// packet.
func (e *Event) Truncated() bool { return e.Len > len(e.Data) }
