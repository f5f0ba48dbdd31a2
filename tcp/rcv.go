package tcp

import (
	"sort"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
)

// maxOOO bounds the out-of-order queue's entries: data that would need
// another is dropped (and counted); the window already bounds the bytes.
// A segment that follows an entry's data extends it, up to oooChunk bytes
// (insertOOO), so the bound counts chunks and holes, not segments: until
// 2026-11-24 it counted segments, and a plain (non-GRO) link's 1448-byte
// segments above one hole reached it at 370 KB of a 1 MB window; what came
// after was dropped unSACKed, and the peer, seeing no SACK beyond, waited
// for its RTO (tcpwheel compare -no-offload, bulk-down at 5% loss: 0.8-14 s
// against 0.26-0.44 s now).
const (
	maxOOO   = 256
	oooChunk = 64 << 10
)

// receiver is the receive side of a connection: the receive sequence space
// (RFC 9293 3.3.1), the receive buffer, the out-of-order queue, the window we
// advertise and the accounting the delayed-ACK rule needs. It sends nothing
// and knows no state: the endpoint decides when to ACK (input.go).
type receiver struct {
	irs, nxt seqnum.Value // IRS and RCV.NXT
	adv      seqnum.Value // right edge of the window we advertised
	ws       uint8        // our window shift (RFC 7323 2.2); 0 when scaling is off
	buf      buffer
	held     int      // bytes taken by Hold, or by sink, and not yet Released: still unread
	sink     Sink     // takes in-order data as it arrives, if set (SetSink)
	ooo      []oooSeg // out-of-order segments, by sequence
	// lastOOOEnd is where the last out-of-order segment ended (past its
	// FIN, if it had one): its SACK block leads the list (sackBlocks), and
	// a segment that starts there extends that block (Endpoint.
	// holdOutOfOrderAck).
	lastOOOEnd seqnum.Value
	finRcvd    bool          // FIN consumed: Read returns io.EOF after the data
	mss        int           // largest segment seen (at most our MSS), for the delayed-ACK rule
	unacked    int           // in-order bytes received since the last ACK
	quick      int           // data segments still to ACK at once (Config.QuickAcks)
	gotData    bool          // data has been received
	dataAt     time.Duration // when data was last received
	size       int           // Config.RecvBuffer
	sws        int           // the smallest step of the right edge: min(RecvBuffer/2, MSS)
	// smallEdge is the right edge of the last window smaller than one MSS
	// that we advertised, while small is set: until data beyond it arrives,
	// the peer may know no larger window (the update that opened it may have
	// been lost), so what it sends there is a probe (see nearlyClosed).
	smallEdge seqnum.Value
	small     bool
	// pushed: in-order data with PSH, or shorter than mss, came since our
	// last ACK (Linux's ICSK_ACK_PUSHED): the end of a write, after which
	// the sender may wait for the ACK (readAckDue).
	pushed bool
	// pingpong: our last data went out within the delayed-ACK time of the
	// data before it (Linux's pingpong mode): an interactive exchange, whose
	// reply will carry the ACK (readAckDue).
	pingpong bool
}

func newReceiver(cfg Config, ws uint8) receiver {
	return receiver{ws: ws, mss: DefaultMSS, size: cfg.RecvBuffer, sws: min(cfg.RecvBuffer/2, cfg.MSS)}
}

// start takes the peer's ISN from its SYN: IRS, and RCV.NXT just past it.
func (r *receiver) start(irs seqnum.Value) {
	r.irs = irs
	r.nxt = irs + 1
	r.adv = r.nxt
}

// oooSeg is out-of-order data waiting for the hole before it to fill.
type oooSeg struct {
	seq  seqnum.Value
	data []byte // a copy
	fin  bool
}

// dataEnd is the sequence number after the range's data (before its FIN).
func (o *oooSeg) dataEnd() seqnum.Value { return o.seq.Add(seqnum.Size(len(o.data))) }

func (o *oooSeg) end() seqnum.Value {
	e := o.dataEnd()
	if o.fin {
		e++
	}
	return e
}

// space is the free space in the receive buffer: what is neither in it nor
// held unread by the application's side (Endpoint.Hold).
func (r *receiver) space() int {
	return max(0, r.size-r.buf.len()-r.held)
}

// wnd is the window we have advertised: RCV.WND = right edge - RCV.NXT.
func (r *receiver) wnd() seqnum.Size { return rcvWnd(r.nxt, r.adv) }

// rcvWnd is RCV.WND for RCV.NXT nxt and the advertised right edge adv: 0
// when the edge is behind.
func rcvWnd(nxt, adv seqnum.Value) seqnum.Size {
	if adv.LessThan(nxt) {
		return 0
	}
	return nxt.Size(adv)
}

// acceptable is the table of RFC 9293 3.10.7.4: RCV.WND is what we advertised.
func (r *receiver) acceptable(seq seqnum.Value, segLen seqnum.Size) bool {
	return acceptable(r.nxt, r.adv, seq, segLen)
}

// acceptable is the receiver's test, for RCV.NXT nxt and the advertised
// right edge adv (shared with a TIME-WAIT record).
func acceptable(nxt, adv, seq seqnum.Value, segLen seqnum.Size) bool {
	wnd := rcvWnd(nxt, adv)
	if segLen == 0 {
		if wnd == 0 {
			return seq == nxt
		}
		return seq.InWindow(nxt, wnd)
	}
	if wnd == 0 {
		return false
	}
	last := seq.Add(segLen - 1)
	return seq.InWindow(nxt, wnd) || last.InWindow(nxt, wnd)
}

// synWindow is the window of our SYN or SYN-ACK, never scaled (RFC 7323 2.2),
// and records its right edge.
func (r *receiver) synWindow() uint16 {
	w := uint16(min(r.space(), 0xffff))
	if r.adv.LessThan(r.nxt.Add(seqnum.Size(w))) {
		r.adv = r.nxt.Add(seqnum.Size(w))
	}
	return w
}

// windowField computes the window to advertise, scaled to the 16-bit field, and
// records the right edge. The edge never moves left (RFC 9293 3.8.6.2.2: do not
// shrink the window) and moves right only by at least min(RecvBuffer/2, MSS)
// (receiver SWS avoidance, RFC 9293 3.8.6.2.2 / RFC 1122 4.2.3.3).
func (r *receiver) windowField() uint16 {
	field, adv := advertise(r.nxt, r.adv, r.space(), r.ws, r.sws)
	r.adv = adv
	if int(field)<<r.ws < r.mss {
		r.small, r.smallEdge = true, r.nxt.Add(seqnum.Size(int(field)<<r.ws))
	}
	return field
}

// advertise is windowField's arithmetic, shared with a TIME-WAIT record
// (TimeWait.sendAck): the window field for RCV.NXT nxt, with the right edge
// advertised so far at adv, space free, our shift ws and SWS step sws; and
// the right edge it advertises.
func advertise(nxt, adv seqnum.Value, space int, ws uint8, sws int) (uint16, seqnum.Value) {
	maxWnd := 0xffff << ws
	space = min(space, maxWnd)
	edge := nxt.Add(seqnum.Size(space))
	if adv.LessThan(edge) {
		if int(adv.Size(edge)) < sws {
			edge = adv // RFC 9293 3.8.6.2.2: too small a step; keep the edge
		}
	} else {
		edge = adv
	}
	wnd := int(nxt.Size(edge))
	if adv.LessThan(nxt) {
		wnd = space
	}
	field := wnd >> ws
	if nxt.Add(seqnum.Size(field << ws)).LessThan(adv) {
		field = (wnd + (1 << ws) - 1) >> ws // round up so the promised edge never recedes
	}
	field = min(field, 0xffff)
	if a := nxt.Add(seqnum.Size(field << ws)); adv.LessThan(a) {
		adv = a
	}
	return uint16(field), adv
}

// nearlyClosed reports whether in-order text at seq arrives into a window the
// peer may still know as smaller than one MSS: one we advertised below an
// MSS, with no data beyond its edge since. Such a segment is a window probe
// (RFC 9293 3.8.6.1), or the first data after a window update, and is ACKed
// at once, so that the ACK carries the window the probe asks for even when
// the update that opened it was lost. (Linux ends up there by other routes:
// a segment into a zero window enters quickack mode in tcp_data_queue, and
// data after a silence longer than the RTO does in tcp_event_data_recv, "Too
// long gap. Apparently sender failed to restart window".) Once RCV.NXT passes
// the small window's edge, the peer has seen a larger one: the mark is
// cleared.
func (r *receiver) nearlyClosed(seq seqnum.Value) bool {
	if !r.small {
		return false
	}
	if r.smallEdge.LessThan(r.nxt) {
		r.small = false
	}
	return seq.LessThanEq(r.smallEdge)
}

// windowUpdateDue reports whether a Read freed enough to send a window update,
// as Linux's tcp_cleanup_rbuf (net/ipv4/tcp.c) decides: only once the window
// the peer knows (what remains of the last one advertised) has fallen to half
// the largest we can advertise or less, and the window we can advertise now
// is at least twice it; and the right edge must move by at least
// min(RecvBuffer/2, MSS) (RFC 1122 4.2.3.3's receiver SWS avoidance, which
// Linux's __tcp_select_window also keeps: nothing below an MSS once less than
// half the buffer is free). RFC 9293 3.8.6.2.2 allows an update at every
// such step; a reader that keeps up never needs one (the ACKs of the data
// carry the window), and one that fell behind gets an update each time the
// window doubles, from a closed one at its first MSS. A lost update costs
// the peer's persist timer (a zero window) or its next segment's ACK.
func (r *receiver) windowUpdateDue() bool {
	clamp, cur := r.peerWindow()
	if 2*cur > clamp {
		return false
	}
	edge := r.nxt.Add(seqnum.Size(min(r.space(), clamp)))
	if !r.adv.LessThan(edge) || int(r.adv.Size(edge)) < r.sws {
		return false
	}
	return int(r.nxt.Size(edge)) >= 2*cur
}

// peerWindow returns the largest window we can advertise (clamp) and what
// the peer can still send (cur): the window it knows, less what it already
// sent above a hole (room). Linux's rule (windowUpdateDue) looks at the
// window alone; a peer that filled it with out-of-order data waits for an
// update (or its RTO) all the same (sendWindowUpdate).
func (r *receiver) peerWindow() (clamp, cur int) {
	return min(r.size, 0xffff<<r.ws), min(int(r.wnd()), r.room())
}

// ReleaseCanWait reports whether bytes the application has read may be
// Released later, when the next segment with data arrives, instead of
// now, with no change to what the endpoint sends: no ACK waits for a Read
// (readAckDue needs unacknowledged data) and the peer can still send more
// than half the largest window we advertise, so that no Release can make a
// window update due (windowUpdateDue) until data arrives. Data is what
// shrinks the peer's window: a receiver that releases what was read before
// it handles the next data (the stack does, at the end of each batch of
// input) never holds back an update the peer waits for.
func (e *Endpoint) ReleaseCanWait() bool {
	if !e.state.canReceive() || e.rcv.unacked > 0 {
		return false
	}
	clamp, cur := e.rcv.peerWindow()
	return 2*cur > clamp
}

// room is what the peer has left of the window we advertised, as far as we
// know: from the highest sequence number received (RCV.NXT, or the end of
// the out-of-order data above a hole) to the right edge. Below one MSS, a
// window-limited peer has stopped: only a window update restarts it.
func (r *receiver) room() int {
	top := r.nxt
	for i := range r.ooo {
		if e := r.ooo[i].end(); top.LessThan(e) {
			top = e
		}
	}
	if !top.LessThan(r.adv) {
		return 0
	}
	return int(top.Size(r.adv))
}

// trim cuts a segment's text and FIN to what is new (at or after RCV.NXT) and
// inside the window (RFC 9293 3.10.7.4, seventh check).
func (r *receiver) trim(seq seqnum.Value, data []byte, fin bool) (seqnum.Value, []byte, bool) {
	if seq.LessThan(r.nxt) {
		d := int(seq.Size(r.nxt))
		if d > len(data) {
			data, fin = nil, false // the FIN, too, is one we have
		} else {
			data = data[d:]
		}
		seq = r.nxt
	}
	wndEnd := r.nxt.Add(r.wnd())
	if end := seq.Add(seqnum.Size(len(data))); wndEnd.LessThan(end) {
		keep := int(seq.Size(wndEnd))
		if keep < 0 || keep > len(data) {
			keep = 0
		}
		data, fin = data[:keep], false
	}
	return seq, data, fin
}

// Sink takes the in-order data an endpoint receives as it arrives, in place
// of the endpoint's receive buffer: the data is then held as unread, as if
// Hold had taken it, until Release. The stack's Conn is one: the bytes go
// from the input packet straight into the buffer its Read takes from, one
// copy instead of two (the endpoint's buffer, then Hold into the Conn's).
// What the sink takes changes nothing the endpoint sends: the window counts
// held bytes as unread, exactly as bytes in its own buffer.
type Sink interface {
	// Take copies p (valid only during the call) and reports true, or
	// reports false and copies nothing: the data then waits in the
	// endpoint's buffer, for Hold, and so does all that follows it until
	// that buffer is empty again, so that the order is kept.
	Take(p []byte) bool
}

// OutOfOrderSink is a Sink told of out-of-order data as it arrives, before
// it is queued: data that shrinks the window the peer has left although no
// in-order data came (see ReleaseCanWait), during which the endpoint still
// calls it. It must not call the endpoint back.
type OutOfOrderSink interface {
	Sink
	OutOfOrder()
}

// SetSink makes s take the in-order data that arrives from now on (nil:
// none, the endpoint's buffer holds it for Read or Hold).
func (e *Endpoint) SetSink(s Sink) { e.rcv.sink = s }

// put appends in-order data: to the sink, if there is one, nothing waits in
// the buffer before it and the sink takes it; else to the buffer.
func (r *receiver) put(p []byte) {
	if r.sink != nil && r.buf.len() == 0 && len(p) > 0 && r.sink.Take(p) {
		r.held += len(p)
		return
	}
	r.buf.write(p)
}

// deliver takes in-order text at RCV.NXT into the buffer, then whatever the
// out-of-order queue holds that now follows. It returns the bytes received,
// whether the queue held any (a hole was filled), and whether a FIN was
// reached; RCV.NXT then still stands before the FIN.
func (r *receiver) deliver(data []byte, fin bool) (n int, filled, finReached bool) {
	r.put(data)
	r.nxt = r.nxt.Add(seqnum.Size(len(data)))
	r.unacked += len(data)
	n = len(data)
	if len(r.ooo) > 0 {
		filled = true
		pulled, ooFIN := r.pullOOO()
		n += pulled
		fin = ooFIN || fin
	}
	return n, filled, fin
}

// insertOOO queues out-of-order data (a copy) by sequence number. It reports
// false when the queue is full and the data was dropped.
func (r *receiver) insertOOO(seq seqnum.Value, data []byte, fin bool) bool {
	if o, ok := r.sink.(OutOfOrderSink); ok {
		o.OutOfOrder()
	}
	end := seq.Add(seqnum.Size(len(data)))
	r.lastOOOEnd = end
	if fin {
		r.lastOOOEnd++
	}
	i := sort.Search(len(r.ooo), func(i int) bool { return seq.LessThanEq(r.ooo[i].seq) })
	// Already held entirely by a neighbour?
	for _, j := range []int{i - 1, i} {
		if j >= 0 && j < len(r.ooo) {
			o := &r.ooo[j]
			if o.seq.LessThanEq(seq) && end.LessThanEq(o.dataEnd()) && (!fin || o.fin) {
				return true
			}
		}
	}
	// Extend the entry before when the data follows it, up to oooChunk
	// bytes (Linux's tcp_try_coalesce): a plain link's segments above a
	// hole take one entry per chunk, not one each. Only at the end: the
	// entry after is not copied forward (a retransmission filling a hole
	// below a large range would copy the range).
	if i > 0 {
		p := &r.ooo[i-1]
		if pe := p.dataEnd(); !p.fin && seq.LessThanEq(pe) && pe.LessThan(end) {
			add := data[seq.Size(pe):]
			if len(p.data)+len(add) <= oooChunk {
				p.data = append(p.data, add...) // grown as append grows: no chunk made for a few bytes
				p.fin = fin
				return true
			}
		}
	}
	if len(r.ooo) >= maxOOO {
		return false
	}
	r.ooo = append(r.ooo, oooSeg{})
	copy(r.ooo[i+1:], r.ooo[i:])
	r.ooo[i] = oooSeg{seq: seq, data: append([]byte(nil), data...), fin: fin}
	return true
}

// pullOOO moves queued data that now follows RCV.NXT into the receive buffer.
// It returns the bytes moved and whether a FIN was reached.
func (r *receiver) pullOOO() (int, bool) {
	n, bytes := 0, 0
	fin := false
	for _, o := range r.ooo {
		if r.nxt.LessThan(o.seq) {
			break
		}
		n++
		oe := o.seq.Add(seqnum.Size(len(o.data)))
		if r.nxt.LessThan(oe) {
			d := o.data[o.seq.Size(r.nxt):]
			r.put(d)
			r.nxt = oe
			bytes += len(d)
		}
		if o.fin && r.nxt == oe {
			fin = true
			n = len(r.ooo) // nothing follows a FIN
			break
		}
	}
	r.ooo = append(r.ooo[:0], r.ooo[n:]...)
	return bytes, fin
}

// sackBlocks fills the SACK option from the out-of-order queue (RFC 2018 4):
// the block holding the most recently received segment first, then the others,
// as many as fit beside the timestamps.
func (r *receiver) sackBlocks(o *Options) {
	var blocks [maxOOO]SACKBlock
	nb := 0
	for _, s := range r.ooo {
		start, end := s.seq, s.end() // a FIN takes its sequence number, as in Linux's blocks
		if nb > 0 && start.LessThanEq(blocks[nb-1].End) {
			if blocks[nb-1].End.LessThan(end) {
				blocks[nb-1].End = end
			}
			continue
		}
		if nb == len(blocks) {
			break
		}
		blocks[nb] = SACKBlock{start, end}
		nb++
	}
	limit := MaxSACKBlocks
	if o.TS {
		limit = 3 // 40 bytes: 12 for timestamps, 2+8n for SACK
	}
	first := -1
	for i := 0; i < nb; i++ {
		if (r.lastOOOEnd - 1).InRange(blocks[i].Start, blocks[i].End) {
			first = i
			break
		}
	}
	o.NSACK = 0
	if first >= 0 {
		o.SACK[0] = blocks[first]
		o.NSACK = 1
	}
	for i := nb - 1; i >= 0 && o.NSACK < limit; i-- {
		if i != first {
			o.SACK[o.NSACK] = blocks[i]
			o.NSACK++
		}
	}
}
