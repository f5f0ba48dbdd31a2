package tcp

import (
	"math"
	"sort"
	"time"

	"github.com/tcpwheel/tcpwheel/timer"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
)

// txSeg is a sent, unacknowledged segment. It embeds its retransmission timer:
// sending or resending it starts the entry at RTO, an ACK or SACK that covers it
// stops it (DESIGN.md, tcp/).
type txSeg struct {
	e      *Endpoint
	entry  timer.Entry
	seq    seqnum.Value
	len    seqnum.Size   // in sequence space: data plus SYN and FIN
	flags  Flags         // FlagSYN and FlagFIN
	sentAt time.Duration // RFC 8985 5.2: Segment.xmit_ts
	order  uint64        // rackState.xmits at the latest transmission
	// prevSentAt is the time of the transmission before, when xmits > 1.
	prevSentAt time.Duration
	rtoAt      time.Duration // when its retransmission timer expires, while it runs
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

func (s *txSeg) fire() { s.e.onRTO(s) }

func (e *Endpoint) newSeg(seq seqnum.Value, l seqnum.Size, flags Flags) *txSeg {
	var s *txSeg
	if n := len(e.freeSegs); n > 0 {
		s = e.freeSegs[n-1]
		e.freeSegs = e.freeSegs[:n-1]
		*s = txSeg{e: e, entry: s.entry}
	} else {
		s = &txSeg{e: e}
		s.entry.Init(s.fire)
	}
	s.seq, s.len, s.flags = seq, l, flags
	return s
}

func (e *Endpoint) freeSeg(s *txSeg) {
	e.w.Stop(&s.entry)
	if len(e.freeSegs) < 64 {
		e.freeSegs = append(e.freeSegs, s)
	}
}

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
	s := e.newSeg(e.iss, 1, FlagSYN)
	e.rtxq = append(e.rtxq, s)
	e.sndNxt, e.sndMax = e.iss+1, e.iss+1
	e.transmit(s, false)
}

// transmit sends s (again) and starts its retransmission timer.
func (e *Endpoint) transmit(s *txSeg, retransmit bool) {
	var seg Segment
	seg.Seq = s.seq
	seg.Flags = s.flags | FlagACK
	if s.flags&FlagSYN != 0 {
		if e.state == StateSynSent {
			seg.Flags &^= FlagACK
		}
		e.synOptions(&seg.Options)
	}
	if n := s.dataLen(); n > 0 {
		off := int(s.seq - e.sndBufSeq)
		seg.Payload = e.sndBuf.at(off, n)
		seg.Flags |= FlagPSH
		e.stats.DataSegsOut++
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
	s.xmits++
	s.prevSentAt, s.sentAt = s.sentAt, e.now() // RFC 8985 6.1: Segment.xmit_ts = Now()
	e.rack.xmits++
	s.order = e.rack.xmits
	s.lost = false       // RFC 8985 6.1: Segment.lost = FALSE
	at := e.w.SendTime() // the instant the segment is sent: the RTO runs from here (loopTimers)
	e.send(&seg)
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
	s.rtoAt = at + d
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
		e.rcv.unacked = 0
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
		}
	}
	e.stats.SegsOut++
	e.out.Send(e.id, seg)
}

// sendAck sends a bare ACK: <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
func (e *Endpoint) sendAck() {
	seg := Segment{Seq: e.sndNxt, Flags: FlagACK}
	e.send(&seg)
}

// challengeAck sends the RFC 5961 challenge ACK, at most 1000 a second
// (RFC 5961 7, as Linux's tcp_challenge_ack_limit).
func (e *Endpoint) challengeAck() {
	now := e.now()
	if now-e.challengeSec >= time.Second {
		e.challengeSec, e.challengeCount = now, 0
	}
	if e.challengeCount >= 1000 {
		e.stats.DropsRateLimited++
		return
	}
	e.challengeCount++
	e.stats.ChallengeACKs++
	e.sendAck()
}

// sendRST sends <SEQ=seq><CTL=RST>.
func (e *Endpoint) sendRST(seq seqnum.Value) {
	seg := Segment{Seq: seq, Flags: FlagRST}
	e.stats.ResetsSent++
	e.send(&seg)
}

// flightSize is the data sent and not yet acknowledged (RFC 5681 2).
func (e *Endpoint) flightSize() int { return int(e.sndMax - e.sndUna) }

// output sends what the windows allow: segments being resent after an RTO
// (go-back-N from SND.NXT up to the highest sent, skipping SACKed ones), then
// new data, then the FIN. New data (re)starts the loss probe timeout (RFC 8985
// 7.2).
func (e *Endpoint) output() {
	if !e.state.canSendData() {
		return
	}
	sndMax := e.sndMax
	e.outputLoop()
	if e.sndMax != sndMax && e.state != StateClosed && e.rackOn() {
		e.armPTO() // RFC 8985 7.2: after transmitting new data
	}
}

// pipe is RFC 6675's estimate of the data in the network: sent up to SND.NXT,
// not acknowledged, not SACKed and not marked lost by RACK (a lost segment
// counts again once resent).
func (e *Endpoint) pipe() int {
	p := int(e.sndNxt-e.sndUna) - e.sackedBytes
	if e.rackOn() {
		for _, s := range e.rtxq {
			if !s.seq.LessThan(e.sndNxt) {
				break
			}
			if s.lost {
				p -= int(s.len)
			}
		}
	}
	return max(p, 0)
}

// sackRecovery reports fast recovery with SACK: the congestion window is not
// inflated by duplicate ACKs, and pipe, not the flight size, is held to it
// (RFC 6675 5).
func (e *Endpoint) sackRecovery() bool { return e.inRecovery && e.sackOK }

func (e *Endpoint) outputLoop() {
	for e.state != StateClosed {
		wnd := min(e.cwnd, int(e.sndWnd))
		inflight := int(e.sndNxt - e.sndUna)
		if e.sackRecovery() && !e.sndNxt.LessThan(e.sndMax) {
			// RFC 6675 5 (C): new data as long as cwnd - pipe >= 1 SMSS; the
			// peer's window still bounds what is outstanding.
			wnd = int(e.sndWnd)
			if room := e.cwnd - e.pipe(); room < wnd-inflight {
				wnd = inflight + room
			}
		}
		if e.sndNxt.LessThan(e.sndMax) {
			s := e.segAt(e.sndNxt)
			if s == nil {
				e.sndNxt = e.sndMax // cannot happen: the queue covers [SND.UNA, SND.MAX)
				continue
			}
			if s.sacked {
				e.sndNxt = s.end()
				continue
			}
			if inflight > 0 && inflight+int(s.len) > wnd {
				return
			}
			e.transmit(s, true) // RFC 6298 (5.4)-(5.6): resent in order as cwnd allows
			e.sndNxt = s.end()
			continue
		}
		if e.finSent {
			return // the FIN is the last thing to send
		}
		off := int(e.sndNxt - e.sndBufSeq)
		avail := e.sndBuf.len() - off
		if avail <= 0 {
			if e.finQueued && !e.finSent {
				e.queueFIN()
			}
			return
		}
		usable := wnd - inflight
		if usable <= 0 {
			if e.sndWnd == 0 && len(e.rtxq) == 0 {
				e.armPersist()
			}
			return
		}
		n := min(avail, e.smss, usable)
		// RFC 9293 3.8.6.2.1 sender SWS avoidance: a full segment, all the data we
		// have, or, when nothing is in flight, at least half the peer's largest
		// window; otherwise wait for ACKs to open the window.
		if n < e.smss && n < avail && inflight > 0 && n < int(e.maxSndWnd/2) {
			return
		}
		e.sendData(n)
	}
}

// sendData queues and sends the next n bytes of unsent data, with the FIN if
// they are the last and the FIN is queued.
func (e *Endpoint) sendData(n int) {
	avail := e.sndBuf.len() - int(e.sndNxt-e.sndBufSeq)
	fin := e.finQueued && n == avail
	l := seqnum.Size(n)
	var flags Flags
	if fin {
		l++
		flags = FlagFIN
		e.finSent, e.finSeq = true, e.sndNxt.Add(seqnum.Size(n))
	}
	s := e.newSeg(e.sndNxt, l, flags)
	e.rtxq = append(e.rtxq, s)
	e.sndNxt = e.sndNxt.Add(l)
	e.sndMax = e.sndNxt
	e.stopTimer(timerPersist)
	e.transmit(s, false)
}

// sendNewSegment sends, as a tail-loss probe (RFC 8985 7.3), the next segment
// of unsent data, or the FIN alone, if there is one and the peer's window
// takes it; cwnd is not consulted. It reports whether it sent.
func (e *Endpoint) sendNewSegment() bool {
	if e.sndNxt != e.sndMax || e.finSent {
		return false
	}
	avail := e.sndBuf.len() - int(e.sndNxt-e.sndBufSeq)
	if avail <= 0 {
		if e.finQueued {
			e.queueFIN()
			return true
		}
		return false
	}
	n := min(avail, e.smss)
	if int(e.sndNxt-e.sndUna)+n > int(e.sndWnd) {
		return false // RFC 8985 7.3: the receive window does not allow new data
	}
	e.sendData(n)
	return true
}

// queueFIN sends a FIN with no data.
func (e *Endpoint) queueFIN() {
	s := e.newSeg(e.sndNxt, 1, FlagFIN)
	e.finSent, e.finSeq = true, e.sndNxt
	e.rtxq = append(e.rtxq, s)
	e.sndNxt = e.sndNxt.Add(1)
	e.sndMax = e.sndNxt
	e.transmit(s, false)
}

// segAt returns the queued segment that starts at seq, or nil.
func (e *Endpoint) segAt(seq seqnum.Value) *txSeg {
	i := sort.Search(len(e.rtxq), func(i int) bool { return seq.LessThanEq(e.rtxq[i].seq) })
	if i < len(e.rtxq) && e.rtxq[i].seq == seq {
		return e.rtxq[i]
	}
	return nil
}

// onRTO runs when a segment's retransmission timer expires. The expiry of the
// oldest outstanding segment is the RTO event; a later segment's expiry (its RTO
// was shorter) is one too when the oldest has no timer running.
func (e *Endpoint) onRTO(s *txSeg) {
	defer e.flush()
	if len(e.rtxq) == 0 || e.state == StateClosed {
		return
	}
	head := e.rtxq[0]
	if s != head && head.entry.Pending() {
		return
	}
	e.stats.RTOEvents++
	if head.flags&FlagSYN != 0 {
		if e.synRetries >= e.cfg.SYNRetries {
			e.abort(ErrTimeout, e.state == StateSynReceived && !e.passive) // retry limit (Linux tcp_syn_retries, tcp_synack_retries)
			return
		}
		e.synRetries++
		e.synRetransmit = true
		e.rtt.backOff() // RFC 6298 (5.5): SYNs back off 1, 2, 4, ... s
		e.rtoRetries++
		e.transmit(head, true) // RFC 6298 (5.4)
		return
	}
	if e.rtoRetries >= e.cfg.Retries2 {
		e.abort(ErrTimeout, true) // total retransmission limit (Linux tcp_retries2)
		return
	}
	e.rtoRetries++
	e.rackOnRTO()
	if e.rtoRetries == 1 {
		e.ssthresh = max(e.flightSize()/2, 2*e.smss) // RFC 5681 (4), once per timeout episode
	}
	e.cwnd = e.smss // RFC 5681 3.1: LW = 1 SMSS
	e.caAcked = 0
	e.rtt.backOff() // RFC 6298 (5.5): RTO <- min(2*RTO, MaxRTO)
	e.inRecovery, e.dupAcks = false, 0
	e.recover = e.sndMax // RFC 6582 4: no fast retransmit for the ACKs of this flight
	for _, o := range e.rtxq[1:] {
		e.w.Stop(&o.entry) // re-armed when resent (go-back-N)
		o.rtxInRecovery = false
	}
	e.sndNxt = e.sndUna
	e.transmit(head, true) // RFC 6298 (5.4): retransmit the earliest unacknowledged segment
	e.sndNxt = head.end()  // RFC 6298 (5.6): its timer runs with the doubled RTO
	e.output()
}

// handleAck processes SEG.ACK in a synchronized state (RFC 9293 3.10.7.4, fifth
// check). It returns false when the segment is to be dropped.
func (e *Endpoint) handleAck(seg *Segment, forceWnd bool) bool {
	ack := seg.Ack
	if e.sndMax.LessThan(ack) {
		e.stats.DropsBadACK++
		e.sendAck() // RFC 9293 3.10.7.4: ACK of something not yet sent: send an ACK, drop
		return false
	}
	if ack.LessThan(e.sndUna.Add(-seqnum.Size(max(e.maxSndWnd, 1)))) && !forceWnd {
		e.stats.DropsBadACK++
		e.challengeAck() // RFC 5961 5.2: too old an ACK: challenge ACK, drop
		return false
	}
	if ack.LessThan(e.sndUna) {
		return true // RFC 9293: a duplicate (old) ACK can be ignored
	}
	// RFC 9293 3.10.7.4: update the send window.
	wnd := uint32(seg.Window) << e.sndWS
	if seg.Flags&FlagSYN != 0 {
		wnd = uint32(seg.Window) // RFC 7323 2.2: the window of a SYN is never scaled
	}
	wndChanged := false
	if forceWnd || e.sndWL1.LessThan(seg.Seq) || (e.sndWL1 == seg.Seq && e.sndWL2.LessThanEq(ack)) {
		wndChanged = wnd != e.sndWnd
		e.sndWnd, e.sndWL1, e.sndWL2 = wnd, seg.Seq, ack
		e.maxSndWnd = max(e.maxSndWnd, wnd)
		if wnd > 0 {
			e.stopTimer(timerPersist)
			e.persistBackoff = 0
		}
	}
	if e.timerPending(timerPersist) || e.persistProbes > 0 {
		e.persistProbes = 0 // the peer answers: RFC 9293 3.8.6.1, the connection stays up
	}
	newSACK := false
	if e.sackOK && seg.Options.NSACK > 0 {
		newSACK = e.updateSACK(seg.Options.SACKBlocks())
	}
	acked := int(ack - e.sndUna)
	if acked == 0 {
		// RFC 5681 2: a duplicate ACK acknowledges nothing new, carries no data,
		// SYN or FIN, leaves the window alone, and data is outstanding.
		if len(e.rtxq) > 0 && len(seg.Payload) == 0 && seg.Flags&(FlagSYN|FlagFIN) == 0 && (!wndChanged || newSACK) {
			e.stats.DupAcksIn++
			e.onDupAck()
		}
	} else {
		e.ackRange(ack, seg)
	}
	if e.rackOn() && e.state != StateClosed {
		e.rackOnAck(seg, acked > 0)
	}
	return true
}

// ackRange handles an ACK that advances SND.UNA to ack.
func (e *Endpoint) ackRange(ack seqnum.Value, seg *Segment) {
	acked := int(ack - e.sndUna)
	e.stats.BytesAcked += uint64(acked)
	retransmitted := false
	var newest *txSeg
	n := 0
	for _, s := range e.rtxq {
		if ack.LessThan(s.end()) {
			break
		}
		n++
		if s.xmits > 1 {
			retransmitted = true
		}
		newest = s
	}
	// RTT sample: RFC 6298 (2.2)/(2.3) with Karn's algorithm (RFC 6298 3): none
	// from a retransmitted segment, unless timestamps disambiguate (RFC 7323 4.1).
	if newest != nil && !retransmitted {
		e.rttSample(e.now() - newest.sentAt)
	} else if e.tsOK && seg.Options.TS && seg.Options.TSEcr != 0 {
		if d := int32(e.tsVal() - seg.Options.TSEcr); d >= 0 {
			e.rttSample(time.Duration(d) * time.Millisecond) // RFC 7323 4.1
		}
	}
	for _, s := range e.rtxq[:n] {
		if s.sacked {
			e.sackedBytes -= int(s.len)
			e.sackedSegs--
		} else {
			e.rackDelivered(s) // RFC 8985 6.2 steps 2 and 3
		}
		e.freeSeg(s) // STOP_TIMER: acknowledged
	}
	e.rtxq = append(e.rtxq[:0], e.rtxq[n:]...)
	if len(e.rtxq) > 0 && e.rtxq[0].seq.LessThan(ack) {
		h := e.rtxq[0] // partly acknowledged: trim it
		d := seqnum.Size(ack - h.seq)
		if h.sacked {
			e.sackedBytes -= int(d)
		}
		h.seq, h.len = ack, h.len-d
		h.flags &^= FlagSYN
	}
	// Data bytes to drop from the send buffer: the SYN and FIN have none.
	dataEnd := ack
	if e.finSent && e.finSeq.LessThan(ack) {
		dataEnd = e.finSeq
	}
	if e.sndBufSeq.LessThan(dataEnd) {
		k := int(dataEnd - e.sndBufSeq)
		e.sndBuf.consume(min(k, e.sndBuf.len()))
		e.sndBufSeq = dataEnd
		e.event(EventWritable)
	}
	e.sndUna = ack
	if e.sndNxt.LessThan(ack) {
		e.sndNxt = ack // go-back-N: the peer had data we were about to resend
	}
	e.rtoRetries = 0
	e.keepProbes = 0
	e.congestionOnAck(acked)
	// RFC 6298 (5.2)/(5.3): with data outstanding, the oldest segment's timer runs
	// (from its own send time: RTO restart, RFC 7765); without any, none does.
	if len(e.rtxq) == 0 {
		e.stopTimer(timerUser)
	} else {
		e.ensureRTOTimer()
		if e.cfg.UserTimeout > 0 {
			e.startTimer(timerUser, e.cfg.UserTimeout) // RFC 5482: progress restarts the user timeout
		}
	}
}

func (e *Endpoint) rttSample(m time.Duration) {
	e.stats.RTTSamples++
	e.rtt.sample(m)
}

// congestionOnAck grows or, in fast recovery, adjusts cwnd for an ACK that
// acknowledged acked new bytes.
func (e *Endpoint) congestionOnAck(acked int) {
	if e.inRecovery {
		if !e.sndUna.LessThan(e.recover) {
			// RFC 6582 3.2 (3): a full acknowledgment ends recovery.
			e.cwnd = min(e.ssthresh, max(e.flightSize(), e.smss)+e.smss) // RFC 6582 3.2 (3) option 1
			e.inRecovery, e.dupAcks = false, 0
			e.clearRecoveryMarks()
			return
		}
		if e.sackOK {
			// RFC 6675 5: cwnd stays at ssthresh; pipe paces the recovery.
			if !e.rackOn() && len(e.rtxq) > 0 && !e.rtxq[0].sacked && !e.rtxq[0].rtxInRecovery {
				h := e.rtxq[0] // RFC 6675 NextSeg() rule 1: the first hole
				h.rtxInRecovery = true
				e.stats.FastRetransmits++
				e.transmit(h, true)
			}
			return
		}
		// RFC 6582 3.2 (3) partial acknowledgment: retransmit the first
		// unacknowledged segment, deflate cwnd by the amount acknowledged and add
		// back one SMSS if that amount was at least one SMSS.
		e.cwnd -= acked
		if acked >= e.smss {
			e.cwnd += e.smss
		}
		e.cwnd = max(e.cwnd, e.smss)
		if len(e.rtxq) > 0 && !e.rtxq[0].sacked && !e.rtxq[0].rtxInRecovery && !(e.rackOn() && e.sackOK) {
			// Once per episode: a segment already resent in it (by the SACK hole
			// rule, RFC 6675 NextSeg()) is not resent again on a partial ACK;
			// its timer, or RACK, finds it lost again. With RACK and SACK,
			// RACK alone decides what is lost (RFC 8985 7: retransmit what is
			// marked lost), so the partial ACK resends nothing itself.
			h := e.rtxq[0]
			h.rtxInRecovery = true
			e.stats.FastRetransmits++
			e.transmit(h, true) // also resets its timer, RFC 6582 3.2 (3)
		}
		return
	}
	e.dupAcks = 0
	if e.cwnd < e.ssthresh {
		e.cwnd += min(acked, e.smss) // RFC 5681 (2): slow start, RFC 3465 L = 1 SMSS
	} else {
		e.caAcked += acked // RFC 5681 3.1 (3): congestion avoidance by bytes acked
		if e.caAcked >= e.cwnd {
			e.caAcked -= e.cwnd
			e.cwnd += e.smss
		}
	}
}

func (e *Endpoint) clearRecoveryMarks() {
	for _, s := range e.rtxq {
		s.rtxInRecovery = false
	}
}

// onDupAck counts a duplicate ACK: the third starts fast retransmit (RFC 5681
// 3.2, RFC 6582 3.2); later ones inflate cwnd and, with SACK, resend the next
// hole.
func (e *Endpoint) onDupAck() {
	e.dupAcks++
	if e.inRecovery {
		if !e.sackOK {
			e.cwnd += e.smss // RFC 6582 3.2 (4): inflate by one SMSS per further duplicate ACK
		}
		if e.sackOK && !e.rackOn() {
			e.retransmitNextHole()
		}
		e.output() // RFC 6582 3.2 (4): send new data as cwnd and rwnd allow
		return
	}
	if e.dupAcks < 3 || len(e.rtxq) == 0 {
		return
	}
	if e.sndUna.LessThan(e.recover) {
		// RFC 6582 3.2 (2): the ACK does not cover more than recover: these
		// duplicates belong to a flight already recovered; no fast retransmit.
		return
	}
	e.ssthresh = max(e.flightSize()/2, 2*e.smss) // RFC 5681 (4) / RFC 6582 3.2 (2)
	e.recover = e.sndMax                         // RFC 6582 3.2 (2): recover <- highest sent
	e.inRecovery = true
	h := e.rtxq[0]
	h.rtxInRecovery = true
	e.stats.FastRetransmits++
	e.transmit(h, true)            // RFC 5681 3.2 (3): retransmit the lost segment
	e.cwnd = e.ssthresh + 3*e.smss // RFC 6582 3.2 (2)/RFC 5681 3.2 (3): inflate by the three segments that left
	if e.sackOK {
		e.cwnd = e.ssthresh // RFC 6675 5 (4.2): pipe, not inflation, paces the rest
	}
	e.output()
}

// retransmitNextHole resends, in fast recovery with SACK and without RACK
// (which otherwise decides what is lost), the first segment
// below the highest SACKed byte that is neither SACKed nor already resent in
// this episode (the NextSeg() rule 1 of RFC 6675 4).
func (e *Endpoint) retransmitNextHole() {
	for _, s := range e.rtxq {
		if !s.seq.LessThan(e.highSACK) {
			return
		}
		if s.sacked || s.rtxInRecovery {
			continue
		}
		if int(e.sndNxt-e.sndUna)-e.sackedBytes >= e.cwnd {
			return
		}
		s.rtxInRecovery = true
		e.stats.FastRetransmits++
		e.transmit(s, true)
		return
	}
}

// updateSACK marks the queued segments the peer's SACK blocks cover (RFC 2018,
// the scoreboard of RFC 6675) and stops their timers. It reports whether any
// segment was newly SACKed.
func (e *Endpoint) updateSACK(blocks []SACKBlock) bool {
	news := false
	for _, b := range blocks {
		// Ignore blocks outside (SND.UNA, SND.MAX] or inverted (RFC 2018 does not
		// allow them; they could only be bogus or D-SACK).
		if !e.sndUna.LessThan(b.End) || e.sndMax.LessThan(b.End) || !b.Start.LessThan(b.End) || b.Start.LessThan(e.sndUna) {
			continue
		}
		if e.highSACK.LessThan(b.End) || e.highSACK.LessThan(e.sndUna) {
			e.highSACK = b.End
		}
		i := sort.Search(len(e.rtxq), func(i int) bool { return b.Start.LessThanEq(e.rtxq[i].seq) })
		for ; i < len(e.rtxq); i++ {
			s := e.rtxq[i]
			if b.End.LessThan(s.end()) {
				break
			}
			if !s.sacked {
				s.sacked, s.lost = true, false
				e.sackedBytes += int(s.len)
				e.sackedSegs++
				e.w.Stop(&s.entry) // STOP_TIMER: SACKed
				e.rackDelivered(s) // RFC 8985 6.2 steps 2 and 3
				news = true
			}
		}
	}
	if news {
		e.ensureRTOTimer()
	}
	return news
}

// ensureRTOTimer keeps RFC 6298 (5.1)/(5.3) true with per-segment timers: while
// data is outstanding, the oldest segment not SACKed has its timer running
// (from its own send time if it was already running: RTO restart, RFC 7765).
// Segments past SND.NXT, waiting to be resent after an RTO, have none.
func (e *Endpoint) ensureRTOTimer() {
	for _, s := range e.rtxq {
		if !s.seq.LessThan(e.sndNxt) {
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
	if len(e.rtxq) > 0 && e.rtxq[0].seq.LessThan(e.sndNxt) {
		e.armRTO(e.rtxq[0]) // everything SACKed: a reneging peer
	}
}
