package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tcpwheel/tcpwheel/stack"
	"github.com/tcpwheel/tcpwheel/stack/record"
	"github.com/tcpwheel/tcpwheel/tcp"
	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// Conn is one connection of a flight recording, seen from the stack.
type Conn struct {
	N             int // from 1, in the order of the connections' first packets
	Local, Remote netip.AddrPort
	Sent, Handled int // the stack's packets on it, each way
}

func (c Conn) String() string {
	return fmt.Sprintf("connection %d %v <-> %v", c.N, c.Local, c.Remote)
}

// ConnReport is the replay of one connection.
type ConnReport struct {
	Conn
	Got   int    // packets the replay sent on it
	Diffs []Diff // the mismatches, in order; Context shows the first one's events
	// Context is the recording's events around the first mismatch.
	Context []string
}

// Report is the replay of a flight recording.
type Report struct {
	Conns []ConnReport // every connection, or the one ReplayOptions.Conn picks
	// Divergences are the points where the replayed stack asked for
	// something the recording does not have there (stack.Divergence).
	Divergences []stack.Divergence
	// OtherExpected and OtherGot count the packets of no TCP connection
	// (ICMP replies); OtherDiff describes a mismatch among them.
	OtherExpected, OtherGot int
	OtherDiff               string
	Events                  int
	Elapsed                 time.Duration
}

// Err returns nil if every connection replayed exactly, else an error naming
// each connection that did not, with its first differing segment and the
// events around it.
func (r *Report) Err() error {
	var b strings.Builder
	bad := 0
	for _, c := range r.Conns {
		if len(c.Diffs) == 0 {
			continue
		}
		bad++
		fmt.Fprintf(&b, "\n%v: %d packets recorded, %d replayed, %d differ; first:\n%v", c.Conn, c.Sent, c.Got, len(c.Diffs), c.Diffs[0])
		if len(c.Context) > 0 {
			fmt.Fprintf(&b, "\n  events around it in the recording:\n    %s", strings.Join(c.Context, "\n    "))
		}
	}
	if r.OtherDiff != "" {
		bad++
		fmt.Fprintf(&b, "\npackets of no connection: %s", r.OtherDiff)
	}
	for i, d := range r.Divergences {
		if i == 5 {
			fmt.Fprintf(&b, "\n... and %d more divergences", len(r.Divergences)-i)
			break
		}
		fmt.Fprintf(&b, "\ndivergence: %v", d)
	}
	if bad == 0 && len(r.Divergences) == 0 {
		return nil
	}
	return fmt.Errorf("replay: %d of %d connections differ, %d divergences:%s", bad, len(r.Conns), len(r.Divergences), b.String())
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Conn picks one connection to report: its number ("2") or its two
	// ends ("198.18.0.1:80-198.18.0.2:41000", either order). Empty reports
	// them all. The whole recording is replayed either way: the
	// connections share one stack.
	Conn string
	// Rerecord, if set, receives the replay's own recording: the file to
	// keep when a change of behaviour is deliberate (Test's update mode).
	Rerecord io.Writer
}

// ErrNotRecording is wrapped by OpenRecording's error for a pcapng file that
// holds no tcpwheel recording (a capture of another tool, for Open and Run).
// It wraps ErrCapture.
var ErrNotRecording = fmt.Errorf("%w: not a flight recording", ErrCapture)

// OpenRecording reads the flight recording at path. A pcapng file without a
// recorder header, a pcap file or anything else is an error wrapping
// ErrCapture or record.ErrFormat.
func OpenRecording(path string) (*record.Recording, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rec, err := record.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if rec.Header == nil {
		return nil, fmt.Errorf("%w: %s: a pcapng file without a tcpwheel recording in it", ErrNotRecording, path)
	}
	if len(Conns(rec)) == 0 {
		return nil, fmt.Errorf("%w: %s: no TCP connection in the recording", ErrCapture, path)
	}
	return rec, nil
}

// Conns lists the recording's connections.
func Conns(rec *record.Recording) []Conn {
	var cs []Conn
	idx := map[tcp.ID]int{}
	for i := range rec.Events {
		e := &rec.Events[i]
		if e.Kind != record.In && e.Kind != record.Out {
			continue
		}
		id, _, ok := connOf(e)
		if !ok {
			continue
		}
		k, seen := idx[id]
		if !seen {
			k = len(cs)
			idx[id] = k
			cs = append(cs, Conn{N: k + 1, Local: id.Local, Remote: id.Remote})
		}
		if e.Kind == record.Out {
			cs[k].Sent++
		} else {
			cs[k].Handled++
		}
	}
	return cs
}

// connOf returns the connection of a packet event, from the stack's side.
func connOf(e *record.Event) (tcp.ID, tcp.Segment, bool) {
	parse := parseIPv4TCP
	if d := e.Data; len(d) > 0 && d[0]>>4 == 6 {
		parse = parseIPv6TCP
	}
	p, err := parse(e.Whole())
	if err != nil {
		return tcp.ID{}, tcp.Segment{}, false
	}
	if e.Kind == record.Out {
		return tcp.ID{Local: p.Src, Remote: p.Dst}, p.Seg, true
	}
	return tcp.ID{Local: p.Dst, Remote: p.Src}, p.Seg, true
}

// ErrConn is wrapped by Replay's error when ReplayOptions.Conn names no
// connection of the recording.
var ErrConn = errors.New("replay: bad connection")

// pick resolves ReplayOptions.Conn.
func pick(cs []Conn, sel string) (*Conn, error) {
	if sel == "" {
		return nil, nil
	}
	if n, err := strconv.Atoi(sel); err == nil {
		if n < 1 || n > len(cs) {
			return nil, fmt.Errorf("%w: connection %d: the recording has %d", ErrConn, n, len(cs))
		}
		return &cs[n-1], nil
	}
	a, b, ok := strings.Cut(sel, "-")
	pa, erra := netip.ParseAddrPort(a)
	pb, errb := netip.ParseAddrPort(b)
	if !ok || erra != nil || errb != nil {
		return nil, fmt.Errorf("%w: %q is neither a number nor ADDR:PORT-ADDR:PORT", ErrConn, sel)
	}
	for i := range cs {
		c := &cs[i]
		if (c.Local == pa && c.Remote == pb) || (c.Local == pb && c.Remote == pa) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: no connection %v <-> %v in the recording", ErrConn, pa, pb)
}

// Replay runs the flight recording again (stack.Playback) and compares,
// connection by connection, every packet the stack sends with the recorded
// one: byte for byte from the TCP header on, the IP addresses, and the send
// instant to the nanosecond. (The IP ID and checksum are left out: the
// connections' packets may interleave differently when timers of several
// connections fire in the same tick.) The error is for a recording that
// cannot be replayed at all; mismatches are in the Report.
func Replay(rec *record.Recording, opt ReplayOptions) (*Report, error) {
	cs := Conns(rec)
	only, err := pick(cs, opt.Conn)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	p, err := stack.NewPlayback(rec, opt.Rerecord)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := p.Run(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r := &Report{Divergences: p.Divergences(), Events: len(rec.Events), Elapsed: time.Since(start)}
	want, wantOther := byConn(rec.Events)
	got, gotOther := byConn(p.Sent())
	r.OtherExpected, r.OtherGot = len(wantOther), len(gotOther)
	for k := range max(len(wantOther), len(gotOther)) {
		if k >= len(wantOther) || k >= len(gotOther) || !stack.SentMatches(wantOther[k], gotOther[k]) {
			r.OtherDiff = fmt.Sprintf("%d recorded, %d replayed; the %d. differs", len(wantOther), len(gotOther), k+1)
			break
		}
	}
	for _, c := range cs {
		if only != nil && c.N != only.N {
			continue
		}
		id := tcp.ID{Local: c.Local, Remote: c.Remote}
		cr := ConnReport{Conn: c, Got: len(got[id])}
		f := recFormatter(rec, id)
		w, g := want[id], got[id]
		ts0 := firstTSVal(w) // both sides' TSvals relative to the recording's first
		for k := range max(len(w), len(g)) {
			d := Diff{Index: k + 1}
			var we, ge *record.Event
			var ws, gs tcp.Segment
			if k < len(w) {
				we = w[k]
				_, ws, _ = connOf(we)
				d.Packet = we.Index
				d.Want = f.seg(&ws, we.T-time.Duration(rec.Header.Origin), ts0)
			}
			if k < len(g) {
				ge = g[k]
				_, gs, _ = connOf(ge)
				d.Got = f.seg(&gs, ge.T-time.Duration(rec.Header.Origin), ts0)
			}
			if we != nil && ge != nil {
				if stack.SentMatches(we, ge) {
					continue
				}
				d.Fields = diffSeg(&ws, &gs, we.T, ge.T, 0, 0, 0)
				switch {
				case len(d.Fields) > 0:
				case ws.Options.TSVal != gs.Options.TSVal:
					d.Fields = []string{"tsval"}
				default:
					d.Fields = []string{"ip header"}
				}
			}
			if len(cr.Diffs) == 0 && we != nil {
				cr.Context = context(rec, we.Index)
			}
			cr.Diffs = append(cr.Diffs, d)
		}
		r.Conns = append(r.Conns, cr)
	}
	return r, nil
}

// firstTSVal is the TSval of the first of a connection's packets that has
// one, or 0.
func firstTSVal(pkts []*record.Event) uint32 {
	for _, e := range pkts {
		if _, seg, ok := connOf(e); ok && seg.Options.TS {
			return seg.Options.TSVal
		}
	}
	return 0
}

// ipv4Fixed is the part of an IPv4 header up to the checksum's end: the
// version to the checksum; the addresses follow.
const ipv4Fixed = 12

// byConn splits the packets sent by connection; those of none (ICMP) apart.
func byConn(evs []record.Event) (map[tcp.ID][]*record.Event, []*record.Event) {
	m := map[tcp.ID][]*record.Event{}
	var other []*record.Event
	for i := range evs {
		e := &evs[i]
		if e.Kind != record.Out {
			continue
		}
		if len(e.Data) < ipv4Fixed {
			continue
		}
		id, _, ok := connOf(e)
		if !ok {
			other = append(other, e)
			continue
		}
		m[id] = append(m[id], e)
	}
	return m, other
}

// recFormatter prints a connection's segments relative to its ISNs.
func recFormatter(rec *record.Recording, id tcp.ID) formatter {
	sess := &Session{Stack: id.Local, Peer: id.Remote}
	for i := range rec.Events {
		e := &rec.Events[i]
		switch {
		case e.Kind == record.ISN && e.Local == id.Local && e.Remote == id.Remote && !sess.HasStackISN:
			sess.StackISN, sess.HasStackISN = seqnum.Value(uint32(e.N)), true
		case e.Kind == record.In:
			if cid, seg, ok := connOf(e); ok && cid == id && seg.Flags&tcp.FlagSYN != 0 && sess.PeerISN == 0 {
				sess.PeerISN = seg.Seq
			}
		}
	}
	return formatter{sess: sess}
}

// contextEvents is how many events before and after a mismatch Context shows.
const contextEvents = 6

// context renders the recording's events around the event numbered index.
func context(rec *record.Recording, index int) []string {
	pos := -1
	for i := range rec.Events {
		if rec.Events[i].Index == index {
			pos = i
			break
		}
	}
	if pos < 0 {
		return nil
	}
	var out []string
	for i := max(0, pos-contextEvents); i < min(len(rec.Events), pos+contextEvents+1); i++ {
		d := Describe(&rec.Events[i])
		if i == pos {
			d += "   <== the first difference"
		}
		out = append(out, d)
	}
	return out
}

// Describe renders an event on one line: a packet with its connection and
// TCP header, anything else as record.Event.String does.
func Describe(e *record.Event) string {
	s := e.String()
	if e.Kind == record.In || e.Kind == record.Out {
		if id, seg, ok := connOf(e); ok {
			s = fmt.Sprintf("#%d %s t=%v %v<->%v [%v] seq=%d ack=%d win=%d len=%d", e.Index, e.Kind, e.T, id.Local, id.Remote,
				seg.Flags, uint32(seg.Seq), uint32(seg.Ack), seg.Window, len(seg.Payload))
		}
	}
	return s
}

// IsRecording reports whether the file at path is a pcapng file (a flight
// recording, or a capture of another tool).
func IsRecording(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, err
	}
	return record.IsPcapng(b[:]), nil
}
