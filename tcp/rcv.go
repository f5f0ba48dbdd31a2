package tcp

import (
	"sort"

	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// maxOOO bounds the out-of-order queue: segments beyond it are dropped (and
// counted); the window already bounds the bytes.
const maxOOO = 256

// oooSeg is out-of-order data waiting for the hole before it to fill.
type oooSeg struct {
	seq  seqnum.Value
	data []byte // a copy
	fin  bool
}

func (o *oooSeg) end() seqnum.Value {
	e := o.seq.Add(seqnum.Size(len(o.data)))
	if o.fin {
		e++
	}
	return e
}

// rcvSpace is the free space in the receive buffer.
func (e *Endpoint) rcvSpace() int {
	return max(0, e.cfg.RecvBuffer-e.rcvBuf.len())
}

// rcvWnd is the window we have advertised: RCV.WND = right edge - RCV.NXT.
func (e *Endpoint) rcvWnd() seqnum.Size {
	if e.rcvAdv.LessThan(e.rcvNxt) {
		return 0
	}
	return e.rcvNxt.Size(e.rcvAdv)
}

// windowField computes the window to advertise, scaled to the 16-bit field, and
// records the right edge. The edge never moves left (RFC 9293 3.8.6.2.2: do not
// shrink the window) and moves right only by at least min(RecvBuffer/2, MSS)
// (receiver SWS avoidance, RFC 9293 3.8.6.2.2 / RFC 1122 4.2.3.3).
func (e *Endpoint) windowField() uint16 {
	space := e.rcvSpace()
	maxWnd := 0xffff << e.rcvWS
	space = min(space, maxWnd)
	edge := e.rcvNxt.Add(seqnum.Size(space))
	if e.rcvAdv.LessThan(edge) {
		if int(e.rcvAdv.Size(edge)) < min(e.cfg.RecvBuffer/2, e.cfg.MSS) {
			edge = e.rcvAdv // RFC 9293 3.8.6.2.2: too small a step; keep the edge
		}
	} else {
		edge = e.rcvAdv
	}
	wnd := int(e.rcvNxt.Size(edge))
	if e.rcvAdv.LessThan(e.rcvNxt) {
		wnd = space
	}
	field := wnd >> e.rcvWS
	if e.rcvNxt.Add(seqnum.Size(field << e.rcvWS)).LessThan(e.rcvAdv) {
		field = (wnd + (1 << e.rcvWS) - 1) >> e.rcvWS // round up so the promised edge never recedes
	}
	field = min(field, 0xffff)
	if adv := e.rcvNxt.Add(seqnum.Size(field << e.rcvWS)); e.rcvAdv.LessThan(adv) {
		e.rcvAdv = adv
	}
	return uint16(field)
}

// maybeWindowUpdate sends a window update after Read freed space, when the
// right edge can move by at least min(RecvBuffer/2, MSS) (RFC 1122 4.2.3.3).
func (e *Endpoint) maybeWindowUpdate() {
	if !e.state.canReceive() {
		return
	}
	edge := e.rcvNxt.Add(seqnum.Size(min(e.rcvSpace(), 0xffff<<e.rcvWS)))
	if e.rcvAdv.LessThan(edge) && int(e.rcvAdv.Size(edge)) >= min(e.cfg.RecvBuffer/2, e.cfg.MSS) {
		e.sendAck()
	}
}

// processData accepts the text of an acceptable segment and its FIN (RFC 9293
// 3.10.7.4, seventh and eighth checks).
func (e *Endpoint) processData(seg *Segment) {
	seq, data, fin := seg.Seq, seg.Payload, seg.Flags&FlagFIN != 0
	if len(data) > 0 {
		e.stats.DataSegsIn++
	}
	if len(data) > e.rcvMSS {
		e.rcvMSS = len(data)
	}
	if len(data) > 0 && e.appClosed {
		// RFC 2525 2.17 / Linux: data for a closed socket resets the connection.
		e.abort(nil, true)
		return
	}
	// Trim what we already have.
	if seq.LessThan(e.rcvNxt) {
		d := int(seq.Size(e.rcvNxt))
		if d > len(data) {
			data, fin = nil, false // the FIN, too, is one we have
		} else {
			data = data[d:]
		}
		seq = e.rcvNxt
	}
	// Trim what lies beyond the window (RFC 9293 3.10.7.4).
	wndEnd := e.rcvNxt.Add(e.rcvWnd())
	if end := seq.Add(seqnum.Size(len(data))); wndEnd.LessThan(end) {
		keep := int(seq.Size(wndEnd))
		if keep < 0 || keep > len(data) {
			keep = 0
		}
		data, fin = data[:keep], false
	}
	if len(data) == 0 && !fin {
		if len(seg.Payload) > 0 || seg.Flags&FlagFIN != 0 {
			e.sendAck() // a duplicate: ACK at once (RFC 5681 4.2)
		}
		return
	}
	if seq != e.rcvNxt {
		e.insertOOO(seq, data, fin)
		e.stats.OutOfOrderSegs++
		e.sendAck() // RFC 5681 4.2: out-of-order data is ACKed at once (with SACK blocks)
		return
	}
	e.rcvBuf.write(data)
	e.rcvNxt = e.rcvNxt.Add(seqnum.Size(len(data)))
	e.stats.BytesReceived += uint64(len(data))
	e.unackedBytes += len(data)
	filled := false
	if len(e.ooo) > 0 {
		filled = true
		fin = e.pullOOO() || fin
	}
	if len(data) > 0 {
		e.event(EventReadable)
	}
	if fin {
		e.rcvNxt++
		e.processFIN()
		return
	}
	if filled || e.unackedBytes >= 2*e.rcvMSS || e.cfg.DelayedACK < 0 {
		// RFC 5681 4.2: ACK at least every second full-sized segment, and at once
		// when a segment fills a hole.
		e.sendAck()
		return
	}
	if !e.timerPending(timerDelayedACK) {
		e.startTimer(timerDelayedACK, e.cfg.DelayedACK) // RFC 1122 4.2.3.2: delay the ACK
	}
}

// insertOOO queues out-of-order data (a copy) by sequence number.
func (e *Endpoint) insertOOO(seq seqnum.Value, data []byte, fin bool) {
	e.lastOOO = seq
	end := seq.Add(seqnum.Size(len(data)))
	i := sort.Search(len(e.ooo), func(i int) bool { return seq.LessThanEq(e.ooo[i].seq) })
	// Already held entirely by a neighbour?
	for _, j := range []int{i - 1, i} {
		if j >= 0 && j < len(e.ooo) {
			o := &e.ooo[j]
			oe := o.seq.Add(seqnum.Size(len(o.data)))
			if o.seq.LessThanEq(seq) && end.LessThanEq(oe) && (!fin || o.fin) {
				return
			}
		}
	}
	if len(e.ooo) >= maxOOO {
		e.stats.DropsOOOLimit++
		return
	}
	e.ooo = append(e.ooo, oooSeg{})
	copy(e.ooo[i+1:], e.ooo[i:])
	e.ooo[i] = oooSeg{seq: seq, data: append([]byte(nil), data...), fin: fin}
}

// pullOOO moves queued data that now follows RCV.NXT into the receive buffer.
// It reports whether a FIN was reached.
func (e *Endpoint) pullOOO() bool {
	n := 0
	fin := false
	for _, o := range e.ooo {
		if e.rcvNxt.LessThan(o.seq) {
			break
		}
		n++
		oe := o.seq.Add(seqnum.Size(len(o.data)))
		if e.rcvNxt.LessThan(oe) {
			d := o.data[o.seq.Size(e.rcvNxt):]
			e.rcvBuf.write(d)
			e.rcvNxt = oe
			e.stats.BytesReceived += uint64(len(d))
		}
		if o.fin && e.rcvNxt == oe {
			fin = true
			n = len(e.ooo) // nothing follows a FIN
			break
		}
	}
	e.ooo = append(e.ooo[:0], e.ooo[n:]...)
	return fin
}

// sackBlocks fills the SACK option from the out-of-order queue (RFC 2018 4):
// the block holding the most recently received segment first, then the others,
// as many as fit beside the timestamps.
func (e *Endpoint) sackBlocks(o *Options) {
	var blocks [maxOOO]SACKBlock
	nb := 0
	for _, s := range e.ooo {
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
		if e.lastOOO.InRange(blocks[i].Start, blocks[i].End) {
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
