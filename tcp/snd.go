package tcp

import (
	"math"
	"sort"
	"time"

	"github.com/tcpwheel/tcpwheel/tcp/seqnum"
	"github.com/tcpwheel/tcpwheel/timer"
)

// txSeg is a sent, unacknowledged segment. It embeds its retransmission timer:
// sending or resending it starts the entry at RTO, an ACK or SACK that covers it
// stops it (DESIGN.md, tcp/).
type txSeg struct {
	e     *Endpoint
	entry timer.Entry
	segState
}

// segState is a txSeg's state but for its endpoint and timer entry: what
// newSeg resets when it reuses one, in one assignment of a struct without
// pointers (with them, the assignment of the whole txSeg was a typed copy
// through the runtime, 3% of a download's CPU).
type segState struct {
	seq   seqnum.Value
	len   seqnum.Size // in sequence space: data plus SYN and FIN
	flags Flags       // FlagSYN, FlagFIN, and FlagPSH (sendDataPSH)
	push  bool        // Linux would mark it PSH: a retransmission carries PSH only then (sendDataPSH)
	// gso: a TSO segment of MSS-sized pieces of gso bytes (gso.go); 0:
	// one segment. (In the padding before sentAt: txSeg stays 128 bytes.)
	gso    uint16
	sentAt time.Duration // RFC 8985 5.2: Segment.xmit_ts
	order  uint64        // rackState.xmits at the latest transmission
	// prevSentAt is the time of the transmission before, when xmits > 1.
	prevSentAt time.Duration
	rtoAt      time.Duration // when its retransmission timer expires, while it runs
	rtoArmed   time.Duration // when that timer was started (rtoAt less the RTO it runs)
	xmits      int           // times sent
	sacked     bool          // covered by a SACK block
	lost       bool          // RFC 8985 5.2: Segment.lost, by RACK, until resent
	// rtxInRecovery: resent in the current fast recovery episode.
	rtxInRecovery bool
}

func (s *txSeg) end() seqnum.Value { return s.seq.Add(s.len) }

func (s *txSeg) dataLen() int {
	n := int(s.len)
	if s.flags&FlagSYN != 0 {
		n--
	}
	if s.flags&FlagFIN != 0 {
		n--
	}
	return n
}

// Expire is the segment's retransmission timeout: s is its entry's
// timer.Handler, so a new segment binds no method value (an allocation).
func (s *txSeg) Expire() { s.e.onRTO(s) }

// sender is the send side of a connection: the send sequence space (RFC 9293
// 3.3.1), the send buffer, the retransmission queue and the state of
// retransmission and zero-window probing. Its methods touch only these; the
// steps that also touch the receiver, the timers, congestion control or
// RACK-TLP (transmit, output, the ACK processing, the RTO) are the
// Endpoint's, below.
type sender struct {
	iss      seqnum.Value
	una, nxt seqnum.Value // SND.UNA, SND.NXT: nxt falls back to una after an RTO (go-back-N)
	max      seqnum.Value // the highest sequence number sent + 1
	wnd      uint32       // SND.WND, scaled
	maxWnd   uint32       // the largest SND.WND seen
	wl1, wl2 seqnum.Value // SND.WL1, SND.WL2
	ws       uint8        // the peer's window shift (RFC 7323 2.2)
	// gsoSegs counts the TSO segments in rtxq (gso.go), which splitGSO
	// cuts. (In the padding after ws: the Endpoint keeps its size class.)
	gsoSegs int32
	smss    int // payload bytes per segment (RFC 9293 3.7.1 Eff.snd.MSS)
	peerMSS int

	buf       sendBuffer   // unacknowledged and unsent data
	bufSeq    seqnum.Value // sequence number of buf's first byte
	finQueued bool         // CloseWrite: send FIN after the data
	finSent   bool
	finSeq    seqnum.Value // valid when finSent
	rtxq      []*txSeg     // sent, unacknowledged segments, by sequence
	// rtxqMem is rtxq's storage, from its start: an ACK moves rtxq past
	// the segments it frees (dropHead), and queue moves what is left back
	// to the start when rtxq reaches the storage's end.
	rtxqMem  []*txSeg
	freeSegs []*txSeg
	// rtxqFirst and freeFirst are rtxqMem's and freeSegs' first storage,
	// in the endpoint's allocation (whose size class has room for them): a
	// short connection's queues do not grow on the heap.
	rtxqFirst, freeFirst [2]*txSeg

	rtoRetries    int  // RTO expirations since the last progress (tcpi_retransmits)
	synRetries    int  // SYN or SYN-ACK retransmissions
	synRetransmit bool // the SYN or SYN-ACK was resent: RFC 6298 (5.7), RFC 5681 3.1
	// chunkEnd says that the segment about to be sent ends a chunk of new
	// data (gso.go, "Chunks"; Segment.ChunkEnd); chunkLeft is how many
	// full-sized segments the open chunk still takes, 0 when none is open.
	// In synRetransmit's padding.
	chunkEnd       bool
	chunkLeft      int32
	persistBackoff int          // zero-window probe doublings (RFC 1122 4.2.2.17)
	persistProbes  int          // unanswered zero-window probes
	burst          int          // segments of new data sent by the current output pass
	sml            seqnum.Value // the end of the last segment sent short of a full one (Nagle)
	// maxOut is the most data outstanding in the current window (since
	// maxOutSeq was sent), for congestion window validation (cwndLimited).
	maxOut    int
	maxOutSeq seqnum.Value
	// lastDataAt: when data last went out (new or resent), once dataSent;
	// for the restart after idle (restartAfterIdle).
	lastDataAt time.Duration
	dataSent   bool
	push       pushState       // Config.PushPolicy PushLinux (push.go)
	local      localCong       // LocalCongestion (localcong.go)
	cong       LocalCongestion // the Output, if it is one
}

func newSender(iss seqnum.Value) sender {
	return sender{iss: iss, una: iss, nxt: iss, max: iss, sml: iss, bufSeq: iss + 1, peerMSS: DefaultMSS, smss: DefaultMSS}
}

// flightSize is the data sent and not yet acknowledged (RFC 5681 2).
func (s *sender) flightSize() int { return int(s.max - s.una) }

// inflight is the data sent up to SND.NXT and not yet acknowledged.
func (s *sender) inflight() int { return int(s.nxt - s.una) }

// unsent is the data in the buffer at and after SND.NXT.
func (s *sender) unsent() int { return s.buf.len() - int(s.nxt-s.bufSeq) }

// finAcked reports whether our FIN has been acknowledged.
func (s *sender) finAcked() bool { return s.finSent && s.finSeq.LessThan(s.una) }

// queue appends s, a new segment at SND.NXT, to the retransmission queue and
// moves SND.NXT and SND.MAX past it; a FIN is recorded as sent.
func (s *sender) queue(q *txSeg) {
	if q.flags&FlagFIN != 0 {
		s.finSent, s.finSeq = true, q.end()-1
	}
	if len(s.rtxq) == cap(s.rtxq) {
		s.rtxqRoom()
	}
	s.rtxq = append(s.rtxq, q)
	s.nxt = q.end()
	s.max = s.nxt
}

// rtxqRoom makes room at the end of a full rtxq: when it is in rtxqMem and
// fills at most half of it, by moving it to the start (each segment is moved
// at most once per half of the storage it is queued behind); else in a new
// storage twice as large.
func (s *sender) rtxqRoom() {
	n := len(s.rtxq)
	if s.inRtxqMem() && n <= cap(s.rtxqMem)/2 {
		copy(s.rtxqMem[:n], s.rtxq)
		clear(s.rtxqMem[n:cap(s.rtxqMem)])
		s.rtxq = s.rtxqMem[:n]
		return
	}
	if s.rtxqMem == nil && n < len(s.rtxqFirst) {
		s.rtxqMem = s.rtxqFirst[:n]
	} else {
		s.rtxqMem = make([]*txSeg, n, max(2*n, 1))
	}
	copy(s.rtxqMem, s.rtxq)
	s.rtxq = s.rtxqMem
}

// inRtxqMem reports whether rtxq, with room for at least one segment
// beyond its start, ends where rtxqMem does: then it is rtxqMem's tail.
func (s *sender) inRtxqMem() bool {
	c, m := cap(s.rtxq), cap(s.rtxqMem)
	return c > 0 && m > 0 && &s.rtxq[:c][c-1] == &s.rtxqMem[:m][m-1]
}

// dropHead takes the first n segments off the queue: rtxq moves past them
// (an ACK of a window of segments copied the rest of the queue down, each
// time), and they are cleared from the storage; an emptied queue starts
// again at the storage's start.
func (s *sender) dropHead(n int) {
	clear(s.rtxq[:n])
	if n == len(s.rtxq) && s.inRtxqMem() {
		s.rtxq = s.rtxqMem[:0]
		return
	}
	s.rtxq = s.rtxq[n:]
}

// segAt returns the queued segment that starts at seq, or nil.
func (s *sender) segAt(seq seqnum.Value) *txSeg {
	i := sort.Search(len(s.rtxq), func(i int) bool { return seq.LessThanEq(s.rtxq[i].seq) })
	if i < len(s.rtxq) && s.rtxq[i].seq == seq {
		return s.rtxq[i]
	}
	return nil
}

// windowUpdate is RFC 9293 3.10.7.4's test of whether seg may update the
// send window: SND.WL1 < SEG.SEQ, or SND.WL1 = SEG.SEQ and SND.WL2 =<
// SEG.ACK (shared with a TIME-WAIT record).
func windowUpdate(wl1, wl2 seqnum.Value, seg *Segment) bool {
	return wl1.LessThan(seg.Seq) || wl1 == seg.Seq && wl2.LessThanEq(seg.Ack)
}

// updateWindow is RFC 9293 3.10.7.4's send window update: taken from a
// segment newer than the last one that set it (SND.WL1, SND.WL2), or from any
// with force (the handshake). It reports whether it was taken, and whether
// the window changed.
func (s *sender) updateWindow(seg *Segment, force bool) (taken, changed bool) {
	if !force && !windowUpdate(s.wl1, s.wl2, seg) {
		return false, false
	}
	wnd := uint32(seg.Window) << s.ws
	if seg.Flags&FlagSYN != 0 {
		wnd = uint32(seg.Window) // RFC 7323 2.2: the window of a SYN is never scaled
	}
	changed = wnd != s.wnd
	s.wnd, s.wl1, s.wl2 = wnd, seg.Seq, seg.Ack
	s.maxWnd = max(s.maxWnd, wnd)
	return true, changed
}

// ackedSegs counts the queued segments that ack covers entirely, and reports
// whether any of them was sent more than once (Karn's algorithm) and the
// last of them.
func (s *sender) ackedSegs(ack seqnum.Value) (n int, newest *txSeg, retransmitted bool) {
	for _, q := range s.rtxq {
		if ack.LessThan(q.end()) {
			break
		}
		n++
		if q.xmits > 1 {
			retransmitted = true
		}
		newest = q
	}
	return n, newest, retransmitted
}

// trimHead cuts what ack covers off the head of the queue, partly
// acknowledged, and returns the sequence space cut (0 if none).
func (s *sender) trimHead(ack seqnum.Value) seqnum.Size {
	if len(s.rtxq) == 0 || !s.rtxq[0].seq.LessThan(ack) {
		return 0
	}
	h := s.rtxq[0]
	d := seqnum.Size(ack - h.seq)
	h.seq, h.len = ack, h.len-d
	h.flags &^= FlagSYN
	return d
}

// advance moves SND.UNA to ack and drops the acknowledged data from the
// buffer (the SYN and FIN have none). It reports whether buffer space was
// freed.
func (s *sender) advance(ack seqnum.Value) (freed bool) {
	dataEnd := ack
	if s.finSent && s.finSeq.LessThan(ack) {
		dataEnd = s.finSeq
	}
	if s.bufSeq.LessThan(dataEnd) {
		k := int(dataEnd - s.bufSeq)
		s.buf.consume(min(k, s.buf.len()))
		s.bufSeq = dataEnd
		freed = true
	}
	s.una = ack
	if s.nxt.LessThan(ack) {
		s.nxt = ack // go-back-N: the peer had data we were about to resend
	}
	s.rtoRetries = 0
	return freed
}

// newSeg makes a txSeg, reusing a freed one (and its timer entry) if it can;
// the endpoint's first is Endpoint.seg0, in the endpoint's allocation.
func (e *Endpoint) newSeg(seq seqnum.Value, l seqnum.Size, flags Flags) *txSeg {
	var s *txSeg
	if n := len(e.snd.freeSegs); n > 0 {
		s = e.snd.freeSegs[n-1]
		e.snd.freeSegs = e.snd.freeSegs[:n-1]
	} else if e.seg0.e == nil {
		s = &e.seg0
		s.e = e
		s.entry.InitHandler(s)
	} else {
		s = &txSeg{e: e}
		s.entry.InitHandler(s)
	}
	s.segState = segState{seq: seq, len: l, flags: flags}
	return s
}

// freeSeg stops s's retransmission timer (STOP_TIMER) and keeps s for reuse,
// up to as many as a full send buffer holds (freeSegsCap).
func (e *Endpoint) freeSeg(s *txSeg) { e.freeSegUpTo(s, e.freeSegsCap()) }

// freeSegUpTo is freeSeg keeping up to keep segments: an ACK that frees a
// window of them works out freeSegsCap, a division, once.
func (e *Endpoint) freeSegUpTo(s *txSeg, keep int) {
	if s.entry.Pending() { // the wheel's Stop of an idle entry does nothing: spare the call
		e.w.Stop(&s.entry)
	}
	if s.gso != 0 {
		e.snd.gsoSegs--
	}
	if len(e.snd.freeSegs) < keep {
		if e.snd.freeSegs == nil {
			e.snd.freeSegs = e.snd.freeFirst[:0]
		}
		e.snd.freeSegs = append(e.snd.freeSegs, s)
	}
}

// freeSegsCap is how many freed txSegs the endpoint keeps: enough for a full
// send buffer of full-sized segments, and at least 64. An ACK may free a
// whole window at once (a batch of input ACKs it all before the output
// runs): with a fixed 64 a bulk sender allocated anew most of the segments
// of each window (a 256 KB buffer is 182 segments of 1448 bytes, the
// default 512 KB one 363). They cost 128 bytes each (46 KB for 512 KB),
// kept once used as the connection's ring keeps its storage, up to the
// send buffer (internal/ring).
func (e *Endpoint) freeSegsCap() int {
	return max(64, e.cfg.SendBuffer/max(e.snd.smss, 64)+1)
}

// autoGrowSendBuffer doubles the send buffer, up to Config.SendBufferMax,
// when an ACK of new data finds it full while cwnd has room (Linux's
// tcp_should_expand_sndbuf: the application is held back by the buffer,
// not by the network) on a connection that has had at least four buffers'
// worth acknowledged: a bulk sender, whose writer then wakes, and whose
// loop sends, once per larger step. A shorter transfer keeps the default,
// which a new connection's storage is grown and faulted in to (tcp.Config).
// It runs on the ACKs alone, so a replay grows the buffer where the
// recording did.
func (e *Endpoint) autoGrowSendBuffer() {
	n := e.cfg.SendBuffer
	if n >= e.cfg.SendBufferMax || e.snd.buf.len() < n || e.stats.BytesAcked < 4*uint64(n) || e.snd.inflight() >= e.cc.cwnd() {
		return
	}
	e.cfg.SendBuffer = min(2*n, e.cfg.SendBufferMax)
}

// SendBufferSize returns the send buffer's size (Config.SendBuffer), as
// SetSendBuffer or its growth (autoGrowSendBuffer) left it.
func (e *Endpoint) SendBufferSize() int { return e.cfg.SendBuffer }

// synOptions fills the options of our SYN or SYN-ACK (RFC 9293 3.7.1, RFC 7323,
// RFC 2018). On a SYN-ACK only the options the peer offered are echoed.
func (e *Endpoint) synOptions(o *Options) {
	o.HasMSS, o.MSS = true, uint16(e.cfg.MSS)
	if e.wsOK {
		o.HasWS, o.WindowScale = true, e.rcv.ws
	}
	o.SACKPermitted = e.sackOK
	if e.tsOK {
		o.TS, o.TSVal, o.TSEcr = true, e.tsVal(), e.tsRecent
	}
}

// sendSYN queues and sends the SYN (or, from a passive open, the SYN-ACK).
func (e *Endpoint) sendSYN() {
	e.transmit(e.queueNew(1, FlagSYN), false)
}

// queueNew queues a new segment of l (sequence space) at SND.NXT.
func (e *Endpoint) queueNew(l seqnum.Size, flags Flags) *txSeg {
	s := e.newSeg(e.snd.nxt, l, flags)
	e.snd.queue(s)
	return s
}

// transmit sends s (again) and starts its retransmission timer.
func (e *Endpoint) transmit(s *txSeg, retransmit bool) { e.transmitAt(s, retransmit, e.now()) }

// transmitAt is transmit with the wheel's Now read by the caller (now): it
// does not move within the loop's turn, and a bulk sender read it, through
// the Timers interface, three times per segment.
func (e *Endpoint) transmitAt(s *txSeg, retransmit bool, now time.Duration) {
	seg := e.outSeg()
	seg.Seq = s.seq
	seg.Flags = s.flags | FlagACK
	seg.ChunkEnd, e.snd.chunkEnd = e.snd.chunkEnd && !retransmit, false
	if retransmit && !s.push {
		seg.Flags &^= FlagPSH // sendDataPSH
	}
	if s.flags&FlagSYN != 0 {
		if e.state == StateSynSent {
			seg.Flags &^= FlagACK
		}
		e.synOptions(&seg.Options)
	}
	pieces := 1
	if s.gso != 0 { // a TSO segment (gso.go): its packets are counted
		seg.GSOSize, pieces = int(s.gso), s.gsoPieces()
		e.stats.SegsOut += uint64(pieces - 1) // send counts one
	}
	if n := s.dataLen(); n > 0 {
		e.snd.dataSent, e.snd.lastDataAt = true, now // restartAfterIdle
		off := int(s.seq - e.snd.bufSeq)
		seg.Payload, seg.PayloadStable = e.snd.buf.at(off, n), e.snd.buf.stable(off, n)
		e.stats.DataSegsOut += uint64(pieces)
		e.stats.BytesSent += uint64(n)
		if retransmit {
			e.stats.BytesRetrans += uint64(n)
		}
	}
	if retransmit {
		e.stats.SegsRetransmitted++
		if s.flags&FlagSYN != 0 {
			e.stats.SYNRetransmits++
		}
	}
	if e.sackRecovery() {
		e.fr.prr.out += int(s.len) // RFC 6937 3: prr_out
	}
	s.xmits++
	s.prevSentAt, s.sentAt = s.sentAt, now // RFC 8985 6.1: Segment.xmit_ts = Now()
	e.rack.xmits += uint64(pieces)         // one per MSS piece: the last piece's order (splitGSO)
	s.order = e.rack.xmits
	s.lost = false       // RFC 8985 6.1: Segment.lost = FALSE
	at := e.w.SendTime() // the instant the segment is sent: the RTO runs from here (Timers)
	e.send(seg)
	if e.state == StateClosed { // the wheel failed us inside send
		return
	}
	e.armRTOAt(s, at) // RFC 6298 (5.1): start the timer when a segment is sent
	if e.cfg.UserTimeout > 0 && !e.timerPending(timerUser) {
		e.startTimer(timerUser, e.cfg.UserTimeout) // RFC 5482: data now waits for an ACK
	}
}

// armRTO starts s's retransmission timer at the current RTO from now (an RTO
// restarted by an ACK, RFC 6298 (5.3)).
func (e *Endpoint) armRTO(s *txSeg) { e.armRTOAt(s, e.w.SendTime()) }

// armRTOAt starts s's retransmission timer at the current RTO from at.
func (e *Endpoint) armRTOAt(s *txSeg, at time.Duration) {
	d := e.rtt.rto()
	if at > math.MaxInt64-d {
		at = math.MaxInt64 - d // a MaxRTO of centuries
	}
	s.rtoArmed, s.rtoAt = at, at+d
	if err := e.w.StartAt(&s.entry, s.rtoAt); err != nil {
		e.timerFailed(err)
	}
}

// send fills the fields every segment shares (ports, ACK, window, timestamps,
// SACK blocks) and hands seg to the Output.
func (e *Endpoint) send(seg *Segment) {
	seg.SrcPort, seg.DstPort = e.id.Local.Port(), e.id.Remote.Port()
	if seg.Flags&FlagACK != 0 {
		seg.Ack = e.rcv.nxt
		e.lastAckSent = e.rcv.nxt
		e.rcv.unacked, e.rcv.pushed = 0, false
		e.ackHeld = false            // FlushAck has nothing left to send
		e.stopTimer(timerDelayedACK) // the ACK rides on this segment
	}
	if seg.Flags&FlagSYN != 0 {
		seg.Window = e.rcv.synWindow() // RFC 7323 2.2: the SYN's window is never scaled
	} else {
		seg.Window = e.rcv.windowField()
		if e.tsOK {
			seg.Options.TS, seg.Options.TSVal, seg.Options.TSEcr = true, e.tsVal(), e.tsRecent
		}
		if e.sackOK && seg.Flags&FlagACK != 0 && seg.Flags&FlagRST == 0 && len(e.rcv.ooo) > 0 {
			e.rcv.sackBlocks(&seg.Options) // RFC 2018 4
			e.fitSACK(seg)
		}
	}
	e.stats.SegsOut++
	e.emit(seg)
}

// emit hands seg to the Output as a copy the endpoint keeps (txScratch):
// a segment passed to an interface's method is moved to the heap by the
// compiler, and every segment a bulk sender sent was one allocation (with
// the garbage collection it caused, 13% of a download's CPU). A send made
// while the Output still has the scratch (an Output that hands the segment
// to a peer which answers at once, as tests do) gets a copy of its own.
func (e *Endpoint) emit(seg *Segment) {
	if e.emitting {
		c := *seg
		e.out.Send(e.id, &c)
		return
	}
	e.emitting = true
	if seg != &e.txScratch { // outSeg's is there already
		e.txScratch = *seg
	}
	e.out.Send(e.id, &e.txScratch)
	e.txScratch.Payload = nil // it aliases the send buffer
	e.emitting = false
}

// outSeg returns a zero segment for transmit to fill and send: the
// scratch that emit hands to the Output, so that a data segment is not
// copied there (2.7% of a download's CPU), or, while the Output has it, a
// new one.
func (e *Endpoint) outSeg() *Segment {
	if e.emitting {
		return new(Segment)
	}
	e.txScratch = Segment{}
	return &e.txScratch
}

// fitSACK drops the SACK blocks a data segment has no room for: its payload
// and options must fit the MSS (RFC 9293 3.7.1, RFC 6691), and a full-sized
// segment was sized with room for the timestamps only. RFC 2018 4 asks for as
// many blocks as fit; the first, the most recent, are kept. (Without this, a
// retransmission while out-of-order data waited was larger than the link's
// MTU, dropped by the stack as too big, every time: both ends of a lossy
// connection could stall for good.)
func (e *Endpoint) fitSACK(seg *Segment) {
	n := len(seg.Payload)
	if seg.GSOSize > 0 {
		n = min(n, seg.GSOSize) // each packet's
	}
	if n == 0 || seg.Options.NSACK == 0 {
		return
	}
	room := e.mssCap() - n // icmp.go
	if seg.Options.TS {
		room -= 12
	}
	// A SACK option takes 4 + 8 bytes per block, NOPs included.
	seg.Options.NSACK = max(0, min(seg.Options.NSACK, (room-4)/8))
}

// sendAck sends a bare ACK: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
func (e *Endpoint) sendAck() {
	seg := Segment{Seq: e.snd.nxt, Flags: FlagACK}
	e.send(&seg)
}

// sendRST sends <SEQ=seq><CTL=RST>.
func (e *Endpoint) sendRST(seq seqnum.Value) {
	seg := Segment{Seq: seq, Flags: FlagRST}
	e.stats.ResetsSent++
	e.send(&seg)
}

// output sends what the windows allow: segments being resent after an RTO
// (go-back-N from SND.NXT up to the highest sent, skipping SACKed ones), then
// new data, then the FIN. New data (re)starts the loss probe timeout (RFC 8985
// 7.2).
func (e *Endpoint) output() {
	if !e.state.canSendData() {
		return
	}
	sndMax := e.snd.max
	e.snd.burst = 0
	e.snd.chunkLeft = 0
	e.snd.push.left = 0 // PushLinux: each pass starts a TSO chunk, as tcp_write_xmit
	for e.state != StateClosed && e.outputOne() {
	}
	if e.snd.max != sndMax && e.state != StateClosed && e.rackOn() {
		e.armPTO() // RFC 8985 7.2: after transmitting new data
	}
}

// sendWindow is how much may be outstanding: the smaller of cwnd and the
// peer's window; in fast recovery with SACK, once nothing waits to be resent,
// RFC 6675 5 (C): new data as long as cwnd - pipe >= 1 SMSS, the peer's
// window still bounding what is outstanding.
func (e *Endpoint) sendWindow() int {
	wnd := min(e.cc.cwnd(), int(e.snd.wnd))
	if e.sackRecovery() && !e.snd.nxt.LessThan(e.snd.max) {
		inflight := e.snd.inflight()
		wnd = int(e.snd.wnd)
		if room := e.cc.cwnd() - e.pipe(); room < wnd-inflight {
			wnd = inflight + room
		}
	}
	return wnd
}

// outputOne sends one segment, if the windows allow: the next to resend
// after an RTO, else new data, else the FIN. It reports whether to go on.
func (e *Endpoint) outputOne() bool {
	wnd := e.sendWindow()
	if e.snd.nxt.LessThan(e.snd.max) {
		return e.resendNext(wnd)
	}
	if e.snd.finSent {
		return false // the FIN is the last thing to send
	}
	avail := e.snd.unsent()
	if avail <= 0 {
		if e.snd.finQueued && !e.snd.finSent {
			e.queueFIN()
		}
		return false
	}
	inflight := e.snd.inflight()
	usable := wnd - inflight
	if usable <= 0 {
		if e.snd.wnd == 0 && len(e.snd.rtxq) == 0 {
			e.armPersist()
		}
		return false
	}
	if k := e.gsoRoom(min(avail, usable, e.startChunk(usable))); k >= 2 && !e.localCongested() {
		// k full-sized segments as one TSO segment (gso.go), each of
		// which the loop would have sent: full-sized, SWS and Nagle let
		// them go; PSH on each (PushEvery outside fast recovery).
		n := k * e.snd.smss
		e.takeChunk(k)
		e.sendGSO(n, usable-n < min(avail-n, e.snd.smss))
		e.snd.burst += k
		return true
	}
	n := min(avail, e.snd.smss, usable)
	// RFC 9293 3.8.6.2.1 sender SWS avoidance: a full segment, all the data we
	// have, or, when nothing is in flight, at least half the peer's largest
	// window; otherwise wait for ACKs to open the window.
	if n < e.snd.smss && n < avail && inflight > 0 && n < int(e.snd.maxWnd/2) {
		return false
	}
	// Nagle (RFC 896, RFC 1122 4.2.3.4) with Minshall's refinement, as Linux:
	// with Config.Nagle, a segment short of a full one waits while a short
	// segment sent before is unacknowledged; one that carries the FIN does
	// not wait.
	if e.cfg.Nagle && n < e.snd.smss && e.snd.una.LessThan(e.snd.sml) && !(e.snd.finQueued && n == avail) {
		return false
	}
	if e.localCongested() {
		return false // the Output's queue would drop it: held (localcong.go)
	}
	// Linux's PSH (as packetdrill's scripts show it): besides the segment that
	// empties the buffer, the last of a burst of two or more, the one after
	// which the windows leave no room for the next; not a lone segment that
	// leaves data behind (limited transmit, PRR's one per ACK).
	// In fast recovery, Linux's marking alone: the receiver holds
	// out-of-order data and ACKs every segment at once, PSH or not (as for
	// limited transmit's segment, sendDataPSH).
	if e.cfg.PushPolicy == PushLinux {
		psh := e.pushChunkEnd(usable)
		e.snd.chunkEnd = e.snd.push.left == 0 && !e.cfg.DisableHalfCwndChunks
		e.sendDataPSH(n, false, psh)
	} else {
		e.takeChunk(1)
		burstEnd := usable-n < min(avail-n, e.snd.smss)
		push := burstEnd && e.snd.burst > 0
		e.sendDataPSH(n, push, push || !e.fr.active)
	}
	e.snd.burst++
	return true
}

// resendNext resends the segment at SND.NXT after an RTO, in order as the
// window allows (RFC 6298 (5.4)-(5.6), go-back-N), skipping SACKed ones. It
// reports whether to go on.
func (e *Endpoint) resendNext(wnd int) bool {
	s := e.snd.segAt(e.snd.nxt)
	if s == nil {
		e.snd.nxt = e.snd.max // cannot happen: the queue covers [SND.UNA, SND.MAX)
		return true
	}
	if s.sacked {
		e.snd.nxt = s.end()
		return true
	}
	if inflight := e.snd.inflight(); inflight > 0 && inflight+int(s.len) > wnd {
		return false
	}
	e.transmit(s, true) // RFC 6298 (5.4)-(5.6): resent in order as cwnd allows
	e.snd.nxt = s.end()
	return true
}

// sendData queues and sends the next n bytes of unsent data, with the FIN if
// they are the last and the FIN is queued; push says whether Linux would mark
// it with PSH (see sendDataPSH), and so does it carry PSH: limited
// transmit's segment, alone and leaving data behind, goes without.
func (e *Endpoint) sendData(n int, push bool) { e.sendDataPSH(n, push, push) }

// sendDataPSH is sendData with PSH on the segment when psh is set, or when
// it empties the send buffer (RFC 1122 4.2.2.2: "MUST set the PSH bit in the
// last buffered segment"). push says whether Linux would mark it (the last
// of a write or of a burst, tcp_push): a retransmission carries PSH only
// then (transmit), as Linux resends a fragment of its segment without it.
//
// PSH goes on every new data segment but limited transmit's, not only where
// Linux marks it (the
// RFCs leave it open: RFC 1122 4.2.2.2 asks for PSH on the last buffered
// segment and allows it on others). A Linux receiver (tcp_measure_rcv_mss,
// since late 2023) notes a full-sized segment with PSH as the end of a write
// (ICSK_ACK_PUSHED) and ACKs at once when its reader has taken everything
// (tcp_cleanup_rbuf); without PSH it ACKs every second segment, and a lone
// segment after a pause (a tail-loss probe) only when its delayed-ACK timer
// fires, 40 ms on. Measured with Linux's marking against the Linux kernel
// over TUN (tcpwheel compare, 20 MB uploads, interleaved runs): slower at
// every loss rate, 2x at 1% and 5% (README, conformance deviations).
// Limited transmit's segment goes without at no such cost: it answers a
// duplicate ACK, while the receiver holds out-of-order data and ACKs every
// segment at once; so does a retransmission that fills a hole.
//
// With PushLinux, push is whether the segment covers a Write's end or a
// forced push (pushMarked), and PSH goes there and where psh says (the end
// of a TSO chunk).
func (e *Endpoint) sendDataPSH(n int, push, psh bool) {
	if e.cfg.PushPolicy == PushLinux {
		push = e.pushMarked(n)
		psh = psh || push
	}
	l := seqnum.Size(n)
	var flags Flags
	last := n == e.snd.unsent() // it empties the buffer (unsent asks the buffer's Source)
	if psh || last {
		flags = FlagPSH
	}
	push = push || last
	if last {
		if e.snd.finQueued {
			l++
			flags |= FlagFIN
		}
	}
	if n < e.snd.smss {
		e.snd.sml = e.snd.nxt.Add(seqnum.Size(n))
	}
	s := e.queueNew(l, flags)
	s.push = push
	// Linux's pingpong mode (tcp_event_data_sent): data sent within the
	// delayed-ACK time of the data received before it.
	now := e.now()
	e.rcv.pingpong = e.rcv.gotData && now-e.rcv.dataAt < e.cfg.DelayedACK
	// Linux's tcp_cwnd_validate: the window's largest flight.
	if out := e.snd.inflight(); !e.snd.una.LessThan(e.snd.maxOutSeq) || out > e.snd.maxOut {
		e.snd.maxOut, e.snd.maxOutSeq = out, e.snd.nxt
	}
	e.stopTimer(timerPersist)
	e.transmitAt(s, false, now)
}

// sendNewSegment sends, as a tail-loss probe (RFC 8985 7.3), the next segment
// of unsent data, or the FIN alone, if there is one and the peer's window
// takes it; cwnd is not consulted. It reports whether it sent.
func (e *Endpoint) sendNewSegment() bool {
	if e.snd.nxt != e.snd.max || e.snd.finSent {
		return false
	}
	avail := e.snd.unsent()
	if avail <= 0 {
		if e.snd.finQueued {
			e.queueFIN()
			return true
		}
		return false
	}
	n := min(avail, e.snd.smss)
	if e.snd.inflight()+n > int(e.snd.wnd) {
		return false // RFC 8985 7.3: the receive window does not allow new data
	}
	e.sendDataPSH(n, false, e.cfg.PushPolicy != PushLinux) // PSH: the last segment before a silence (sendDataPSH)
	return true
}

// queueFIN sends a FIN with no data.
func (e *Endpoint) queueFIN() {
	e.transmit(e.queueNew(1, FlagFIN), false)
}

// onRTO runs when a segment's retransmission timer expires. The expiry of the
// oldest outstanding segment is the RTO event; a later segment's expiry (its RTO
// was shorter) is one too when the oldest has no timer running.
func (e *Endpoint) onRTO(s *txSeg) {
	defer e.flush()
	if len(e.snd.rtxq) == 0 || e.state == StateClosed {
		return
	}
	e.splitGSO() // go-back-N resends MSS-sized segments (gso.go)
	head := e.snd.rtxq[0]
	if s != head && head.entry.Pending() {
		return
	}
	e.stats.RTOEvents++
	e.lastRTO = TimerExpiry{Timer: TimerRTO, Armed: s.rtoArmed, Due: s.rtoAt, Fired: e.w.Target()}
	if e.trace != nil {
		e.traceExpiry(e.lastRTO)
	}
	if head.flags&FlagSYN != 0 {
		limit := e.cfg.SYNRetries
		if l := e.listener; l != nil {
			limit = l.synAckRetries() // a half-open connection's (ListenerConfig.SynAckRetries)
		}
		if e.snd.synRetries >= limit {
			e.abort(ErrTimeout, e.state == StateSynReceived && !e.passive) // retry limit (Linux tcp_syn_retries, tcp_synack_retries)
			return
		}
		e.snd.synRetries++
		e.snd.synRetransmit = true
		e.rtt.backOff() // RFC 6298 (5.5): SYNs back off 1, 2, 4, ... s
		e.snd.rtoRetries++
		e.transmit(head, true) // RFC 6298 (5.4)
		return
	}
	if e.snd.rtoRetries >= e.cfg.Retries2 {
		e.abort(ErrTimeout, true) // total retransmission limit (Linux tcp_retries2)
		return
	}
	e.snd.rtoRetries++
	e.rackOnRTO()
	e.cc.onRTO(e.snd.flightSize(), e.snd.rtoRetries == 1) // RFC 5681 (4), 3.1: LW = 1 SMSS
	e.rtt.backOff()                                       // RFC 6298 (5.5): RTO <- min(2*RTO, MaxRTO)
	e.fr.active, e.fr.dupAcks = false, 0
	e.fr.recover = e.snd.max // RFC 6582 4: no fast retransmit for the ACKs of this flight
	for _, o := range e.snd.rtxq[1:] {
		e.w.Stop(&o.entry) // re-armed when resent (go-back-N)
		o.rtxInRecovery = false
	}
	e.snd.nxt = e.snd.una
	e.transmit(head, true) // RFC 6298 (5.4): retransmit the earliest unacknowledged segment
	e.snd.nxt = head.end() // RFC 6298 (5.6): its timer runs with the doubled RTO
	e.output()
}

// handleAck processes SEG.ACK in a synchronized state (RFC 9293 3.10.7.4, fifth
// check). It returns false when the segment is to be dropped.
func (e *Endpoint) handleAck(seg *Segment, forceWnd bool) bool {
	ack := seg.Ack
	if !e.ackAcceptable(ack, forceWnd) {
		return false
	}
	una, sacked := e.snd.una, e.sb.bytes
	e.fr.prr.hold = e.sackOK // fast recovery's sends wait for PRR (prrAck)
	if ack.LessThan(e.snd.una) {
		// RFC 9293: a duplicate (old) ACK can be ignored; its SACK
		// information is taken (RFC 2018 does not tie it to SEG.ACK), as
		// Linux does: a reordered ACK may be the first news of a delivery.
		if e.sackOK && seg.Options.NSACK > 0 && e.updateSACK(seg.Options.SACKBlocks()) && e.rackOn() {
			e.rackDetectLoss()
		}
		e.prrAck(una, sacked)
		return true
	}
	wndChanged := e.takeWindow(seg, forceWnd)
	newSACK := false
	sackedBefore := e.sb.bytes
	if e.sackOK && seg.Options.NSACK > 0 {
		newSACK = e.updateSACK(seg.Options.SACKBlocks())
	}
	acked := int(ack - e.snd.una)
	if acked > 0 {
		e.ackRange(ack, seg, max(0, e.sb.bytes-sackedBefore))
	} else if e.isDupAck(seg, wndChanged, newSACK) {
		e.stats.DupAcksIn++
		e.onDupAck()
	}
	if e.rackOn() && e.state != StateClosed {
		e.rackOnAck(seg, acked > 0)
	}
	e.prrAck(una, sacked)
	return true
}

// ackAcceptable drops, and answers, an ACK of what was never sent (RFC 9293
// 3.10.7.4: an ACK) or one older than the largest window allows (RFC 5961
// 5.2: a challenge ACK).
func (e *Endpoint) ackAcceptable(ack seqnum.Value, forceWnd bool) bool {
	if e.snd.max.LessThan(ack) {
		e.stats.DropsBadACK++
		e.sendAck() // RFC 9293 3.10.7.4: ACK of something not yet sent: send an ACK, drop
		return false
	}
	if ack.LessThan(e.snd.una.Add(-seqnum.Size(max(e.snd.maxWnd, 1)))) && !forceWnd {
		e.stats.DropsBadACK++
		e.challengeAck() // RFC 5961 5.2: too old an ACK: challenge ACK, drop
		return false
	}
	return true
}

// takeWindow updates the send window (RFC 9293 3.10.7.4); an open window
// stops the persist timer, and any answer while probing keeps the connection
// up (RFC 9293 3.8.6.1). It reports whether the window changed.
func (e *Endpoint) takeWindow(seg *Segment, force bool) bool {
	taken, changed := e.snd.updateWindow(seg, force)
	if taken && e.snd.wnd > 0 {
		e.stopTimer(timerPersist)
		e.snd.persistBackoff = 0
	}
	if e.timerPending(timerPersist) || e.snd.persistProbes > 0 {
		e.snd.persistProbes = 0 // the peer answers: RFC 9293 3.8.6.1, the connection stays up
	}
	if changed && e.snd.unsent() > 0 {
		// Data waits and the window moved (it may have been closed): the
		// idle restart is checked here too, as Linux's
		// tcp_ack_update_window (tcp_slow_start_after_idle_check).
		e.restartAfterIdle()
	}
	return changed
}

// isDupAck is RFC 5681 2's duplicate ACK, for an ACK that acknowledges
// nothing new: data is outstanding, and it carries no data, SYN or FIN and
// leaves the window alone (or brings new SACK information).
func (e *Endpoint) isDupAck(seg *Segment, wndChanged, newSACK bool) bool {
	return len(e.snd.rtxq) > 0 && len(seg.Payload) == 0 && seg.Flags&(FlagSYN|FlagFIN) == 0 && (!wndChanged || newSACK)
}

// ackRange handles an ACK that advances SND.UNA to ack; newlySACKed is what
// its own SACK blocks marked.
func (e *Endpoint) ackRange(ack seqnum.Value, seg *Segment, newlySACKed int) {
	acked := int(ack - e.snd.una)
	e.stats.BytesAcked += uint64(acked)
	n, newest, retransmitted := e.snd.ackedSegs(ack)
	var part *txSeg // the pieces of a TSO segment ack covers (gso.go)
	if e.snd.gsoSegs > 0 && n < len(e.snd.rtxq) {
		var p txSeg // in no queue, no timer: on the stack
		if e.gsoAcked(e.snd.rtxq[n], ack, &p) {
			part, newest, retransmitted = &p, &p, retransmitted || p.xmits > 1
		}
	}
	e.sampleRTT(seg, newest, retransmitted)
	if e.sb.segs > 0 { // a hole below SACKed data filled by a segment sent once: reordering
		for _, s := range e.snd.rtxq[:n] {
			if !s.sacked && s.xmits == 1 && s.flags&FlagSYN == 0 {
				e.sb.reordered(s.seq, e.sb.high, e.snd.smss)
				break
			}
		}
	}
	delivered := acked + newlySACKed // deliveredOnAck
	now, keep := e.now(), e.freeSegsCap()
	for _, s := range e.snd.rtxq[:n] {
		if !e.sb.acked(s) {
			e.rackDeliveredAt(s, now) // RFC 8985 6.2 steps 2 and 3
		} else {
			delivered -= int(s.len)
		}
		e.freeSegUpTo(s, keep) // STOP_TIMER: acknowledged
	}
	if part != nil { // never SACKed: SACK blocks split TSO segments
		e.rackDeliveredAt(part, now)
	}
	e.snd.dropHead(n)
	if len(e.snd.rtxq) > 0 {
		e.sb.trimmed(e.snd.rtxq[0], e.snd.trimHead(ack)) // partly acknowledged: trim it
	}
	e.autoGrowSendBuffer()
	if e.snd.advance(ack) {
		e.event(EventWritable)
	}
	e.keepProbes = 0
	if e.fr.active {
		e.congestionOnAck(acked)
	} else {
		e.congestionOnAck(e.deliveredOnAck(acked, delivered))
	}
	// RFC 6298 (5.2)/(5.3): with data outstanding, the oldest segment's timer runs
	// (from its own send time: RTO restart, RFC 7765); without any, none does.
	if len(e.snd.rtxq) == 0 {
		e.stopTimer(timerUser)
	} else {
		e.ensureRTOTimer()
		if e.cfg.UserTimeout > 0 {
			e.startTimer(timerUser, e.cfg.UserTimeout) // RFC 5482: progress restarts the user timeout
		}
	}
}

// deliveredOnAck is what an ACK of acked new bytes outside recovery grows
// cwnd by, as Linux's acked_sacked (tcp_ack, tcp_slow_start): the bytes it
// newly delivered, those it acknowledges that no SACK block had covered
// before plus those its own SACK blocks cover (delivered), not what earlier
// SACKs reported, which grew nothing then (cwnd grows only on an ACK of new
// data, tcp_may_raise_cwnd). Without SACK, each duplicate ACK before it stood
// for a segment delivered (Linux's tcp_remove_reno_sacks): the ACK delivered
// the rest, at least one segment's worth.
func (e *Endpoint) deliveredOnAck(acked, delivered int) int {
	if !e.sackOK && e.fr.dupAcks > 0 {
		return max(acked-e.fr.dupAcks*e.snd.smss, min(acked, e.snd.smss))
	}
	return max(delivered, 0)
}

// sampleRTT takes the RTT sample of an ACK of new data: RFC 6298 (2.2)/(2.3)
// with Karn's algorithm (RFC 6298 3): none from a retransmitted segment,
// unless timestamps disambiguate (RFC 7323 4.1).
func (e *Endpoint) sampleRTT(seg *Segment, newest *txSeg, retransmitted bool) {
	if newest != nil && !retransmitted {
		e.rttSample(e.now() - newest.sentAt)
	} else if e.tsOK && seg.Options.TS && seg.Options.TSEcr != 0 {
		if d := int32(e.tsVal() - seg.Options.TSEcr); d >= 0 {
			e.rttSample(time.Duration(d) * time.Millisecond) // RFC 7323 4.1
		}
	}
}

func (e *Endpoint) rttSample(m time.Duration) {
	e.stats.RTTSamples++
	e.rtt.sample(m)
}

// ensureRTOTimer keeps RFC 6298 (5.1)/(5.3) true with per-segment timers: while
// data is outstanding, the oldest segment not SACKed has its timer running
// (from its own send time if it was already running: RTO restart, RFC 7765).
// Segments past SND.NXT, waiting to be resent after an RTO, have none.
func (e *Endpoint) ensureRTOTimer() {
	for _, s := range e.snd.rtxq {
		if !s.seq.LessThan(e.snd.nxt) {
			break
		}
		if s.entry.Pending() {
			return
		}
		if !s.sacked {
			e.armRTO(s) // RFC 6298 (5.3)
			return
		}
	}
	if len(e.snd.rtxq) > 0 && e.snd.rtxq[0].seq.LessThan(e.snd.nxt) {
		e.armRTO(e.snd.rtxq[0]) // everything SACKed: a reneging peer
	}
}
